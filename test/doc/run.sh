#!/usr/bin/env bash
# The doc test: doc/reference.md's examples, run in order on a throwaway
# cluster of our own and compared with the output the doc shows
# (test/doc/reference_examples.py says how).  scripts/test.sh runs it as
# its "doc" layer; by hand, as the postgres OS user:
#
#   test/doc/run.sh PG_BINDIR WORKDIR [PORT [--show-server]]
#
# The cluster has test/mqlog.conf's settings with the doc's own
# (mqlog.maintenance_naptime = 1d, TimeZone UTC, and PostgreSQL's defaults
# for the settings that size MaxBackends, which mqlog.shared_memory's
# figures in the doc are for), listens on a Unix socket in WORKDIR only,
# and is stopped before the script exits.  --show-server prints what the
# server printed for each example that differs.
set -uo pipefail
BINDIR=$1 WORK=$2 PORT=${3:-54339}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
DATA=$WORK/data

rm -rf "$DATA" && mkdir -p "$WORK" || exit 1
"$BINDIR/initdb" -D "$DATA" -A trust -U postgres -E UTF8 --no-sync >"$WORK/initdb.log" 2>&1 ||
    { cat "$WORK/initdb.log"; exit 1; }
{
    echo
    cat "$SRC/test/mqlog.conf"
    echo "mqlog.maintenance_naptime = '1d'"
    echo "timezone = 'UTC'"
    # the doc's mqlog.shared_memory is "at the defaults": 122 backends
    echo "max_connections = 100"
    echo "autovacuum_max_workers = 3"
    echo "max_worker_processes = 8"
    echo "max_wal_senders = 10"
    echo "port = $PORT"
    echo "listen_addresses = ''"
    echo "unix_socket_directories = '$WORK'"
} >>"$DATA/postgresql.conf"
"$BINDIR/pg_ctl" -D "$DATA" -l "$WORK/server.log" -w -t 120 start >/dev/null ||
    { tail -n 40 "$WORK/server.log"; exit 1; }
trap '"$BINDIR/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null' EXIT
/usr/bin/python3 "$SRC/test/doc/reference_examples.py" --psql "$BINDIR/psql" \
    --host "$WORK" --port "$PORT" "${@:4}" "$SRC/doc/reference.md"
