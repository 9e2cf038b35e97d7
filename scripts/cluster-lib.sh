# scripts/cluster-lib.sh: start and stop a throwaway mqlog cluster on this
# machine, one etcd member and three PostgreSQL 15 nodes on loopback, for
# scripts/cluster-demo.sh and bench/run.sh.  Source it; it defines cl_*
# functions and changes no shell option of the caller.
#
#   CL_DIR=/tmp/mqlog-cluster        # everything lives here (required)
#   CL_EXTRA_CONF=$'fsync = on\n'    # more postgresql.conf lines (optional)
#   CL_LEASE_TTL=5                   # mqlog.etcd_lease_ttl of the nodes, s (unset: 5;
#                                    # set and empty: no line, mqlog's default)
#   cl_running && echo "already up"  # the state file names live processes
#   cl_start                         # etcd, n1..n3, CREATE EXTENSION, 3 alive
#   cl_psql 2 -c 'SELECT 1'          # psql on node 2 (over its Unix socket)
#   cl_stop                          # the pids it started, and nothing else
#
# After cl_start (or cl_load), CL_ETCD_URL, CL_ETCD_PID, CL_PORT[1..3] and
# CL_PID[1..3] are set; $CL_DIR/cluster.env keeps them for a later cl_stop.
# Nodes are named n1, n2, n3; the etcd prefix is /mqlog/$CL_CLUSTER_NAME/;
# the replicated topics live in database postgres.  Every server listens on
# 127.0.0.1 only (PostgreSQL also on a Unix socket in $CL_DIR).  Run as root
# (the servers then run as the postgres OS user) or as postgres.

CL_BINDIR=${CL_BINDIR:-/usr/lib/postgresql/15/bin}
CL_CLUSTER_NAME=${CL_CLUSTER_NAME:-demo}
CL_NODES=3
CL_PORT=()
CL_PID=()

cl_as_pg() {
    if [ "$(id -u)" -eq 0 ]; then
        (cd / && runuser -u postgres -- "$@")
    else
        (cd / && "$@")
    fi
}

cl_log() { printf 'cluster: %s\n' "$*"; }

# Is anything listening on 127.0.0.1:$1?  ss when it is there, else a
# connect attempt (bash's /dev/tcp).
cl_port_busy() {
    if command -v ss >/dev/null 2>&1; then
        [ -n "$(ss -Htln "sport = :$1" 2>/dev/null)" ]
    else
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
    fi
}

# The first free port at or above $1 that is not in the rest of the
# arguments (ports already handed out).
cl_free_port() {
    local p=$1 taken t
    shift
    while :; do
        taken=0
        for t in "$@"; do [ "$t" = "$p" ] && taken=1; done
        if [ $taken = 0 ] && ! cl_port_busy "$p"; then
            echo "$p"
            return 0
        fi
        p=$((p + 1))
        [ "$p" -lt 65000 ] || { echo "cluster: no free port" >&2; return 1; }
    done
}

cl_alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

# Read $CL_DIR/cluster.env; false when there is none.
cl_load() {
    [ -f "$CL_DIR/cluster.env" ] || return 1
    # shellcheck disable=SC1091
    . "$CL_DIR/cluster.env"
    CL_ETCD_URL=http://127.0.0.1:$CL_ETCD_PORT
    return 0
}

cl_save() {
    local i
    {
        echo "CL_ETCD_PORT=$CL_ETCD_PORT"
        echo "CL_ETCD_PEER_PORT=$CL_ETCD_PEER_PORT"
        echo "CL_ETCD_PID=${CL_ETCD_PID:-}"
        for i in $(seq "$CL_NODES"); do
            echo "CL_PORT[$i]=${CL_PORT[$i]}"
            echo "CL_PID[$i]=${CL_PID[$i]:-}"
        done
    } >"$CL_DIR/cluster.env.tmp"
    mv "$CL_DIR/cluster.env.tmp" "$CL_DIR/cluster.env"
}

# True when the state file names at least one live process of ours.
cl_running() {
    local i
    cl_load || return 1
    cl_alive "${CL_ETCD_PID:-}" && return 0
    for i in $(seq "$CL_NODES"); do
        cl_alive "${CL_PID[$i]:-}" && return 0
    done
    return 1
}

cl_psql() {
    local i=$1
    shift
    "$CL_BINDIR/psql" -X -h "$CL_DIR" -p "${CL_PORT[$i]}" -U postgres -d postgres "$@"
}

# One value from node $1.
cl_q() { cl_psql "$1" -Atq -v ON_ERROR_STOP=1 -c "$2"; }

# Poll "$@" (a command) every 0.2 s for at most $1 seconds.
cl_wait() {
    local t=$1
    shift
    local end=$(( $(date +%s) + t ))
    while [ "$(date +%s)" -le "$end" ]; do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    "$@" >/dev/null 2>&1
}

cl_etcd_healthy() {
    etcdctl --endpoints "$CL_ETCD_URL" --dial-timeout=1s --command-timeout=2s endpoint health
}

cl_start_etcd() {
    mkdir -p "$CL_DIR/etcd"
    # a session of its own, so a Ctrl-C in the caller's terminal does not
    # reach it; the inner shell writes its pid and becomes etcd
    setsid bash -c 'echo $$ >"$0/etcd.pid"; exec etcd --name "$1" --data-dir "$0/etcd/data" \
        --listen-client-urls "$2" --advertise-client-urls "$2" \
        --listen-peer-urls "$3" --initial-advertise-peer-urls "$3" \
        --initial-cluster "$1=$3" --initial-cluster-state new' \
        "$CL_DIR" "$CL_CLUSTER_NAME" "$CL_ETCD_URL" "http://127.0.0.1:$CL_ETCD_PEER_PORT" \
        </dev/null >>"$CL_DIR/etcd.log" 2>&1 &
    local _i
    for _i in $(seq 50); do [ -s "$CL_DIR/etcd.pid" ] && break; sleep 0.1; done
    CL_ETCD_PID=$(cat "$CL_DIR/etcd.pid")
    cl_save
    if ! cl_wait 30 cl_etcd_healthy; then
        echo "cluster: etcd did not become healthy; its log:" >&2
        tail -n 20 "$CL_DIR/etcd.log" >&2
        return 1
    fi
    cl_log "etcd pid $CL_ETCD_PID at $CL_ETCD_URL"
}

cl_init_node() {
    local i=$1 data=$CL_DIR/n$1 ttl_line=
    [ -z "${CL_LEASE_TTL-5}" ] || ttl_line="mqlog.etcd_lease_ttl = ${CL_LEASE_TTL-5}"
    cl_as_pg "$CL_BINDIR/initdb" -D "$data" -U postgres -A trust -E UTF8 --no-sync \
        >"$CL_DIR/initdb-n$i.log" 2>&1 || { cat "$CL_DIR/initdb-n$i.log" >&2; return 1; }
    cat >>"$data/postgresql.conf" <<EOF

# scripts/cluster-lib.sh: node n$i of a throwaway mqlog cluster
port = ${CL_PORT[$i]}
listen_addresses = '127.0.0.1'
unix_socket_directories = '$CL_DIR'
shared_preload_libraries = 'mqlog'
wal_level = logical
max_replication_slots = 10
max_wal_senders = 10
max_worker_processes = 16
output_plugin_libraries = 'pgoutput, test_decoding, mqlog'
mqlog.etcd_endpoints = '$CL_ETCD_URL'
mqlog.cluster_name = '$CL_CLUSTER_NAME'
mqlog.cluster_database = 'postgres'
mqlog.node_name = 'n$i'
mqlog.node_conninfo = 'host=127.0.0.1 port=${CL_PORT[$i]} user=postgres'
${ttl_line}
${CL_EXTRA_CONF:-}
EOF
    # the followers' apply workers connect with replication=database over
    # 127.0.0.1 as postgres (initdb -A trust allows it already; said here
    # so that it does not depend on initdb's defaults)
    cat >>"$data/pg_hba.conf" <<EOF
# scripts/cluster-lib.sh
local   replication  postgres                 trust
host    replication  postgres  127.0.0.1/32   trust
EOF
}

cl_start_node() {
    local i=$1 data=$CL_DIR/n$1
    if ! cl_as_pg "$CL_BINDIR/pg_ctl" -D "$data" -l "$CL_DIR/n$i.log" -w -t 60 start >/dev/null; then
        echo "cluster: node n$i did not start; its log:" >&2
        tail -n 30 "$CL_DIR/n$i.log" >&2
        return 1
    fi
    CL_PID[$i]=$(head -n 1 "$data/postmaster.pid")
    cl_save
    cl_log "n$i pid ${CL_PID[$i]} on 127.0.0.1:${CL_PORT[$i]}"
}

cl_alive_count() { cl_q "$1" "SELECT count(*) FILTER (WHERE alive) FROM mqlog.nodes"; }
cl_three_alive() { [ "$(cl_alive_count "$1")" = "$CL_NODES" ]; }

# Everything from scratch in $CL_DIR (which must not hold a running cluster).
cl_start() {
    rm -rf "$CL_DIR"
    mkdir -p "$CL_DIR"
    chmod 755 "$CL_DIR"
    [ "$(id -u)" -ne 0 ] || chown postgres:postgres "$CL_DIR"
    CL_ETCD_PORT=$(cl_free_port 23790) || return 1
    CL_ETCD_PEER_PORT=$(cl_free_port $((CL_ETCD_PORT + 1)) "$CL_ETCD_PORT") || return 1
    CL_ETCD_URL=http://127.0.0.1:$CL_ETCD_PORT
    local base=5511 i
    for i in $(seq "$CL_NODES"); do
        CL_PORT[$i]=$(cl_free_port "$base" "${CL_PORT[@]}") || return 1
        base=$((CL_PORT[i] + 1))
    done
    cl_save
    cl_start_etcd || return 1
    for i in $(seq "$CL_NODES"); do cl_init_node "$i" || return 1; done
    for i in $(seq "$CL_NODES"); do cl_start_node "$i" || return 1; done
    for i in $(seq "$CL_NODES"); do cl_q "$i" "CREATE EXTENSION mqlog" >/dev/null || return 1; done
    for i in $(seq "$CL_NODES"); do
        if ! cl_wait 60 cl_three_alive "$i"; then
            echo "cluster: n$i sees $(cl_alive_count "$i") alive nodes, not $CL_NODES; its log: $CL_DIR/n$i.log" >&2
            return 1
        fi
    done
    cl_log "every node sees $CL_NODES alive nodes in mqlog.nodes"
}

# Signal process $1 (named $2) with $3 and wait at most $4 seconds for it
# to exit; false if it is still there.
cl_kill_wait() {
    local pid=$1 what=$2 sig=$3 t=$4 n
    cl_alive "$pid" || return 0
    kill "-$sig" "$pid" 2>/dev/null || true
    for n in $(seq $((t * 10))); do
        cl_alive "$pid" || { cl_log "stopped $what (pid $pid, SIG$sig)"; return 0; }
        sleep 0.1
    done
    echo "cluster: $what (pid $pid) did not stop in $t s after SIG$sig" >&2
    return 1
}

# A postmaster: fast shutdown (SIGINT), then immediate (SIGQUIT, which
# takes its children down too), then SIGKILL.  False when it took more
# than the fast shutdown.
cl_stop_postmaster() {
    cl_kill_wait "$1" "$2" INT 60 && return 0
    cl_kill_wait "$1" "$2" QUIT 10 || cl_kill_wait "$1" "$2" KILL 5 || true
    return 1
}

# Stop what $CL_DIR/cluster.env names, by pid: the postmasters first (a
# fast shutdown, SIGINT; a node's clean stop revokes its etcd lease), then
# etcd.  False when one of them needed more than SIGINT / SIGTERM.  A pid is signalled only while it is still the process we started
# (a postmaster whose postmaster.pid names it, an etcd).
cl_stop() {
    cl_load || { cl_log "nothing to stop in $CL_DIR"; return 0; }
    local i pid rc=0
    for i in $(seq "$CL_NODES"); do
        pid=${CL_PID[$i]:-}
        cl_alive "$pid" || continue
        if [ "$(head -n 1 "$CL_DIR/n$i/postmaster.pid" 2>/dev/null)" != "$pid" ]; then
            echo "cluster: pid $pid is no longer n$i's postmaster; left alone" >&2
            continue
        fi
        cl_stop_postmaster "$pid" "n$i's postmaster" || rc=1
    done
    pid=${CL_ETCD_PID:-}
    if cl_alive "$pid"; then
        if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = etcd ]; then
            cl_kill_wait "$pid" etcd TERM 20 || { cl_kill_wait "$pid" etcd KILL 5 || true; rc=1; }
        else
            echo "cluster: pid $pid is no longer etcd; left alone" >&2
        fi
    fi
    return $rc
}
