#!/usr/bin/env bash
# Run the whole mqlog test suite on throwaway clusters: this is what CI runs
# (.ci/run calls exactly this script).
#
#   scripts/test.sh            from any directory, normally as root
#
# Layers, in order:
#   build       install the Debian packages, make clean && make (warnings are
#               errors), make install
#   pg_regress  sql/*.sql against expected/*.out       (make installcheck)
#   isolation   test/isolation/specs/*.spec            (make installcheck)
#   pgTAP       test/pgtap/*.sql with pg_prove on a cluster of our own
#   Perl TAP    test/perl/*.pl with prove and PostgreSQL::Test::Cluster
#   doc         doc/reference.md's examples, run in order on a cluster of our
#               own and compared with the doc (test/doc/run.sh)
#   librdkafka  librdkafka's own test suite (Debian's source package, tests/)
#               against the Kafka listener of a server of our own
#               (test/librdkafka/run.sh; the tests run and excluded are in
#               test/librdkafka/tests.txt)
# A test layer with no test files is skipped (and says so).  Every cluster
# runs as the `postgres` OS user (PostgreSQL refuses root) from a copy of the
# source tree in /tmp/mqlog-test.XXXXXX, so the checkout itself is never
# written to.  The last line of output is "N layers passed, N failed", counting
# the layers above (a skipped layer is in neither number); the exit status is
# 0 only when nothing failed.
#
# Environment:
#   PG_CONFIG          pg_config to build against (default: PostgreSQL 15's)
#   MQLOG_KEEP_TMP=1   keep the temporary directory even when everything passed
#                      (it is always kept after a failure)
#   PROVE_FLAGS        extra flags for prove, e.g. --verbose
#   PG_TEST_NOCLEAN    kept by PostgreSQL::Test::Cluster: leave its data dirs
#   MQLOG_TEST_LAYERS  run only these test layers, comma-separated (pg_regress,
#                      isolation, pgTAP, perl, doc, librdkafka); the build
#                      and the crash check always run.  Default: all
#   MQLOG_RDKAFKA_*    passed to test/librdkafka/run.sh (it says which)
#
# Perl TAP tests get TEMP_CONFIG=test/mqlog.conf, so every node a test creates
# has mqlog preloaded (and the other test settings) unless the test overrides
# shared_preload_libraries itself.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
PGTAP_PORT_START=54329
TEST_DB=mqlog_test

# Deterministic client and server environment: no stray libpq settings, one
# locale that every Debian system has.
for v in $(compgen -e); do
    case "$v" in
        PG_*) ;;                       # PG_CONFIG, PG_TEST_* are ours to keep
        PG*|LC_*) unset "$v" ;;
    esac
done
unset LANGUAGE
export LANG=C.UTF-8

# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

LAYERS=()       # "name|result|note", result is passed, FAILED or skipped
record() { LAYERS+=("$1|$2|$3"); }

banner() { printf '\n==== %s ====\n' "$*"; }

# Is layer $1 to run (MQLOG_TEST_LAYERS)?
wanted() {
    [ -z "${MQLOG_TEST_LAYERS:-}" ] && return 0
    case ",${MQLOG_TEST_LAYERS// /}," in *",$1,"*) return 0 ;; esac
    return 1
}

IS_ROOT=0
[ "$(id -u)" -eq 0 ] && IS_ROOT=1

# Run a command as the postgres OS user (as ourselves when not root) in the
# given directory, with the environment we set up here.  To redirect its
# output, wrap the call in a subshell, "(as_pg ...) >file": a redirection on
# the function call itself would also capture what the EXIT/INT traps print
# if a signal arrives meanwhile.
as_pg() {
    local dir=$1; shift
    if [ $IS_ROOT -eq 1 ]; then
        (cd "$dir" && runuser -u postgres -- env PATH="$PATH" LANG="$LANG" "$@")
    else
        (cd "$dir" && "$@")
    fi
}

# Show the end of a file, if it exists, under a heading.
show_file() {
    local file=$1 lines=${2:-200}
    [ -s "$file" ] || return 0
    printf '\n---- %s (last %s lines) ----\n' "$file" "$lines"
    tail -n "$lines" "$file"
    printf -- '---- end of %s ----\n' "$file"
}

# First port from $1 up on which nothing listens on 127.0.0.1.
free_port() { perl "$ROOT/scripts/free-port.pl" "$1"; }

# Files prove/pg_prove reported as failing, from its "Test Summary Report":
# a non-zero wait status, failed tests or parse errors (a report entry may
# also just list TODO tests that passed, which is no failure).
tap_failed_files() {
    awk '
        /^Test Summary Report/ { in_report = 1; next }
        !in_report { next }
        /^Files=/ { flush(); in_report = 0; next }
        /^test\/[^ ]* *\(Wstat: / {
            flush()
            file = $1
            bad = ($0 !~ /Wstat: 0 / || $0 !~ /Failed: 0\)/)
            next
        }
        /^ +Parse errors:/ { bad = 1 }
        function flush() { if (file != "" && bad) print file; file = ""; bad = 0 }
        END { flush() }
    ' "$1" | sort -u
}

# One-line result of a prove/pg_prove run: "2 file(s), 133 tests" or
# "failed: test/pgtap/002_fail.sql (of 2 file(s))".
tap_note() {
    local out=$1 nfiles=$2 tests failed
    tests=$(sed -n 's/^Files=[0-9]*, Tests=\([0-9]*\),.*/\1/p' "$out" | tail -n 1)
    failed=$(tap_failed_files "$out" | tr '\n' ' ' | sed 's/ $//')
    if [ -n "$failed" ]; then
        echo "failed: $failed (of $nfiles file(s))"
    elif grep -q '^Result: PASS' "$out"; then
        echo "$nfiles file(s), ${tests:-?} tests"
    else
        echo "$nfiles file(s), no PASS result (see above)"
    fi
}

print_summary() {
    local passed=0 failed=0 entry name result note
    banner "mqlog test summary"
    for entry in "${LAYERS[@]}"; do
        IFS='|' read -r name result note <<<"$entry"
        printf '  %-12s %-8s %s\n' "$name" "$result" "$note"
        case "$result" in
            passed) passed=$((passed + 1)) ;;
            FAILED) failed=$((failed + 1)) ;;
        esac
    done
    if [ -d "$WORK" ]; then
        echo "  temporary directory kept for inspection: $WORK"
    fi
    echo "$passed layers passed, $failed failed"
    [ $failed -eq 0 ]
}

# ---------------------------------------------------------------------------
# Temporary tree and cleanup
# ---------------------------------------------------------------------------

WORK=$(mktemp -d /tmp/mqlog-test.XXXXXX) || { echo "cannot create a temporary directory" >&2; exit 1; }
SRC=$WORK/src
ANY_FAILED=0

# Stop every postmaster whose data directory lies in our temporary tree:
# the pgTAP cluster and whatever pg_regress or a Perl test left behind when
# interrupted.  Nothing else is touched.
stop_our_clusters() {
    local pidfile datadir
    [ -d "$WORK" ] || return 0
    while IFS= read -r pidfile; do
        datadir=$(dirname "$pidfile")
        echo "stopping leftover cluster in $datadir"
        (as_pg / "$PG_BINDIR/pg_ctl" -D "$datadir" -m immediate -w stop) >/dev/null 2>&1 || true
    done < <(find "$WORK" -name postmaster.pid -type f 2>/dev/null)
}

# On any exit: stop our clusters, remove the temporary tree unless something
# failed, and print the summary as the very last line.
cleanup() {
    local rc=$? entry
    trap - EXIT INT TERM
    [ -n "${PG_BINDIR:-}" ] && stop_our_clusters
    for entry in "${LAYERS[@]}"; do
        case "$entry" in *"|FAILED|"*) ANY_FAILED=1 ;; esac
    done
    [ $rc -ne 0 ] && ANY_FAILED=1
    if [ $ANY_FAILED -eq 0 ] && [ "${MQLOG_KEEP_TMP:-0}" != 1 ]; then
        rm -rf "$WORK"
    fi
    print_summary || [ "$rc" -ne 0 ] || rc=1
    exit $rc
}
trap cleanup EXIT
trap 'echo "interrupted"; record interrupted FAILED "the run was interrupted"; exit 130' INT TERM

# ---------------------------------------------------------------------------
# Layer: build (dependencies, compile, install)
# ---------------------------------------------------------------------------

build() {
    banner "dependencies"
    "$ROOT/scripts/install-deps.sh" || { echo "dependency installation failed"; return 1; }

    [ -x "$PG_CONFIG" ] || { echo "PG_CONFIG=$PG_CONFIG is not executable"; return 1; }
    PG_BINDIR=$("$PG_CONFIG" --bindir)
    PGXS_DIR=$(dirname "$(dirname "$("$PG_CONFIG" --pgxs)")")    # .../lib/pgxs/src
    export PATH="$PG_BINDIR:$PATH"

    banner "copy source tree to $SRC"
    mkdir -p "$SRC"
    tar -C "$ROOT" --exclude=./.git --exclude='*.o' --exclude='*.so' --exclude='*.bc' \
        --exclude=./results --exclude=./output_iso --exclude='./tmp_check*' --exclude=./log \
        --exclude=./regression.diffs --exclude=./regression.out --exclude=./bench/work \
        --warning=no-file-changed -cf - . | tar -C "$SRC" -xf -
    # tar exits 1 when a file changed while it was read (someone building in
    # the checkout meanwhile): the copy is still usable.
    local st=("${PIPESTATUS[@]}")
    if [ "${st[0]}" -gt 1 ] || [ "${st[1]}" -ne 0 ]; then
        echo "copying the source tree failed"
        return 1
    fi

    banner "build: make clean && make (PG_CONFIG=$PG_CONFIG)"
    make -C "$SRC" -s clean PG_CONFIG="$PG_CONFIG" || return 1
    make -C "$SRC" -s PG_CONFIG="$PG_CONFIG" && echo "build ok" || { echo "build failed"; return 1; }

    banner "make install"
    if ! make -C "$SRC" -s install PG_CONFIG="$PG_CONFIG"; then
        [ $IS_ROOT -eq 1 ] || echo "make install failed: run scripts/test.sh as root so it can install into $("$PG_CONFIG" --pkglibdir)"
        return 1
    fi

    if [ $IS_ROOT -eq 1 ]; then
        id postgres >/dev/null 2>&1 || { echo "there is no 'postgres' OS user to run the test clusters"; return 1; }
        chown -R postgres:postgres "$WORK"
    fi
    return 0
}

# ---------------------------------------------------------------------------
# Layers: pg_regress and isolation, both through the Makefile's installcheck
# (each with the other's list emptied, so they report separately)
# ---------------------------------------------------------------------------

# pg_regress (PG 15) ends with "All N tests passed." or "M of N tests failed."
regress_note() {
    local line
    line=$(grep -E '^ *(All [0-9]+ tests passed|[0-9]+ of [0-9]+ tests failed)' "$1" | tail -n 1 | sed 's/^ *//; s/ *$//')
    echo "${line:-pg_regress did not finish, see its output above}"
}

# pg_regress gives up on the whole run at the first test without an expected
# file; name those tests up front.
missing_expected() {
    local dir=$1 ext=$2 expdir=$3 f name
    for f in "$dir"/*"$ext"; do
        [ -f "$f" ] || continue
        name=$(basename "$f" "$ext")
        if ! compgen -G "$expdir/$name.out" >/dev/null && ! compgen -G "$expdir/${name}_[0-9].out" >/dev/null; then
            echo "WARNING: ${f#"$SRC"/} has no expected output ${expdir#"$SRC"/}/$name.out"
        fi
    done
}

run_regress() {
    local n
    n=$(find "$SRC/sql" -maxdepth 1 -name '*.sql' 2>/dev/null | wc -l)
    if [ "$n" -eq 0 ]; then
        banner "pg_regress: skipped, no sql/*.sql"
        record pg_regress skipped "no test files in sql/"
        return
    fi
    banner "pg_regress: $n test(s) in sql/"
    missing_expected "$SRC/sql" .sql "$SRC/expected"
    if as_pg "$SRC" make installcheck PG_CONFIG="$PG_CONFIG" ISOLATION= 2>&1 | tee "$WORK/regress.out"; then
        record pg_regress passed "$(regress_note "$WORK/regress.out")"
    else
        record pg_regress FAILED "$(regress_note "$WORK/regress.out")"
        show_file "$SRC/regression.diffs" 400
        [ -f "$SRC/log/postmaster.log" ] || show_file "$SRC/log/initdb.log" 40
        show_file "$SRC/log/postmaster.log" 120
    fi
}

run_isolation() {
    local n
    n=$(find "$SRC/test/isolation/specs" -maxdepth 1 -name '*.spec' 2>/dev/null | wc -l)
    if [ "$n" -eq 0 ]; then
        banner "isolation: skipped, no test/isolation/specs/*.spec"
        record isolation skipped "no test files in test/isolation/specs/"
        return
    fi
    banner "isolation: $n spec(s) in test/isolation/specs/"
    missing_expected "$SRC/test/isolation/specs" .spec "$SRC/test/isolation/expected"
    if as_pg "$SRC" make installcheck PG_CONFIG="$PG_CONFIG" REGRESS= 2>&1 | tee "$WORK/isolation.out"; then
        record isolation passed "$(regress_note "$WORK/isolation.out")"
    else
        record isolation FAILED "$(regress_note "$WORK/isolation.out")"
        show_file "$SRC/output_iso/regression.diffs" 400
        [ -f "$SRC/output_iso/log/postmaster.log" ] || show_file "$SRC/output_iso/log/initdb.log" 40
        show_file "$SRC/output_iso/log/postmaster.log" 120
    fi
}

# ---------------------------------------------------------------------------
# Layer: pgTAP on a cluster of our own
# ---------------------------------------------------------------------------

PGTAP_DATA=
run_pgtap() {
    local files=() port dir=$WORK/pgtap
    shopt -s nullglob
    files=("$SRC"/test/pgtap/*.sql)
    shopt -u nullglob
    if [ ${#files[@]} -eq 0 ]; then
        banner "pgTAP: skipped, no test/pgtap/*.sql"
        record pgTAP skipped "no test files in test/pgtap/"
        return
    fi
    banner "pgTAP: ${#files[@]} file(s) in test/pgtap/"

    port=$(free_port $PGTAP_PORT_START) || { record pgTAP FAILED "no free port from $PGTAP_PORT_START"; return; }
    PGTAP_DATA=$dir/data
    mkdir -p "$dir" && { [ $IS_ROOT -eq 0 ] || chown postgres:postgres "$dir"; }

    local psql=("$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -U postgres)
    if ! (as_pg "$dir" initdb -D "$PGTAP_DATA" -A trust -U postgres -E UTF8 --no-sync) >"$dir/initdb.log" 2>&1; then
        record pgTAP FAILED "initdb failed"
        show_file "$dir/initdb.log" 40
        return
    fi
    {
        echo
        echo "# scripts/test.sh: settings from test/mqlog.conf"
        cat "$SRC/test/mqlog.conf"
        echo
        echo "# scripts/test.sh: private cluster, Unix socket only"
        echo "port = $port"
        echo "listen_addresses = ''"
        echo "unix_socket_directories = '$dir'"
    } >>"$PGTAP_DATA/postgresql.conf"

    echo "starting cluster: port $port, socket dir $dir"
    if ! (as_pg "$dir" pg_ctl -D "$PGTAP_DATA" -l "$dir/server.log" -w -t 120 start) >/dev/null; then
        record pgTAP FAILED "cluster did not start"
        show_file "$dir/server.log" 80
        return
    fi
    if ! as_pg "$dir" "${psql[@]}" -d postgres -c "CREATE DATABASE $TEST_DB" ||
       ! as_pg "$dir" "${psql[@]}" -d "$TEST_DB" -c 'CREATE EXTENSION pgtap' -c 'CREATE EXTENSION mqlog'; then
        record pgTAP FAILED "could not create the test database with pgtap and mqlog"
        show_file "$dir/server.log" 80
        (as_pg "$dir" pg_ctl -D "$PGTAP_DATA" -m immediate -w stop) >/dev/null 2>&1
        return
    fi

    local rel=("${files[@]#"$SRC"/}") rc
    as_pg "$SRC" pg_prove --nocolor --failures --comments --merge --psql-bin "$PG_BINDIR/psql" \
        -h "$dir" -p "$port" -U postgres -d "$TEST_DB" "${rel[@]}" 2>&1 | tee "$WORK/pgtap.out"
    rc=${PIPESTATUS[0]}

    if ! (as_pg "$dir" pg_ctl -D "$PGTAP_DATA" -m fast -w stop) >/dev/null; then
        echo "pgTAP cluster did not stop cleanly"
        rc=1
    fi
    if [ "$rc" -eq 0 ]; then
        record pgTAP passed "$(tap_note "$WORK/pgtap.out" ${#files[@]})"
    else
        record pgTAP FAILED "$(tap_note "$WORK/pgtap.out" ${#files[@]})"
        show_file "$dir/server.log" 120
    fi
}

# ---------------------------------------------------------------------------
# Layer: Perl TAP (PGXS here has TAP tests disabled, so we call prove as
# prove_installcheck in Makefile.global would)
# ---------------------------------------------------------------------------

run_perl() {
    local files=() rc
    shopt -s nullglob
    files=("$SRC"/test/perl/*.pl)
    shopt -u nullglob
    if [ ${#files[@]} -eq 0 ]; then
        banner "Perl TAP: skipped, no test/perl/*.pl"
        record "Perl TAP" skipped "no test files in test/perl/"
        return
    fi
    banner "Perl TAP: ${#files[@]} file(s) in test/perl/"
    local rel=("${files[@]#"$SRC"/}")
    # shellcheck disable=SC2086
    as_pg "$SRC" env \
        TESTDIR="$SRC" \
        PGPORT=65432 \
        PG_REGRESS="$PGXS_DIR/test/regress/pg_regress" \
        TEMP_CONFIG="$SRC/test/mqlog.conf" \
        ${PG_TEST_NOCLEAN+PG_TEST_NOCLEAN="$PG_TEST_NOCLEAN"} \
        ${PG_TEST_TIMEOUT_DEFAULT+PG_TEST_TIMEOUT_DEFAULT="$PG_TEST_TIMEOUT_DEFAULT"} \
        prove -I "$PGXS_DIR/test/perl" -I test/perl ${PROVE_FLAGS:-} "${rel[@]}" 2>&1 | tee "$WORK/perl.out"
    rc=${PIPESTATUS[0]}
    if [ "$rc" -eq 0 ]; then
        record "Perl TAP" passed "$(tap_note "$WORK/perl.out" ${#files[@]})"
    else
        record "Perl TAP" FAILED "$(tap_note "$WORK/perl.out" ${#files[@]})"
        # The logs of the failing tests: the server logs of its nodes
        # (NAME_NODE.log), then what the test printed (regress_log_NAME),
        # and last its failed checks and its error, so that the end of the
        # output, which is what a CI log shows first, says what failed.
        local t name f
        for t in $(tap_failed_files "$WORK/perl.out"); do
            name=$(basename "$t" .pl)
            for f in "$SRC/tmp_check/log/${name}"_*.log; do
                [ -f "$f" ] && show_file "$f" 60
            done
            show_file "$SRC/tmp_check/log/regress_log_$name" 80
            printf '\n---- %s: the last errors in its server logs ----\n' "$t"
            for f in "$SRC/tmp_check/log/${name}"_*.log; do
                [ -f "$f" ] || continue
                grep -E '(ERROR|FATAL|PANIC):' "$f" | tail -n 8 | sed "s|^|$(basename "$f"): |"
            done
            printf '\n---- %s: failed checks and errors ----\n' "$t"
            # regress_log lines begin with "[time](elapsed) "
            grep -n -A4 -E '(^|\) )(not ok|# +Failed test)|error running SQL|died|ended prematurely|# the last error while waiting' \
                "$SRC/tmp_check/log/regress_log_$name" 2>/dev/null | head -n 80
            printf -- '---- end of %s ----\n' "$t"
        done
    fi
}

# ---------------------------------------------------------------------------
# Layer: the doc test (doc/reference.md's examples, test/doc/run.sh)
# ---------------------------------------------------------------------------

# A layer that is one script: NAME LOG COMMAND...  Its output is shown
# and kept in $WORK/NAME.out, whose last line is the layer's note; after a
# failure the end of LOG (its server's log) is shown too.
script_layer() {
    local name=$1 log=$2 rc
    shift 2
    "$@" 2>&1 | tee "$WORK/$name.out"
    rc=${PIPESTATUS[0]}
    if [ "$rc" -eq 0 ]; then
        record "$name" passed "$(tail -n 1 "$WORK/$name.out")"
    else
        record "$name" FAILED "$(tail -n 1 "$WORK/$name.out")"
        show_file "$log" 60
    fi
}

DOC_PORT_START=54339
run_doc() {
    local port dir=$WORK/doc
    banner "doc: doc/reference.md's examples"
    port=$(free_port $DOC_PORT_START) || { record doc FAILED "no free port from $DOC_PORT_START"; return; }
    mkdir -p "$dir" && { [ $IS_ROOT -eq 0 ] || chown postgres:postgres "$dir"; }
    script_layer doc "$dir/server.log" as_pg "$SRC" test/doc/run.sh "$PG_BINDIR" "$dir" "$port"
}

# ---------------------------------------------------------------------------
# Layer: librdkafka's own test suite (test/librdkafka/run.sh), run as root
# when we are: it fetches and builds the suite in its cache
# (/var/cache/mqlog-librdkafka) and runs its server as postgres itself.
# ---------------------------------------------------------------------------

run_librdkafka() {
    banner "librdkafka: librdkafka's test suite against the Kafka listener"
    mkdir -p "$WORK/librdkafka"
    script_layer librdkafka "$WORK/librdkafka/server.log" \
        env PG_CONFIG="$PG_CONFIG" MQLOG_RDKAFKA_WORK="$WORK/librdkafka" "$SRC/test/librdkafka/run.sh"
}

# ---------------------------------------------------------------------------
# Check: no server process crashed in any layer.  A backend or worker that
# dies of a signal (segfault, abort, bus error, arithmetic or illegal
# instruction) makes the postmaster restart every session; a test that
# retries its queries could otherwise pass over it.  Deliberate kills
# (kill -9, immediate shutdowns) are signal 9 or no signal at all.
# ---------------------------------------------------------------------------

check_crashes() {
    local found
    found=$(find "$WORK" -name '*.log' -type f -print0 2>/dev/null |
        xargs -0 -r grep -H -E 'terminated by signal (4|6|7|8|11)[^0-9]|was terminated by exception|PANIC:' 2>/dev/null |
        head -n 40)
    if [ -z "$found" ]; then
        record "crashes" passed "no server process died of a signal in any server log"
    else
        banner "server processes that crashed"
        printf '%s\n' "$found"
        record "crashes" FAILED "a server process died of a signal (see above)"
    fi
}

# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------

echo "mqlog tests: source $ROOT, work directory $WORK"
if build; then
    record build passed "$("$PG_CONFIG" --version 2>/dev/null)"
    wanted pg_regress && run_regress
    wanted isolation && run_isolation
    wanted pgTAP && run_pgtap
    wanted perl && run_perl
    wanted doc && run_doc
    wanted librdkafka && run_librdkafka
    check_crashes
else
    record build FAILED "later layers not run"
fi

exit 0    # the EXIT trap stops the clusters and prints the summary
