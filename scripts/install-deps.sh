#!/usr/bin/env bash
# Install what building and testing mqlog needs on Debian 12 (bookworm).
#
#   scripts/install-deps.sh
#
# Idempotent: when every package is already installed (and apt knows
# librdkafka's source package, see below) it changes nothing and does not
# touch the network.  Otherwise it must run as root; it then runs
# `apt-get update` once and installs the missing packages non-interactively.
set -euo pipefail

PACKAGES=(
    postgresql-15                           # server, initdb, pg_ctl
    postgresql-client-15                    # psql
    postgresql-server-dev-15                # PGXS, pg_regress, pg_isolation_regress, PostgreSQL::Test::*
    postgresql-15-pgtap                     # the pgtap extension
    pgtap                                   # metapackage: pgtap + pg_prove
    libtap-parser-sourcehandler-pgtap-perl  # pg_prove itself
    libipc-run-perl                         # IPC::Run, needed by PostgreSQL::Test::Utils
    perl                                    # prove, Test::More
    build-essential                         # gcc, make
    zlib1g-dev liblz4-dev libsnappy-dev libzstd-dev  # Kafka's codecs (gzip, lz4, snappy, zstd)
    python3-kafka                           # kafka.record: the independent v2 batch codec the tests use
    python3-snappy python3-lz4 python3-zstandard     # ... and its compression codecs
    libcurl4-openssl-dev                    # the etcd client (src/cluster/etcd.c)
    libssl-dev openssl                      # TLS on the Kafka listener (src/kafka/tls.c); openssl makes the test certificates
    etcd-server etcd-client                 # etcd 3.4 for the cluster tests (test/perl/MqCluster.pm)
    libpq-dev libhiredis-dev pkg-config     # the benchmark's C driver (make bench-driver, bench/driver/)
    kcat librdkafka-dev python3-confluent-kafka  # Kafka clients for the listener's tests (test/perl/150_kafka.pl)
    dpkg-dev libssl-dev                     # librdkafka's test suite: apt-get source, its build (test/librdkafka/run.sh)
)

is_installed() {
    [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]
}

if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "install-deps: dpkg-query not found; this script supports Debian 12 only." >&2
    exit 1
fi

missing=()
for p in "${PACKAGES[@]}"; do
    is_installed "$p" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all ${#PACKAGES[@]} packages already installed."
else
    if [ "$(id -u)" -ne 0 ]; then
        echo "install-deps: these packages are missing: ${missing[*]}" >&2
        echo "install-deps: run this script as root (e.g. sudo $0), or install them with:" >&2
        echo "    sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
    echo "install-deps: installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# librdkafka's test suite (test/librdkafka/run.sh) is built from Debian's
# source package, which `apt-get source` fetches from a deb-src entry:
# when apt knows no source of librdkafka yet, add one for bookworm main,
# beside the machine's deb entries, and read that entry's index alone.
DEB_SRC_LIST=/etc/apt/sources.list.d/mqlog-deb-src.sources
if [ -z "$(apt-cache showsrc librdkafka 2>/dev/null)" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "install-deps: apt knows no source package of librdkafka: run this script as root to add a deb-src entry ($DEB_SRC_LIST)" >&2
        exit 1
    fi
    if [ ! -f "$DEB_SRC_LIST" ]; then
        echo "install-deps: adding $DEB_SRC_LIST (deb-src for bookworm main)"
        cat >"$DEB_SRC_LIST" <<'EOF'
# Added by mqlog's scripts/install-deps.sh: Debian's source packages, for
# librdkafka's test suite (test/librdkafka/run.sh runs `apt-get source`).
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    fi
    apt-get update -qq -o Dir::Etc::sourcelist="$DEB_SRC_LIST" -o Dir::Etc::sourceparts=- \
        -o APT::Get::List-Cleanup=0
    if [ -z "$(apt-cache showsrc librdkafka 2>/dev/null)" ]; then
        echo "install-deps: still no source package of librdkafka after adding $DEB_SRC_LIST" >&2
        exit 1
    fi
fi

# kafkajs (npm, not Debian) for the Kafka listener's tests
# (test/kafka/kafkajs_client.js), into a directory of the repository that
# git ignores; only when it is not there yet.  Node.js and npm are the
# machine's own: Debian's npm package conflicts with the Node.js these
# machines have, so they are not installed from Debian here.
KAFKA_TEST_DIR="$(cd "$(dirname "$0")/.." && pwd)/test/kafka"
if [ ! -d "$KAFKA_TEST_DIR/node_modules/kafkajs" ]; then
    if ! command -v npm >/dev/null 2>&1; then
        echo "install-deps: npm not found: Node.js 18 or later with npm is needed for kafkajs (test/perl/150_kafka.pl)" >&2
        exit 1
    fi
    echo "install-deps: installing kafkajs 2 into $KAFKA_TEST_DIR/node_modules"
    npm install --silent --no-save --no-package-lock --prefix "$KAFKA_TEST_DIR" kafkajs@2
fi

# Check that the tools the scripts call are really there.
status=0
for f in /usr/lib/postgresql/15/bin/pg_config /usr/lib/postgresql/15/bin/initdb \
         /usr/lib/postgresql/15/bin/pg_ctl /usr/lib/postgresql/15/bin/psql \
         /usr/lib/postgresql/15/lib/pgxs/src/makefiles/pgxs.mk \
         /usr/lib/postgresql/15/lib/pgxs/src/test/regress/pg_regress \
         /usr/lib/postgresql/15/lib/pgxs/src/test/isolation/pg_isolation_regress \
         /usr/lib/postgresql/15/lib/pgxs/src/test/perl/PostgreSQL/Test/Cluster.pm \
         /usr/share/postgresql/15/extension/pgtap.control; do
    if [ ! -e "$f" ]; then
        echo "install-deps: missing after installation: $f" >&2
        status=1
    fi
done
for c in gcc make prove pg_prove runuser etcd etcdctl kcat node; do
    if ! command -v "$c" >/dev/null 2>&1; then
        echo "install-deps: command not found after installation: $c" >&2
        status=1
    fi
done
if ! perl -MIPC::Run -MTest::More -e 1 2>/dev/null; then
    echo "install-deps: the Perl modules IPC::Run and Test::More do not load" >&2
    status=1
fi
exit $status
