# mqlog: a Kafka-style log inside PostgreSQL 15, built with PGXS.
#
#   make && make install      build and install into the server pg_config names
#   make installcheck          pg_regress + isolation against a throwaway instance
#   scripts/test.sh            every test layer on throwaway clusters (what CI runs)

EXTENSION   = mqlog
MODULE_big  = mqlog
OBJS        = $(patsubst %.c,%.o,$(sort $(wildcard src/*.c src/*/*.c)))
DATA        = $(sort $(wildcard extension/mqlog--*.sql))
PGFILEDESC  = "mqlog - Kafka-style log for PostgreSQL"

PG_CPPFLAGS = -I$(srcdir)/src -I$(libpq_srcdir)
# Kafka's compression codecs (codec.c), from Debian's zlib1g-dev, liblz4-dev,
# libsnappy-dev and libzstd-dev; the etcd client (cluster/etcd.c), from
# libcurl4-openssl-dev; TLS on the Kafka listener (kafka/tls.c), with the
# OpenSSL PostgreSQL links against, from libssl-dev.
SHLIB_LINK  = -lz -llz4 -lsnappy -lzstd -lcurl -lssl -lcrypto
# libpq: a follower's apply worker streams from its leader (workers/apply.c)
SHLIB_LINK_INTERNAL = $(libpq)
# -Wextra is kept; the three switches below silence warnings that the
# PostgreSQL 15 server headers themselves trigger under -Wextra.
PG_CFLAGS   = -Wall -Wextra -Werror -Wno-unused-parameter -Wno-sign-compare \
              -Wno-missing-field-initializers

# pg_regress: one file per feature in sql/, expected output in expected/.
REGRESS      = $(patsubst sql/%.sql,%,$(sort $(wildcard sql/*.sql)))
REGRESS_OPTS = --temp-instance=tmp_check_regress \
               --temp-config=$(srcdir)/test/mqlog.conf --load-extension=mqlog

# isolation specs live under test/isolation.
ISOLATION      = $(patsubst test/isolation/specs/%.spec,%,$(sort $(wildcard test/isolation/specs/*.spec)))
ISOLATION_OPTS = --inputdir=$(srcdir)/test/isolation \
                 --outputdir=output_iso \
                 --temp-instance=tmp_check_iso \
                 --temp-config=$(srcdir)/test/mqlog.conf --load-extension=mqlog

EXTRA_CLEAN = tmp_check_regress tmp_check_iso output_iso

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# The benchmark's client (bench/driver/, doc/benchmarks.md), built against
# Debian's libpq (libpq-dev) and hiredis (libhiredis-dev), not against the
# server PG_CONFIG names: it is a client and runs against any of them.
BENCH_DRIVER     = bench/driver/mqbench
BENCH_DRIVER_SRC = $(sort $(wildcard bench/driver/*.c))
BENCH_DRIVER_PKG = libpq hiredis
EXTRA_CLEAN     += $(BENCH_DRIVER)

$(BENCH_DRIVER): $(BENCH_DRIVER_SRC) $(wildcard bench/driver/*.h)
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -Werror -pthread \
		$(shell pkg-config --cflags $(BENCH_DRIVER_PKG)) \
		-o $@ $(BENCH_DRIVER_SRC) $(shell pkg-config --libs $(BENCH_DRIVER_PKG))

# The benchmark's C Kafka client: librdkafka's own rdkafka_performance,
# built from the example source Debian's librdkafka-dev ships, against the
# installed library.  The example includes librdkafka's internal rd.h and
# rdtime.h for a clock and a few macros; bench/rdkafka/src has our own
# small versions of them (the -I makes both its "rd.h" and "../src/rd.h"
# find them).  Not our code: -Wall, but no -Werror.
BENCH_RDKAFKA     = bench/rdkafka/rdkafka_performance
BENCH_RDKAFKA_SRC = /usr/share/doc/librdkafka-dev/examples/rdkafka_performance.c
EXTRA_CLEAN      += $(BENCH_RDKAFKA)

$(BENCH_RDKAFKA): $(BENCH_RDKAFKA_SRC) $(wildcard bench/rdkafka/src/*.h)
	$(CC) -std=gnu11 -O2 -g -Wall -Ibench/rdkafka/src \
		-I$(shell pkg-config --variable=includedir rdkafka)/librdkafka \
		-o $@ $(BENCH_RDKAFKA_SRC) $(shell pkg-config --libs rdkafka)

# bench/run.sh reads PG_CONFIG from the environment: pass it on when it
# was given (make bench PG_CONFIG=...), else run.sh keeps its default.
.PHONY: bench bench-driver bench-rdkafka
bench-driver: $(BENCH_DRIVER)
bench-rdkafka: $(BENCH_RDKAFKA)

bench: $(BENCH_DRIVER) $(BENCH_RDKAFKA)
	$(if $(filter command line environment,$(origin PG_CONFIG)),PG_CONFIG=$(PG_CONFIG)) \
		$(srcdir)/bench/run.sh $(if $(QUICK),--quick,)

# PGXS does not track header dependencies: every object depends on every header.
$(OBJS): $(wildcard src/*.h src/*/*.h)
