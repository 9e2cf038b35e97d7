#!/usr/bin/env bash
# Try mqlog's replicated partitions in one command: install the
# dependencies, build and install mqlog, start one etcd and three
# PostgreSQL 15 nodes on loopback, create a topic with replication factor 3,
# produce on each partition's leader, and read it back on the followers.
#
#   scripts/cluster-demo.sh               start the cluster and run the tour
#   scripts/cluster-demo.sh --stop        stop what it started (by pid), delete the directory
#   scripts/cluster-demo.sh --dir DIR     use DIR instead of /tmp/mqlog-cluster (also with --stop)
#   scripts/demo.sh --cluster [...]       the same
#
# Run it as root on Debian 12 (it installs packages and the extension; the
# servers run as the `postgres` OS user).  Everything lives in the
# directory; the servers listen on 127.0.0.1 only, on the first free ports
# from 23790 (etcd) and 5511 (the nodes n1, n2, n3).  A second start while
# the cluster runs says so and leaves it alone.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
CL_DIR=/tmp/mqlog-cluster
STOP=0

usage() { sed -n '2,16s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; }

while [ $# -gt 0 ]; do
    case "$1" in
        --stop) STOP=1 ;;
        --dir) [ $# -ge 2 ] || { usage >&2; exit 2; }; CL_DIR=$2; shift ;;
        --dir=*) CL_DIR=${1#--dir=} ;;
        --cluster) ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
    esac
    shift
done
case "$CL_DIR" in
    /*) ;;
    *) CL_DIR=$(pwd -P)/$CL_DIR ;;
esac
export CL_DIR

# shellcheck source=scripts/cluster-lib.sh
. "$ROOT/scripts/cluster-lib.sh"

print_connect() {
    cat <<EOF

==== the mqlog cluster is running in $CL_DIR ====
EOF
    for i in $(seq "$CL_NODES"); do
        echo "n$i:    psql -h 127.0.0.1 -p ${CL_PORT[$i]} -U postgres     (or -h $CL_DIR; log $CL_DIR/n$i.log)"
    done
    cat <<EOF
etcd:  etcdctl --endpoints $CL_ETCD_URL get --prefix /mqlog/$CL_CLUSTER_NAME/
stop:  $0 --stop$( [ "$CL_DIR" = /tmp/mqlog-cluster ] || echo " --dir $CL_DIR")
EOF
}

if [ "$STOP" = 1 ]; then
    if [ ! -e "$CL_DIR" ]; then
        echo "no cluster in $CL_DIR"
        exit 0
    fi
    if [ ! -f "$CL_DIR/cluster.env" ]; then
        echo "$CL_DIR holds no cluster.env: not a directory of this script, left alone" >&2
        exit 1
    fi
    if ! cl_stop; then
        echo "(a server needed more than a clean stop: see the log above; logs kept in $CL_DIR)" >&2
        exit 1
    fi
    if cl_running; then
        echo "something is still running; $CL_DIR kept" >&2
        exit 1
    fi
    rm -rf "$CL_DIR"
    echo "mqlog cluster stopped and $CL_DIR removed."
    exit 0
fi

if cl_running; then
    echo "an mqlog cluster is already running in $CL_DIR (stop it first with: $0 --stop)"
    print_connect
    exit 0
fi
if [ -e "$CL_DIR" ] && [ ! -f "$CL_DIR/cluster.env" ]; then
    echo "$CL_DIR exists and is not a cluster directory of this script; choose another with --dir" >&2
    exit 1
fi

step() { printf '\n==== %s ====\n' "$*"; }

if [ "$(id -u)" -ne 0 ]; then
    echo "run $0 as root: it installs packages and mqlog, and runs the servers as the postgres user" >&2
    exit 1
fi

step "dependencies"
"$ROOT/scripts/install-deps.sh"
CL_BINDIR=$("$PG_CONFIG" --bindir)

step "build and install mqlog"
# Build in a copy so the checkout stays untouched.
BUILD=$(mktemp -d /tmp/mqlog-cluster-build.XXXXXX)
trap 'rm -rf "$BUILD"' EXIT
tar -C "$ROOT" --exclude=./.git --exclude='*.o' --exclude='*.so' --exclude='*.bc' \
    --exclude=./results --exclude=./output_iso --exclude='./tmp_check*' --exclude=./log \
    --exclude=./bench/work --warning=no-file-changed -cf - . | tar -C "$BUILD" -xf - || {
    # tar exits 1 when a file changed while it was read: the copy is usable.
    st=("${PIPESTATUS[@]}")
    [ "${st[0]}" -le 1 ] && [ "${st[1]}" -eq 0 ]
}
make -C "$BUILD" -s PG_CONFIG="$PG_CONFIG"
make -C "$BUILD" -s install PG_CONFIG="$PG_CONFIG"
echo "installed into $("$PG_CONFIG" --pkglibdir)"
rm -rf "$BUILD"
trap - EXIT

on_error() {
    local rc=$?
    [ "$rc" -ne 0 ] || return 0
    echo >&2
    echo "The cluster demo stopped on an error.  Logs: $CL_DIR/etcd.log, $CL_DIR/n1.log .. n3.log" >&2
    echo "What started is still running; stop it with: $0 --stop$( [ "$CL_DIR" = /tmp/mqlog-cluster ] || echo " --dir $CL_DIR")" >&2
}
trap on_error EXIT

step "one etcd and three PostgreSQL nodes on 127.0.0.1, in $CL_DIR"
cl_start

# psql on a node reached by the conninfo it registered in mqlog.nodes
conninfo_of() { cl_q 1 "SELECT conninfo FROM mqlog.nodes WHERE node = '$1'"; }
on() {
    local node=$1
    shift
    "$CL_BINDIR/psql" -X -d "$(conninfo_of "$node") dbname=postgres" --pset=pager=off "$@"
}

step "every node's view of the cluster"
cl_psql 1 --pset=pager=off --echo-queries -c "SELECT node, conninfo, alive, is_self FROM mqlog.nodes ORDER BY node"

step "a topic with 3 partitions, each on 3 nodes, min.insync.replicas 2 (on n1)"
cl_psql 1 -v ON_ERROR_STOP=1 --pset=pager=off --echo-queries -c \
    "SELECT mq_create_topic('orders', 3, replication_factor => 3, config => '{\"min.insync.replicas\": 2}')"
topic_everywhere() {
    for i in $(seq "$CL_NODES"); do
        [ "$(cl_q "$i" "SELECT count(*) FROM mqlog.partitions WHERE topic = 'orders' AND leader IS NOT NULL")" = 3 ] || return 1
    done
}
cl_wait 60 topic_everywhere
echo "every node has its copy of the topic"
cl_psql 1 --pset=pager=off --echo-queries -c \
    "SELECT \"partition\", leader, replicas, isr, leader_epoch FROM mqlog.partitions WHERE topic = 'orders' ORDER BY 1"

step "produce on each partition's leader, with acks=all"
LEADER=()
for p in 0 1 2; do
    LEADER[$p]=$(cl_q 1 "SELECT leader FROM mqlog.partitions WHERE topic = 'orders' AND \"partition\" = $p")
    echo
    echo "-- partition $p: leader ${LEADER[$p]}, reached with '$(conninfo_of "${LEADER[$p]}")'"
    on "${LEADER[$p]}" -v ON_ERROR_STOP=1 --echo-queries <<SQL
SET mqlog.acks = 'all';
SELECT * FROM mq_produce('orders', '{"order":$((p * 10 + 1)),"on":"${LEADER[$p]}"}', key => 'customer-$p', partition => $p);
SELECT * FROM mq_produce_batch('orders', ARRAY['{"order":$((p * 10 + 2))}', '{"order":$((p * 10 + 3))}', '{"order":$((p * 10 + 4))}']::bytea[], partition => $p);
SQL
done

# acks=all returned once the leader's high watermark passed the records;
# a follower learns the high watermark from the stream a moment later
caught_up() {
    for i in $(seq "$CL_NODES"); do
        [ "$(cl_q "$i" "SELECT count(*) FROM mqlog.partitions WHERE topic = 'orders' AND high_watermark = 4")" = 3 ] || return 1
    done
}
cl_wait 30 caught_up || echo "(not every node shows high_watermark 4 on every partition after 30 s)"

step "mqlog.partitions on every node"
for i in $(seq "$CL_NODES"); do
    echo
    echo "-- on n$i"
    cl_psql "$i" --pset=pager=off --echo-queries -c \
        "SELECT topic, \"partition\", leader, replicas, isr, high_watermark, log_end_offset FROM mqlog.partitions WHERE topic = 'orders' ORDER BY 2"
done

step "read the records back on a follower of each partition, with mq_fetch"
for p in 0 1 2; do
    f=$(cl_q 1 "SELECT replicas[2] FROM mqlog.partitions WHERE topic = 'orders' AND \"partition\" = $p")
    echo
    echo "-- partition $p (leader ${LEADER[$p]}), read on follower $f"
    on "$f" -v ON_ERROR_STOP=1 --echo-queries -c \
        "SELECT \"partition\", \"offset\", convert_from(key, 'UTF8') AS key, convert_from(value, 'UTF8') AS value FROM mq_fetch('orders', $p, 0)"
done

step "produce on a follower: refused, the hint names the leader"
f=$(cl_q 1 "SELECT replicas[2] FROM mqlog.partitions WHERE topic = 'orders' AND \"partition\" = 0")
echo "-- on $f, which follows partition 0 (leader ${LEADER[0]})"
out=$(on "$f" --echo-queries -v VERBOSITY=verbose -c "SELECT * FROM mq_produce('orders', 'x', partition => 0)" 2>&1) || true
echo "$out"
if ! grep -q "HINT:  Produce on node \"${LEADER[0]}\"" <<<"$out"; then
    echo "(unexpected: the refusal above does not name leader ${LEADER[0]} in its hint)" >&2
fi
echo
echo "-- how to reach the leader, on $f"
on "$f" --echo-queries -c "SELECT node, conninfo FROM mqlog.nodes WHERE node = '${LEADER[0]}'"
trap - EXIT

print_connect
