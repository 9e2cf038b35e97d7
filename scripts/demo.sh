#!/usr/bin/env bash
# Try mqlog in one command: install the dependencies, build and install the
# extension, start a throwaway PostgreSQL 15 with mqlog preloaded, and run a
# short tour in psql (topics, produce, fetch, the catalog views).
#
#   scripts/demo.sh          (re)start the demo from scratch and run the tour
#   scripts/demo.sh --stop   stop the demo server and delete /tmp/mqlog-demo
#   scripts/demo.sh --cluster [--stop] [--dir DIR]
#                            three nodes and etcd, a replicated topic: runs
#                            scripts/cluster-demo.sh (see there)
#
# Run it as root on Debian 12 (it installs missing packages and the
# extension; the server itself runs as the `postgres` OS user).  Everything
# lives in /tmp/mqlog-demo; the server listens on the Unix socket in that
# directory only, port 5499.  The tour runs in a database of its own,
# mqlog_demo; the database postgres is left without mqlog, for README's
# "A first session".
#
# Environment (the same for --stop):
#   PG_CONFIG        pg_config of the PostgreSQL 15 to build for and run
#                    (default: Debian's, /usr/lib/postgresql/15/bin/pg_config)
#   MQLOG_DEMO_PORT  the server's port (default 5499)
#   MQLOG_DEMO_DIR   its directory and socket directory (default /tmp/mqlog-demo)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
DEMO=${MQLOG_DEMO_DIR:-/tmp/mqlog-demo}
PORT=${MQLOG_DEMO_PORT:-5499}
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
DEMO_DB=mqlog_demo

usage() {
    sed -n '2,25s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
}

for a in "$@"; do
    if [ "$a" = --cluster ]; then
        exec "$ROOT/scripts/cluster-demo.sh" "$@"
    fi
done

case "$DEMO" in
    /*) ;;
    *) echo "MQLOG_DEMO_DIR must be an absolute path" >&2; exit 2 ;;
esac

# Run a command as the postgres OS user when we are root (PostgreSQL refuses
# to run as root), from a directory that user can read.
as_pg() {
    if [ "$(id -u)" -eq 0 ]; then
        (cd / && runuser -u postgres -- "$@")
    else
        (cd / && "$@")
    fi
}

# pg_ctl of the PostgreSQL that PG_CONFIG names (it may not exist yet before
# the dependencies are installed; --stop then falls back to Debian's)
bindir() {
    "$PG_CONFIG" --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin
}

stop_demo() {
    local BINDIR
    BINDIR=$(bindir)
    if [ -f "$DEMO/data/postmaster.pid" ]; then
        echo "stopping the demo server in $DEMO/data"
        as_pg "$BINDIR/pg_ctl" -D "$DEMO/data" -m fast -w stop >/dev/null ||
            as_pg "$BINDIR/pg_ctl" -D "$DEMO/data" -m immediate -w stop >/dev/null || true
    fi
}

case "${1:-}" in
    "") ;;
    --stop)
        stop_demo
        rm -rf "$DEMO"
        echo "mqlog demo stopped and $DEMO removed."
        exit 0
        ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
esac

step() { printf '\n==== %s ====\n' "$*"; }

step "dependencies"
"$ROOT/scripts/install-deps.sh"
BINDIR=$("$PG_CONFIG" --bindir)
PSQL=("$BINDIR/psql" -X -h "$DEMO" -p "$PORT" -U postgres)

step "clean slate: $DEMO"
stop_demo
rm -rf "$DEMO"
mkdir -p "$DEMO/build"

step "build and install mqlog"
# Build in a copy so the checkout stays untouched.
tar -C "$ROOT" --exclude=./.git --exclude='*.o' --exclude='*.so' --exclude='*.bc' \
    --exclude=./results --exclude=./output_iso --exclude='./tmp_check*' --exclude=./log \
    --exclude=./bench/work --warning=no-file-changed -cf - . | tar -C "$DEMO/build" -xf - || {
    # tar exits 1 when a file changed while it was read: the copy is usable.
    st=("${PIPESTATUS[@]}")
    [ "${st[0]}" -le 1 ] && [ "${st[1]}" -eq 0 ]
}
make -C "$DEMO/build" -s PG_CONFIG="$PG_CONFIG"
if ! make -C "$DEMO/build" -s install PG_CONFIG="$PG_CONFIG"; then
    echo "make install failed: run scripts/demo.sh as root so it can install into $("$PG_CONFIG" --pkglibdir)" >&2
    exit 1
fi
echo "installed into $("$PG_CONFIG" --pkglibdir)"

step "start PostgreSQL with mqlog preloaded (port $PORT, socket in $DEMO)"
chmod 755 "$DEMO"
if [ "$(id -u)" -eq 0 ]; then
    chown postgres:postgres "$DEMO"
fi
as_pg "$BINDIR/initdb" -D "$DEMO/data" -U postgres -A trust -E UTF8 --no-sync >"$DEMO/initdb.log" 2>&1 ||
    { cat "$DEMO/initdb.log" >&2; exit 1; }
cat >>"$DEMO/data/postgresql.conf" <<EOF

# scripts/demo.sh
port = $PORT
listen_addresses = ''
unix_socket_directories = '$DEMO'
shared_preload_libraries = 'mqlog'
# logical decoding: the mqlog output plugin must be allowed by name on this
# PostgreSQL build (doc/reference.md, Server settings)
wal_level = logical
output_plugin_libraries = 'pgoutput, test_decoding, mqlog'
EOF
if ! as_pg "$BINDIR/pg_ctl" -D "$DEMO/data" -l "$DEMO/server.log" -w -t 60 start >/dev/null; then
    echo "the demo server did not start; its log:" >&2
    tail -n 40 "$DEMO/server.log" >&2
    exit 1
fi

on_error() {
    echo >&2
    echo "The demo stopped on an error.  Server log: $DEMO/server.log" >&2
    echo "The server is still running: psql -h $DEMO -p $PORT -U postgres -d $DEMO_DB" >&2
    echo "Stop it with: scripts/demo.sh --stop" >&2
}
trap on_error ERR

step "CREATE DATABASE $DEMO_DB, CREATE EXTENSION mqlog there, then the tour"
"${PSQL[@]}" -d postgres -v ON_ERROR_STOP=1 --echo-queries -c "CREATE DATABASE $DEMO_DB"
"${PSQL[@]}" -d "$DEMO_DB" -v ON_ERROR_STOP=1 --echo-queries --pset=pager=off <<'SQL'
CREATE EXTENSION mqlog;

\echo
\echo '-- A topic with 3 partitions.'
SELECT mq_create_topic('orders', 3);

\echo
\echo '-- Produce single records.  The same key always lands on the same partition'
\echo '-- (Kafka''s murmur2 partitioner); a null key spreads records across partitions.'
SELECT * FROM mq_produce('orders', '{"id":1}', key => 'customer-7');
SELECT * FROM mq_produce('orders', '{"id":2}', key => 'customer-7');
SELECT * FROM mq_produce('orders', '{"id":3}', key => 'customer-9');
SELECT * FROM mq_produce('orders', '{"id":4}');

\echo
\echo '-- Produce a batch: the fast path, one record batch per partition touched.'
SELECT * FROM mq_produce_batch('orders', ARRAY['a','b','c']::bytea[]);

\echo
\echo '-- Read partition 0 from offset 0, without a consumer group.'
SELECT partition, "offset", ts, convert_from(key,'UTF8') AS key, convert_from(value,'UTF8') AS value FROM mq_fetch('orders', 0, 0);

\echo
\echo '-- Every partition.'
SELECT f.partition, f."offset", convert_from(f.key,'UTF8') AS key, convert_from(f.value,'UTF8') AS value FROM generate_series(0, 2) AS p, mq_fetch('orders', p, 0) AS f ORDER BY 1, 2;

\echo
\echo '-- Text and JSON without casts.'
SELECT * FROM mq_produce_json('orders', '{"id":5,"total":12.5}', key => 'customer-7');
SELECT "offset", key, value FROM mq_fetch_text('orders', mq_partition_for_key('customer-7', 3), 0);

\echo
\echo '-- Consumer group "billing": poll and commit in one transaction.'
BEGIN;
SELECT topic, partition, "offset", key, value FROM mq_poll_text('billing', 'orders', 100, timeout => '2 seconds');
SELECT mq_commit('billing');
COMMIT;
SELECT * FROM mqlog.consumer_lag;
SELECT mq_leave('billing');

\echo
\echo '-- Logical decoding: the mqlog output plugin prints committed records.'
SELECT 'init' FROM pg_create_logical_replication_slot('mqlog_demo_slot', 'mqlog');
SELECT * FROM mq_produce('orders', 'decoded', key => 'customer-9');
SELECT data FROM pg_logical_slot_get_changes('mqlog_demo_slot', NULL, NULL);
SELECT pg_drop_replication_slot('mqlog_demo_slot');

\echo
\echo '-- The catalog views a DBA uses.'
SELECT topic, partitions, replication_factor, config->>'retention.ms' AS retention_ms, config_overrides FROM mqlog.topics;
SELECT * FROM mqlog.partitions;
SELECT * FROM mqlog.segments;
SQL
trap - ERR

# --stop needs the same directory (and PostgreSQL) as the start
STOP_ENV=
[ "$PG_CONFIG" = /usr/lib/postgresql/15/bin/pg_config ] || STOP_ENV+="PG_CONFIG=$PG_CONFIG "
[ "$DEMO" = /tmp/mqlog-demo ] || STOP_ENV+="MQLOG_DEMO_DIR=$DEMO "
cat <<EOF

==== the mqlog demo server is running ====
the tour:    psql -h $DEMO -p $PORT -U postgres -d $DEMO_DB
a fresh db:  psql -h $DEMO -p $PORT -U postgres     (postgres: no mqlog yet, for README's "A first session")
stop:        ${STOP_ENV}scripts/demo.sh --stop
server log:  $DEMO/server.log
EOF
