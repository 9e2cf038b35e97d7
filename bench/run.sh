#!/usr/bin/env bash
# mqlog's benchmark: mqlog beside a heap-table log, a SKIP LOCKED queue, PgQ
# and Redis Streams, in one run on one throwaway PostgreSQL 15 cluster and
# one throwaway Redis, with ratios, targets and a plot.
#
#   bench/run.sh            full run, about 35 minutes      (make bench)
#   bench/run.sh --quick    same shape, shorter runs, about 5 min (make bench QUICK=1)
#   bench/run.sh --keep     leave the servers running at the end (for poking)
#   bench/run.sh --servers-only   start the servers, print how to reach them, stop
#   bench/run.sh --soak     issue 5's soak: 10 minutes each of mqlog (retention
#                           by the maintenance worker) and the heap log (DELETE
#                           after consume); results in bench/results/soak.jsonl
#   bench/run.sh --only replication [--quick]
#                           only the replication workload, on three nodes and
#                           etcd (scripts/cluster-lib.sh); results in
#                           bench/results/replication.{jsonl,md}
#   bench/run.sh --only failover [--quick]
#                           only the failover workload on those nodes (kill -9
#                           of a leader, 5 times, 3 with --quick, and the time
#                           to the first acks=all produce on its successor);
#                           results in bench/results/failover.{jsonl,md}
#   bench/run.sh --only kafka [--quick]
#                           only the Kafka clients' produce and consume
#                           (librdkafka's rdkafka_performance and
#                           confluent-kafka through mqlog's listener), beside
#                           the driver's mq_produce_batch, mq_poll and the
#                           WAL floor
#   bench/run.sh --only scale [--quick]
#                           only the scale run (issue 16) on the single server:
#                           1, 100, 1,000 (and 10,000 without --quick)
#                           partitions and 1, 10, 100 groups on one topic;
#                           results in bench/results/scale.{jsonl,md}
#
# Run it as root on Debian 12: it installs the Debian packages it needs,
# builds and installs mqlog into the server that PG_CONFIG names (default
# /usr/lib/postgresql/15/bin/pg_config; every server binary comes from its
# --bindir), builds the C driver bench/driver/mqbench (against Debian's
# libpq and hiredis) and the C Kafka client bench/rdkafka/rdkafka_performance
# (librdkafka's example, against Debian's librdkafka), then runs PostgreSQL as the `postgres` OS user
# (Unix socket only) and Redis on 127.0.0.1; then, for the replication
# workload, stops them and starts one etcd and three PostgreSQL nodes on
# 127.0.0.1.  Everything lives in a fresh temporary directory that is
# removed at the end, and every server is stopped by its pid.  Results go to
# bench/results/latest.{jsonl,md,png}; doc/benchmarks.md explains them.
# This is a benchmark, not a test: nothing in the test suite runs it.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
BENCH=$ROOT/bench
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
PGPORT=${BENCH_PGPORT:-5488}
REDISPORT=${BENCH_REDISPORT:-6388}
KAFKAPORT=${BENCH_KAFKAPORT:-19388}   # mqlog's Kafka listener, on 127.0.0.1 (the kafka workload)
PY=/usr/bin/python3             # Debian's python, where the python3-* packages are

MODE=full
ONLY=
KEEP=0
SERVERS_ONLY=0
for a in "$@"; do
    case "$a" in
        --quick) MODE=quick ;;
        --full) MODE=full ;;
        --soak) MODE=soak ;;
        --keep) KEEP=1 ;;
        --servers-only) KEEP=1; SERVERS_ONLY=1 ;;
        -h|--help) sed -n '2,45s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0 ;;
        --only) ONLY=next ;;
        --only=*) ONLY=${a#--only=} ;;
        *)
            if [ "$ONLY" = next ]; then
                ONLY=$a
            else
                echo "run.sh: unknown argument $a" >&2; exit 2
            fi ;;
    esac
done
case "$ONLY" in
    ""|replication|failover|scale|kafka) ;;
    *) echo "run.sh: --only takes one workload: replication, failover, scale or kafka" >&2; exit 2 ;;
esac

step() { printf '\n==== %s  (%s)\n' "$*" "$(date +%T)"; }
START=$(date +%s)

if [ "$(id -u)" -ne 0 ]; then
    echo "bench/run.sh must run as root: it installs packages and mqlog, and starts PostgreSQL as the postgres user." >&2
    exit 1
fi

# ---------------------------------------------------------------- packages
step "Debian packages"
PACKAGES=(
    postgresql-15 postgresql-client-15 postgresql-server-dev-15 build-essential  # server, PGXS
    libpq-dev libhiredis-dev pkg-config  # the C driver, bench/driver/mqbench
    postgresql-15-pgq3           # PgQ
    redis-server redis-tools     # Redis Streams, redis-cli
    python3-hiredis              # Redis replies parsed in C, as redis-py does
    python3 python3-psycopg2     # bench.py, and the Python client of the latency, sustained and replication runs
    python3-matplotlib           # the PNG
    etcd-server etcd-client      # the replication workload's cluster
    libcurl4-openssl-dev         # mqlog's etcd client
    librdkafka-dev               # the kafka workload's C client: rdkafka_performance, built from its example source
    python3-confluent-kafka      # the kafka workload's Python client
)
missing=()
for p in "${PACKAGES[@]}"; do
    [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # pgq3 pulls in pgqd; no daemon is started by this script.
    apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
else
    echo "all ${#PACKAGES[@]} packages present"
fi
BINDIR=$("$PG_CONFIG" --bindir)

# --------------------------------------------------------------- build mqlog
step "build and install mqlog"
make -C "$ROOT" -s PG_CONFIG="$PG_CONFIG"
make -C "$ROOT" -s install PG_CONFIG="$PG_CONFIG" >/dev/null
echo "installed into $("$PG_CONFIG" --pkglibdir)"
step "build the C driver and the C Kafka client"
make -C "$ROOT" -s bench-driver bench-rdkafka PG_CONFIG="$PG_CONFIG"
echo "$BENCH/driver/mqbench"
echo "$BENCH/rdkafka/rdkafka_performance"

# ------------------------------------------------------------------ servers
WORK=$(mktemp -d /tmp/mqlog-bench.XXXXXX)
chmod 755 "$WORK"
chown postgres:postgres "$WORK"
PGDATA=$WORK/pgdata

as_pg() { (cd / && runuser -u postgres -- "$@"); }

# the replication workload's cluster (scripts/cluster-lib.sh)
CL_DIR=$WORK/cluster
CL_BINDIR=$BINDIR
CL_CLUSTER_NAME=bench
CL_LEASE_TTL=       # mqlog's default mqlog.etcd_lease_ttl (cluster-lib.sh's own is 5 s)
# shellcheck source=scripts/cluster-lib.sh
. "$ROOT/scripts/cluster-lib.sh"

stop_single() {
    if [ -f "$PGDATA/postmaster.pid" ]; then
        as_pg "$BINDIR/pg_ctl" -D "$PGDATA" -m fast -w -t 60 stop >/dev/null 2>&1 ||
            as_pg "$BINDIR/pg_ctl" -D "$PGDATA" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    if [ -f "$WORK/redis.pid" ]; then
        redis-cli -h 127.0.0.1 -p "$REDISPORT" shutdown nosave >/dev/null 2>&1 ||
            kill "$(cat "$WORK/redis.pid")" 2>/dev/null || true
        rm -f "$WORK/redis.pid"
    fi
}

# A node whose postmaster is up but not the pid in cluster.env (the
# failover workload interrupted while it started a killed node again):
# stopped by its data directory, which pg_ctl maps to its postmaster.pid.
stop_cluster_leftovers() {
    local i d
    for i in 1 2 3; do
        d=$CL_DIR/n$i
        [ -f "$d/postmaster.pid" ] || continue
        as_pg "$BINDIR/pg_ctl" -D "$d" status >/dev/null 2>&1 || continue
        echo "run.sh: n$i is still up outside cluster.env; stopping it" >&2
        as_pg "$BINDIR/pg_ctl" -D "$d" -m fast -w -t 60 stop >/dev/null 2>&1 ||
            as_pg "$BINDIR/pg_ctl" -D "$d" -m immediate -w stop >/dev/null 2>&1 || true
    done
}

cleanup() {
    local rc=$?
    if [ "$KEEP" = 1 ]; then
        echo "--keep: PostgreSQL: psql -h $WORK -p $PGPORT -U postgres bench;  Redis: redis-cli -p $REDISPORT"
        echo "stop with: runuser -u postgres -- $BINDIR/pg_ctl -D $PGDATA stop; redis-cli -p $REDISPORT shutdown nosave; rm -rf $WORK"
        if cl_running; then
            echo "the cluster: scripts/cluster-demo.sh --stop --dir $CL_DIR"
        fi
        exit $rc
    fi
    stop_single
    if cl_running; then
        cl_stop || true
    fi
    stop_cluster_leftovers
    if [ $rc -ne 0 ] && [ -f "$CL_DIR/n1.log" ]; then
        echo "last lines of the cluster's n1 log:" >&2
        tail -n 20 "$CL_DIR/n1.log" >&2
    fi
    if [ -f "$WORK/server.log" ] && [ -d "$BENCH/results" ]; then
        # checkpoints, lock waits and errors, to explain a dip in the samples
        tail -n 3000 "$WORK/server.log" >"$BENCH/results/${ONLY:-latest}-postgresql.log" || true
    fi
    if [ $rc -ne 0 ] && [ -f "$WORK/server.log" ]; then
        echo "last lines of the PostgreSQL log:" >&2
        tail -n 20 "$WORK/server.log" >&2
    fi
    rm -rf "$WORK"
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The settings of every PostgreSQL system, printed with the results;
# the replication workload's nodes get them too.  Durability is on:
# fsync, synchronous_commit, full pages.
BENCH_CONF="fsync = on
synchronous_commit = on
full_page_writes = on
shared_buffers = 256MB
max_wal_size = 4GB
checkpoint_timeout = 30min
max_connections = 50
log_lock_waits = on"

# Three nodes and etcd, the workloads $3 (replication, failover or both,
# comma-separated) against them, then stop them: results appended to $1
# (or written, with $2 = new).  The failover workload kills nodes and
# starts them again with cl_start_node, which records their new pids in
# $CL_DIR/cluster.env, where cl_stop (here, or in cleanup) finds them.
run_replication() {
    local workloads=${3:-replication,failover} tag
    tag=$([ "$workloads" = failover ] && echo failover || echo replication)
    step "$workloads: one etcd and three PostgreSQL nodes on 127.0.0.1, in $CL_DIR"
    CL_EXTRA_CONF="# bench/run.sh
$BENCH_CONF"
    # the installation is shared: install this tree's build again right
    # before the nodes load it, and check afterwards that they did
    make -C "$ROOT" -s install PG_CONFIG="$PG_CONFIG" >/dev/null
    cl_start || return 1
    if ! cmp -s "$ROOT/mqlog.so" "$("$PG_CONFIG" --pkglibdir)/mqlog.so"; then
        echo "run.sh: $("$PG_CONFIG" --pkglibdir)/mqlog.so is no longer this tree's build (another make install ran meanwhile); the nodes may run other code: rerun" >&2
        cl_stop || true
        return 1
    fi
    step "$workloads workload ($MODE)"
    local ports rc
    ports=${CL_PORT[1]},${CL_PORT[2]},${CL_PORT[3]}
    set +e
    "$PY" "$BENCH/bench.py" --mode "$MODE" --workloads "$workloads" \
        --pghost "$CL_DIR" --pgport "${CL_PORT[1]}" --dbname postgres --cluster-ports "$ports" \
        --cluster-dir "$CL_DIR" --cluster-bindir "$CL_BINDIR" \
        --redis-port "$REDISPORT" --redis-ok 0 \
        --work "$WORK" --out "$1" $([ "${2:-}" = new ] || echo --append)
    rc=$?
    set -e
    local i errs
    # (a node the failover workload killed and started again is in
    # cluster.env under its new pid)
    if ! cl_stop; then
        echo "run.sh: a node or etcd needed more than a clean stop; their logs: $BENCH/results/latest-$tag-*.log" >&2
        for i in 1 2 3; do
            tail -n 400 "$CL_DIR/n$i.log" >"$BENCH/results/latest-$tag-n$i.log" || true
        done
        tail -n 100 "$CL_DIR/etcd.log" >"$BENCH/results/latest-$tag-etcd.log" || true
        return 1
    fi
    for i in 1 2 3; do
        # errors and warnings of the nodes, to explain a failed row (the
        # failover workload's refused produce attempts are among them)
        errs=$(grep -E "ERROR|WARNING|FATAL|PANIC" "$CL_DIR/n$i.log" | tail -n 200 || true)
        if [ -n "$errs" ]; then
            printf '%s\n' "$errs" >"$BENCH/results/latest-$tag-n$i.log"
        else
            rm -f "$BENCH/results/latest-$tag-n$i.log"
        fi
    done
    return $rc
}

# --only WORKLOAD: its own report beside its results, then exit with the
# bench's status
report_only_and_exit() {
    step "report"
    "$PY" "$BENCH/report.py" "$BENCH/results/$ONLY.jsonl" "--only-$ONLY" \
        --md "$BENCH/results/$ONLY.md"
    cat "$BENCH/results/$ONLY.md"
    echo
    echo "done in $(( $(date +%s) - START )) s:"
    echo "  $BENCH/results/$ONLY.jsonl"
    echo "  $BENCH/results/$ONLY.md"
    exit "$1"
}

if [ -n "$ONLY" ] && [ "$ONLY" != scale ] && [ "$ONLY" != kafka ]; then
    mkdir -p "$BENCH/results"
    set +e
    run_replication "$BENCH/results/$ONLY.jsonl" new "$ONLY"
    brc=$?
    set -e
    report_only_and_exit $brc
fi

step "throwaway PostgreSQL 15 in $WORK (Unix socket only, port $PGPORT)"
as_pg "$BINDIR/initdb" -D "$PGDATA" -U postgres -A trust -E UTF8 >"$WORK/initdb.log" 2>&1 ||
    { cat "$WORK/initdb.log" >&2; exit 1; }
cat >>"$PGDATA/postgresql.conf" <<EOF

# bench/run.sh
port = $PGPORT
listen_addresses = ''
unix_socket_directories = '$WORK'
shared_preload_libraries = 'mqlog'
wal_level = logical
output_plugin_libraries = 'pgoutput, test_decoding, mqlog'
# the scale run's topic of 10,000 partitions, beside the others
mqlog.max_partitions = 16384
# the kafka workload: Kafka clients through mqlog's listener (doc/kafka.md);
# the database is created after the start, the listener retries until then
mqlog.kafka_listen = '127.0.0.1:$KAFKAPORT'
mqlog.kafka_database = 'bench'
mqlog.kafka_role = 'mqbench_kafka'
$BENCH_CONF
EOF
if ! as_pg "$BINDIR/pg_ctl" -D "$PGDATA" -l "$WORK/server.log" -w -t 60 start >/dev/null; then
    echo "PostgreSQL did not start:" >&2
    tail -n 30 "$WORK/server.log" >&2
    exit 1
fi
"$BINDIR/createdb" -h "$WORK" -p "$PGPORT" -U postgres bench

step "throwaway Redis on 127.0.0.1:$REDISPORT (appendonly yes, appendfsync everysec)"
mkdir -p "$WORK/redis"
cat >"$WORK/redis.conf" <<EOF
bind 127.0.0.1
port $REDISPORT
protected-mode yes
daemonize yes
pidfile $WORK/redis.pid
logfile $WORK/redis.log
dir $WORK/redis
appendonly yes
appendfsync everysec
save ""
EOF
REDIS_OK=1
if ! redis-server "$WORK/redis.conf"; then
    echo "redis-server did not start; Redis rows will carry the error" >&2
    REDIS_OK=0
fi
for _ in $(seq 50); do
    redis-cli -h 127.0.0.1 -p "$REDISPORT" ping >/dev/null 2>&1 && break
    sleep 0.1
done

if [ "$SERVERS_ONLY" = 1 ]; then
    echo "bench.py args: --pghost $WORK --pgport $PGPORT --redis-port $REDISPORT --work $WORK"
    exit 0
fi

# ---------------------------------------------------------------- the bench
step "benchmark ($MODE)"
mkdir -p "$BENCH/results"
set +e
if [ "$ONLY" = scale ] || [ "$ONLY" = kafka ]; then
    # the single server's workloads run alone: the scale run, or the Kafka
    # clients beside the driver's mq_produce_batch and mq_poll
    case "$ONLY" in
        scale) only_workloads=scale ;;
        kafka) only_workloads=kafka,produce_batch,consume ;;
    esac
    "$PY" "$BENCH/bench.py" --mode "$MODE" --systems mqlog --workloads "$only_workloads" \
        --pghost "$WORK" --pgport "$PGPORT" --kafka-port "$KAFKAPORT" \
        --redis-port "$REDISPORT" --redis-ok "$REDIS_OK" \
        --work "$WORK" --out "$BENCH/results/$ONLY.jsonl"
    brc=$?
    report_only_and_exit $brc
fi
if [ "$MODE" = soak ]; then
    "$PY" "$BENCH/bench.py" --mode soak --systems mqlog,heap_log --workloads sustained \
        --pghost "$WORK" --pgport "$PGPORT" \
        --redis-port "$REDISPORT" --redis-ok "$REDIS_OK" \
        --work "$WORK" --out "$BENCH/results/soak.jsonl"
    exit $?
fi
"$PY" "$BENCH/bench.py" --mode "$MODE" \
    --pghost "$WORK" --pgport "$PGPORT" --kafka-port "$KAFKAPORT" \
    --redis-port "$REDISPORT" --redis-ok "$REDIS_OK" \
    --work "$WORK" --out "$BENCH/results/latest.jsonl"
brc=$?
set -e
if [ $brc -ne 0 ]; then
    echo "bench.py exited with $brc; writing the report from what it measured" >&2
fi

# the single server and Redis make room for the three nodes
if [ -f "$WORK/server.log" ]; then
    tail -n 3000 "$WORK/server.log" >"$BENCH/results/latest-postgresql.log" || true
fi
stop_single
set +e
run_replication "$BENCH/results/latest.jsonl" append replication,failover
rrc=$?
set -e
[ $rrc -eq 0 ] || { echo "the replication and failover workloads exited with $rrc" >&2; brc=$rrc; }

step "report"
"$PY" "$BENCH/report.py" "$BENCH/results/latest.jsonl" \
    --md "$BENCH/results/latest.md" --png "$BENCH/results/latest.png" --doc "$ROOT/doc/benchmarks.md"

echo
echo "done in $(( $(date +%s) - START )) s:"
echo "  $BENCH/results/latest.jsonl"
echo "  $BENCH/results/latest.md"
echo "  $BENCH/results/latest.png"
exit $brc
