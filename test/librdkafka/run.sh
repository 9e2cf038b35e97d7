#!/usr/bin/env bash
# librdkafka's own test suite against mqlog's Kafka listener: the tests/ of
# Debian 12's librdkafka source package, built against the librdkafka the
# machine has installed (librdkafka-dev), run one test number at a time
# against a throwaway PostgreSQL with mqlog preloaded and the listener on a
# free loopback port.  scripts/test.sh runs it as its "librdkafka" layer; by
# hand, after `make install` into the PostgreSQL that PG_CONFIG names:
#
#   test/librdkafka/run.sh                  every entry tests.txt marks "run"
#   test/librdkafka/run.sh 0001 0081/do_test_DeleteTopics
#                                           these entries only (excluded ones too)
#
# test/librdkafka/tests.txt lists every test number of 0000-0099 the source
# has: "run" (with the options it runs with), or "excluded" with the
# reason; its header says how.  The last line of output is
# "librdkafka: N run, N passed, N failed, N excluded"; the exit status is 0
# only when no test failed.
#
# Environment:
#   PG_CONFIG               the PostgreSQL mqlog is installed in (default 15's)
#   MQLOG_RDKAFKA_CACHE     where the source is fetched and built, kept between
#                           runs (default /var/cache/mqlog-librdkafka)
#   MQLOG_RDKAFKA_WORK      the server's data directory and the logs (default
#                           a new /tmp/mqlog-rdkafka.XXXXXX, removed when
#                           every test passed)
#   MQLOG_RDKAFKA_TIMEOUT   seconds one entry may take before it is killed
#                           and counted failed (default 300)
#   MQLOG_RDKAFKA_BUDGET    seconds all of them may take: once they are up,
#                           the entries not started yet are counted failed
#                           without being run (default 2400)
#   MQLOG_RDKAFKA_QUICK=1   run the tests in librdkafka's quick mode (-Q: fewer
#                           messages, most sub-tests left out)
#   TEST_LEVEL, TEST_DEBUG, SUBTESTS   librdkafka's own (tests/README.md)
#
# Getting the source needs a deb-src entry for bookworm main, which
# scripts/install-deps.sh adds.  As root, the server runs as the postgres OS
# user (PostgreSQL refuses root); the test binaries run as the caller.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
SRC=$(cd "$HERE/../.." && pwd -P)
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
CACHE=${MQLOG_RDKAFKA_CACHE:-/var/cache/mqlog-librdkafka}
TIMEOUT=${MQLOG_RDKAFKA_TIMEOUT:-300}
BUDGET=${MQLOG_RDKAFKA_BUDGET:-2400}
# The broker version the tests assume: 2.4.0 lets them use the Admin API
# to create topics (not kafka-topics.sh) and skips the tests of newer
# brokers' features, which mqlog's API versions do not reach either.
KAFKA_VERSION=2.4.0
# mqlog as librdkafka's test clusters are configured (tests/scenarios/
# default.json): topics auto-created with 4 partitions.
NUM_PARTITIONS=4

die() { echo "librdkafka: $*" >&2; exit 1; }

IS_ROOT=0
[ "$(id -u)" -eq 0 ] && IS_ROOT=1
as_pg() {
    if [ $IS_ROOT -eq 1 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# ---------------------------------------------------------------------------
# The source, fetched once into the cache, for the version installed
# ---------------------------------------------------------------------------

VERSION=$(dpkg-query -W -f='${Version}' librdkafka-dev 2>/dev/null) ||
    die "librdkafka-dev is not installed (scripts/install-deps.sh installs it)"
[ -n "$VERSION" ] || die "librdkafka-dev is not installed (scripts/install-deps.sh installs it)"
TREE=$CACHE/librdkafka-$VERSION
TESTS_DIR=$TREE/tests

mkdir -p "$CACHE" || die "cannot create $CACHE (set MQLOG_RDKAFKA_CACHE)"
# One run at a time per cache: the build, and the test runner, which writes
# into its own directory.
exec 9>"$CACHE/.lock"
flock 9 || die "cannot lock $CACHE/.lock"

fetch_source() {
    [ -f "$TREE/.mqlog-fetched" ] && return 0
    local tmp
    tmp=$(mktemp -d "$CACHE/fetch.XXXXXX") || return 1
    echo "librdkafka: fetching the source of librdkafka $VERSION into $CACHE"
    # apt-get source runs dpkg-source -x, which checks the signature and
    # applies Debian's patches.  As root, apt's download sandbox user cannot
    # write into the cache: download as ourselves.
    if ! (cd "$tmp" && apt-get source -q -o APT::Sandbox::User="$(id -un)" \
                        "librdkafka=$VERSION") >"$tmp/apt.log" 2>&1; then
        cat "$tmp/apt.log"
        echo "librdkafka: apt-get source failed; is there a deb-src entry for bookworm main? (scripts/install-deps.sh adds one)" >&2
        rm -rf "$tmp"
        return 1
    fi
    local dir
    dir=$(find "$tmp" -mindepth 1 -maxdepth 1 -type d -name 'librdkafka-*' | head -n 1)
    [ -n "$dir" ] && [ -d "$dir/tests" ] || { echo "no librdkafka-*/tests in what apt-get source unpacked" >&2; rm -rf "$tmp"; return 1; }
    rm -rf "$TREE"
    mv "$dir" "$TREE" && touch "$TREE/.mqlog-fetched"
    local rc=$?
    rm -rf "$tmp"
    return $rc
}

# The tests link with the installed librdkafka: they use its public API and
# the few internals they need (tinycthread, rdlist, sockem) are compiled
# into the runner from the source tree, for which configure writes
# config.h.  The library itself is not built: make is told that
# src/librdkafka.a and src-cpp/librdkafka++.a, which test.o names as
# prerequisites, are up to date (-o), and -lrdkafka then finds the
# installed one.
build_tests() {
    [ -f "$TREE/.mqlog-built" ] && [ -x "$TESTS_DIR/test-runner" ] && return 0
    echo "librdkafka: building tests/ against the installed librdkafka $VERSION"
    (
        cd "$TREE" &&
        ./configure --disable-gssapi --disable-curl &&
        make -C tests -j"$(nproc)" test-runner -o ../src/librdkafka.a -o ../src-cpp/librdkafka++.a
    ) >"$TREE/mqlog-build.log" 2>&1 || {
        tail -n 40 "$TREE/mqlog-build.log"
        echo "librdkafka: building the tests failed (log: $TREE/mqlog-build.log)" >&2
        return 1
    }
    # the runner must load the installed library, not one from the tree
    if ! ldd "$TESTS_DIR/test-runner" | grep -q '^[[:space:]]*librdkafka\.so\.1 => /'; then
        ldd "$TESTS_DIR/test-runner"
        echo "librdkafka: the test runner does not load the installed librdkafka" >&2
        return 1
    fi
    touch "$TREE/.mqlog-built"
}

fetch_source || die "could not get the librdkafka source"
build_tests || die "could not build the tests"

# ---------------------------------------------------------------------------
# Which tests
# ---------------------------------------------------------------------------

LIST=$HERE/tests.txt
# tests.txt without comments: "ENTRY STATUS [WORD...]"
entries() { sed 's/#.*//' "$LIST" | awk 'NF >= 2'; }
# the "run" entries of tests.txt, or the entries on the command line
if [ $# -gt 0 ]; then
    SELECTED=("$@")
else
    mapfile -t SELECTED < <(entries | awk '$2 == "run" { print $1 }')
fi
EXCLUDED=$(entries | awk '$2 == "excluded" { n++ } END { print n + 0 }')
for e in "${SELECTED[@]}"; do
    [[ $e =~ ^[0-9]{4}(/[A-Za-z0-9_:]+)?$ ]] || die "not a test: $e (NNNN or NNNN/SUBTEST, as in tests.txt)"
done
# an entry's options in tests.txt (version=V, args=A), one a line
options() { entries | awk -v e="$1" '$1 == e { for (i = 3; i <= NF; i++) if ($i ~ /=/) print $i }'; }

# ---------------------------------------------------------------------------
# A throwaway server
# ---------------------------------------------------------------------------

[ -x "$PG_CONFIG" ] || die "PG_CONFIG=$PG_CONFIG is not executable"
BINDIR=$("$PG_CONFIG" --bindir)
[ -f "$("$PG_CONFIG" --pkglibdir)/mqlog.so" ] || die "mqlog is not installed in $("$PG_CONFIG" --pkglibdir) (make install PG_CONFIG=$PG_CONFIG)"

if [ -n "${MQLOG_RDKAFKA_WORK:-}" ]; then
    WORK=$MQLOG_RDKAFKA_WORK
    mkdir -p "$WORK" || die "cannot create $WORK"
else
    WORK=$(mktemp -d /tmp/mqlog-rdkafka.XXXXXX) || die "cannot create a work directory"
fi
DATA=$WORK/data
LOGS=$WORK/logs
rm -rf "$DATA" "$LOGS"
mkdir -p "$LOGS"
[ $IS_ROOT -eq 1 ] && chown postgres:postgres "$WORK"

PGPORT_=$(perl "$SRC/scripts/free-port.pl" 55432) || die "no free port for PostgreSQL"
KPORT=$(perl "$SRC/scripts/free-port.pl" 29092) || die "no free port for the Kafka listener"

as_pg "$BINDIR/initdb" -D "$DATA" -A trust -U postgres -E UTF8 --no-sync >"$WORK/initdb.log" 2>&1 ||
    { cat "$WORK/initdb.log"; die "initdb failed"; }
{
    echo
    cat "$SRC/test/mqlog.conf"
    echo "port = $PGPORT_"
    echo "listen_addresses = ''"
    echo "unix_socket_directories = '$WORK'"
    echo "mqlog.kafka_listen = '127.0.0.1:$KPORT'"
    echo "mqlog.kafka_database = 'postgres'"
    echo "mqlog.kafka_role = 'rdkafka'"
    echo "mqlog.kafka_auto_create_topics = on"
    echo "mqlog.kafka_num_partitions = $NUM_PARTITIONS"
    # the tests open many connections and groups at once (0042: 50 topics)
    echo "mqlog.kafka_max_connections = 1024"
    echo "log_min_messages = warning"
} >>"$DATA/postgresql.conf"

stop_server() {
    local pid
    [ -f "$DATA/postmaster.pid" ] || return 0
    pid=$(head -n 1 "$DATA/postmaster.pid")
    as_pg "$BINDIR/pg_ctl" -D "$DATA" -m fast -w -t 60 stop >/dev/null 2>&1 ||
        { [ -n "$pid" ] && kill -QUIT "$pid" 2>/dev/null; }
}
RUNNER_PID=
on_exit() {
    [ -n "$RUNNER_PID" ] && kill -- -"$RUNNER_PID" 2>/dev/null
    stop_server
}
trap on_exit EXIT
trap 'echo "librdkafka: interrupted"; exit 130' INT TERM

as_pg "$BINDIR/pg_ctl" -D "$DATA" -l "$WORK/server.log" -w -t 120 start >/dev/null ||
    { tail -n 40 "$WORK/server.log"; die "the server did not start"; }
PSQL=("$BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h "$WORK" -p "$PGPORT_" -U postgres -d postgres)
# The role every Kafka request runs as: a member of mqlog_admin, as the
# tests create and delete topics (CreateTopics, DeleteTopics, and the
# Metadata requests that auto-create them) and use groups they do not own.
# test1 and test2: the principals (User:test1, User:test2) of 0081's ACL
# tests, which mqlog maps to roles that must exist.
as_pg "${PSQL[@]}" -c 'CREATE EXTENSION mqlog' \
    -c 'CREATE ROLE rdkafka LOGIN' -c 'GRANT mqlog_admin TO rdkafka' \
    -c 'CREATE ROLE test1' -c 'CREATE ROLE test2' >"$WORK/setup.log" 2>&1 ||
    { cat "$WORK/setup.log"; die "could not set up the database"; }

# wait until the listener accepts connections
perl -MIO::Socket::INET -e '
    for (1 .. 60) {
        exit 0 if IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => $ARGV[0], Proto => "tcp");
        sleep 1;
    }
    exit 1;' "$KPORT" || { tail -n 40 "$WORK/server.log"; die "the Kafka listener does not accept connections on $KPORT"; }

cat >"$WORK/test.conf" <<EOF
# written by mqlog's test/librdkafka/run.sh
metadata.broker.list=127.0.0.1:$KPORT
# a loaded 2-core CI machine: the tests' own timeouts, doubled
test.timeout.multiplier=2
EOF
chmod 644 "$WORK/test.conf"

echo "librdkafka $VERSION tests against mqlog: listener 127.0.0.1:$KPORT, server log $WORK/server.log, logs $LOGS"

# ---------------------------------------------------------------------------
# Run them, one test number at a time
# ---------------------------------------------------------------------------

ARGS=(-p1)
# in full: librdkafka's quick mode (-Q) leaves out most sub-tests
[ "${MQLOG_RDKAFKA_QUICK:-0}" = 1 ] && ARGS+=(-Q)
# One run of entry $1 into log $2: sets rc (the runner's exit status, or
# "timeout"), parts (each test of the number with its state) and nsub (the
# sub-tests that passed); returns 0 when it passed: the runner exited 0
# having run (not skipped) at least one of the number's tests, and one of
# the sub-tests an entry names (a test the runner skips whole is no pass,
# and belongs in tests.txt as excluded).
run_entry() {
    local e=$1 log=$2 t sub version args opt start st
    t=${e%%/*}
    sub=
    [ "$e" != "$t" ] && sub=${e#*/}
    # options: version= the broker version the test is told (a test that
    # checks for a feature by version, such as idempotence, then leaves its
    # parts out), args= more runner flags (-k: a test librdkafka marks a
    # known issue)
    version=$KAFKA_VERSION
    args=("${ARGS[@]}")
    while IFS= read -r opt; do
        case "$opt" in
            version=*) version=${opt#version=} ;;
            args=*) args+=(${opt#args=}) ;;
            *) die "tests.txt: unknown option $opt for $e" ;;
        esac
    done < <(options "$e")
    start=$(date +%s)
    # setsid: the runner is a process group of its own, which the timeout
    # (and our exit trap) kill whole; its shell reports how it ended (a
    # failing test aborts the runner) in the log, not on our stderr.
    (cd "$TESTS_DIR" && exec setsid bash -c '"$@"; st=$?; [ $st -gt 128 ] && echo "test-runner: killed by signal $((st - 128))"; exit $st' \
        runner env TESTS="$t" TEST_KAFKA_VERSION="$version" \
        RDKAFKA_TEST_CONF="$WORK/test.conf" TEST_LEVEL="${TEST_LEVEL:-2}" \
        ${sub:+SUBTESTS="$sub"} ${TEST_DEBUG:+TEST_DEBUG="$TEST_DEBUG"} \
        ./test-runner "${args[@]}") >"$log" 2>&1 &
    RUNNER_PID=$!
    rc=
    while kill -0 "$RUNNER_PID" 2>/dev/null; do
        if [ $(($(date +%s) - start)) -ge "$TIMEOUT" ]; then
            kill -TERM -- -"$RUNNER_PID" 2>/dev/null; sleep 2; kill -KILL -- -"$RUNNER_PID" 2>/dev/null
            rc=timeout
            break
        fi
        sleep 0.5
    done
    wait "$RUNNER_PID"; st=$?
    RUNNER_PID=
    [ -z "$rc" ] && rc=$st
    # the runner's summary: "| 0001_multiobj   |     PASSED |   1.234s |"
    parts=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | awk -F'|' -v t="$t" '
        { n = $2; gsub(/ /, "", n); s = $3; gsub(/ /, "", s) }
        n ~ "^" t "_" && s ~ /^(PASSED|FAILED|SKIPPED|RUNNING)$/ { printf "%s%s=%s", sep, n, s; sep = " " }')
    # sub-tests that passed: "[ do_test_CreateTopics:74: ...: PASS (0.12s) ]"
    nsub=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -c '^\[.*\] \[ .*: PASS ([0-9.]*s) \]$')
    [ "$rc" = 0 ] && ! grep -q '=FAILED\|=RUNNING' <<<"$parts" && grep -q '=PASSED' <<<"$parts" &&
        { [ -z "$sub" ] || [ "$nsub" -gt 0 ]; }
}

# the runner's failure lines in log $1, or its reason for skipping
why_failed() {
    sed 's/\x1b\[[0-9;]*m//g' "$1" |
        grep -E '^### Test .* failed|SKIPPING TEST|test-runner: killed' |
        grep -v '"<MAIN>"' | uniq | head -n 4 | cut -c1-300 | sed 's/^/        /'
}

NRUN=0 NPASS=0 NFAIL=0 NRETRIED=0
FAILED_LIST=() RETRIED_LIST=()
START_ALL=$(date +%s)
for e in "${SELECTED[@]}"; do
    if [ $(($(date +%s) - START_ALL)) -ge "$BUDGET" ]; then
        echo "$e  FAILED  not run: the layer's ${BUDGET}s (MQLOG_RDKAFKA_BUDGET) are up"
        NRUN=$((NRUN + 1)) NFAIL=$((NFAIL + 1))
        FAILED_LIST+=("$e")
        continue
    fi
    log=$LOGS/${e//\//_}.out
    start=$(date +%s)
    NRUN=$((NRUN + 1))
    result=passed
    if ! run_entry "$e" "$log"; then
        # Once more, unless it ran out of time: some of these tests time
        # what a loaded 2-core machine does not always deliver (0089's
        # rebalance).  A pass on the second run counts as a pass, is said
        # on its line and in the summary, and the first run's output is
        # kept beside the second's.
        result=FAILED
        if [ "$rc" != timeout ]; then
            mv "$log" "${log%.out}.first.out"
            printf '%s  first run failed, running it again:\n' "$e"
            why_failed "${log%.out}.first.out"
            run_entry "$e" "$log" && result="passed on a second run"
        fi
    fi
    if [ "$result" = FAILED ]; then
        NFAIL=$((NFAIL + 1))
        FAILED_LIST+=("$e")
    else
        NPASS=$((NPASS + 1))
        [ "$result" = passed ] || { NRETRIED=$((NRETRIED + 1)); RETRIED_LIST+=("$e"); }
    fi
    note=
    case "$rc" in
        0) ;;
        timeout) note=" (killed after ${TIMEOUT}s)" ;;
        *) note=" (exit $rc)" ;;
    esac
    [ "$nsub" -gt 0 ] && note="$note ($nsub sub-tests passed)"
    printf '%s  %-6s %4ss  %s%s\n' "$e" "$result" "$(($(date +%s) - start))" "${parts:-no summary}" "$note"
    [ "$result" = FAILED ] && why_failed "$log"
done
echo "librdkafka: $(($(date +%s) - START_ALL)) s for ${#SELECTED[@]} test(s)"

stop_server
trap - EXIT
if grep -q -E 'terminated by signal (4|6|7|8|11)[^0-9]|PANIC:' "$WORK/server.log"; then
    echo "librdkafka: a server process crashed:"
    grep -E 'terminated by signal|PANIC:' "$WORK/server.log" | head -n 10
    NFAIL=$((NFAIL + 1))
    FAILED_LIST+=("server-crash")
fi
if [ $NFAIL -eq 0 ] && [ -z "${MQLOG_RDKAFKA_WORK:-}" ]; then
    rm -rf "$WORK"
elif [ $NFAIL -gt 0 ]; then
    echo "librdkafka: failed: ${FAILED_LIST[*]} (logs in $LOGS, server log $WORK/server.log)"
fi
[ $NRETRIED -eq 0 ] || echo "librdkafka: passed on a second run: ${RETRIED_LIST[*]}"
echo "librdkafka: $NRUN run, $NPASS passed, $NFAIL failed, $EXCLUDED excluded"
[ $NFAIL -eq 0 ]
