#!/usr/bin/python3
"""mqlog's benchmark: every system, every workload, one JSON line each.

bench/run.sh starts the servers and calls this script; it can also be run by
hand against servers that are already up (see --help).  Each measurement is
wrapped so that a failing system yields a row with an "error" field instead
of stopping the run.

The rates (batched and single-record produce, consume, the floor, the JSON
events) are measured by bench/driver/mqbench, a C client over libpq with
binary parameters and results (and hiredis for Redis), which this script
runs once per measurement while it sets the structures up and reads WAL
and sizes around it (`make bench-driver` builds it).  Latency, the
sustained run, the replication workload and the rows labelled "a typical
Python client" use psycopg2 (Debian's python3-psycopg2); Redis is spoken
to there over a raw socket (RESP).
"""

import argparse
import datetime
import json
import os
import platform
import random
import re
import socket
import statistics
import string
import struct
import subprocess
import sys
import threading
import time
import traceback

import psycopg2
import psycopg2.extensions

try:                    # Debian's python3-hiredis: replies parsed in C
    import hiredis
except ImportError:     # pragma: no cover - the pure-Python parser below
    hiredis = None

SYSTEMS = ["mqlog", "heap_log", "skip_locked", "pgq", "redis"]
WORKLOADS = ["produce_batch", "consume", "produce_single", "latency", "json", "sustained", "replication",
             "failover", "scale", "kafka"]
KAFKA_ROLE = "mqbench_kafka"   # bench/run.sh's mqlog.kafka_role
JSON_CODECS = ["uncompressed", "lz4", "zstd"]   # mqlog's compression.type in the JSON workload
PG_SYSTEMS = SYSTEMS[:4]
VALUE_SIZES = [100, 1024]
ALPHABET = (string.ascii_letters + string.digits).encode()

MODES = {
    # records: per batched-produce run of the Python client; the C
    # driver's batched produce goes on for batch_s seconds and at least
    # c_records records (by value size), and its consume reads c_records
    # of them (at most what was produced); the replication workload's
    # rows and the Kafka clients' use the same;
    # single_s: seconds of single-record produce; rounds: driver runs of
    # each measurement, back to back, the median reported; latency
    # samples, total sustained seconds, sample period; failover_kills:
    # leaders killed by the failover workload; scale_partitions and
    # scale_groups: the topics and groups of the scale run; repl_lag_n:
    # samples of the replication lag; warm_wal_mb:
    # WAL written and recycled before the first measurement (warm_wal)
    "quick": dict(warm_wal_mb=2048, records=10000, batch_s=2, c_records={100: 400000, 1024: 100000}, single_s=2, rounds=1,
                  latency_n=150, sustained_s=60, sample_s=2, repl_lag_n=40,
                  failover_kills=3, scale_partitions=[1, 100, 1000], scale_groups=[1, 10, 100]),
    "full": dict(warm_wal_mb=3072, records=200000, batch_s=5, c_records={100: 2000000, 1024: 400000}, single_s=5, rounds=3,
                 latency_n=1000, sustained_s=600, sample_s=5, repl_lag_n=100,
                 failover_kills=5, scale_partitions=[1, 100, 1000, 10000], scale_groups=[1, 10, 100]),
    # issue 5's soak: 10 minutes each of mqlog (worker-driven retention) and
    # the heap log (DELETE after consume); run with --workloads sustained
    "soak": dict(warm_wal_mb=2048, records=10000, batch_s=2, c_records={100: 400000, 1024: 100000}, single_s=2, rounds=1,
                 latency_n=150, sustained_s=1200, sample_s=10, repl_lag_n=40,
                 failover_kills=3, scale_partitions=[1, 100, 1000], scale_groups=[1, 10, 100]),
}
BATCH = 1000          # records per batched-produce call
CONSUME_BATCH = 500   # records per consume batch, commit/ack included
SUSTAIN_RETENTION = 128 * 1024 * 1024  # mqlog retention.bytes in the sustained run
SUSTAIN_SEGMENT = 1024 * 1024          # mqlog segment.bytes (the minimum)
SUSTAIN_REDIS_MAXLEN = 100000
FAILOVER_GOAL_S = 5         # issue 12: leader's death to the first acks=all produce on its successor
FAILOVER_NAP_S = 0.02       # between two rounds of produce attempts on the survivors
FAILOVER_TIMEOUT_S = 60     # a kill with no successful produce by then is a failed sample


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)


def rand_values(n, size, rng):
    """n incompressible-enough ASCII values (letters and digits): usable as
    bytea literals, as PgQ's text events and as Redis strings alike."""
    return [bytes(rng.choices(ALPHABET, k=size)) for _ in range(n)]


def change(xs):
    """Relative change from the start to the end of a series: the mean of
    its last fifth over the mean of its first fifth (one sample at least),
    so one noisy sample does not decide."""
    if not xs:
        return None
    k = max(1, len(xs) // 5)
    a = sum(xs[:k]) / k
    b = sum(xs[-k:]) / k
    return round(b / a - 1, 4) if a else None


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return None
    k = (len(xs) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


# ------------------------------------------------------------------ Redis

class Redis:
    """A minimal RESP2 client: enough for XADD, XREADGROUP, XACK, INFO.
    Replies are parsed by hiredis (C, as redis-py does when it is there)
    when python3-hiredis is installed, else in Python, which would make
    Redis's reads look slower than they are."""

    def __init__(self, port, host="127.0.0.1", timeout=60):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = hiredis.Reader() if hiredis else None
        self.f = None if self.reader else self.sock.makefile("rb", buffering=1 << 20)

    @staticmethod
    def encode(*args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            if not isinstance(a, bytes):
                a = str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    def read(self):
        if self.reader is not None:
            while True:
                r = self.reader.gets()
                if r is not False:
                    if isinstance(r, Exception):
                        raise RuntimeError("redis: %s" % r)
                    return r
                data = self.sock.recv(1 << 20)
                if not data:
                    raise ConnectionError("redis closed the connection")
                self.reader.feed(data)
        line = self.f.readline()
        if not line:
            raise ConnectionError("redis closed the connection")
        t, rest = line[:1], line[1:-2]
        if t == b"+":
            return rest
        if t == b"-":
            raise RuntimeError("redis: " + rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)
            return data[:-2]
        if t == b"*":
            n = int(rest)
            if n < 0:
                return None
            return [self.read() for _ in range(n)]
        raise RuntimeError("redis: bad reply %r" % line)

    def cmd(self, *args):
        self.sock.sendall(self.encode(*args))
        return self.read()

    def pipeline(self, cmds):
        self.sock.sendall(b"".join(self.encode(*c) for c in cmds))
        return [self.read() for _ in cmds]

    def info(self, section):
        txt = self.cmd("INFO", section).decode()
        d = {}
        for line in txt.splitlines():
            if ":" in line:
                k, v = line.split(":", 1)
                d[k] = v
        return d

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


# ------------------------------------------------------------ PostgreSQL

class Bench:
    def __init__(self, args):
        self.a = args
        self.cfg = dict(MODES[args.mode])
        if args.rounds:
            self.cfg["rounds"] = args.rounds
        if args.failover_kills:
            self.cfg["failover_kills"] = args.failover_kills
        self.rng = random.Random(42)
        self.rows = []
        self.produced = {}      # (system, value size) -> records the batched produce wrote
        self.out = open(args.out, "a" if args.append else "w")
        self.meta = {}
        self.only = set(args.systems.split(",")) if args.systems else set(SYSTEMS)
        self.workloads = set(args.workloads.split(",")) if args.workloads else set(WORKLOADS)

    # -- connections
    def dsn(self, port=None):
        return "host=%s port=%s user=postgres dbname=%s application_name=bench" % (
            self.a.pghost, port or self.a.pgport, self.a.dbname)

    def connect(self, autocommit=True, port=None):
        c = psycopg2.connect(self.dsn(port))
        c.autocommit = autocommit
        with c.cursor() as cur:
            cur.execute("SET statement_timeout = '300s'")
        return c

    def q(self, sql, args=None, conn=None):
        """One autocommitted statement on the admin connection; returns rows."""
        conn = conn or self.admin
        with conn.cursor() as cur:
            cur.execute(sql, args)
            return cur.fetchall() if cur.description else None

    def q1(self, sql, args=None, conn=None):
        r = self.q(sql, args, conn)
        return r[0][0] if r else None

    def lsn(self):
        return self.q1("SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint")

    def redis(self):
        if not self.a.redis_ok:
            raise RuntimeError("redis-server did not start")
        return Redis(self.a.redis_port)

    # -- output
    def emit(self, system, workload, value_bytes, **kw):
        row = dict(system=system, workload=workload, value_bytes=value_bytes,
                   records_per_s=None, mb_per_s=None, p50_ms=None, p99_ms=None,
                   wal_bytes_per_record=None, disk_bytes_per_record=None, clients=1,
                   client="psycopg2")
        row.update(kw)
        for k in ("records_per_s", "mb_per_s", "p50_ms", "p99_ms",
                  "wal_bytes_per_record", "disk_bytes_per_record"):
            if isinstance(row[k], float):
                row[k] = round(row[k], 3)
        row.update(self.meta)
        self.rows.append(row)
        self.out.write(json.dumps(row) + "\n")
        self.out.flush()
        shown = {k: row[k] for k in ("records_per_s", "mb_per_s", "p50_ms", "p99_ms",
                                     "wal_bytes_per_record", "disk_bytes_per_record")
                 if row.get(k) is not None}
        log("  %-11s %-17s %5dB c=%d %s%s" % (
            system, workload, value_bytes, row["clients"], shown,
            ("  ERROR: " + row["error"]) if row.get("error") else ""))

    @staticmethod
    def base_workload(workload):
        """The workload of --workloads that a row's workload belongs to:
        py_consume and consume_fetch to consume, sustained_inline to
        sustained, py_produce_batch to produce_batch."""
        w = workload[3:] if workload.startswith("py_") else workload
        return w.split("_inline")[0].replace("consume_fetch", "consume")

    def guarded(self, system, workload, value_bytes, fn, **extra):
        """Run one measurement; on failure emit an error row (with the
        extra fields, clients and partitions) and go on."""
        if system not in self.only and system not in ("floor", "wal_floor"):
            return None
        if self.base_workload(workload) not in self.workloads:
            return None
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - every failure becomes a row
            msg = "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else "")
            traceback.print_exc(file=sys.stderr)
            self.emit(system, workload, value_bytes, error=msg, **extra)
            try:
                self.admin.close()
            except Exception:
                pass
            self.admin = self.connect()
            return None

    # -- machine and settings
    def collect_meta(self):
        settings = {}
        for name, setting in self.q(
                "SELECT name, current_setting(name) FROM pg_settings WHERE name IN "
                "('fsync', 'synchronous_commit', 'full_page_writes', 'shared_buffers', "
                "'wal_level', 'max_wal_size', 'checkpoint_timeout', 'wal_buffers', "
                "'shared_preload_libraries', 'autovacuum', 'autovacuum_naptime', "
                "'mqlog.maintenance_naptime', 'wal_compression', 'huge_pages', 'max_connections',"
                " 'output_plugin_libraries') ORDER BY name"):
            settings[name] = setting
        redis_ver = None
        try:
            r = self.redis()
            redis_ver = r.info("server").get("redis_version")
            r.close()
        except Exception:
            pass
        model = ""
        try:
            with open("/proc/cpuinfo") as f:
                m = re.search(r"model name\s*:\s*(.*)", f.read())
                model = m.group(1).strip() if m else ""
        except OSError:
            pass
        mem = None
        try:
            with open("/proc/meminfo") as f:
                mem = int(re.search(r"MemTotal:\s*(\d+)", f.read()).group(1)) // 1024
        except (OSError, AttributeError):
            pass
        # The commit measured, marked -dirty only when the source differs from it:
        # bench/results/ is excluded because this run writes its own server log
        # there before this point, which made every clean-clone run say -dirty.
        try:
            here = os.path.dirname(os.path.abspath(__file__))
            rev = subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"],
                                 capture_output=True, text=True, timeout=10).stdout.strip()
            changed = subprocess.run(["git", "-C", here, "status", "--porcelain", "--untracked-files=no",
                                      "--", ":/", ":(exclude,top)bench/results"],
                                     capture_output=True, text=True, timeout=10).stdout.strip()
            if rev and changed:
                rev += "-dirty"
        except (OSError, subprocess.SubprocessError):
            rev = ""
        self.meta = dict(
            mode=self.a.mode,
            mqlog_commit=rev or None,
            date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            cores=os.cpu_count(), cpu=model, mem_mb=mem, kernel=platform.release(),
            pg_version=self.q1("SHOW server_version"),
            mqlog_version=self.q1("SELECT extversion FROM pg_extension WHERE extname = 'mqlog'"),
            pgq_version=self.q1("SELECT extversion FROM pg_extension WHERE extname = 'pgq'"),
            redis_version=redis_ver,
            redis_settings="appendonly yes, appendfsync everysec, save \"\"",
            redis_client_parser="hiredis" if hiredis else "pure Python",
            settings=settings,
        )

    # ============================================================ set-up
    def setup(self):
        self.admin = self.connect()
        self.q("CREATE EXTENSION IF NOT EXISTS mqlog")
        if self.a.cluster_ports:        # the cluster's nodes: mqlog only
            self.collect_meta()
            log("settings:", json.dumps(self.meta["settings"]))
            return
        try:
            self.q("CREATE EXTENSION IF NOT EXISTS pgq")
        except Exception as e:
            log("pgq extension: %s" % e)
            self.admin = self.connect()
        self.collect_meta()
        log("settings:", json.dumps(self.meta["settings"]))

    def reset(self, system, name, partitions=1):
        """Drop and re-create the structure `name` of one system: a topic
        (of `partitions` partitions), a table, a queue or a stream, all
        empty."""
        if system == "mqlog":
            if self.q1("SELECT count(*) FROM mqlog.topics WHERE topic = %s", (name,)):
                self.q("SELECT mq_drop_topic(%s)", (name,))
            self.q("SELECT mq_create_topic(%s, %s)", (name, partitions))
        elif system == "heap_log":
            self.q("DROP TABLE IF EXISTS %s" % name)
            self.q("CREATE TABLE %s (id bigserial PRIMARY KEY, ts timestamptz NOT NULL DEFAULT now(),"
                   " key bytea, value bytea)" % name)
            self.q("CREATE TABLE IF NOT EXISTS heap_offsets (consumer text PRIMARY KEY, last_id bigint NOT NULL)")
            self.quiet_autovacuum(name)
            self.q("INSERT INTO heap_offsets VALUES (%s, 0) ON CONFLICT (consumer) DO UPDATE SET last_id = 0",
                   (name,))
        elif system == "skip_locked":
            # pgmq's table layout (msg_id, read_ct, enqueued_at, vt, message)
            # with a bytea message and a key, and its index on vt.
            self.q("DROP TABLE IF EXISTS %s" % name)
            self.q("CREATE TABLE %s (msg_id bigserial PRIMARY KEY, read_ct int NOT NULL DEFAULT 0,"
                   " enqueued_at timestamptz NOT NULL DEFAULT now(),"
                   " vt timestamptz NOT NULL DEFAULT now(), key bytea, message bytea)" % name)
            self.q("CREATE INDEX ON %s (vt)" % name)
            self.quiet_autovacuum(name)
        elif system == "pgq":
            if self.q1("SELECT count(*) FROM pgq.queue WHERE queue_name = %s", (name,)):
                for (c,) in self.q("SELECT co_name FROM pgq.subscription JOIN pgq.consumer ON co_id = sub_consumer"
                                   " JOIN pgq.queue ON queue_id = sub_queue WHERE queue_name = %s", (name,)):
                    self.q("SELECT pgq.unregister_consumer(%s, %s)", (name, c))
                self.q("SELECT pgq.drop_queue(%s, true)", (name,))
            self.q("SELECT pgq.create_queue(%s)", (name,))
            # a tick as soon as there is a new event when the bench asks
            self.q("SELECT pgq.set_queue_config(%s, 'ticker_max_lag', '0')", (name,))
            self.q("SELECT pgq.set_queue_config(%s, 'ticker_max_count', '500')", (name,))
            self.q("SELECT pgq.register_consumer(%s, 'c')", (name,))
            for t in self.pgq_tables(name):
                self.quiet_autovacuum(t)
        elif system == "redis":
            r = self.redis()
            r.cmd("DEL", name)
            r.cmd("XGROUP", "CREATE", name, "g", "$", "MKSTREAM")
            r.close()

    def pgq_tables(self, queue):
        """A PgQ queue's event tables: the parent and its rotating children."""
        return [t for (t,) in self.q(
            "SELECT c.oid::regclass::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace,"
            " pgq.queue q WHERE q.queue_name = %s AND c.relkind = 'r'"
            " AND (n.nspname || '.' || c.relname = q.queue_data_pfx"
            "      OR n.nspname || '.' || c.relname LIKE q.queue_data_pfx || '\\_%%')", (queue,))]

    def quiet_autovacuum(self, table):
        """The short measurements read WAL positions of the whole cluster:
        autovacuum of a table written a moment earlier would be counted
        against whatever runs next.  So the measured tables opt out; the
        tables of the sustained run keep autovacuum, which is how a heap
        log or queue stays bounded."""
        if not table.split(".")[-1].startswith("sus_"):
            self.q("ALTER TABLE %s SET (autovacuum_enabled = off)" % table)

    def size_of(self, system, name):
        """Bytes the structure occupies: relation sizes with indexes and
        TOAST for PostgreSQL, the stream's MEMORY USAGE for Redis."""
        if system == "mqlog":
            return self.q1("SELECT coalesce(sum(size_bytes), 0)::bigint FROM mqlog.partitions WHERE topic = %s",
                           (name,))
        if system in ("heap_log", "skip_locked"):
            return self.q1("SELECT pg_total_relation_size(%s)", (name,))
        if system == "pgq":
            return sum(self.q1("SELECT pg_total_relation_size(%s)", (t,)) for t in self.pgq_tables(name))
        if system == "redis":
            r = self.redis()
            try:
                return r.cmd("MEMORY", "USAGE", name, "SAMPLES", "0") or 0
            finally:
                r.close()
        return None

    # ====================================================== the C driver
    def conninfo(self):
        return "host=%s port=%s user=postgres dbname=%s application_name=mqbench" % (
            self.a.pghost, self.a.pgport, self.a.dbname)

    def drive(self, system, workload, target, size, conninfo=None, **opts):
        """Run bench/driver/mqbench once: the timed client work of one
        system and workload, every client with a connection of its own
        (doc/benchmarks.md says how it works).  Returns its JSON object;
        raises with its error."""
        cmd = [self.a.driver, "--system", system, "--workload", workload, "--target", target,
               "--value-bytes", str(size)]
        if system == "redis":
            if not self.a.redis_ok:
                raise RuntimeError("redis-server did not start")
            cmd += ["--redis-host", "127.0.0.1", "--redis-port", str(self.a.redis_port)]
        else:
            cmd += ["--conninfo", conninfo or self.conninfo()]
        for k, v in opts.items():
            if v is True:           # a flag (--spread)
                cmd.append("--" + k.replace("_", "-"))
            elif v is not None and v is not False:
                cmd += ["--" + k.replace("_", "-"), str(v)]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        lines = [line for line in p.stdout.splitlines() if line.startswith("{")]
        if not lines:
            raise RuntimeError("mqbench exited with %d: %s" % (
                p.returncode, (p.stderr or p.stdout).strip()[:300]))
        r = json.loads(lines[-1])
        if r.get("error") or p.returncode != 0:
            raise RuntimeError("mqbench: %s" % r.get("error", "exit %d" % p.returncode))
        # libpq's default notice processor prints the server's WARNINGs
        # (an acks=all commit whose wait ended short of the in-sync
        # replicas) on the driver's stderr
        r["warnings"] = [line.strip() for line in p.stderr.splitlines() if line.startswith("WARNING:")]
        return r

    DRIVER_FIELDS = ("driver", "libpq_version", "records", "calls", "seconds", "call_p50_ms", "call_p99_ms",
                     "call_avg_ms", "pipeline", "partitions", "per_client_records", "batch", "clients",
                     "records_per_s", "mb_per_s", "rounds", "total_records")

    def driven(self, r):
        """The fields of the driver's answer that go into a row."""
        d = {k: r[k] for k in self.DRIVER_FIELDS if k in r}
        d["client"] = "mqbench"
        return d

    def rounds(self, fn, between=None, n=None):
        """The mode's rounds (or n) of fn(), a driver run, back to back,
        between() before each but the first: the answer of the round of
        the median rate, with every round's rate (`rounds`) and the
        records of them all (`total_records`)."""
        res = []
        for i in range(n or self.cfg["rounds"]):
            if i and between:
                between()
            res.append(fn())
        med = dict(sorted(res, key=lambda r: r["records_per_s"])[len(res) // 2])
        med["rounds"] = [round(r["records_per_s"], 1) for r in res]
        med["total_records"] = sum(r["records"] for r in res)
        return med

    def measured(self, system, name, fn):
        """fn() (driver rounds) after a checkpoint, with the WAL it wrote
        and the growth of the structure per record: (result, WAL bytes per
        record, disk bytes per record or None)."""
        self.q("CHECKPOINT")
        size0 = self.size_of(system, name)
        w0 = self.lsn()
        res = fn()
        w1 = self.lsn()
        rec = max(res.get("total_records", res["records"]), 1)
        disk = None if size0 is None else (self.size_of(system, name) - size0) / rec
        return res, (w1 - w0) / rec, disk

    # ================================================= compressible values
    def json_literals(self, n, seed):
        """JSON-like events of about 300 bytes, as applications produce them:
        the same keys in every record, a few fields that vary."""
        rng = random.Random(seed)
        lits = []
        statuses = ["created", "paid", "packed", "shipped", "delivered"]
        for _ in range(min(8, max(1, n // BATCH))):
            vals = []
            for _ in range(BATCH):
                v = json.dumps({
                    "order_id": rng.randrange(10 ** 9), "customer": "c-%06d" % rng.randrange(10 ** 6),
                    "status": rng.choice(statuses), "currency": "EUR",
                    "amount": round(rng.uniform(1, 500), 2), "created_at": "2026-11-%02dT%02d:%02d:%02dZ" % (
                        rng.randrange(1, 29), rng.randrange(24), rng.randrange(60), rng.randrange(60)),
                    "items": [{"sku": "SKU-%04d" % rng.randrange(10000), "qty": rng.randrange(1, 4)}
                              for _ in range(rng.randrange(1, 4))],
                    "channel": rng.choice(["web", "app", "store"])}, separators=(",", ":"))
                vals.append(v.encode())
            keys = [b"k%08d" % rng.randrange(10 ** 8) for _ in range(BATCH)]
            lits.append((None, None, vals, keys))
        return lits

    def values_file(self, lits, path):
        """The records of lits in the driver's --values-file format: per
        record a 4-byte big-endian length and the value, then the same
        for the key."""
        with open(path, "wb") as f:
            for lit in lits:
                for v, k in zip(lit[2], lit[3]):
                    f.write(struct.pack(">I", len(v)) + v + struct.pack(">I", len(k)) + k)
        return path

    def run_json(self, system, codec, lits):
        """Batched produce of the JSON-like events by the driver: rate, WAL
        and disk bytes per record; mqlog with each compression.type, the
        heap log as is."""
        name = "j_%s_%s" % (system, codec or "plain")
        self.reset(system, name)
        if system == "mqlog":
            self.q("SELECT mq_alter_topic(%s, jsonb_build_object('compression.type', %s::text))", (name, codec))
        path = self.values_file(lits, os.path.join(self.a.work, "json_values.bin"))
        avg = sum(len(v) for l in lits for v in l[2]) / sum(len(l[2]) for l in lits)
        res, wal, disk = self.measured(system, name, lambda: self.drive(
            system, "produce_batch", name, int(round(avg)), records=self.cfg["c_records"][1024],
            batch=BATCH, values_file=path))
        self.emit(system, "json", int(round(avg)), wal_bytes_per_record=wal, disk_bytes_per_record=disk,
                  codec=codec, **self.driven(res))
        self.drop(system, name)

    # ================================================= batched produce
    def run_produce_batch(self, system, size, name, clients=1, partitions=None):
        """Batched produce by the driver, BATCH records per autocommitted
        call from each client, for the mode's batch_s seconds (and at
        least its c_records, which the consume reads back); with
        `partitions`, an mqlog topic of that many partitions and client i
        producing to partition i.  The floor is the same arrays parsed by
        a statement that stores nothing, with a durable commit; the WAL
        floor the same, and their bytes written once to the WAL (a logical
        message) before the commit."""
        if system not in ("floor", "wal_floor"):
            self.reset(system, name, partitions=partitions or 1)
        run = lambda: self.rounds(lambda: self.drive(  # noqa: E731
            system, "produce_batch", name, size, records=self.cfg["c_records"][size] if clients == 1 else None,
            seconds=self.cfg["batch_s"], batch=BATCH, clients=clients, partitions=partitions))
        if clients == 1 and not partitions:
            run0 = run

            def run():
                res = run0()
                self.produced[(system, size)] = res["total_records"]
                return res
        if system == "redis":
            r = self.redis()
            aof0 = int(r.info("persistence").get("aof_current_size", 0))
            res = run()
            mem = r.cmd("MEMORY", "USAGE", name, "SAMPLES", "0")
            aof1 = int(r.info("persistence").get("aof_current_size", 0))
            r.close()
            rec = res["total_records"]
            self.emit(system, "produce_batch", size, memory_bytes_per_record=round(mem / rec, 1),
                      aof_bytes_per_record=round((aof1 - aof0) / rec, 1), **self.driven(res))
            return
        res, wal, disk = self.measured(system, name, run)
        extra = {"floor": dict(note="arrays parsed and a durable empty commit, nothing stored"),
                 "wal_floor": dict(note="arrays parsed, their bytes written once to the WAL, a durable commit")
                 }.get(system, {})
        self.emit(system, "produce_batch", size, wal_bytes_per_record=wal, disk_bytes_per_record=disk,
                  **extra, **self.driven(res))

    # a typical Python client: psycopg2 sends bytea[] as hex text
    def batch_literals(self, n, size, seed):
        """Pre-built array literals for n/BATCH calls, cycled: the client's
        work is the same for every PostgreSQL system."""
        rng = random.Random(seed)
        lits = []
        for _ in range(min(8, max(1, n // BATCH))):
            vals = rand_values(BATCH, size, rng)
            keys = [b"k%08d" % rng.randrange(10 ** 8) for _ in range(BATCH)]
            lits.append(("{" + ",".join(v.decode() for v in vals) + "}",
                         "{" + ",".join(k.decode() for k in keys) + "}", vals, keys))
        return lits

    def produce_batch_sql(self, system, name):
        return {
            "mqlog": "SELECT count(*) FROM mq_produce_batch('%s', %%s::bytea[], %%s::bytea[])" % name,
            "heap_log": "INSERT INTO %s (key, value) SELECT k, v FROM unnest(%%s::bytea[], %%s::bytea[]) AS u(v, k)" % name,
            "skip_locked": "INSERT INTO %s (key, message) SELECT k, v FROM unnest(%%s::bytea[], %%s::bytea[]) AS u(v, k)" % name,
            "pgq": "SELECT count(pgq.insert_event('%s', 'ev', v, k, NULL, NULL, NULL))"
                   " FROM unnest(%%s::text[], %%s::text[]) AS u(v, k)" % name,
        }[system]

    def run_py_produce_batch(self, system, size, lits, name):
        """Batched produce from psycopg2, the arrays sent as text literals:
        the rows labelled "a typical Python client"."""
        n = self.cfg["records"]
        calls = n // BATCH
        self.reset(system, name)
        rec, dt, wal, disk = self.timed_batches(system, name, lits, calls)
        self.emit(system, "py_produce_batch", size, records_per_s=rec / dt, mb_per_s=rec * size / dt / 1e6,
                  wal_bytes_per_record=wal / rec, disk_bytes_per_record=disk / rec, batch=BATCH, records=rec)

    def timed_batches(self, system, name, lits, calls):
        """calls batched produce calls of the pre-built literals, timed,
        after a checkpoint: (records, seconds, WAL bytes, disk bytes)."""
        sql = self.produce_batch_sql(system, name)
        conn = self.connect()
        self.q("CHECKPOINT")
        size0 = self.size_of(system, name)
        w0 = self.lsn()
        t0 = time.perf_counter()
        with conn.cursor() as cur:
            for i in range(calls):
                vl, kl = lits[i % len(lits)][:2]
                cur.execute(sql, (vl, kl))
                cur.fetchall() if cur.description else None
        dt = time.perf_counter() - t0
        w1 = self.lsn()
        conn.close()
        return calls * BATCH, dt, w1 - w0, self.size_of(system, name) - size0

    def run_py_produce_floor(self, size, lits):
        """The Python client's floor: the same arrays sent and parsed, and
        a durable commit with nothing stored (a transactional logical
        message: an xid alone writes no WAL, and a commit that wrote none
        before its commit record is not flushed)."""
        n = self.cfg["records"]
        calls = n // BATCH
        conn = self.connect()
        t0 = time.perf_counter()
        with conn.cursor() as cur:
            for i in range(calls):
                vl, kl = lits[i % len(lits)][:2]
                cur.execute("SELECT pg_logical_emit_message(true, 'mqbench', '') IS NOT NULL,"
                            " cardinality(%s::bytea[]) + cardinality(%s::bytea[])", (vl, kl))
                cur.fetchall()
        dt = time.perf_counter() - t0
        conn.close()
        rec = calls * BATCH
        self.emit("floor", "py_produce_batch", size, records_per_s=rec / dt, mb_per_s=rec * size / dt / 1e6,
                  batch=BATCH, records=rec, note="arrays parsed and a durable empty commit, nothing stored")

    # ========================================================= consume
    def pgq_fill(self, name, size, n):
        """A PgQ queue of n events with a tick after every 500: PgQ hands
        out what lies between two ticks, so its batches are 500 too.  The
        events are made by the server (hex digits, as long as the values),
        each 500 committed before its tick; not timed."""
        self.reset("pgq", name)
        self.q("""DO $$
BEGIN
  FOR i IN 1 .. %d LOOP
    PERFORM pgq.insert_event('%s', 'ev', left(repeat(md5(random()::text || g), %d), %d),
                             'k' || lpad((random() * 1e8)::int::text, 8, '0'), NULL, NULL, NULL)
      FROM generate_series(1, %d) AS g;
    COMMIT;
    PERFORM pgq.ticker('%s');
    COMMIT;
  END LOOP;
END $$""" % (n // CONSUME_BATCH, name, size // 32 + 1, size, CONSUME_BATCH, name))

    def consume_count(self, system, size):
        """How many records a consumer reads: the mode's c_records, at
        most what the batched produce wrote."""
        n = min(self.cfg["c_records"][size], self.produced.get((system, size), 0))
        if n < CONSUME_BATCH:
            raise RuntimeError("the batched produce did not run: nothing to consume")
        return n // CONSUME_BATCH * CONSUME_BATCH

    def run_consume(self, system, size, name):
        """The driver reads back what the batched produce wrote, 500 at a
        time, each batch with its commit/ack in one transaction."""
        n = self.consume_count(system, size)
        group = None

        def rewind():
            # back to the start, so that each round reads the same records
            if system == "mqlog":
                self.q("SELECT mq_reset_offsets(%s, %s, 'earliest', true)", (group, name))
            elif system == "redis":
                r = self.redis()
                r.cmd("XGROUP", "SETID", name, "g", "0")
                r.close()
        if system == "pgq":
            name = name + "_c"
            self.pgq_fill(name, size, n)
        elif system == "mqlog":
            group = "g_" + name
        rewind()
        # the SKIP LOCKED queue and PgQ consume what they read: one round
        res = self.rounds(lambda: self.drive(system, "consume", name, size, records=n, batch=CONSUME_BATCH,
                                             group=group),
                          rewind, n=1 if system in ("skip_locked", "pgq") else None)
        self.emit(system, "consume", size, avg_batch=round(res["records"] / max(res["calls"], 1), 1),
                  **self.driven(res))

    def run_consume_fetch(self, size, name):
        """mqlog read by offset with mq_fetch, the position committed with the
        explicit mq_commit(group, topic, partition, offset): Kafka's assign + seek."""
        n = self.consume_count("mqlog", size)
        res = self.rounds(lambda: self.drive("mqlog", "consume_fetch", name, size, records=n,
                                             batch=CONSUME_BATCH, group="f_" + name))
        self.emit("mqlog", "consume_fetch", size, **self.driven(res))

    def run_consume_floor(self, size, heap):
        """The consume floor: one batch of the heap log's own rows, in a
        table of exactly that many, read whole by the driver call after
        call, each with a durable ack (a logical message) in the same
        transaction, pipelined as mq_poll's consumer is: the heap log's
        read with nothing to search for.  A reference beside the consume
        targets, not a bound (see report.py's floor section)."""
        n = self.consume_count("heap_log", size)
        table = "floor_c_%d" % size
        self.q("DROP TABLE IF EXISTS %s" % table)
        self.q("CREATE TABLE %s AS SELECT id, ts, key, value FROM %s ORDER BY id LIMIT %d" % (
            table, heap, CONSUME_BATCH))
        res = self.rounds(lambda: self.drive("floor", "consume", table, size, records=n, batch=CONSUME_BATCH))
        self.emit("floor", "consume", size, note="one batch of the heap log's rows read again and again, "
                  "a durable ack", **self.driven(res))
        self.q("DROP TABLE %s" % table)

    def run_py_consume(self, system, size, name):
        """The Python client's consume (mqlog and the heap log): what
        run_py_produce_batch wrote, 500 at a time, psycopg2 parsing the
        bytea values from hex."""
        n = self.cfg["records"] // BATCH * BATCH
        got = 0
        batches = 0
        conn = self.connect(autocommit=False)
        cur = conn.cursor()
        if system == "mqlog":
            group = "gpy_" + name
            cur.execute("SELECT mq_reset_offsets(%s, %s, 'earliest', true)", (group, name))
            conn.commit()
        t0 = time.perf_counter()
        last = 0
        empty = 0
        while got < n:
            if system == "mqlog":
                cur.execute("SELECT \"offset\", ts, key, value FROM mq_poll(%s, %s, %s, '1s')",
                            (group, name, CONSUME_BATCH))
                rows = cur.fetchall()
                cur.execute("SELECT mq_commit(%s)", (group,))
            else:
                cur.execute("SELECT id, ts, key, value FROM %s WHERE id > %%s ORDER BY id LIMIT %d"
                            % (name, CONSUME_BATCH), (last,))
                rows = cur.fetchall()
                if rows:
                    last = rows[-1][0]
                    cur.execute("UPDATE heap_offsets SET last_id = %s WHERE consumer = %s", (last, name))
            conn.commit()
            if rows:
                got += len(rows)
                batches += 1
                empty = 0
            else:
                empty += 1
                if empty > 3:
                    break
        dt = time.perf_counter() - t0
        conn.close()
        if got < n:
            raise RuntimeError("consumed %d of %d records" % (got, n))
        self.emit(system, "py_consume", size, records_per_s=got / dt, mb_per_s=got * size / dt / 1e6,
                  batch=CONSUME_BATCH, records=got, avg_batch=round(got / max(batches, 1), 1))

    # ============================================== single-record produce
    def run_single(self, system, size, clients):
        """One record per autocommitted call for the mode's single_s
        seconds, from `clients` driver threads, each waiting for its
        commit before the next call."""
        name = "s_%s_%d" % (system, size)
        if system != "floor":
            self.reset(system, name)
        run = lambda: self.rounds(lambda: self.drive(  # noqa: E731
            system, "produce_single", name, size, seconds=self.cfg["single_s"], clients=clients))
        if system == "redis":
            self.emit(system, "produce_single", size, **self.driven(run()))
            return
        res, wal, _ = self.measured(system, name, run)
        self.emit(system, "produce_single", size, wal_bytes_per_record=wal, **self.driven(res))

    # ========================================================== latency
    def run_latency(self, system, size):
        """One producer sends single autocommitted records at random 1-4 ms
        gaps; one consumer waits for them the way that system waits.  The
        latency of a record is the consumer's clock at receipt minus the
        producer's clock just before it sent the record (the commit, with
        its WAL flush, is inside)."""
        name = "l_%s_%d" % (system, size)
        self.reset(system, name)
        n = self.cfg["latency_n"]
        filler = rand_values(1, size, random.Random(7))[0]
        lat = []
        send_ms = []
        stop = threading.Event()
        ready = threading.Event()
        errors = []

        def consumer():
            try:
                if system == "redis":
                    r = self.redis()
                    ready.set()
                    while not stop.is_set() and len(lat) < n:
                        rep = r.cmd("XREADGROUP", "GROUP", "g", "c", "COUNT", CONSUME_BATCH, "BLOCK", 1000,
                                    "STREAMS", name, ">")
                        now = time.time()
                        if not rep:
                            continue
                        ids = []
                        for eid, fields in rep[0][1]:
                            v = dict(zip(fields[0::2], fields[1::2]))[b"v"]
                            lat.append((now - float(v[:20])) * 1000)
                            ids.append(eid)
                        r.cmd("XACK", name, "g", *ids)
                    r.close()
                    return
                conn = self.connect(autocommit=False)
                cur = conn.cursor()
                last = 0
                if system == "mqlog":
                    # join the group before the producer starts
                    cur.execute("SELECT count(*) FROM mq_poll(%s, %s, 1, '0')", ("lg", name))
                    conn.commit()
                ready.set()
                while not stop.is_set() and len(lat) < n:
                    vals = []
                    if system == "mqlog":
                        cur.execute("SELECT value FROM mq_poll(%s, %s, %s, '1s')", ("lg", name, CONSUME_BATCH))
                        vals = [r[0] for r in cur.fetchall()]
                        now = time.time()
                        if vals:
                            cur.execute("SELECT mq_commit(%s)", ("lg",))
                    elif system == "heap_log":
                        cur.execute("SELECT id, value FROM %s WHERE id > %%s ORDER BY id LIMIT %d"
                                    % (name, CONSUME_BATCH), (last,))
                        rows = cur.fetchall()
                        now = time.time()
                        if rows:
                            last = rows[-1][0]
                            vals = [r[1] for r in rows]
                            cur.execute("UPDATE heap_offsets SET last_id = %s WHERE consumer = %s", (last, name))
                    elif system == "skip_locked":
                        cur.execute("DELETE FROM %s WHERE msg_id IN (SELECT msg_id FROM %s WHERE vt <= now()"
                                    " ORDER BY msg_id LIMIT %d FOR UPDATE SKIP LOCKED) RETURNING message"
                                    % (name, name, CONSUME_BATCH))
                        vals = [r[0] for r in cur.fetchall()]
                        now = time.time()
                    elif system == "pgq":
                        cur.execute("SELECT pgq.next_batch(%s, 'c')", (name,))
                        bid = cur.fetchone()[0]
                        if bid is not None:
                            cur.execute("SELECT ev_data FROM pgq.get_batch_events(%s)", (bid,))
                            vals = [r[0].encode() for r in cur.fetchall()]
                            now = time.time()
                            cur.execute("SELECT pgq.finish_batch(%s)", (bid,))
                    conn.commit()
                    for v in vals:
                        lat.append((now - float(bytes(v[:20]))) * 1000)
                    if not vals and system != "mqlog":
                        time.sleep(0.001)   # a polling consumer's nap
                conn.close()
            except Exception as e:  # noqa: BLE001
                errors.append(e)
                ready.set()

        def ticker():
            # PgQ needs ticks to cut batches; the bench is the ticker here,
            # every 2 ms (pgqd's default ticker_period is 1 s).
            try:
                conn = self.connect()
                cur = conn.cursor()
                while not stop.is_set():
                    cur.execute("SELECT pgq.ticker(%s)", (name,))
                    time.sleep(0.002)
                conn.close()
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=consumer, daemon=True)]
        if system == "pgq":
            threads.append(threading.Thread(target=ticker, daemon=True))
        for t in threads:
            t.start()
        ready.wait(30)
        time.sleep(0.2)
        rng = random.Random(1)
        try:
            if system == "redis":
                r = self.redis()
            else:
                conn = self.connect()
                cur = conn.cursor()
                sql = {
                    "mqlog": "SELECT mq_produce(%s, %s, %s)",
                    "heap_log": "INSERT INTO " + name + " (key, value) VALUES (%s, %s)",
                    "skip_locked": "INSERT INTO " + name + " (key, message) VALUES (%s, %s)",
                    "pgq": "SELECT pgq.insert_event(%s, 'ev', %s, %s, NULL, NULL, NULL)",
                }[system]
            for i in range(n):
                if errors:
                    break
                t = time.time()
                v = (b"%.6f" % t).ljust(20, b" ") + filler[20:]
                k = b"k%08d" % i
                if system == "redis":
                    r.cmd("XADD", name, "*", "k", k, "v", v)
                elif system == "mqlog":
                    cur.execute(sql, (name, psycopg2.Binary(v), psycopg2.Binary(k)))
                elif system == "pgq":
                    cur.execute(sql, (name, v.decode(), k.decode()))
                else:
                    cur.execute(sql, (psycopg2.Binary(k), psycopg2.Binary(v)))
                send_ms.append((time.time() - t) * 1000)
                time.sleep(rng.uniform(0.001, 0.004))
            deadline = time.time() + 10
            while len(lat) < n and time.time() < deadline and not errors:
                time.sleep(0.01)
        finally:
            stop.set()
            for t in threads:
                t.join(15)
        if errors:
            raise errors[0]
        if len(lat) < n:
            raise RuntimeError("received %d of %d records" % (len(lat), n))
        self.emit(system, "latency", size, p50_ms=pct(lat, 50), p99_ms=pct(lat, 99),
                  max_ms=round(max(lat), 3), produce_call_p50_ms=round(pct(send_ms, 50), 3),
                  produce_call_p99_ms=round(pct(send_ms, 99), 3), samples=len(lat))

    # ======================================================== sustained
    def run_sustained(self, system, seconds, inline_maint=False):
        """Produce 500 and consume 500 (with commit/ack) in a loop, for
        `seconds`, while the system's own retention keeps it bounded:
        mqlog retention.bytes enforced by its maintenance worker, heap
        DELETE of consumed rows, the queue's own DELETE, PgQ table
        rotation, Redis MAXLEN.  Samples size and throughput."""
        size = 100
        name = "sus_%s%s" % (system, "_inline" if inline_maint else "")
        self.reset(system, name)
        lits = self.batch_literals(CONSUME_BATCH * 8, size, 99)
        half = [("{" + ",".join(v.decode() for v in l[2][:CONSUME_BATCH]) + "}",
                 "{" + ",".join(k.decode() for k in l[3][:CONSUME_BATCH]) + "}",
                 l[2][:CONSUME_BATCH], l[3][:CONSUME_BATCH]) for l in lits]
        samples = []
        period = self.cfg["sample_s"]
        conn = cur = r = None
        if system == "mqlog":
            self.q("SELECT mq_alter_topic(%s, %s)", (name, json.dumps(
                {"retention.bytes": SUSTAIN_RETENTION, "segment.bytes": SUSTAIN_SEGMENT})))
            # start full: fill to the retention bound, let the worker trim,
            # then consume from the end so the loop starts in steady state
            # (about 1 MiB, then a maintenance pass, so segments are small)
            c = self.connect()
            with c.cursor() as cc:
                # (retention trims as it goes: stop a little short of the bound)
                t_fill = time.time()
                while (self.size_of(system, name) < SUSTAIN_RETENTION - 4 * SUSTAIN_SEGMENT
                       and time.time() - t_fill < 60):
                    for l in lits:
                        cc.execute(self.produce_batch_sql("mqlog", name), l[:2])
                    cc.execute("SELECT count(*) FROM mq_run_maintenance()")
            c.close()
            self.q("SELECT mq_reset_offsets(%s, %s, 'latest', true)", ("g_" + name, name))
        if system == "pgq":
            rot = max(5, seconds // 10)
            self.q("SELECT pgq.set_queue_config(%s, 'rotation_period', %s)", (name, "%d seconds" % rot))
        if system == "redis":
            r = self.redis()
            pipe = []
            for l in half:
                pipe.append([("XADD", name, "MAXLEN", "~", SUSTAIN_REDIS_MAXLEN, "*", "k", k, "v", v)
                             for v, k in zip(l[2], l[3])])
            # start full, like mqlog
            for i in range(SUSTAIN_REDIS_MAXLEN // CONSUME_BATCH + 1):
                r.pipeline(pipe[i % len(pipe)])
            r.cmd("XGROUP", "SETID", name, "g", "$")
        else:
            conn = self.connect(autocommit=False)
            cur = conn.cursor()
            psql = self.produce_batch_sql(system, name)
        last = 0
        total = 0
        t_start = time.time()
        t_next = t_start + period
        t_maint = t_start + 1
        n_in_period = 0
        t_prev = t_start
        i = 0
        while True:
            now = time.time()
            if now >= t_next:
                sz = self.size_of(system, name)
                samples.append(dict(t=round(now - t_start, 2),
                                    records_per_s=round(n_in_period / (now - t_prev), 1),
                                    size_bytes=sz))
                n_in_period = 0
                t_prev = now
                t_next += period
                if now - t_start >= seconds:
                    break
            l = half[i % len(half)]
            i += 1
            if system == "redis":
                r.pipeline(pipe[i % len(pipe)])
                rep = r.cmd("XREADGROUP", "GROUP", "g", "c", "COUNT", CONSUME_BATCH, "STREAMS", name, ">")
                ents = rep[0][1] if rep else []
                if ents:
                    r.cmd("XACK", name, "g", *[e[0] for e in ents])
                got = len(ents)
            else:
                cur.execute(psql, l[:2])
                conn.commit()
                if system == "pgq":
                    cur.execute("SELECT pgq.ticker(%s)", (name,))
                    conn.commit()
                got = 0
                if system == "mqlog":
                    cur.execute("SELECT value FROM mq_poll(%s, %s, %s, '0')", ("g_" + name, name, CONSUME_BATCH))
                    got = len(cur.fetchall())
                    cur.execute("SELECT mq_commit(%s)", ("g_" + name,))
                elif system == "heap_log":
                    cur.execute("SELECT id, value FROM %s WHERE id > %%s ORDER BY id LIMIT %d"
                                % (name, CONSUME_BATCH), (last,))
                    rows = cur.fetchall()
                    got = len(rows)
                    if rows:
                        last = rows[-1][0]
                        cur.execute("UPDATE heap_offsets SET last_id = %s WHERE consumer = %s", (last, name))
                elif system == "skip_locked":
                    cur.execute("DELETE FROM %s WHERE msg_id IN (SELECT msg_id FROM %s WHERE vt <= now()"
                                " ORDER BY msg_id LIMIT %d FOR UPDATE SKIP LOCKED) RETURNING message"
                                % (name, name, CONSUME_BATCH))
                    got = len(cur.fetchall())
                elif system == "pgq":
                    cur.execute("SELECT pgq.next_batch(%s, 'c')", (name,))
                    bid = cur.fetchone()[0]
                    if bid is not None:
                        cur.execute("SELECT ev_data FROM pgq.get_batch_events(%s)", (bid,))
                        got = len(cur.fetchall())
                        cur.execute("SELECT pgq.finish_batch(%s)", (bid,))
                conn.commit()
                if now >= t_maint:
                    t_maint = now + 1
                    if system == "mqlog" and inline_maint:
                        # the loop's own session runs the maintenance pass
                        conn.autocommit = True
                        cur.execute("SELECT count(*) FROM mq_run_maintenance()")
                        conn.autocommit = False
                    elif system == "heap_log":
                        # retention of the hand-written log: delete what
                        # every consumer has read (one consumer here)
                        cur.execute("DELETE FROM %s WHERE id <= (SELECT min(last_id) FROM heap_offsets"
                                    " WHERE consumer = %%s)" % name, (name,))
                        conn.commit()
                    elif system == "pgq":
                        # what pgqd's maintenance does: rotation in two steps
                        conn.autocommit = True
                        cur.execute("SELECT pgq.maint_rotate_tables_step1(%s)", (name,))
                        cur.execute("SELECT pgq.maint_rotate_tables_step2()")
                        conn.autocommit = False
            n_in_period += got
            total += got
        if conn:
            conn.close()
        if r:
            r.close()
        rates = [s["records_per_s"] for s in samples]
        sizes = [s["size_bytes"] for s in samples]
        dur = samples[-1]["t"] if samples else seconds
        row = dict(records_per_s=total / dur if dur else None, mb_per_s=total * size / dur / 1e6 if dur else None,
                   seconds=round(dur, 1), samples=samples,
                   first_records_per_s=rates[0], last_records_per_s=rates[-1],
                   first_size_bytes=sizes[0], last_size_bytes=sizes[-1], max_size_bytes=max(sizes),
                   throughput_change=change(rates), size_change=change(sizes))
        if system == "mqlog":
            row["maintenance"] = ("mq_run_maintenance() every second in the loop's session" if inline_maint
                                  else "maintenance worker, mqlog.maintenance_naptime = 1s")
            row["retention_bytes"] = SUSTAIN_RETENTION
            row["segment_bytes"] = SUSTAIN_SEGMENT
        if system == "redis":
            row["maxlen"] = SUSTAIN_REDIS_MAXLEN
        if system == "pgq":
            row["rotation_period_s"] = rot
        self.emit(system, "sustained_inline" if inline_maint else "sustained", size, **row)

    # ====================================================== replication
    # Three nodes of one cluster on this machine (bench/run.sh starts them
    # with scripts/cluster-lib.sh), reached over the Unix socket in --pghost
    # at the ports of --cluster-ports (n1 first); --pgport is n1.
    def node_port(self, node):
        """The port of a node, from the conninfo it registered."""
        ci = self.q1("SELECT conninfo FROM mqlog.nodes WHERE node = %s", (node,))
        m = re.search(r"port=(\d+)", ci or "")
        if not m:
            raise RuntimeError("no port in the conninfo of node %s: %r" % (node, ci))
        return int(m.group(1))

    def wait(self, what, fn, timeout=60):
        end = time.time() + timeout
        while time.time() < end:
            if fn():
                return
            time.sleep(0.1)
        raise RuntimeError("timed out after %d s waiting for %s" % (timeout, what))

    def repl_topic(self, name, rf, port=None):
        """A fresh one-partition topic: rf 3 with min.insync.replicas 2,
        created on n1, present on every node with a follower streaming;
        or rf 1 on the node of `port`.  Returns (leader, leader port,
        [follower ports])."""
        ports = self.a.cluster_ports
        c = self.connect(port=port or ports[0])
        if self.q1("SELECT count(*) FROM mqlog.topics WHERE topic = %s", (name,), conn=c):
            self.q("SELECT mq_drop_topic(%s)", (name,), conn=c)
        if rf == 1:
            self.q("SELECT mq_create_topic(%s, 1)", (name,), conn=c)
            c.close()
            return None, port, []
        self.q("SELECT mq_create_topic(%s, 1, replication_factor => 3,"
               " config => '{\"min.insync.replicas\": 2}')", (name,), conn=c)
        c.close()
        leader = self.q1("SELECT leader FROM mqlog.partitions WHERE topic = %s", (name,))
        lport = self.node_port(leader)
        followers = [p for p in ports if p != lport]
        for fp in followers:
            c = self.connect(port=fp)
            self.wait("topic %s on the node of port %d" % (name, fp), lambda: self.q1(
                "SELECT count(*) FROM mqlog.partitions WHERE topic = %s AND leader IS NOT NULL",
                (name,), conn=c) == 1)
            self.wait("an apply worker on the node of port %d" % fp, lambda: self.q1(
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'mqlog apply'", conn=c) > 0)
            c.close()
        return leader, lport, followers

    def acks_conn(self, port, acks):
        c = self.connect(port=port)
        with c.cursor() as cur:
            cur.execute("SET mqlog.acks = '%s'" % acks)
        return c

    def node_conninfo(self, port, acks):
        """The driver's conninfo for the node of port, with mqlog.acks set
        for its session."""
        return "host=%s port=%d user=postgres dbname=%s application_name=mqbench options='-c mqlog.acks=%s'" % (
            self.a.pghost, port, self.a.dbname, acks)

    def node_restart(self, i, cluster_on):
        """Restart node n<i> with its cluster settings on or off: off is
        mqlog.etcd_endpoints = '' in postgresql.auto.conf (ALTER SYSTEM),
        which makes mqlog run the node as a single server; on resets it.
        Stopped and started by scripts/cluster-lib.sh (cl_stop_postmaster
        by the pid in cluster.env, cl_start_node, which records the new
        pid there for run.sh's cl_stop).  With the settings on, waits for
        every node to see the three alive again."""
        port = self.a.cluster_ports[i - 1]
        c = self.connect(port=port)
        self.q("ALTER SYSTEM RESET mqlog.etcd_endpoints" if cluster_on else
               "ALTER SYSTEM SET mqlog.etcd_endpoints = ''", conn=c)
        c.close()
        if port == self.a.pgport:
            self.admin.close()
        lib = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts", "cluster-lib.sh")
        env = dict(os.environ, CL_DIR=self.a.cluster_dir, CL_BINDIR=self.a.cluster_bindir)
        r = subprocess.run(["bash", "-c", '. "$0" && cl_load && cl_stop_postmaster "${CL_PID[$1]}" "n$1" && '
                            'cl_start_node "$1"', lib, str(i)], env=env, capture_output=True, text=True, timeout=180)
        if r.returncode != 0:
            raise RuntimeError("restart of n%d with the cluster settings %s failed: %s" % (
                i, "on" if cluster_on else "off", (r.stdout + r.stderr).strip()[-500:]))
        log("    n%d restarted with the cluster settings %s: %s" % (i, "on" if cluster_on else "off",
                                                                      r.stdout.strip().replace("\n", "; ")))
        self.wait("n%d to accept connections" % i, lambda: self.fo_try("n%d" % i, "SELECT 1") == 1)
        if port == self.a.pgport:
            self.admin = self.connect()
        if self.fo_q1("n%d" % i, "SELECT current_setting('mqlog.etcd_endpoints') <> ''") != cluster_on:
            raise RuntimeError("n%d: mqlog.etcd_endpoints is not what the restart set" % i)
        if cluster_on:
            for p in self.a.cluster_ports:
                c = self.connect(port=p)
                self.wait("the node of port %d to see three alive nodes" % p, lambda: self.q1(
                    "SELECT count(*) FILTER (WHERE alive) FROM mqlog.nodes", conn=c) == 3, timeout=120)
                c.close()
            # the other nodes' walsenders on it decode what it wrote with
            # the settings off before they reach the present: wait for
            # that, or the first measurement with the settings on pays it
            c = self.connect(port=port)
            end = self.q1("SELECT pg_current_wal_lsn()::text", conn=c)
            try:
                self.wait("n%d's walsenders to stream its WAL up to %s" % (i, end), lambda: self.q1(
                    "SELECT count(*) FROM pg_stat_replication WHERE replay_lsn >= %s::pg_lsn", (end,), conn=c)
                    >= len(self.a.cluster_ports) - 1, timeout=60)
            except RuntimeError as e:
                log("    %s; measuring anyway" % e)
            c.close()

    def lead_on_n1(self, name):
        """Make n1 the leader of partition 0 of the replicated topic name
        (mq_elect_leader on its leader) if another node leads it, so that
        every replicated_produce row is the same node's."""
        for _ in range(10):
            leader = self.q1("SELECT leader FROM mqlog.partitions WHERE topic = %s", (name,))
            if leader == "n1":
                return
            try:
                c = self.connect(port=self.node_port(leader))
                self.q("SELECT mq_elect_leader(%s, 0, 'n1')", (name,), conn=c)
                c.close()
            except psycopg2.Error as e:
                log("    mq_elect_leader(%s, 0, n1) on %s: %s" % (name, leader, str(e).strip().splitlines()[0]))
            time.sleep(1)
        raise RuntimeError("n1 does not lead %s" % name)

    def repl_drive(self, label, name, size, acks):
        """The single-node batched produce, run against the topic name
        on n1: the driver, BATCH records a call, the mode's c_records
        and batch_s, its rounds back to back, after a checkpoint; acks
        as the session's mqlog.acks.  (result, WAL bytes per record,
        WARNINGs the driver's sessions got)."""
        warns = []

        def one():
            r = self.drive("mqlog", "produce_batch", name, size, conninfo=self.node_conninfo(self.a.pgport, acks),
                           records=self.cfg["c_records"][size], seconds=self.cfg["batch_s"], batch=BATCH)
            warns.extend(r.pop("warnings", []))
            return r
        # the other nodes' apply workers stream n1's WAL through its
        # walsenders (one per follower node, whatever the topic): counted
        # before and after, so a row says whether they were there
        ws = "SELECT count(*) FROM pg_stat_replication"
        w0 = self.q1(ws)
        res, wal, _ = self.measured("mqlog", name, lambda: self.rounds(one))
        res["walsenders"] = [w0, self.q1(ws)]
        log("    %s acks=%s: %.0f records/s (rounds %s, walsenders on n1 %s)" % (
            label, acks, res["records_per_s"], res["rounds"], res["walsenders"]))
        return res, wal, warns

    def run_replication_produce(self, size):
        """rf 1 and rf 3 on a node of the cluster (n1), measured as the
        single-node batched produce is (repl_drive), beside the same
        node with its cluster settings off (measured first, for both
        value sizes, by run_replication)."""
        t3 = self.repl_topic("r_rf3_%d" % size, 3)[0]
        self.lead_on_n1("r_rf3_%d" % size)
        self.repl_topic("r_rf1_%d" % size, 1, port=self.a.pgport)
        # rf 1 acks=1 and rf 3 acks=all are the comparison; rf 3 acks=1
        # tells what the followers' load costs the leader without the wait
        confs = [("rf1", 1, "1"), ("rf3", 3, "all"), ("rf3_acks1", 3, "1")]
        out = {}
        for label, rf, acks in confs:
            out[label] = self.repl_drive(label, "r_rf%d_%d" % (rf, size), size, acks)
        # the followers end with every record: the high watermark is the
        # log end offset on each of them
        end = self.q1("SELECT log_end_offset FROM mqlog.partitions WHERE topic = %s", ("r_rf3_%d" % size,))
        for fp in [p for p in self.a.cluster_ports if p != self.a.pgport]:
            c = self.connect(port=fp)
            self.wait("the follower on port %d to reach offset %d" % (fp, end), lambda: self.q1(
                "SELECT high_watermark FROM mqlog.partitions WHERE topic = %s", ("r_rf3_%d" % size,),
                conn=c) >= end, timeout=120)
            c.close()
        off = self.cluster_off.get(size)
        base = out["rf1"][0]["records_per_s"]
        # the cluster-off row lies between two rf 1 rows with the settings
        # on: their mean is what it is compared with, so that a load that
        # grows or shrinks over the run does not decide the ratio
        ons = [x for x in (self.rf1_before.get(size), base) if x]
        on = sum(ons) / len(ons)
        for label, rf, acks in confs:
            res, wal, warns = out[label]
            self.emit("mqlog_" + label, "replicated_produce", size, wal_bytes_per_record=wal,
                      replication_factor=rf, acks=acks, cluster=True,
                      min_insync_replicas=2 if rf == 3 else None, leader="n1", elected_by_hand=(t3 != "n1"),
                      ack_warnings=warns[:3] if warns else None, warnings=len(warns),
                      ratio_to_rf1=round(res["records_per_s"] / base, 4) if rf == 3 else None,
                      ratio_to_cluster_off=round(on / off, 4) if off and rf == 1 else None,
                      rf1_before_cluster_off=self.rf1_before.get(size) if rf == 1 else None,
                      walsenders=res["walsenders"], **self.driven(res))
        for name in ("r_rf1_%d" % size, "r_rf3_%d" % size):
            self.drop_quietly("mqlog", name)

    def run_rf1_before(self):
        """rf 1 on n1 with the cluster on, before run_cluster_off, as
        repl_drive measures it: the first of the two rows that bracket
        the cluster-off row.  Sets self.rf1_before."""
        for size in VALUE_SIZES:
            name = "r_rf1b_%d" % size
            self.repl_topic(name, 1, port=self.a.pgport)
            res, wal, _ = self.repl_drive("rf1 before the cluster-off row", name, size, "1")
            self.rf1_before[size] = res["records_per_s"]
            self.emit("mqlog_rf1_before_off", "replicated_produce", size, wal_bytes_per_record=wal,
                      replication_factor=1, acks="1", cluster=True, leader="n1",
                      walsenders=res["walsenders"], **self.driven(res))
            self.drop("mqlog", name)

    def run_cluster_off(self):
        """n1 restarted with its cluster settings off (a single server,
        the other two nodes and etcd still up, idle), the rf 1 batched
        produce of both value sizes measured there as repl_drive does,
        then n1 restarted with them on.  Sets self.cluster_off."""
        self.node_restart(1, cluster_on=False)
        try:
            for size in VALUE_SIZES:
                name = "r_off_%d" % size
                self.reset("mqlog", name)
                res, wal, _ = self.repl_drive("cluster off, rf1", name, size, "1")
                self.cluster_off[size] = res["records_per_s"]
                self.emit("mqlog_rf1_cluster_off", "replicated_produce", size, wal_bytes_per_record=wal,
                          replication_factor=1, acks="1", cluster=False, leader="n1",
                          note="n1 restarted with mqlog.etcd_endpoints = '' (a single server); "
                               "n2, n3 and etcd up and idle", walsenders=res["walsenders"], **self.driven(res))
                self.drop("mqlog", name)
        finally:
            self.node_restart(1, cluster_on=True)

    def run_replication_lag(self, size):
        """One record at a time, acks=1, on the rf3 topic's leader; from
        the return of its COMMIT until a follower's mqlog.partitions shows
        a high watermark past it.  Also the commit time of one record with
        acks=all (rf3) beside acks=1 (rf1)."""
        n = self.cfg["repl_lag_n"]
        t3, p3, fol = self.repl_topic("l_rf3_%d" % size, 3)
        self.repl_topic("l_rf1_%d" % size, 1, port=p3)
        value = rand_values(1, size, random.Random(size))[0]
        prod = self.acks_conn(p3, "1")
        prod.autocommit = False
        fconn = self.connect(port=fol[0])
        lconn = self.connect(port=p3)
        lags = []
        leo_lags = []
        lhw_lags = []
        rng = random.Random(7)
        with prod.cursor() as cur, fconn.cursor() as fc, lconn.cursor() as lc:
            for i in range(n + 3):
                cur.execute("SELECT \"offset\" FROM mq_produce(%s, %s, %s, partition => 0)",
                            ("l_rf3_%d" % size, psycopg2.Binary(value), b"k%08d" % i))
                off = cur.fetchone()[0]
                prod.commit()
                t0 = time.perf_counter()
                t_leo = t_lhw = None
                while True:
                    fc.execute("SELECT high_watermark, log_end_offset FROM mqlog.partitions WHERE topic = %s",
                               ("l_rf3_%d" % size,))
                    hw, leo = fc.fetchone()
                    now = time.perf_counter()
                    if t_leo is None and leo > off:
                        t_leo = now         # the record is in the follower's log
                    if t_lhw is None:       # the leader's own high watermark
                        lc.execute("SELECT high_watermark FROM mqlog.partitions WHERE topic = %s",
                                   ("l_rf3_%d" % size,))
                        if lc.fetchone()[0] > off:
                            t_lhw = time.perf_counter()
                    if hw > off:
                        break
                    if now - t0 > 30:
                        raise RuntimeError("the follower's high watermark did not pass offset %d in 30 s" % off)
                if i >= 3:              # the first few warm the path up
                    lags.append((now - t0) * 1000)
                    leo_lags.append(((t_leo or now) - t0) * 1000)
                    lhw_lags.append(((t_lhw or now) - t0) * 1000)
                time.sleep(rng.uniform(0.005, 0.02))    # let the pipeline go idle
        prod.close()
        fconn.close()
        lconn.close()
        commit = {}
        for rf, acks in ((1, "1"), (3, "all")):
            conn = self.acks_conn(p3, acks)
            ts = []
            with conn.cursor() as cur:
                for i in range(n + 3):
                    t0 = time.perf_counter()
                    cur.execute("SELECT mq_produce(%s, %s, %s, partition => 0)",
                                ("l_rf%d_%d" % (rf, size), psycopg2.Binary(value), b"k%08d" % i))
                    cur.fetchall()
                    if i >= 3:
                        ts.append((time.perf_counter() - t0) * 1000)
            commit[rf] = ts
            conn.close()
        self.emit("mqlog_rf3", "replication_lag", size, p50_ms=pct(lags, 50), p99_ms=pct(lags, 99),
                  p90_ms=round(pct(lags, 90), 3), max_ms=round(max(lags), 3), min_ms=round(min(lags), 3),
                  samples=len(lags), follower_port=fol[0], leader=t3,
                  leo_p50_ms=round(pct(leo_lags, 50), 3), leo_p99_ms=round(pct(leo_lags, 99), 3),
                  leader_hw_p50_ms=round(pct(lhw_lags, 50), 3), leader_hw_p99_ms=round(pct(lhw_lags, 99), 3),
                  produce_acks1_rf1_p50_ms=round(pct(commit[1], 50), 3),
                  produce_acks1_rf1_p99_ms=round(pct(commit[1], 99), 3),
                  produce_acksall_rf3_p50_ms=round(pct(commit[3], 50), 3),
                  produce_acksall_rf3_p99_ms=round(pct(commit[3], 99), 3))

    def run_replication(self):
        if not self.a.cluster_ports or len(self.a.cluster_ports) < 3:
            raise RuntimeError("the replication workload needs --cluster-ports of three nodes")
        # the nodes' WAL warmed as the single server's is (warm_wal), each
        # node's: a follower pays for its new WAL files as a leader does
        for p in self.a.cluster_ports:
            self.admin.close()
            self.admin = self.connect(port=p)
            self.guarded("mqlog", "replication", 0, self.warm_wal)
        self.admin.close()
        self.admin = self.connect()
        self.cluster_off = {}
        self.rf1_before = {}
        log("== replication: rf 1 on n1, then n1 with its cluster settings off")
        self.guarded("mqlog", "replication", 0, self.run_rf1_before)
        self.guarded("mqlog", "replication", 0, self.run_cluster_off)
        for size in VALUE_SIZES:
            log("== replication, value %d bytes" % size)
            self.guarded("mqlog", "replication", size, lambda: self.run_replication_produce(size))
        self.guarded("mqlog", "replication", 100, lambda: self.run_replication_lag(100))

    # ========================================================== failover
    # Issue 12: kill -9 of a replicated partition's leader, and the time
    # until an acks=all produce succeeds on its successor.  The nodes are
    # scripts/cluster-lib.sh's (bench/run.sh passes --cluster-dir and
    # --cluster-bindir): data directories n1..n3 in the cluster's
    # directory, the pids it started in its cluster.env; a killed node is
    # started again with cl_start_node, which records the new pid there, so
    # that run.sh's cl_stop stops it at the end.  self.admin (n1) is not
    # used once a node may be dead.
    def cluster_env(self):
        """cluster.env as {"CL_PID": {1: pid, ...}, "CL_PORT": {...}, "CL_ETCD_PORT": "..."}."""
        env = {"CL_PID": {}, "CL_PORT": {}}
        with open(os.path.join(self.a.cluster_dir, "cluster.env")) as f:
            for line in f:
                m = re.match(r"(\w+)(?:\[(\d+)\])?=(.*)$", line.strip())
                if not m:
                    continue
                if m.group(2):
                    env.setdefault(m.group(1), {})[int(m.group(2))] = m.group(3)
                else:
                    env[m.group(1)] = m.group(3)
        return env

    @staticmethod
    def node_index(node):
        m = re.match(r"n(\d+)$", node or "")
        if not m:
            raise RuntimeError("node %r is not one of cluster-lib.sh's n1..n3" % node)
        return int(m.group(1))

    def fo_port(self, node):
        return int(self.cluster_env()["CL_PORT"][self.node_index(node)])

    def fo_connect(self, node, acks_all=False):
        c = psycopg2.connect(self.dsn(self.fo_port(node)) + " connect_timeout=3")
        c.autocommit = True
        with c.cursor() as cur:
            cur.execute("SET statement_timeout = '60s'")
            if acks_all:
                cur.execute("SET mqlog.acks = 'all'")
        return c

    def fo_q1(self, node, sql, args=None):
        """One value from a node, on a connection of its own."""
        c = self.fo_connect(node)
        try:
            return self.q1(sql, args, conn=c)
        finally:
            c.close()

    def fo_try(self, node, sql, args=None):
        """fo_q1, or None when the node cannot answer."""
        try:
            return self.fo_q1(node, sql, args)
        except psycopg2.Error:
            return None

    @staticmethod
    def proc_start(pid):
        """The start time of process pid (field 22 of /proc/pid/stat), or
        None when there is no such process: a pid with the same start time
        is the same process."""
        try:
            with open("/proc/%d/stat" % pid) as f:
                return f.read().rsplit(")", 1)[1].split()[19]
        except (OSError, IndexError):
            return None

    @staticmethod
    def children_of(pid):
        """[(pid, start time)] of the processes whose parent is pid."""
        out = []
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % d) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid:
                    out.append((int(d), fields[19]))
            except (OSError, IndexError, ValueError):
                pass
        return out

    def postmaster_of(self, node):
        """The pid of a node's postmaster: the one cluster.env records,
        if its postmaster.pid names it and it is a postgres process."""
        i = self.node_index(node)
        pid = self.cluster_env()["CL_PID"].get(i)
        try:
            with open(os.path.join(self.a.cluster_dir, "n%d" % i, "postmaster.pid")) as f:
                file_pid = f.readline().strip()
        except OSError:
            file_pid = None
        if not pid or pid != file_pid:
            raise RuntimeError("node %s: cluster.env says pid %s, postmaster.pid says %s" % (node, pid, file_pid))
        pid = int(pid)
        try:
            with open("/proc/%d/comm" % pid) as f:
                comm = f.read().strip()
        except OSError:
            comm = None
        if comm != "postgres":
            raise RuntimeError("node %s: pid %d is not a postgres process (%r)" % (node, pid, comm))
        return pid

    def fo_restart(self, node, orphans):
        """Start a killed node again, as cluster-lib.sh starts nodes, once
        the children of its dead postmaster have gone (they exit when they
        see it die; one left behind would keep the old shared memory
        attached and the new postmaster would refuse to start).  Returns
        how many were still there, the seconds waited for them, and how
        many had to be killed."""
        t0 = time.monotonic()
        left = [(p, st) for p, st in orphans if self.proc_start(p) == st]
        there = len(left)
        while left and time.monotonic() - t0 < 30:
            left = [(p, st) for p, st in left if self.proc_start(p) == st]
            if left:
                time.sleep(0.05)
        waited_s = time.monotonic() - t0
        killed = 0
        for p, st in left:      # still the same process, ours: the benchmark started its postmaster
            if self.proc_start(p) == st:
                log("    pid %d of the dead postmaster of %s is still there after 30 s: SIGKILL" % (p, node))
                try:
                    os.kill(p, 9)
                    killed += 1
                except OSError:
                    pass
        lib = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts", "cluster-lib.sh")
        env = dict(os.environ, CL_DIR=self.a.cluster_dir, CL_BINDIR=self.a.cluster_bindir)
        for attempt in range(3):
            r = subprocess.run(["bash", "-c", '. "$0" && cl_load && cl_start_node "$1"', lib,
                                str(self.node_index(node))], env=env, capture_output=True, text=True, timeout=180)
            if r.returncode == 0:
                log("    " + r.stdout.strip().replace("\n", "; "))
                return there, waited_s, killed
            log("    restart of %s failed (attempt %d): %s" % (node, attempt + 1, (r.stdout + r.stderr).strip()[-500:]))
            time.sleep(2)
        raise RuntimeError("node %s did not start again" % node)

    def fo_state(self, node, topic):
        """(leader, epoch, isr) of partition 0 in a node's mqlog.partitions, or None."""
        try:
            c = self.fo_connect(node)
        except psycopg2.Error:
            return None
        try:
            return self.q("SELECT leader, leader_epoch, isr FROM mqlog.partitions WHERE topic = %s AND \"partition\" = 0",
                          (topic,), conn=c)[0]
        except (psycopg2.Error, IndexError):
            return None
        finally:
            c.close()

    def fo_produce(self, conn, topic, value):
        """One autocommitted acks=all produce on conn: None if it succeeded,
        else what failed (an SQLSTATE, "warning" for a WARNING at commit,
        "connection")."""
        del conn.notices[:]
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT mq_produce(%s, %s, partition => 0)", (topic, psycopg2.Binary(value)))
                cur.fetchall()
        except psycopg2.Error as e:
            if e.pgcode:
                return e.pgcode
            return "connection"
        if any("WARNING" in n for n in conn.notices):
            del conn.notices[:]
            return "warning"
        return None

    def fo_steady(self, topic, nodes, value, timeout=180):
        """Wait until every node is alive to every node, agrees on the
        leader, the leader's ISR holds every node and an acks=all produce
        succeeds on it; returns the leader."""
        end = time.monotonic() + timeout
        why = "?"
        while time.monotonic() < end:
            states = [self.fo_state(n, topic) for n in nodes]
            alive = [self.fo_try(n, "SELECT count(*) FILTER (WHERE alive) FROM mqlog.nodes") for n in nodes]
            if any(s is None for s in states):
                why = "a node does not answer"
            elif len(set(s[0] for s in states)) != 1:
                why = "the nodes name different leaders: %s" % [s[0] for s in states]
            elif any(a != len(nodes) for a in alive):
                why = "alive nodes seen: %s" % alive
            else:
                leader = states[0][0]
                isr = states[nodes.index(leader)][2] or []
                if sorted(isr) != sorted(nodes):
                    why = "the ISR on %s is %s" % (leader, isr)
                else:
                    c = self.fo_connect(leader, acks_all=True)
                    try:
                        err = self.fo_produce(c, topic, value)
                    finally:
                        c.close()
                    if err is None:
                        return leader
                    why = "an acks=all produce on %s: %s" % (leader, err)
            time.sleep(0.2)
        raise RuntimeError("no steady state in %d s before a kill: %s" % (timeout, why))

    def fo_coordinator(self, node):
        """The node that holds the elector's key in etcd, or None."""
        try:
            url = self.fo_q1(node, "SELECT current_setting('mqlog.etcd_endpoints')").split(",")[0]
            name = self.fo_q1(node, "SELECT current_setting('mqlog.cluster_name')")
            r = subprocess.run(["etcdctl", "--endpoints", url, "--dial-timeout=2s", "--command-timeout=3s", "get",
                                "--print-value-only", "/mqlog/%s/elector" % name],
                               capture_output=True, text=True, timeout=10)
            return json.loads(r.stdout.strip()).get("node") if r.stdout.strip() else None
        except (OSError, ValueError, subprocess.SubprocessError, psycopg2.Error, AttributeError):
            return None

    def fo_round(self, topic, nodes, want, r, value, samples):
        """One kill: the leader moved to `want` first (mq_elect_leader on
        the current leader) unless it leads already, kill -9 of its
        postmaster, acks=all produce tried on every survivor until one
        succeeds, then the node started again and back in the ISR.  The
        kill's sample goes into samples once measured, before the restart
        (which completes it), so that a failed restart does not lose it."""
        leader = self.fo_steady(topic, nodes, value)
        elected_by_hand = leader != want
        for attempt in range(5 if leader != want else 0):
            try:
                self.fo_q1(leader, "SELECT mq_elect_leader(%s, 0, %s)", (topic, want))
            except psycopg2.Error as e:
                log("    mq_elect_leader(%s, 0, %s) on %s: %s" % (topic, want, leader, str(e).strip().splitlines()[0]))
                time.sleep(1)
            leader = self.fo_steady(topic, nodes, value)
            if leader == want:
                break
        if leader != want:
            log("    %s still leads; it is the victim instead of %s" % (leader, want))
        victim = leader
        survivors = [n for n in nodes if n != victim]
        st = self.fo_state(survivors[0], topic)
        epoch0 = st[1] if st else None
        coord = self.fo_coordinator(survivors[0])
        conns = {n: self.fo_connect(n, acks_all=True) for n in survivors}
        pid = self.postmaster_of(victim)
        orphans = self.children_of(pid)
        fails = {}
        attempts = 0
        seen_s = first_s = successor = None
        t0 = time.monotonic()
        os.kill(pid, 9)
        interrupted = False
        try:
            while time.monotonic() - t0 < FAILOVER_TIMEOUT_S and first_s is None:
                for n in survivors:
                    if seen_s is None:
                        st = None
                        try:
                            if conns[n] is not None:
                                st = self.q("SELECT leader FROM mqlog.partitions WHERE topic = %s AND \"partition\" = 0",
                                            (topic,), conn=conns[n])[0][0]
                        except psycopg2.Error:
                            pass
                        if st is not None and st != victim:
                            seen_s = time.monotonic() - t0
                    try:
                        if conns[n] is None:
                            conns[n] = self.fo_connect(n, acks_all=True)
                        err = self.fo_produce(conns[n], topic, value)
                    except psycopg2.Error:
                        err = "connection"
                    attempts += 1
                    if err is None:
                        first_s = time.monotonic() - t0
                        successor = n
                        break
                    fails[err] = fails.get(err, 0) + 1
                    if err == "connection":
                        try:
                            conns[n].close()
                        except Exception:  # noqa: BLE001 - it is gone either way
                            pass
                        conns[n] = None
                if first_s is None:
                    time.sleep(FAILOVER_NAP_S)
            log("    kill %d: %s%s (pid %d); %s" % (
                r + 1, victim, ", the coordinator," if coord == victim else "", pid,
                "first acks=all produce on %s after %.3f s (new leader seen after %s s), %d attempts, failures %s" % (
                    successor, first_s, "%.3f" % seen_s if seen_s is not None else "?", attempts, fails)
                if first_s is not None else "NO successful produce in %d s; failures %s" % (FAILOVER_TIMEOUT_S, fails)))
            sample = dict(round=r + 1, victim=victim, victim_was_coordinator=(coord == victim), coordinator=coord,
                          moved_there_by_mq_elect_leader=elected_by_hand, successor=successor,
                          epoch_before=epoch0, epoch_after=None,
                          first_ack_s=round(first_s, 3) if first_s is not None else None,
                          leader_seen_s=round(seen_s, 3) if seen_s is not None else None,
                          attempts=attempts, failures=fails, children=len(orphans))
            samples.append(sample)
        except (KeyboardInterrupt, SystemExit):
            # Ctrl-C: no restart (a postmaster started now might escape
            # cluster.env); bench/run.sh stops what is up
            interrupted = True
            raise
        finally:
            for c in conns.values():
                if c is not None:
                    c.close()
            if not interrupted:
                t_restart = time.monotonic()
                orphans_left, orphans_wait_s, orphans_killed = self.fo_restart(victim, orphans)
        new = self.fo_state(successor, topic) if successor else None
        sample["epoch_after"] = new[1] if new else None
        if successor and new and new[0] != successor:
            raise RuntimeError("the produce succeeded on %s, whose mqlog.partitions names %s the leader" % (
                successor, new[0]))
        # back in the ISR of its successor (or of whoever leads now)
        rejoin_s = None
        end = time.monotonic() + 180
        while time.monotonic() < end:
            st = self.fo_state(successor or survivors[0], topic)
            if st and st[0] and st[0] != victim:
                lst = self.fo_state(st[0], topic)
                if lst and victim in (lst[2] or []) and len(lst[2]) == len(nodes):
                    rejoin_s = time.monotonic() - t_restart
                    break
            time.sleep(0.2)
        sample.update(children_left_at_restart=orphans_left, children_wait_s=round(orphans_wait_s, 3),
                      children_killed=orphans_killed,
                      rejoin_isr_s=round(rejoin_s, 3) if rejoin_s is not None else None)
        log("      started again (%d of the %d children of the dead postmaster were still there, waited %.2f s); "
            "back in the ISR %s" % (orphans_left, len(orphans), orphans_wait_s,
                                    "after %.1f s" % rejoin_s if rejoin_s is not None else "NOT within 180 s"))
        if rejoin_s is None:
            raise RuntimeError("%s did not come back into the ISR of %s within 180 s" % (victim, topic))

    def run_failover(self):
        if not self.a.cluster_dir or not self.a.cluster_bindir:
            raise RuntimeError("the failover workload needs --cluster-dir and --cluster-bindir (bench/run.sh passes them)")
        kills = self.cfg["failover_kills"]
        nodes = ["n%d" % i for i in sorted(self.cluster_env()["CL_PORT"])]
        topic = "failover"
        log("== failover: %d kills of the leader of a topic with replication factor 3, min.insync.replicas 2" % kills)
        first, _, _ = self.repl_topic(topic, 3)
        ttl = {}
        for n in nodes:     # (setting, mqlog's default), s
            ttl[n] = tuple(int(x) for x in self.fo_q1(n, "SELECT setting || '/' || boot_val FROM pg_settings "
                                                         "WHERE name = 'mqlog.etcd_lease_ttl'").split("/"))
        ttls = sorted(set(v[0] for v in ttl.values()))
        boot = sorted(set(v[1] for v in ttl.values()))
        log("   mqlog.etcd_lease_ttl on the nodes: %s (mqlog's default: %s)" % (
            ", ".join("%s %d s" % (n, ttl[n][0]) for n in nodes), "/".join(map(str, boot))))
        # victims in turn: the first leader, then the other nodes
        order = [first] + [n for n in nodes if n != first]
        value = rand_values(1, 100, random.Random(12))[0]
        samples = []
        error = None
        try:
            for r in range(kills):
                self.fo_round(topic, nodes, order[r % len(order)], r, value, samples)
        except Exception as e:  # noqa: BLE001 - the row keeps the kills measured before
            traceback.print_exc(file=sys.stderr)
            error = "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else "")
        try:
            self.admin.close()
        except Exception:  # noqa: BLE001
            pass
        try:
            self.admin = self.connect()
        except psycopg2.Error:
            pass
        times = [s["first_ack_s"] for s in samples if s["first_ack_s"] is not None]
        missed = len(samples) - len(times)
        seen = [s["leader_seen_s"] for s in samples if s["leader_seen_s"] is not None]
        extra = dict(error=error) if error else {}
        self.emit("mqlog_rf3", "failover", 100, replication_factor=3, min_insync_replicas=2,
                  kills=len(samples), kills_planned=kills, failover_s=times, no_success=missed,
                  median_s=round(statistics.median(times), 3) if times else None,
                  max_s=round(max(times), 3) if times else None,
                  min_s=round(min(times), 3) if times else None,
                  leader_seen_median_s=round(statistics.median(seen), 3) if seen else None,
                  leader_seen_max_s=round(max(seen), 3) if seen else None,
                  lease_ttl_s=ttls[0] if len(ttls) == 1 else ttls, lease_ttl_default_s=boot[0] if boot else None,
                  lease_ttl_is_default=(ttls == boot),
                  goal_s=FAILOVER_GOAL_S,
                  goal_met=(bool(times) and not missed and not error and max(times) < FAILOVER_GOAL_S),
                  nap_ms=int(FAILOVER_NAP_S * 1000), timeout_s=FAILOVER_TIMEOUT_S,
                  kill_samples=samples, **extra)

    # ============================================================== WAL
    def warm_wal(self):
        """Fill the WAL directory once, before any rate is measured.  A
        fresh cluster creates each new 16 MB WAL file by writing it full of
        zeroes (XLogFileInit, wal_init_zero), in the backend that needs it:
        23 % of mqlog's batched produce in a profile of a fresh server,
        gone once checkpoints recycle old files into new ones, as on any
        server that has run a while.  Whoever is measured first would pay
        it (mqlog is), the later systems much less.  So the WAL is written
        to once, as logical messages that nothing decodes, and a checkpoint
        recycles those files for the runs (up to max_wal_size)."""
        n = self.cfg["warm_wal_mb"] // 8
        t0 = time.time()
        w0 = self.lsn()
        for _ in range(n):
            self.q("SELECT pg_logical_emit_message(false, 'mqbench.warm', repeat('x', 8388608))")
        self.q("CHECKPOINT")
        log("== WAL warmed: %.0f MB written and recycled in %.1f s" % ((self.lsn() - w0) / 1e6, time.time() - t0))

    # ============================================================== main
    def main(self):
        t0 = time.time()
        self.setup()
        if self.a.cluster_ports:
            if "replication" in self.workloads:
                self.run_replication()
            if "failover" in self.workloads:
                self.guarded("mqlog", "failover", 100, self.run_failover)
            log("== done in %.0f s" % (time.time() - t0))
            self.out.close()
            return
        systems = [s for s in SYSTEMS if s in self.only]
        if any(w in self.workloads for w in ("produce_batch", "produce_single", "json", "sustained", "scale",
                                             "kafka")):
            self.warm_wal()
        for size in VALUE_SIZES:
            log("== value %d bytes" % size)
            lits = self.batch_literals(self.cfg["records"], size, size)
            for s in systems:
                name = "b_%s_%d" % (s, size)
                self.guarded(s, "produce_batch", size, lambda: self.run_produce_batch(s, size, name))
            self.guarded("floor", "produce_batch", size, lambda: self.run_produce_batch("floor", size, "floor"))
            self.guarded("wal_floor", "produce_batch", size,
                         lambda: self.run_produce_batch("wal_floor", size, "wal_floor"))
            # two producers into one table, queue, stream or one-partition
            # topic; and mqlog's two producers on two partitions
            for s in systems + ["floor", "wal_floor"]:
                name = "b2_%s_%d" % (s, size)
                self.guarded(s, "produce_batch", size, lambda: self.run_produce_batch(s, size, name, clients=2),
                             clients=2)
                self.drop_quietly(s, name)
            if "mqlog" in systems:
                name = "b2p_mqlog_%d" % size
                self.guarded("mqlog", "produce_batch", size, lambda: self.run_produce_batch(
                    "mqlog", size, name, clients=2, partitions=2), clients=2, partitions=2)
                self.drop_quietly("mqlog", name)
            for s in systems:
                name = "b_%s_%d" % (s, size)
                self.guarded(s, "consume", size, lambda: self.run_consume(s, size, name))
                if s == "mqlog":
                    self.guarded(s, "consume_fetch", size, lambda: self.run_consume_fetch(size, name))
            if "heap_log" in systems:
                self.guarded("floor", "consume", size, lambda: self.run_consume_floor(size, "b_heap_log_%d" % size))
            # a typical Python client, beside the driver's figures
            for s in [x for x in ("mqlog", "heap_log") if x in systems]:
                name = "p_%s_%d" % (s, size)
                self.guarded(s, "py_produce_batch", size, lambda: self.run_py_produce_batch(s, size, lits, name))
                self.guarded(s, "py_consume", size, lambda: self.run_py_consume(s, size, name))
            self.guarded("floor", "py_produce_batch", size, lambda: self.run_py_produce_floor(size, lits))
            for clients in (1, 8):
                for s in systems + ["floor"]:
                    self.guarded(s, "produce_single", size, lambda: self.run_single(s, size, clients),
                                 clients=clients)
            for s in systems:
                self.guarded(s, "latency", size, lambda: self.run_latency(s, size))
            # free the space of this size's runs before the next
            for s in systems:
                for pfx in ("b", "s", "l", "p"):
                    self.drop_quietly(s, "%s_%s_%d" % (pfx, s, size))
        if "json" in self.workloads:
            log("== JSON-like values, compressed and not")
            jl = self.json_literals(self.cfg["records"], 7)
            for codec in JSON_CODECS:
                self.guarded("mqlog", "json", 0, lambda: self.run_json("mqlog", codec, jl))
            self.guarded("heap_log", "json", 0, lambda: self.run_json("heap_log", None, jl))
        if "scale" in self.workloads and "mqlog" in systems:
            self.run_scale()
        if "kafka" in self.workloads and "mqlog" in systems and self.a.kafka_port:
            for size in VALUE_SIZES:
                self.guarded("mqlog", "kafka", size, lambda: self.run_kafka_c(size))
                self.guarded("mqlog", "kafka", size, lambda: self.run_kafka(size))
        if "sustained" not in self.workloads:
            log("== done in %.0f s" % (time.time() - t0))
            self.out.close()
            return
        runs = [(s, False) for s in systems]
        if "mqlog" in systems and self.a.mode != "soak":
            runs.insert(0, ("mqlog", True))
        per = max(10, self.cfg["sustained_s"] // len(runs))
        log("== sustained run: %d s in all, %d s per run" % (self.cfg["sustained_s"], per))
        for s, inline in runs:
            if s == "mqlog":
                # inline: the worker must keep out (a day between passes);
                # otherwise the worker enforces retention once a second
                self.set_naptime(86400 if inline else 1)
            self.guarded(s, "sustained_inline" if inline else "sustained", 100,
                         lambda: self.run_sustained(s, per, inline))
        self.set_naptime(None)
        log("== done in %.0f s" % (time.time() - t0))
        self.out.close()

    # ======================================= Kafka clients (issue 15)
    def kafka_produce(self, Producer, bootstrap, name, n, value, idempotent, in_flight=1000000):
        """n records of value to partition 0 of name, librdkafka batching
        them (linger 5 ms), at most in_flight requests unanswered (what
        idempotence limits librdkafka to: 5); the seconds it took until all
        were acknowledged"""
        errors = []
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all" if idempotent else 1,
                      "batch.num.messages": 10000, "batch.size": 1000000,
                      "queue.buffering.max.messages": 1000000, "queue.buffering.max.kbytes": 1048576,
                      "max.in.flight.requests.per.connection": in_flight,
                      "compression.type": "none", "enable.idempotence": idempotent})
        t0 = time.perf_counter()
        for i in range(n):
            while True:
                try:
                    p.produce(name, value, partition=0,
                              on_delivery=lambda err, msg: errors.append(err) if err else None)
                    break
                except BufferError:
                    p.poll(0.01)
            if i % 10000 == 0:
                p.poll(0)
        left = p.flush(120)
        dt = time.perf_counter() - t0
        if left or errors:
            raise RuntimeError("%d records not delivered, %d errors (first: %s)" % (left, len(errors),
                                                                                   errors[0] if errors else None))
        if int(self.q1("SELECT mq_latest_offset(%s, 0)", (name,))) != n:
            raise RuntimeError("the topic does not hold the %d records the client was told of" % n)
        return dt

    RDK_PRODUCED = re.compile(r"% (\d+) messages produced \((\d+) bytes\), (\d+) delivered "
                              r"\(offset (-?\d+), (\d+) failed\) in (\d+)ms: (\d+) msgs/s and ([\d.]+) MB/s")
    RDK_CONSUMED = re.compile(r"% (\d+) messages \((\d+) bytes\) consumed in (\d+)ms: (\d+) msgs/s "
                              r"\(([\d.]+) MB/s\)")

    def rdkafka_performance(self, args, pattern):
        """Run librdkafka's rdkafka_performance (make bench-rdkafka) with
        args and return the match of pattern in its summary line; raise
        with its output when there is none."""
        cmd = [self.a.rdkafka_perf, "-b", "127.0.0.1:%d" % self.a.kafka_port] + args
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        m = None
        for line in p.stdout.splitlines():
            m = pattern.search(line) or m
        if not m:
            raise RuntimeError("rdkafka_performance exited with %d and no summary: %s" % (
                p.returncode, (p.stderr + p.stdout).strip()[-400:]))
        return m

    def kafka_topic(self, name):
        """A fresh one-partition topic that the listener's role
        (mqlog.kafka_role, created here if need be) may produce to and
        consume from."""
        self.reset("mqlog", name)
        self.q("DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '%s') THEN "
               "CREATE ROLE %s NOLOGIN; END IF; END$$" % (KAFKA_ROLE, KAFKA_ROLE))
        self.q("SELECT mq_grant(%s, %s, 'produce'), mq_grant(%s, %s, 'consume')",
               (name, KAFKA_ROLE, name, KAFKA_ROLE))

    def run_kafka_c(self, size):
        """The Kafka client in C: librdkafka's own benchmark,
        rdkafka_performance, built from Debian's example source.  -P: the
        mode's c_records records of `size` bytes (the count of the
        driver's batched produce and of the Python client here) to
        partition 0 with acks=1, with the Python producer's batching
        settings (linger 5 ms, up to 10,000 records a batch, no
        compression); the rate is the tool's, from its first produce() to
        the last delivery report.  Then -C: a consumer of partition 0 from
        offset 0 (no group) until it has the same count, with the Python
        consumer's fetch settings; its clock starts at the first record.
        The mode's rounds of each (a produce round appends to the topic,
        each consume round reads the first c_records again), the median."""
        name = "kc_mqlog_%d" % size
        self.kafka_topic(name)
        n = self.cfg["c_records"][size]
        prod = ["-P", "-t", name, "-p", "0", "-s", str(size), "-c", str(n), "-a", "1", "-z", "none",
                "-X", "linger.ms=5", "-X", "batch.num.messages=10000", "-X", "batch.size=1000000",
                "-X", "queue.buffering.max.messages=1000000", "-X", "queue.buffering.max.kbytes=1048576"]
        cons = ["-C", "-t", name, "-p", "0", "-o", "beginning", "-c", str(n),
                "-X", "fetch.max.bytes=52428800", "-X", "max.partition.fetch.bytes=10485760",
                "-X", "fetch.wait.max.ms=100"]
        client = "rdkafka_performance (librdkafka %s, C)" % self.librdkafka_version()

        def produce():
            m = self.rdkafka_performance(prod, self.RDK_PRODUCED)
            sent, delivered, failed = int(m.group(1)), int(m.group(3)), int(m.group(5))
            if delivered != n or failed or sent != n:
                raise RuntimeError("rdkafka_performance -P: %d of %d records delivered, %d failed" % (
                    delivered, n, failed))
            return dict(records=n, seconds=int(m.group(6)) / 1000.0, records_per_s=float(m.group(7)),
                        mb_per_s=float(m.group(8)))

        def consume():
            m = self.rdkafka_performance(cons, self.RDK_CONSUMED)
            if int(m.group(1)) < n:
                raise RuntimeError("rdkafka_performance -C: %s of %d records" % (m.group(1), n))
            return dict(records=n, seconds=int(m.group(3)) / 1000.0, records_per_s=float(m.group(4)),
                        mb_per_s=float(m.group(5)))
        res, wal, disk = self.measured("mqlog", name, lambda: self.rounds(produce))
        if int(self.q1("SELECT mq_latest_offset(%s, 0)", (name,))) != res["total_records"]:
            raise RuntimeError("the topic does not hold the %d records the tool was told of" % res["total_records"])
        self.emit("mqlog", "kafka_c_produce", size, wal_bytes_per_record=wal, disk_bytes_per_record=disk,
                  client=client, acks="1", partitions=1,
                  **{k: res[k] for k in ("records_per_s", "mb_per_s", "records", "seconds", "rounds",
                                         "total_records")})
        res = self.rounds(consume)
        self.emit("mqlog", "kafka_c_consume", size, client=client, partitions=1,
                  **{k: res[k] for k in ("records_per_s", "mb_per_s", "records", "seconds", "rounds",
                                         "total_records")})
        self.drop_quietly("mqlog", name)

    @staticmethod
    def librdkafka_version():
        """The installed librdkafka's version, as dpkg knows it."""
        try:
            return subprocess.run(["dpkg-query", "-W", "-f=${Version}", "librdkafka1"], capture_output=True,
                                  text=True, timeout=10).stdout.strip() or "?"
        except (OSError, subprocess.SubprocessError):
            return "?"

    def run_kafka(self, size):
        """Produce through a Kafka client (confluent-kafka, that is
        librdkafka's batching, linger 5 ms, acks=1, no compression) to one
        partition of a topic, then consume it back with librdkafka's
        fetcher, both through mqlog's listener (bench/run.sh sets
        mqlog.kafka_listen): records/s and MB/s beside the driver's
        mq_produce_batch and mq_poll rows.  The client is Python calling
        librdkafka, one produce() call a record: its rate is the client's as
        much as the server's, which the floor-less rows say."""
        from confluent_kafka import Consumer, Producer, TopicPartition  # Debian's python3-confluent-kafka
        name = "k_mqlog_%d" % size
        self.kafka_topic(name)
        bootstrap = "127.0.0.1:%d" % self.a.kafka_port
        n = self.cfg["c_records"][size]
        value = rand_values(1, size, random.Random(11))[0]
        dt = self.kafka_produce(Producer, bootstrap, name, n, value, False)
        self.emit("mqlog", "kafka_produce", size, records_per_s=n / dt, mb_per_s=n * size / dt / 1e6,
                  records=n, client="confluent-kafka (librdkafka %s)" % __import__("confluent_kafka").libversion()[0])
        # the same with enable.idempotence (acks=all: one node, the same
        # commit), and its control: without it but with the 5 requests in
        # flight idempotence allows; the two differ by what the
        # producer-state check costs each batch
        for workload, idempotent in (("kafka_produce_5_in_flight", False), ("kafka_produce_idempotent", True)):
            other = "%s_%s" % (name, "idem" if idempotent else "five")
            self.reset("mqlog", other)
            self.q("SELECT mq_grant(%s, %s, 'produce')", (other, KAFKA_ROLE))
            dt = self.kafka_produce(Producer, bootstrap, other, n, value, idempotent, in_flight=5)
            self.emit("mqlog", workload, size, records_per_s=n / dt, mb_per_s=n * size / dt / 1e6, records=n,
                      client="confluent-kafka (librdkafka), 5 in flight%s" % (", enable.idempotence" if idempotent else ""))
            self.drop_quietly("mqlog", other)
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-kafka", "enable.auto.commit": False,
                      "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760,
                      "fetch.wait.max.ms": 100, "queued.max.messages.kbytes": 1048576})
        c.assign([TopicPartition(name, 0, 0)])
        got = 0
        t0 = time.perf_counter()
        deadline = t0 + 300
        while got < n and time.perf_counter() < deadline:
            for m in c.consume(num_messages=10000, timeout=1.0):
                if m.error() is None:
                    got += 1
        dt = time.perf_counter() - t0
        c.close()
        if got < n:
            raise RuntimeError("consumed %d of %d records" % (got, n))
        self.emit("mqlog", "kafka_consume", size, records_per_s=n / dt, mb_per_s=n * size / dt / 1e6,
                  records=n, client="confluent-kafka (librdkafka)")
        self.drop_quietly("mqlog", name)

    # ================================================= scale (issue 16)
    def catalog_bytes(self):
        """What topics cost the catalogs: the relations that a segment adds
        rows to, and mqlog's chain, with their indexes."""
        return self.q1("SELECT sum(pg_total_relation_size(c))::bigint FROM unnest(ARRAY['pg_class', "
                       "'pg_attribute', 'pg_type', 'pg_depend', 'pg_description', 'mqlog.segment']::regclass[]) c")

    def partition_shm_bytes(self):
        """Shared memory of the partitions in use now (mqlog.shared_memory)."""
        return self.q1("SELECT in_use * bytes_per_entry FROM mqlog.shared_memory WHERE area = 'partitions'")

    def run_scale(self):
        log("== scale: partitions %s, groups %s" % (self.cfg["scale_partitions"], self.cfg["scale_groups"]))
        for n in self.cfg["scale_partitions"]:
            self.guarded("mqlog", "scale", 100, lambda: self.run_scale_partitions(n), partitions=n)
        for g in self.cfg["scale_groups"]:
            self.guarded("mqlog", "scale", 100, lambda: self.run_scale_groups(g), groups=g)

    def run_scale_partitions(self, n):
        """One topic of n partitions: its creation (the worker makes the
        segments beyond the first 200), its catalog and shared memory,
        batched produce by the driver with each call to the next
        partition (a transaction per call, so every call touches another
        partition), the read back by a group of one member per 512
        partitions, and the drop with the orphan sweep."""
        name = "sc_p%d" % n
        self.drop_quietly("mqlog", name)
        self.sweep()
        cat0, shm0 = self.catalog_bytes(), self.partition_shm_bytes()
        t0 = time.time()
        self.q("SELECT mq_create_topic(%s, %s)", (name, n))
        self.wait("the segments of %s" % name, lambda: self.q1(
            "SELECT count(*) FROM mqlog.partitions WHERE topic = %s AND segment_count = 0", (name,)) == 0,
            timeout=600)
        create_s = time.time() - t0
        cat1 = self.catalog_bytes()
        res, wal, disk = self.measured("mqlog", name, lambda: self.rounds(lambda: self.drive(
            "mqlog", "produce_batch", name, 100, seconds=self.cfg["batch_s"], records=BATCH, batch=BATCH,
            partitions=n, spread=True)))
        touched = self.q1("SELECT count(*) FROM mqlog.partitions WHERE topic = %s AND high_watermark > 0", (name,))
        self.emit("mqlog", "scale_produce", 100, wal_bytes_per_record=wal, disk_bytes_per_record=disk,
                  create_s=round(create_s, 2), catalog_bytes=cat1 - cat0,
                  catalog_bytes_per_partition=round((cat1 - cat0) / n, 1),
                  shm_bytes=self.partition_shm_bytes() - shm0, partitions_written=touched, **self.driven(res))
        # One member, which is assigned at most 512 partitions, reads what
        # the consume workload reads (c_records), at most nine tenths of
        # what its partitions hold (the records are spread evenly), in the
        # mode's rounds, rewound between them: the median, as for the
        # consume workload.  A short read would measure the member's first
        # touch of each partition (its position loaded, its segment opened:
        # about 0.1 ms each, paid once per session) and the machine's noise
        # rather than the rate: 50,000 records over 1,000 partitions took
        # 0.1 s, half of its polls the first of their partition.  (Several
        # members would rebalance when the first of them ends, and fail
        # the other's commit.)
        total = self.q1("SELECT sum(high_watermark)::bigint FROM mqlog.partitions WHERE topic = %s", (name,))
        total = min(total * min(n, 512) // n * 9 // 10, self.cfg["c_records"][100])
        group = "g_" + name
        r = self.rounds(lambda: self.drive("mqlog", "consume", name, 100,
                                           records=total // CONSUME_BATCH * CONSUME_BATCH or total,
                                           batch=CONSUME_BATCH, group=group),
                        lambda: self.q("SELECT mq_reset_offsets(%s, %s, 'earliest', true)", (group, name)))
        d = self.driven(r)
        d["partitions"] = n         # the topic's (the driver's counts produce targets)
        self.emit("mqlog", "scale_consume", 100, **d)
        t1 = time.time()
        self.drop("mqlog", name)
        self.sweep()
        self.emit("mqlog", "scale_drop", 100, partitions=n, drop_s=round(time.time() - t1, 2),
                  catalog_bytes_left=self.catalog_bytes() - cat1)

    def sweep(self):
        """Drop what dropped topics left to the orphan sweep, batch after batch."""
        while self.q1("SELECT count(*) FROM mq_run_maintenance() WHERE action IN ('drop-orphan', 'more')"):
            pass

    def run_scale_groups(self, g):
        """g consumer groups tail one topic of 8 partitions while the
        driver produces to it: the produce rate beside them, and how fast
        every group gets every record (fan-out).  A consumer thread
        polls its share of the groups in turn (a session is a member of
        at most mqlog.max_groups_per_session groups)."""
        name = "sc_g%d" % g
        self.reset("mqlog", name, partitions=8)
        per = max(1, min(self.q1("SELECT current_setting('mqlog.max_groups_per_session')::int"), 8))
        groups = ["g%d_%s" % (i, name) for i in range(g)]
        shares = [groups[i:i + per] for i in range(0, g, per)]
        got = [0] * len(shares)
        stop = threading.Event()
        errors = []

        def tail(k):
            try:
                c = self.connect(autocommit=False)
                with c.cursor() as cur:
                    while not stop.is_set():
                        n = 0
                        for grp in shares[k]:
                            cur.execute("SELECT count(*) FROM mq_poll(%s, %s, 500)", (grp, name))
                            n += cur.fetchone()[0]
                            cur.execute("SELECT mq_commit(%s)", (grp,))
                            c.commit()
                        got[k] += n
                        if n == 0:
                            time.sleep(0.01)
                c.close()
            except Exception as e:  # noqa: BLE001 - reported in the row
                errors.append("%s: %s" % (type(e).__name__, e))
        threads = [threading.Thread(target=tail, args=(k,), daemon=True) for k in range(len(shares))]
        for t in threads:
            t.start()
        self.wait("%d groups to join" % g, lambda: self.q1(
            "SELECT count(DISTINCT group_id) FROM mqlog.group_members WHERE group_id LIKE %s",
            ("%_" + name,)) == g or errors, timeout=120)
        t0 = time.time()
        res = self.drive("mqlog", "produce_batch", name, 100, seconds=self.cfg["batch_s"], records=BATCH,
                         batch=BATCH, partitions=8, spread=True)
        want = res["records"] * g
        try:
            self.wait("every group to read every record", lambda: sum(got) >= want or errors, timeout=300)
        finally:
            stop.set()
            for t in threads:
                t.join(30)
        if errors:
            raise RuntimeError(errors[0])
        took = time.time() - t0
        self.emit("mqlog", "scale_groups", 100, groups=g, consumers=len(shares), delivered=sum(got),
                  delivered_per_s=round(sum(got) / took, 1), fanout_s=round(took, 2), **self.driven(res))
        self.drop("mqlog", name)

    def set_naptime(self, secs):
        if secs is None:
            self.q("ALTER SYSTEM RESET mqlog.maintenance_naptime")
        else:
            self.q("ALTER SYSTEM SET mqlog.maintenance_naptime = %d" % secs)
        self.q("SELECT pg_reload_conf()")
        time.sleep(1.5)

    def drop_quietly(self, system, name):
        """drop(), and a fresh admin connection if it failed."""
        try:
            self.drop(system, name)
        except Exception:  # noqa: BLE001 - a failed drop costs space, not the run
            self.admin = self.connect()

    def drop(self, system, name):
        if system == "mqlog":
            if self.q1("SELECT count(*) FROM mqlog.topics WHERE topic = %s", (name,)):
                self.q("SELECT mq_drop_topic(%s)", (name,))
        elif system in ("heap_log", "skip_locked"):
            self.q("DROP TABLE IF EXISTS %s" % name)
            self.q("DROP TABLE IF EXISTS %s_c" % name)
        elif system == "pgq":
            for n in (name, name + "_c"):
                if self.q1("SELECT count(*) FROM pgq.queue WHERE queue_name = %s", (n,)):
                    self.q("SELECT pgq.unregister_consumer(%s, 'c')", (n,))
                    self.q("SELECT pgq.drop_queue(%s, true)", (n,))
        elif system == "redis":
            r = self.redis()
            r.cmd("DEL", name)
            r.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=sorted(MODES), default="quick")
    ap.add_argument("--pghost", required=True, help="PostgreSQL socket directory")
    ap.add_argument("--pgport", type=int, required=True)
    ap.add_argument("--redis-port", type=int, required=True)
    ap.add_argument("--redis-ok", type=int, default=1)
    ap.add_argument("--work", required=True, help="scratch directory (the JSON workload's values file)")
    ap.add_argument("--driver", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "driver", "mqbench"),
                    help="the C driver (make bench-driver builds it)")
    ap.add_argument("--rdkafka-perf", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "rdkafka",
                                                            "rdkafka_performance"),
                    help="librdkafka's rdkafka_performance (make bench-rdkafka builds it): the kafka workload's C client")
    ap.add_argument("--out", required=True, help="JSON lines output")
    ap.add_argument("--append", action="store_true", help="append to --out instead of rewriting it")
    ap.add_argument("--rounds", type=int, default=0,
                    help="driver runs of each rate measurement, the median reported (default: quick 1, full 3)")
    ap.add_argument("--dbname", default="bench", help="the database (postgres for the cluster's nodes)")
    ap.add_argument("--kafka-port", type=int, default=0,
                    help="where the server's Kafka listener is, on 127.0.0.1 (the kafka workload; 0: not run)")
    ap.add_argument("--cluster-ports", default="",
                    help="the replication workload only: the ports of the cluster's three nodes, n1 first, "
                         "comma-separated, their sockets in --pghost; --pgport is n1's")
    ap.add_argument("--cluster-dir", default="",
                    help="the failover workload only: the cluster's directory (scripts/cluster-lib.sh's CL_DIR, "
                         "with cluster.env and the nodes' data directories n1..n3)")
    ap.add_argument("--cluster-bindir", default="",
                    help="the failover workload only: the server binaries that restart a killed node (CL_BINDIR)")
    ap.add_argument("--failover-kills", type=int, default=0,
                    help="leaders the failover workload kills (default: quick 3, full 5)")
    ap.add_argument("--systems", default="", help="comma-separated subset of " + ",".join(SYSTEMS))
    ap.add_argument("--workloads", default="", help="comma-separated subset of " + ",".join(WORKLOADS) +
                    " (consume reads what produce_batch wrote)")
    args = ap.parse_args()
    args.cluster_ports = [int(p) for p in args.cluster_ports.split(",") if p]
    Bench(args).main()


if __name__ == "__main__":
    main()
