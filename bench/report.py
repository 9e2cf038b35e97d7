#!/usr/bin/python3
"""Turn bench/results/latest.jsonl into the Markdown table and the PNG.

    bench/report.py results/latest.jsonl --md results/latest.md --png results/latest.png

Markdown: mqlog's ratio to each peer per workload, the C driver's floor
beside mqlog, the Python client's rows, latency, WAL and disk bytes per
record, the sustained run, the replication and failover workloads, and
each target of issues 13 and 6 marked met or not met.  PNG (matplotlib,
Debian's python3-matplotlib): throughput per system per workload (the
floor too), latency, bytes per record, and the sustained run over time.  Works on partial results: a missing or failed row shows as "—" or
"error" and its target as "not measured".
"""

import argparse
import json
import os
import sys

SYSTEMS = ["mqlog", "heap_log", "skip_locked", "pgq", "redis"]
PEERS = SYSTEMS[1:]
LABEL = {
    "mqlog": "mqlog",
    "heap_log": "heap log",
    "skip_locked": "SKIP LOCKED queue",
    "pgq": "PgQ",
    "redis": "Redis Streams",
    "floor": "floor (nothing stored)",
    "wal_floor": "WAL floor (the bytes written to the WAL once)",
}
WORKLOADS = [  # (workload, clients, label)
    ("produce_batch", 1, "batched produce (1000/call)"),
    ("produce_batch", 2, "batched produce (1000/call), 2 clients"),
    ("produce_single", 1, "single-record produce, 1 client"),
    ("produce_single", 8, "single-record produce, 8 clients"),
    ("consume", 1, "consume 500/batch + commit/ack"),
]
FLOOR_ROWS = [wl for wl in WORKLOADS if wl[0].startswith("produce")]
KEY_BYTES = 9   # every record carries a 9-byte key ("k" and 8 digits)


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                rows.append(json.loads(line))
    return rows


class Results:
    def __init__(self, rows):
        self.rows = rows
        self.meta = rows[0] if rows else {}

    def get(self, system, workload, value_bytes=100, clients=None, partitions=1):
        for r in self.rows:
            if (r["system"] == system and r["workload"] == workload and r["value_bytes"] == value_bytes
                    and (clients is None or r.get("clients") == clients)
                    and r.get("partitions", 1) == partitions):
                return r
        return None

    def val(self, system, workload, field, value_bytes=100, clients=None, partitions=1):
        r = self.get(system, workload, value_bytes, clients, partitions)
        if r is None or r.get("error"):
            return None
        return r.get(field)


def fmt(x, digits=0):
    if x is None:
        return "—"
    if isinstance(x, str):
        return x
    if digits == 0:
        return "{:,.0f}".format(x)
    return "{:,.{d}f}".format(x, d=digits)


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def pct_change(x):
    return "n/a (started at 0)" if x is None else "%+.1f%%" % (100 * x)


def change_of(x, base):
    """x against base, as pct_change shows it (None when either is missing)."""
    r = ratio(x, base)
    return None if r is None else r - 1


def fmt_ratio(x):
    return "—" if x is None else "%.2f×" % x


def cell(res, system, workload, field, vb, clients, digits=0):
    r = res.get(system, workload, vb, clients)
    if r is None:
        return "—"
    if r.get("error"):
        return "error"
    return fmt(r.get(field), digits)


def wal_target(res, text, need, workload="produce_batch", clients=1):
    """mqlog's WAL per record at most `need` times the heap log's, 100 B."""
    a = res.val("mqlog", workload, "wal_bytes_per_record", 100, clients)
    b = res.val("heap_log", workload, "wal_bytes_per_record", 100, clients)
    x = ratio(a, b)
    return (text, "not measured" if x is None else "%.2f× (%s vs %s bytes)" % (x, fmt(a, 1), fmt(b, 1)),
            None if x is None else x <= need)


def latency_target(res, field, bound, text):
    """mqlog's produce-to-poll latency percentile at most `bound` ms."""
    v = res.val("mqlog", "latency", field)
    return (text, "not measured" if v is None else "%.2f ms" % v, None if v is None else v <= bound)


def annotate(out, extra):
    """Add `extra` (what bounds it, measured in the same run) to the
    measured text of the last target row."""
    text, meas, met = out[-1]
    out[-1] = (text, meas + "; " + extra, met)


def consume_floor(out, floor, heap, mq):
    """The consume floor beside a consume target: one batch of the heap
    log's rows read again and again from a table of their own, with a
    durable ack.  A reference, not a bound: it pays a heap scan and the
    heap's short varlena headers, which mqlog's rows do not."""
    if not (floor and heap and mq):
        return
    annotate(out, "the consume floor (the same rows from a table of one batch, a durable ack): "
             "%s records/s, the heap log at %.0f%% of it, mqlog at %.0f%%" % (
                 fmt(floor), 100 * heap / floor, 100 * mq / floor))


def floor_target(res, vb=100):
    """Is the driver's floor at least twice mqlog's batched produce, one
    client?  (text, measured, met): the client is not what limits mqlog
    when it is."""
    a = res.val("floor", "produce_batch", "records_per_s", vb, 1)
    b = res.val("mqlog", "produce_batch", "records_per_s", vb, 1)
    x = ratio(a, b)
    return ("the driver's floor ≥ 2× mqlog's batched produce (the client is not the bottleneck)",
            "not measured" if x is None else "%.2f× (%s vs %s records/s)" % (x, fmt(a), fmt(b)),
            None if x is None else x >= 2)


def targets13(res):
    """Issue 13's targets, 100-byte values, from the C driver's rows (the
    latency from the Python client's): (target, measured, met)."""
    out = [floor_target(res)]

    def rate_target(text, a, b, need, what=("mqlog", "heap log")):
        x = ratio(a, b)
        shown = "%.0f%%" % (100 * x) if x is not None and need < 1 else "%.2f×" % (x or 0)
        meas = "not measured" if x is None else "%s (%s: %s, %s: %s records/s)" % (
            shown, what[0], fmt(a), what[1], fmt(b))
        out.append((text, meas, None if x is None else x >= need))

    rps = lambda s, w, cl=1, parts=1: res.val(s, w, "records_per_s", 100, cl, parts)  # noqa: E731
    wf = rps("wal_floor", "produce_batch")
    rate_target("batched produce ≥ 5× the heap log's batched insert", rps("mqlog", "produce_batch"),
                rps("heap_log", "produce_batch"), 5)
    if wf and rps("heap_log", "produce_batch"):
        # the most a log that makes its records durable through the WAL can reach
        annotate(out, "the WAL floor (the same call, its bytes written once to the WAL): %.2f× the "
                 "heap log's insert" % (wf / rps("heap_log", "produce_batch")))
    rate_target("batched produce ≥ 50% of the driver's floor", rps("mqlog", "produce_batch"),
                rps("floor", "produce_batch"), 0.5, ("mqlog", "floor"))
    if wf and rps("floor", "produce_batch"):
        # what bounds it: writing the records' bytes to the WAL, nothing else
        annotate(out, "the WAL floor (the same call, its bytes written once to the WAL): %s records/s, "
                 "%.0f%% of the floor, mqlog %.0f%% of it" % (
                     fmt(wf), 100 * wf / rps("floor", "produce_batch"),
                     100 * (rps("mqlog", "produce_batch") or 0) / wf))
    rate_target("poll + commit (500/batch) ≥ 1.5× the heap log read by offset with an offset commit",
                rps("mqlog", "consume"), rps("heap_log", "consume"), 1.5)
    consume_floor(out, rps("floor", "consume"), rps("heap_log", "consume"), rps("mqlog", "consume"))
    rate_target("`mq_fetch` + `mq_commit(group, topic, partition, offset)` (500/batch) ≥ 2× the heap log "
                "read by offset with an offset commit", rps("mqlog", "consume_fetch"), rps("heap_log", "consume"), 2)
    consume_floor(out, rps("floor", "consume"), rps("heap_log", "consume"), rps("mqlog", "consume_fetch"))
    rate_target("single-record autocommit produce, 8 clients, ≥ 1.2× the heap insert",
                rps("mqlog", "produce_single", 8), rps("heap_log", "produce_single", 8), 1.2)
    fs, hs = rps("floor", "produce_single", 8), rps("heap_log", "produce_single", 8)
    if fs and hs:
        # each call is a durable commit: what one costs with nothing stored bounds every system
        annotate(out, "the floor (the same call and a durable commit, nothing stored), 8 clients: "
                 "%s records/s, %.2f× the heap insert, mqlog at %.0f%% of it" % (
                     fmt(fs), fs / hs, 100 * (rps("mqlog", "produce_single", 8) or 0) / fs))
    out.append(wal_target(res, "WAL bytes per record ≤ 1.0× the heap's (single-record produce, 8 clients)",
                          1.0, "produce_single", 8))
    out.append(latency_target(res, "p99_ms", 5, "produce-to-poll latency p99 ≤ 5 ms (Python client)"))
    out.append(latency_target(res, "p50_ms", 1, "produce-to-poll latency p50 ≤ 1 ms (Python client)"))
    rate_target("two producers on two partitions ≥ 1.6× one producer on one",
                rps("mqlog", "produce_batch", 2, 2), rps("mqlog", "produce_batch"), 1.6,
                ("2 on 2", "1 on 1"))
    w1, w2 = rps("wal_floor", "produce_batch"), rps("wal_floor", "produce_batch", 2)
    if w1 and w2:
        # what a second producer can add when both write their records to the one WAL
        annotate(out, "the WAL floor with 2 clients: %.2f× its 1 client's (%s vs %s records/s)" % (
            w2 / w1, fmt(w2), fmt(w1)))
    return out


def targets_md(title, rows):
    L = [title, "", "| target | measured | |", "|---|---|---|"]
    for text, meas, met in rows:
        L.append("| %s | %s | %s |" % (text, meas, "not measured" if met is None else ("**met**" if met else "not met")))
    L.append("")
    return L


def targets(res):
    """Issue 6's targets, 100-byte values: (target, measured, met)."""
    out = []

    def ratio_target(text, workload, peer, need, clients=1, note=""):
        a = res.val("mqlog", workload, "records_per_s", 100, clients)
        b = res.val(peer, workload, "records_per_s", 100, clients)
        x = ratio(a, b)
        meas = "not measured" if x is None else "%.2f× (%s vs %s records/s)%s" % (x, fmt(a), fmt(b), note)
        out.append((text, meas, None if x is None else x >= need))

    ratio_target("batched produce ≥ 3× the heap log's `INSERT … SELECT unnest(…)`", "produce_batch", "heap_log", 3)
    ratio_target("batched produce ≥ 6× pgmq-style `send_batch`", "produce_batch", "skip_locked", 6,
                 note="; stand-in: the SKIP LOCKED queue in pgmq's table layout, pgmq itself is not in Debian")
    ratio_target("batched produce ≥ 3× PgQ's batched insert", "produce_batch", "pgq", 3)
    ratio_target("poll + commit, batches of 500, ≥ 1.5× the heap log read by offset + offset commit",
                 "consume", "heap_log", 1.5)
    ratio_target("poll + commit, batches of 500, ≥ 4× Redis `XREADGROUP` + `XACK`", "consume", "redis", 4)
    ratio_target("single-record autocommit produce, 8 clients, ≥ 1.2× the heap insert", "produce_single",
                 "heap_log", 1.2, clients=8)

    out.append(wal_target(res, "WAL bytes per record ≤ 0.5× the heap log's (batched produce)", 0.5))
    out.append(wal_target(res, "WAL bytes per record ≤ 0.5× the heap log's (single-record produce, 8 clients)",
                          0.5, "produce_single", 8))
    d = res.val("mqlog", "produce_batch", "disk_bytes_per_record")
    bound = 100 + KEY_BYTES + 16
    out.append(("on-disk bytes per record ≤ value + key + 16 (= %d)" % bound,
                "not measured" if d is None else "%s bytes" % fmt(d, 1),
                None if d is None else d <= bound))
    out.append(latency_target(res, "p50_ms", 1, "produce-to-poll latency p50 ≤ 1 ms"))
    out.append(latency_target(res, "p99_ms", 5, "produce-to-poll latency p99 ≤ 5 ms"))
    for wl, how in (("sustained", "maintenance worker"), ("sustained_inline", "mq_run_maintenance in the loop")):
        r = res.get("mqlog", wl)
        if r is None:
            continue
        if r.get("error"):
            out.append(("sustained run (%s): size and throughput within ±10%%" % how, "error", None))
            continue
        tc, sc = r.get("throughput_change"), r.get("size_change")
        met = (tc is not None and sc is not None and abs(tc) <= 0.10 and abs(sc) <= 0.10)
        out.append(("sustained run (%s): size and throughput within ±10%% first to last" % how,
                    "throughput %s, size %s (%s → %s MB)" % (
                        pct_change(tc), pct_change(sc),
                        fmt(r["first_size_bytes"] / 1e6, 1), fmt(r["last_size_bytes"] / 1e6, 1)),
                    met))
    return out


def markdown(res, source):
    """The report of one run; source is the results file it is read from, which
    names the run: latest.jsonl is "latest run", a run kept beside it is named
    by its own date and mode."""
    m = res.meta
    name = os.path.basename(source)
    L = []
    L.append("# mqlog benchmark: %s" % ("latest run" if name == "latest.jsonl" else
                                         "%s run of %s" % (m.get("mode", "?"), m.get("date", "?"))))
    L.append("")
    L.append("Written by `bench/report.py` from `bench/results/%s`; see `doc/benchmarks.md` for what "
             "each row measures and how to reproduce it." % name)
    L.append("")
    L.append("- run: **%s** mode, %s" % (m.get("mode", "?"), m.get("date", "?")))
    L.append("- machine: %s cores (%s), %s MB RAM, Linux %s" % (
        m.get("cores"), m.get("cpu", "?"), m.get("mem_mb"), m.get("kernel")))
    L.append("- PostgreSQL %s, mqlog %s (commit %s), PgQ %s, Redis %s (%s)" % (
        m.get("pg_version"), m.get("mqlog_version"), m.get("mqlog_commit") or "?", m.get("pgq_version"), m.get("redis_version"),
        m.get("redis_settings")))
    drv = next((r for r in res.rows if r.get("client") == "mqbench"), None)
    if drv:
        lv = drv.get("libpq_version") or 0
        L.append("- client of the rate rows: `bench/driver/mqbench` (C; libpq %d.%d with binary parameters and "
                 "results and pipeline mode; hiredis for Redis), one connection per client thread, also for the "
                 "replication rows' produce; the latency, sustained, replication lag and failover rows, and those "
                 "labelled \"a typical Python client\", use psycopg2; the Kafka rows librdkafka (C, and from "
                 "Python)" % (
                     lv // 10000, lv % 10000))
        nr = max(len(r.get("rounds") or [1]) for r in res.rows if r.get("client") == "mqbench")
        if nr > 1:
            L.append("- each rate of the driver is the median of %d rounds run back to back (every round's rate "
                     "is in `rounds` in latest.jsonl)" % nr)
    st = m.get("settings", {})
    L.append("- PostgreSQL settings, the same for every PostgreSQL system: " +
             ", ".join("`%s=%s`" % (k, v) for k, v in sorted(st.items())))
    L.append("- values: random letters and digits of 100 bytes and 1 KiB, each record with a 9-byte key; "
             "one partition / table / queue / stream per run")
    L.append("")

    L.append("## Throughput, records/s (higher is better), and mqlog's ratio to each peer")
    L.append("")
    head = "| workload | value | " + " | ".join(LABEL[s] for s in SYSTEMS) + " | " + \
           " | ".join("mqlog ÷ " + LABEL[p] for p in PEERS) + " |"
    L.append(head)
    L.append("|" + "---|" * (2 + len(SYSTEMS) + len(PEERS)))
    for vb in (100, 1024):
        for wl, cl, label in WORKLOADS:
            cells = [cell(res, s, wl, "records_per_s", vb, cl) for s in SYSTEMS]
            me = res.val("mqlog", wl, "records_per_s", vb, cl)
            rats = [fmt_ratio(ratio(me, res.val(p, wl, "records_per_s", vb, cl))) for p in PEERS]
            L.append("| %s | %s | %s | %s |" % (label, "%d B" % vb, " | ".join(cells), " | ".join(rats)))
    L.append("")
    fetch = [(vb, res.get("mqlog", "consume_fetch", vb)) for vb in (100, 1024)]
    if any(r for _, r in fetch):
        L.append("mqlog read by offset (`mq_fetch` + `mq_commit(group, topic, partition, offset)`), "
                 "batches of 500: " + ", ".join(
                     "%d B: %s records/s" % (vb, "error" if r and r.get("error") else fmt(r and r.get("records_per_s")))
                     for vb, r in fetch) + ".")
        L.append("")
    two = [(vb, res.get("mqlog", "produce_batch", vb, 2, 2)) for vb in (100, 1024)]
    if any(r for _, r in two):
        L.append("mqlog with two producers on a topic of two partitions (client i to partition i): " + ", ".join(
            "%d B: %s records/s, %s one producer on one partition" % (
                vb, "error" if r and r.get("error") else fmt(r and r.get("records_per_s")),
                fmt_ratio(ratio(r and r.get("records_per_s"), res.val("mqlog", "produce_batch", "records_per_s", vb, 1))))
            for vb, r in two) + ".")
        L.append("")
    L += floor_md(res)
    L += python_md(res)
    L.append("MB/s of values (batched produce): " + "; ".join(
        "%s %s / %s" % (LABEL[s], fmt(res.val(s, "produce_batch", "mb_per_s", 100), 1),
                        fmt(res.val(s, "produce_batch", "mb_per_s", 1024), 1)) for s in SYSTEMS) +
        " (100 B / 1 KiB).")
    L.append("")

    L.append("## Produce-to-consume latency with a waiting consumer, ms (lower is better)")
    L.append("")
    L.append("| value | " + " | ".join("%s p50 / p99" % LABEL[s] for s in SYSTEMS) + " |")
    L.append("|" + "---|" * (1 + len(SYSTEMS)))
    for vb in (100, 1024):
        cells = []
        for s in SYSTEMS:
            r = res.get(s, "latency", vb)
            if r is None:
                cells.append("—")
            elif r.get("error"):
                cells.append("error")
            else:
                cells.append("%.2f / %.2f" % (r["p50_ms"], r["p99_ms"]))
        L.append("| %d B | %s |" % (vb, " | ".join(cells)))
    L.append("")
    L.append("How each consumer waits: mqlog `mq_poll(…, timeout => '1s')` (woken by the commit); heap log, "
             "SKIP LOCKED queue and PgQ poll with a 1 ms nap when empty, and PgQ's batches need ticks, which the "
             "bench makes every 2 ms; Redis `XREADGROUP … BLOCK 1000`. The producer's own call, commit and WAL "
             "flush included, is inside the figure: mqlog's `mq_produce` took p50 %s ms of it (100 B)." %
             fmt(res.val("mqlog", "latency", "produce_call_p50_ms"), 2))
    L.append("")

    L.append("## Bytes per record (lower is better)")
    L.append("")
    L.append("| measure | value | " + " | ".join(LABEL[s] for s in SYSTEMS[:4]) + " | mqlog ÷ heap log |")
    L.append("|" + "---|" * (3 + 4))
    for field, wl, cl, label in (("wal_bytes_per_record", "produce_batch", 1, "WAL, batched produce"),
                                 ("wal_bytes_per_record", "produce_single", 1, "WAL, single-record, 1 client"),
                                 ("wal_bytes_per_record", "produce_single", 8, "WAL, single-record, 8 clients"),
                                 ("disk_bytes_per_record", "produce_batch", 1, "on disk (table, indexes, TOAST)")):
        for vb in (100, 1024):
            cells = [cell(res, s, wl, field, vb, cl, 1) for s in SYSTEMS[:4]]
            x = ratio(res.val("mqlog", wl, field, vb, cl), res.val("heap_log", wl, field, vb, cl))
            L.append("| %s | %d B | %s | %s |" % (label, vb, " | ".join(cells), fmt_ratio(x)))
    L.append("")
    rb = [(vb, res.get("redis", "produce_batch", vb)) for vb in (100, 1024)]
    if all(r and not r.get("error") for _, r in rb):
        L.append("Redis keeps the stream in memory: %s (100 B) and %s (1 KiB) bytes of memory per record, "
                 "and its append-only file grew by %s and %s bytes per record." % (
                     fmt(rb[0][1].get("memory_bytes_per_record"), 1), fmt(rb[1][1].get("memory_bytes_per_record"), 1),
                     fmt(rb[0][1].get("aof_bytes_per_record"), 1), fmt(rb[1][1].get("aof_bytes_per_record"), 1)))
        L.append("")

    js = [r for r in res.rows if r["workload"] == "json" and not r.get("error")]
    if js:
        heap = next((r for r in js if r["system"] == "heap_log"), None)
        L.append("## Compressible values: JSON-like events, batched produce (1000/call)")
        L.append("")
        L.append("Order events of about %d bytes (the same keys in every record, a few fields that vary); "
                 "mqlog with each `compression.type`, the heap log as it is (PostgreSQL compresses only "
                 "values of 2 kB and more)." % js[0]["value_bytes"])
        L.append("")
        L.append("| system | records/s | WAL bytes/record | disk bytes/record | disk ÷ heap log |")
        L.append("|---|---|---|---|---|")
        for r in js:
            name = LABEL.get(r["system"], r["system"]) + (" (%s)" % r["codec"] if r.get("codec") else "")
            x = ratio(r.get("disk_bytes_per_record"), heap.get("disk_bytes_per_record") if heap else None)
            L.append("| %s | %s | %s | %s | %s |" % (name, fmt(r.get("records_per_s")),
                                                      fmt(r.get("wal_bytes_per_record"), 1),
                                                      fmt(r.get("disk_bytes_per_record"), 1), fmt_ratio(x)))
        L.append("")

    L.append("## Sustained run with retention (100-byte values)")
    L.append("")
    L.append("Each loop iteration produces 500 records in one transaction and consumes 500 with their "
             "commit/ack; every system bounds its footprint its own way.")
    L.append("")
    L.append("| system | how it stays bounded | seconds | records/s | throughput change | size first → last (max), MB | size change |")
    L.append("|---|---|---|---|---|---|---|")
    for s in SYSTEMS:
        for wl in ("sustained_inline", "sustained"):
            r = res.get(s, wl)
            if r is None:
                continue
            if r.get("error"):
                L.append("| %s | | | error: %s | | | |" % (LABEL[s], r["error"].replace("|", "/")))
                continue
            how = {
                "mqlog": "retention.bytes %s MiB, segment.bytes %s MiB; %s" % (
                    r.get("retention_bytes", 0) // 2 ** 20, r.get("segment_bytes", 0) // 2 ** 20, r.get("maintenance")),
                "heap_log": "DELETE of consumed rows every second, autovacuum at its defaults",
                "skip_locked": "consumers DELETE what they take, autovacuum at its defaults",
                "pgq": "table rotation every %s s (maint_rotate_tables_step1/2)" % r.get("rotation_period_s"),
                "redis": "XADD MAXLEN ~ %s" % fmt(r.get("maxlen")),
            }[s]
            L.append("| %s | %s | %s | %s | %s | %s → %s (%s) | %s |" % (
                LABEL[s], how, fmt(r.get("seconds")), fmt(r.get("records_per_s")),
                pct_change(r.get("throughput_change")),
                fmt(r["first_size_bytes"] / 1e6, 1), fmt(r["last_size_bytes"] / 1e6, 1),
                fmt(r["max_size_bytes"] / 1e6, 1), pct_change(r.get("size_change"))))
    L.append("")
    L.append("Change = mean of the last fifth of the samples over the mean of the first fifth, minus one.")
    L.append("")

    L += replication_md(res)
    L += failover_md(res)
    L += scale_md(res)
    L += kafka_md(res)

    L += targets_md("## Goals of issue 35 (100-byte values, ratios of this run)", targets35(res))
    L += targets_md("## Targets of issue 13 (100-byte values, C driver)", targets13(res))
    L += targets_md("## Targets of issue 6 (100-byte values)", targets(res))
    errs = [r for r in res.rows if r.get("error")]
    if errs:
        L.append("## Failures")
        L.append("")
        for r in errs:
            L.append("- %s, %s, %d B, %d client(s): %s" % (r["system"], r["workload"], r["value_bytes"],
                                                          r.get("clients", 1), r["error"]))
        L.append("")
    return "\n".join(L)


def floor_md(res):
    """The driver's floor beside mqlog: what the client path costs with
    nothing stored, and whether it is at least twice mqlog's rate."""
    if not any(res.get("floor", wl, vb, cl) for wl, cl, _ in FLOOR_ROWS for vb in (100, 1024)):
        return []
    L = ["## The floor: the same calls with nothing stored", ""]
    L.append("The floor is what the C driver's calls cost before any storage: the same binary arrays (or the "
             "same single value and key), received and parsed by the server as parameters of a statement that "
             "does nothing else — `SELECT pg_logical_emit_message(true, 'mqbench', '') IS NOT NULL, "
             "cardinality($1::bytea[]) + cardinality($2::bytea[])`, or the same with `octet_length($1) + "
             "octet_length($2)` for single records — and a durable commit (the transactional message is a "
             "small WAL record that stores nothing; without WAL before it a commit is not flushed), measured "
             "the same way: same clients, same calls.")
    L.append("")
    L.append("| workload | value | floor, records/s | mqlog, records/s | mqlog ÷ floor | floor ≥ 2× mqlog |")
    L.append("|---|---|---|---|---|---|")
    for vb in (100, 1024):
        for wl, cl, label in FLOOR_ROWS:
            f = res.val("floor", wl, "records_per_s", vb, cl)
            q = res.val("mqlog", wl, "records_per_s", vb, cl)
            x = ratio(q, f)
            L.append("| %s | %d B | %s | %s | %s | %s |" % (
                label, vb, cell(res, "floor", wl, "records_per_s", vb, cl),
                cell(res, "mqlog", wl, "records_per_s", vb, cl), "—" if x is None else "%.0f%%" % (100 * x),
                "—" if x is None else ("yes" if x <= 0.5 else "**no**")))
    L.append("")
    cf = [(vb, res.val("floor", "consume", "records_per_s", vb, 1), res.val("heap_log", "consume", "records_per_s", vb, 1),
           res.val("mqlog", "consume", "records_per_s", vb, 1), res.val("mqlog", "consume_fetch", "records_per_s", vb, 1))
          for vb in (100, 1024)]
    if any(f for _, f, _, _, _ in cf):
        L.append("**The consume floor** is a heap table that holds exactly one batch of the heap log's rows "
                 "(its first 500), read whole call after call (`SELECT id, ts, key, value FROM floor_c LIMIT 500`) "
                 "with a durable ack (the floor's logical message) in the same transaction, pipelined in one round "
                 "trip as the `mq_poll` consumer is: the heap log's read with nothing to search for. It is a "
                 "reference, not a bound: it still pays a heap scan, and its byteas have the heap's one-byte "
                 "headers, which `byteasend` copies again; mqlog's rows (`Custom Scan (mqlog records)`) pay "
                 "neither, so mqlog can pass it.")
        L.append("")
        L.append("| value | consume floor, records/s | heap log | `mq_poll` | `mq_fetch` | heap log ÷ floor | "
                 "`mq_poll` ÷ floor |")
        L.append("|---|---|---|---|---|---|---|")
        for vb, f, h, p, q in cf:
            pc = lambda x: "—" if not (x and f) else "%.0f%%" % (100 * x / f)  # noqa: E731
            L.append("| %d B | %s | %s | %s | %s | %s | %s |" % (
                vb, fmt(f), fmt(h), fmt(p), fmt(q), pc(h), pc(p)))
        L.append("")
    walf = [(vb, res.val("wal_floor", "produce_batch", "records_per_s", vb, 1),
             res.val("wal_floor", "produce_batch", "wal_bytes_per_record", vb, 1),
             res.val("mqlog", "produce_batch", "records_per_s", vb, 1),
             res.val("mqlog", "produce_batch", "wal_bytes_per_record", vb, 1)) for vb in (100, 1024)]
    if any(w for _, w, _, _, _ in walf):
        L.append("**The WAL floor** bounds any log that makes its records durable through PostgreSQL's WAL: the "
                 "same batched call, its two arrays' bytes written once to the WAL as a transactional logical "
                 "message (`pg_logical_emit_message(true, 'mqbench', array_send($1) || array_send($2))`) and the "
                 "durable commit, nothing stored.")
        L.append("")
        L.append("| value | WAL floor, records/s | its WAL bytes per record | mqlog, records/s | mqlog's WAL bytes "
                 "per record | mqlog ÷ WAL floor |")
        L.append("|---|---|---|---|---|---|")
        for vb, w, wb, q, qb in walf:
            x = ratio(q, w)
            L.append("| %d B | %s | %s | %s | %s | %s |" % (vb, fmt(w), fmt(wb, 1), fmt(q), fmt(qb, 1),
                                                           "—" if x is None else "%.0f%%" % (100 * x)))
        L.append("")
    text, meas, met = floor_target(res)
    L.append("**Is the floor at least 2× mqlog's rate?** Batched produce, one client, 100-byte values: %s — %s." % (
        "not measured" if met is None else ("yes" if met else "no: the client path limits what this run can show"),
        meas))
    L.append("")
    return L


def python_md(res):
    """The psycopg2 rows: what a typical Python client gets, bytea[] sent
    as hex text and values parsed back from hex."""
    rows = [r for r in res.rows if r["workload"].startswith("py_")]
    if not rows:
        return []
    L = ["## A typical Python client (psycopg2)", ""]
    L.append("The same statements from psycopg2, which sends `bytea[]` as text literals and parses `bytea` "
             "results from hex; one client; its floor is the same parse-and-commit statement. These figures are "
             "what a Python application sees, not what the server can do.")
    L.append("")
    L.append("| workload | value | mqlog | heap log | floor | mqlog ÷ heap log | mqlog ÷ floor |")
    L.append("|---|---|---|---|---|---|---|")
    for vb in (100, 1024):
        for wl, label in (("py_produce_batch", "batched produce (1000/call)"),
                          ("py_consume", "consume 500/batch + commit")):
            me = res.val("mqlog", wl, "records_per_s", vb)
            L.append("| %s | %d B | %s | %s | %s | %s | %s |" % (
                label, vb, cell(res, "mqlog", wl, "records_per_s", vb, None),
                cell(res, "heap_log", wl, "records_per_s", vb, None),
                cell(res, "floor", wl, "records_per_s", vb, None) if wl == "py_produce_batch" else "",
                fmt_ratio(ratio(me, res.val("heap_log", wl, "records_per_s", vb))),
                fmt_ratio(ratio(me, res.val("floor", wl, "records_per_s", vb))) if wl == "py_produce_batch" else ""))
    L.append("")
    return L


def replication_md(res, level="##"):
    """The replication workload: rf 1 on a cluster node beside the same
    node with its cluster settings off, rf 3 acks=all beside rf 1 on the
    same leader, all measured as the single-node batched produce; and
    the follower's lag.  Empty when it did not run."""
    prod = [r for r in res.rows if r.get("workload") == "replicated_produce"]
    lag = res.get("mqlog_rf3", "replication_lag", 100)
    errs = [r for r in res.rows if r.get("workload") == "replication" and r.get("error")]
    if not prod and not lag and not errs:
        return []
    L = ["%s Replication: three nodes on this machine" % level, ""]
    L.append("One etcd and three PostgreSQL nodes on 127.0.0.1 (scripts/cluster-lib.sh), the same settings "
             "as above, each node's WAL warmed as the single server's. Every row is node n1's batched produce "
             "measured as the single-node rows are: the C driver, %d records a call, the mode's record count and "
             "seconds, its rounds back to back after a checkpoint, the median. First rf 1 on n1 (in brackets "
             "in the table); then n1 restarted with its "
             "cluster settings off (`mqlog.etcd_endpoints = ''`, a single server; n2, n3 and etcd up and idle) "
             "and a topic of its own; then n1 restarted with them on, and one-partition topics led by n1: rf 1 "
             "again (`rf 1 ÷ cluster off` compares the mean of the two rf 1 rows with the cluster-off row); "
             "rf 3 with `min.insync.replicas` 2, produced with `mqlog.acks = 'all'` (the commit returns once "
             "both followers hold the batch) and with acks=1 (what the followers' load costs the leader "
             "without the wait). The walsenders column counts n1's walsenders (the other nodes' apply "
             "workers streaming its WAL) before and after the row's rounds." % (
                 prod[0].get("batch", 1000) if prod else 1000))
    L.append("")
    L.append("| value | rf 1, cluster off, records/s | rf 1, acks=1, records/s (before the cluster-off row) | "
             "rf 1 ÷ cluster off | "
             "rf 3, acks=all, records/s | rf 3 acks=all ÷ rf 1 | rf 3, acks=1, records/s | rf 3 acks=1 ÷ rf 1 | "
             "rounds off / rf 1 / rf 3 acks=all | leader WAL bytes/record off / rf 1 / rf 3 | "
             "walsenders on n1 off / rf 1 |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|")
    pc = lambda x, y: "%.1f%%" % (100 * x / y) if x and y else "—"  # noqa: E731
    rounds = lambda r: ", ".join(fmt(x) for x in r.get("rounds") or []) or "—"  # noqa: E731
    for vb in (100, 1024):
        r0 = res.get("mqlog_rf1_cluster_off", "replicated_produce", vb) or {}
        rb = res.get("mqlog_rf1_before_off", "replicated_produce", vb) or {}
        r1 = res.get("mqlog_rf1", "replicated_produce", vb) or {}
        r3 = res.get("mqlog_rf3", "replicated_produce", vb) or {}
        r31 = res.get("mqlog_rf3_acks1", "replicated_produce", vb) or {}
        if not r1 and not r3 and not r0:
            continue
        o, a, b, c = (r0.get("records_per_s"), r1.get("records_per_s"), r3.get("records_per_s"),
                      r31.get("records_per_s"))
        wsn = lambda r: "→".join(str(x) for x in r.get("walsenders") or []) or "—"  # noqa: E731
        L.append("| %d B | %s | %s%s | %s | %s | %s | %s | %s | %s / %s / %s | %s / %s / %s | %s / %s |" % (
            vb, fmt(o), fmt(a), " (%s)" % fmt(rb["records_per_s"]) if rb.get("records_per_s") else "",
            pc(rf1_on(res, vb), o), fmt(b), pc(b, a), fmt(c), pc(c, a), rounds(r0), rounds(r1), rounds(r3),
            fmt(r0.get("wal_bytes_per_record"), 1), fmt(r1.get("wal_bytes_per_record"), 1),
            fmt(r3.get("wal_bytes_per_record"), 1), wsn(r0), wsn(r1)))
        if r3.get("ack_warnings"):
            L.append("")
            L.append("acks=all warnings (%d B, %d in all): %s" % (vb, r3.get("warnings", 0),
                                                                  "; ".join(r3["ack_warnings"][:3])))
    L.append("")
    L.append("Kafka's published figure for the same comparison is about 51% (rf 3 acks=all against rf 1).")
    L.append("")
    if lag:
        L.append("Replication lag, %d samples of one 100-byte record produced with acks=1 on the rf 3 leader: "
                 "from the return of its `COMMIT` until a follower's `mqlog.partitions.high_watermark` passes "
                 "it (polled in a loop on one connection): p50 **%s ms**, p90 %s, p99 %s, min %s, max %s ms." % (
                     lag.get("samples", 0), fmt(lag.get("p50_ms"), 2), fmt(lag.get("p90_ms"), 2),
                     fmt(lag.get("p99_ms"), 2), fmt(lag.get("min_ms"), 2), fmt(lag.get("max_ms"), 2)))
        L.append("")
        L.append("In the same samples, until the follower's `log_end_offset` passes it (the record is in the "
                 "follower's log, not yet readable there): p50 %s ms, p99 %s ms; until the leader's own "
                 "`high_watermark` passes it (both followers hold it): p50 %s ms, p99 %s ms." % (
                     fmt(lag.get("leo_p50_ms"), 2), fmt(lag.get("leo_p99_ms"), 2),
                     fmt(lag.get("leader_hw_p50_ms"), 2), fmt(lag.get("leader_hw_p99_ms"), 2)))
        L.append("")
        L.append("One record per autocommitted `mq_produce`, commit included: rf 1 acks=1 p50 %s / p99 %s ms; "
                 "rf 3 acks=all p50 %s / p99 %s ms." % (
                     fmt(lag.get("produce_acks1_rf1_p50_ms"), 2), fmt(lag.get("produce_acks1_rf1_p99_ms"), 2),
                     fmt(lag.get("produce_acksall_rf3_p50_ms"), 2), fmt(lag.get("produce_acksall_rf3_p99_ms"), 2)))
        L.append("")
    for r in errs:
        L.append("- replication, %d B: %s" % (r["value_bytes"], r["error"]))
    if errs:
        L.append("")
    return L


def rf1_on(res, vb=100):
    """rf 1 on the cluster node, to compare with the cluster-off row: the
    mean of the rows measured before and after it, or the one there is."""
    ons = [x for x in (res.val("mqlog_rf1_before_off", "replicated_produce", "records_per_s", vb),
                       res.val("mqlog_rf1", "replicated_produce", "records_per_s", vb)) if x]
    return sum(ons) / len(ons) if ons else None


def only_header(res, workload):
    """The head of a report of one cluster workload (run.sh --only W)."""
    m = res.meta
    L = ["# mqlog benchmark: the %s workload" % workload, ""]
    L.append("Written by `bench/report.py` from `bench/results/%s.jsonl` (`bench/run.sh --only "
             "%s`); see `doc/benchmarks.md`." % (workload, workload))
    L.append("")
    L.append("- run: **%s** mode, %s" % (m.get("mode", "?"), m.get("date", "?")))
    L.append("- machine: %s cores (%s), %s MB RAM, Linux %s" % (
        m.get("cores"), m.get("cpu", "?"), m.get("mem_mb"), m.get("kernel")))
    L.append("- PostgreSQL %s, mqlog %s (commit %s)" % (
        m.get("pg_version"), m.get("mqlog_version"), m.get("mqlog_commit") or "?"))
    st = m.get("settings", {})
    L.append("- settings of every node: " + ", ".join("`%s=%s`" % (k, v) for k, v in sorted(st.items())))
    L.append("")
    return L


def replication_only(res):
    return "\n".join(only_header(res, "replication") + replication_md(res) +
                     targets_md("## Goals of issue 35 (100-byte values, ratios of this run)",
                                targets35(res, ("replication",))))


def failover_md(res, level="##"):
    """The failover workload (issue 12): kill -9 of a partition's leader,
    to the first successful acks=all produce on its successor, beside the
    lease TTL and the 5 s goal.  Empty when it did not run."""
    r = res.get("mqlog_rf3", "failover", 100)
    err = [x for x in res.rows if x.get("workload") == "failover" and x.get("error") and x is not r]
    if not r and not err:
        return []
    L = ["%s Failover: kill -9 of a leader, to the first acks=all produce on its successor" % level, ""]
    if not r:
        L += ["- failover: %s" % x["error"] for x in err] + [""]
        return L
    ttl = r.get("lease_ttl_s")
    L.append("The three nodes of the replication run; a one-partition topic with replication factor 3 and "
             "`min.insync.replicas` 2. Each kill: `kill -9` of the leader's postmaster, then an autocommitted "
             "`SET mqlog.acks = 'all'; SELECT mq_produce(…)` tried in turn on a connection to each surviving "
             "node every %s ms until one succeeds (`MQ001`, `MQ002`, a connection error or a `WARNING` at "
             "commit is a failure); then the killed node is started again and waits to be back in the ISR. "
             "Victims in turn: the first leader, then the other nodes, moved there with `mq_elect_leader` "
             "when the last failover left another leader." % r.get("nap_ms", 20))
    L.append("")
    goal = r.get("goal_s", 5)
    L.append("| kills | median, s | max, s | min, s | `mqlog.etcd_lease_ttl`, s | median − TTL, s | "
             "max − TTL, s | goal: every kill under %s s |" % goal)
    L.append("|---|---|---|---|---|---|---|---|")
    num = isinstance(ttl, (int, float))
    dif = lambda x: fmt(x - ttl, 2) if x is not None and num else "—"  # noqa: E731
    L.append("| %s%s | %s | %s | %s | %s%s | %s | %s | %s |" % (
        r.get("kills"), "" if r.get("kills") == r.get("kills_planned") else " of %s" % r.get("kills_planned"),
        fmt(r.get("median_s"), 2), fmt(r.get("max_s"), 2), fmt(r.get("min_s"), 2),
        ttl if ttl is not None else "—",
        "" if r.get("lease_ttl_is_default") else " (mqlog's default: %s)" % r.get("lease_ttl_default_s"),
        dif(r.get("median_s")), dif(r.get("max_s")),
        "**met**" if r.get("goal_met") else "not met (stopped early)" if r.get("error") else "not met"))
    L.append("")
    ks = r.get("kill_samples") or []
    if ks:
        L.append("| kill | victim | elector killed too | successor | epoch | new leader in `mqlog.partitions`, s | "
                 "first acks=all produce, s | attempts | failures | back in the ISR after restart, s |")
        L.append("|---|---|---|---|---|---|---|---|---|---|")
        for k in ks:
            L.append("| %s | %s | %s | %s | %s → %s | %s | %s | %s | %s | %s |" % (
                k.get("round"), k.get("victim"), "yes" if k.get("victim_was_coordinator") else "no",
                k.get("successor") or "—", fmt(k.get("epoch_before")), fmt(k.get("epoch_after")),
                fmt(k.get("leader_seen_s"), 2), fmt(k.get("first_ack_s"), 2) if k.get("first_ack_s") is not None
                else "none in %s s" % r.get("timeout_s"), k.get("attempts"),
                ", ".join("%s %s" % (c, n) for c, n in sorted((k.get("failures") or {}).items())) or "—",
                fmt(k.get("rejoin_isr_s"), 1)))
        L.append("")
    L.append("The time is bounded by the lease TTL (the dead leader's key lapses that long after its last "
             "renewal, renewed every third of it) plus up to a second for the elector's round and a second "
             "for the successor's sync worker and its follower's apply worker (doc/failover.md).")
    L.append("")
    if r.get("error"):
        L.append("Stopped early: %s" % r["error"])
        L.append("")
    for x in err:
        L.append("- failover: %s" % x["error"])
    if err:
        L.append("")
    return L


def scale_md(res, level="##"):
    """The scale run (issue 16): rates, catalog and shared memory by the
    number of partitions of one topic, and the produce rate and fan-out
    beside 1, 10 and 100 consumer groups.  Empty when it did not run."""
    rows = [r for r in res.rows if r.get("workload", "").startswith("scale")]
    if not rows:
        return []
    L = ["%s Scale: partitions of one topic, consumer groups on one topic" % level, ""]
    prod = {r["partitions"]: r for r in rows if r["workload"] == "scale_produce" and not r.get("error")}
    cons = {r["partitions"]: r for r in rows if r["workload"] == "scale_consume" and not r.get("error")}
    drop = {r["partitions"]: r for r in rows if r["workload"] == "scale_drop" and not r.get("error")}
    if prod:
        base = prod[min(prod)]["records_per_s"]
        cbase = cons[min(cons)]["records_per_s"] if cons else None
        L.append("Batched produce by the driver (1000 records of 100 B a call, each call to the next "
                 "partition in a transaction of its own), the read back by a group of one member (of at most 512 "
                 "partitions) of as many records as the consume workload reads, at most nine tenths of what the "
                 "member's partitions hold (the median of the mode's rounds, rewound between them), the creation (the worker makes the segments beyond the first 200) and the drop "
                 "with the orphan sweep; catalog bytes are the growth of pg_class, pg_attribute, pg_type, "
                 "pg_depend, pg_description and mqlog.segment, shared memory the partition entries taken.")
        L.append("")
        L.append("| partitions | produce records/s | vs 1 partition | consume records/s (members) | records read | "
                 "vs 1 partition | create s | catalog bytes per partition | shared memory | drop s |")
        L.append("|---|---|---|---|---|---|---|---|---|---|")
        for n in sorted(prod):
            p, c, d = prod[n], cons.get(n, {}), drop.get(n, {})
            crate = c.get("records_per_s")
            L.append("| %s | %s | %s | %s (%s) | %s | %s | %s | %s | %s | %s |" % (
                fmt(n), fmt(p["records_per_s"]), pct_change(change_of(p["records_per_s"], base)),
                fmt(crate), c.get("clients", "-"), fmt(c.get("records")),
                pct_change(change_of(crate, cbase)) if crate and cbase else "-", p.get("create_s"),
                fmt(p.get("catalog_bytes_per_partition")), fmt(p.get("shm_bytes")), d.get("drop_s", "-")))
        L.append("")
    grp = sorted((r for r in rows if r["workload"] == "scale_groups" and not r.get("error")),
                 key=lambda r: r["groups"])
    if grp:
        L.append("Groups tailing one topic of 8 partitions (a consumer session polls up to 8 of them in "
                 "turn) while the driver produces to it: its rate beside them, and every record delivered to "
                 "every group.")
        L.append("")
        L.append("| groups | consumer sessions | produce records/s | delivered records/s (all groups) | "
                 "until every group had every record, s |")
        L.append("|---|---|---|---|---|")
        for r in grp:
            L.append("| %d | %d | %s | %s | %s |" % (r["groups"], r["consumers"], fmt(r["records_per_s"]),
                                                   fmt(r["delivered_per_s"]), r["fanout_s"]))
        L.append("")
    for r in rows:
        if r.get("error"):
            L.append("- %s (%s): %s" % (r["workload"], ", ".join(
                "%s %s" % (k, r[k]) for k in ("partitions", "groups") if k in r), r["error"]))
    return L


def kafka_md(res, level="##"):
    """Kafka clients through mqlog's listener: librdkafka's own C
    benchmark (rdkafka_performance, issue 35) beside the driver's
    mq_produce_batch, mq_poll + mq_commit and the WAL floor of the same
    run, with their ratios; then confluent-kafka from Python (issue 15),
    what a Python application sees.  Empty when the kafka workload did
    not run."""
    rows = [r for r in res.rows if r.get("workload", "").startswith("kafka")]
    if not rows:
        return []
    L = ["%s Kafka clients through the listener" % level, ""]
    crows = [r for r in rows if r["workload"].startswith("kafka_c_")]
    if crows:
        client = next((r.get("client") for r in crows if r.get("client")), "rdkafka_performance")
        L.append("**A C client**: %s, librdkafka's own benchmark built from Debian's example source "
                 "(`make bench-rdkafka`). `-P`: the consume workload's record count (c_records) of 100 B or 1 KiB "
                 "to one partition, `acks=1`, no compression, librdkafka batching as the Python producer below "
                 "(linger 5 ms, up to 10,000 records a batch), timed by the tool from its first `produce()` to "
                 "the last delivery report; `-C`: the same count read back from offset 0 by a consumer assigned "
                 "to the partition (no group), timed from its first record. Beside them, from the same run, the C "
                 "driver's `mq_produce_batch` (1000 a call), its WAL floor (the same call writing its arrays' "
                 "bytes once to the WAL, nothing stored: the most any produce path through PostgreSQL's WAL can "
                 "reach with one client) and `mq_poll` + `mq_commit` (500 a call). Median of the mode's "
                 "rounds." % client.split(" (")[0])
        L.append("")
        L.append("| value | `rdkafka_performance -P` records/s (MB/s) | WAL floor records/s | -P ÷ WAL floor | "
                 "`mq_produce_batch` records/s | -P ÷ `mq_produce_batch` | WAL bytes/record -P / "
                 "`mq_produce_batch` | `rdkafka_performance -C` records/s (MB/s) | `mq_poll` + `mq_commit` "
                 "records/s | -C ÷ `mq_poll` |")
        L.append("|---|---|---|---|---|---|---|---|---|---|")
        for vb in sorted({r["value_bytes"] for r in crows}):
            cp = res.get("mqlog", "kafka_c_produce", vb) or {}
            cc = res.get("mqlog", "kafka_c_consume", vb) or {}
            wf = res.val("wal_floor", "produce_batch", "records_per_s", vb, clients=1)
            mb = res.val("mqlog", "produce_batch", "records_per_s", vb, clients=1)
            mp = res.val("mqlog", "consume", "records_per_s", vb, clients=1)
            p, c = cp.get("records_per_s"), cc.get("records_per_s")
            pc = lambda x, y: "—" if not (x and y) else "%.0f%%" % (100 * x / y)  # noqa: E731
            L.append("| %d B | %s (%s) | %s | %s | %s | %s | %s / %s | %s (%s) | %s | %s |" % (
                vb, fmt(p), fmt(cp.get("mb_per_s"), 1), fmt(wf), pc(p, wf), fmt(mb), fmt_ratio(ratio(p, mb)),
                fmt(cp.get("wal_bytes_per_record"), 1),
                fmt(res.val("mqlog", "produce_batch", "wal_bytes_per_record", vb, clients=1), 1),
                fmt(c), fmt(cc.get("mb_per_s"), 1), fmt(mp), fmt_ratio(ratio(c, mp))))
        L.append("")
        L.append("Rounds, -P / -C: " + "; ".join(
            "%d B: %s / %s" % (vb, ", ".join(fmt(x) for x in (res.get("mqlog", "kafka_c_produce", vb) or {}).get(
                "rounds") or []) or "—", ", ".join(fmt(x) for x in (res.get("mqlog", "kafka_c_consume", vb) or {}).get(
                "rounds") or []) or "—")
            for vb in sorted({r["value_bytes"] for r in crows})) + ".")
        L.append("")
    L.append("**A Python client, what a Python application sees**: confluent-kafka (librdkafka's batching: "
             "linger 5 ms, up to 10,000 records a batch, acks=1, no compression) producing to one partition "
             "through `mqlog.kafka_listen`, one `produce()` call a record from Python, then a consumer reading it "
             "back from offset 0 (assigned, no group). Python's per-record calls bound these rates as much as "
             "the server does; the C client above is what the server can do. Beside them, the C driver's "
             "`mq_produce_batch` (1000 a call) and `mq_poll` + `mq_commit` (500 a call) of the same run.")
    L.append("")
    L.append("The idempotent column is the same producer with `enable.idempotence` (acks=all, which on one node "
             "is the same commit), which librdkafka allows 5 requests in flight; the column before it is its "
             "control, without idempotence but with 5 in flight. The two differ by the producer-state check each "
             "batch passes under the partition lock.")
    L.append("")
    L.append("| value | Python Kafka produce records/s (MB/s) | 5 in flight records/s (MB/s) | idempotent, 5 in flight records/s (MB/s) | "
             "mq_produce_batch records/s | Python Kafka consume records/s (MB/s) | mq_poll + mq_commit records/s |")
    L.append("|---|---|---|---|---|---|---|")
    for vb in sorted({r["value_bytes"] for r in rows}):
        kp = res.get("mqlog", "kafka_produce", vb)
        kc = res.get("mqlog", "kafka_consume", vb)
        ki = res.get("mqlog", "kafka_produce_idempotent", vb)
        k5 = res.get("mqlog", "kafka_produce_5_in_flight", vb)
        if not kp and not kc:
            continue
        L.append("| %d B | %s (%s) | %s (%s) | %s (%s) | %s | %s (%s) | %s |" % (
            vb, fmt((kp or {}).get("records_per_s")), fmt((kp or {}).get("mb_per_s"), 1),
            fmt((k5 or {}).get("records_per_s")), fmt((k5 or {}).get("mb_per_s"), 1),
            fmt((ki or {}).get("records_per_s")), fmt((ki or {}).get("mb_per_s"), 1),
            fmt(res.val("mqlog", "produce_batch", "records_per_s", vb, clients=1)),
            fmt((kc or {}).get("records_per_s")), fmt((kc or {}).get("mb_per_s"), 1),
            fmt(res.val("mqlog", "consume", "records_per_s", vb, clients=1))))
    L.append("")
    for r in rows:
        if r.get("error"):
            L.append("- %s, %d B: %s" % (r["workload"], r["value_bytes"], r["error"]))
    return L


def targets35(res, parts=("kafka", "replication")):
    """Issue 35's goals that this run measures, each as a ratio of two
    rows of the same run, 100-byte values: (goal, measured, met)."""
    out = []

    def goal(text, a, b, need, what, pct=True):
        x = ratio(a, b)
        shown = "—" if x is None else ("%.0f%%" % (100 * x) if pct else "%.2f×" % x)
        out.append((text, "not measured" if x is None else "%s (%s: %s, %s: %s records/s)" % (
            shown, what[0], fmt(a), what[1], fmt(b)), None if x is None else x >= need))
    if "kafka" in parts:
        kp = res.val("mqlog", "kafka_c_produce", "records_per_s")
        goal("Kafka produce (`rdkafka_performance -P`, acks=1, one partition) ≥ 90% of the WAL floor", kp,
             res.val("wal_floor", "produce_batch", "records_per_s", 100, 1), 0.9, ("-P", "WAL floor"))
        goal("Kafka produce (`rdkafka_performance -P`) ≥ `mq_produce_batch` with the C driver", kp,
             res.val("mqlog", "produce_batch", "records_per_s", 100, 1), 1, ("-P", "mq_produce_batch"), False)
        goal("Kafka consume (`rdkafka_performance -C` from offset 0) ≥ 5× `mq_poll` + `mq_commit`",
             res.val("mqlog", "kafka_c_consume", "records_per_s"), res.val("mqlog", "consume", "records_per_s", 100, 1),
             5, ("-C", "mq_poll + mq_commit"), False)
    if "replication" in parts:
        r1 = res.val("mqlog_rf1", "replicated_produce", "records_per_s")
        goal("rf 1 on a cluster node (the mean of the rows before and after) ≥ 85% of the same node with the "
             "cluster settings off", rf1_on(res),
             res.val("mqlog_rf1_cluster_off", "replicated_produce", "records_per_s"), 0.85,
             ("cluster on", "cluster off"))
        goal("rf 3 acks=all batched ≥ 75% of rf 1 on the same cluster",
             res.val("mqlog_rf3", "replicated_produce", "records_per_s"), r1, 0.75, ("rf 3 acks=all", "rf 1"))
    return out


def kafka_only(res):
    return "\n".join(only_header(res, "kafka") + kafka_md(res) +
                     targets_md("## Goals of issue 35 (100-byte values, ratios of this run)",
                                targets35(res, ("kafka",))))


def scale_only(res):
    return "\n".join(only_header(res, "scale") + scale_md(res))


def failover_only(res):
    return "\n".join(only_header(res, "failover") + failover_md(res))


def plot(res, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"mqlog": "#d62728", "heap_log": "#1f77b4", "skip_locked": "#9467bd", "pgq": "#2ca02c",
              "redis": "#ff7f0e", "floor": "#bbbbbb"}
    rated = SYSTEMS + ["floor"]     # the throughput panels show the floor too
    fig, axes = plt.subplots(2, 3, figsize=(19, 10.5))
    m = res.meta
    fig.suptitle("mqlog benchmark (%s mode, %s, %s cores, PostgreSQL %s, fsync and synchronous_commit on)" % (
        m.get("mode"), m.get("date"), m.get("cores"), m.get("pg_version")), fontsize=13)

    def bars(ax, vb):
        n = len(rated)
        w = 0.8 / n
        for i, s in enumerate(rated):
            ys = [res.val(s, wl, "records_per_s", vb, cl) or 0 for wl, cl, _ in WORKLOADS]
            xs = [j + (i - (n - 1) / 2) * w for j in range(len(WORKLOADS))]
            ax.bar(xs, ys, w, label=LABEL[s], color=colors[s])
        ax.set_yscale("log")
        ax.set_xticks(range(len(WORKLOADS)))
        ax.set_xticklabels(["batched\nproduce", "batched\n2 clients", "single\n1 client", "single\n8 clients",
                            "consume 500\n+ commit"], fontsize=9)
        ax.set_ylabel("records/s (log scale)")
        ax.set_title("throughput, %s-byte values (C driver)" % vb)
        ax.grid(axis="y", which="both", alpha=0.3)

    bars(axes[0][0], 100)
    bars(axes[0][1], 1024)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=len(rated), bbox_to_anchor=(0.5, 0.955), fontsize=11)

    ax = axes[0][2]
    n = len(SYSTEMS)
    w = 0.8 / n
    groups = [(100, "p50_ms"), (100, "p99_ms"), (1024, "p50_ms"), (1024, "p99_ms")]
    for i, s in enumerate(SYSTEMS):
        ys = [res.val(s, "latency", f, vb) or 0 for vb, f in groups]
        xs = [j + (i - (n - 1) / 2) * w for j in range(len(groups))]
        ax.bar(xs, ys, w, label=LABEL[s], color=colors[s])
    ax.set_yscale("log")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(["p50, 100 B", "p99, 100 B", "p50, 1 KiB", "p99, 1 KiB"], fontsize=9)
    ax.set_ylabel("ms (log scale)")
    ax.set_title("produce-to-consume latency, waiting consumer")
    ax.axhline(1, color="grey", ls=":", lw=1)
    ax.axhline(5, color="grey", ls=":", lw=1)
    ax.grid(axis="y", which="both", alpha=0.3)

    ax = axes[1][0]
    pg = SYSTEMS[:4]
    w = 0.8 / len(pg)
    groups = [("wal_bytes_per_record", "produce_batch", 1, "WAL, batched"),
              ("wal_bytes_per_record", "produce_single", 8, "WAL, single\n8 clients"),
              ("disk_bytes_per_record", "produce_batch", 1, "on disk")]
    for i, s in enumerate(pg):
        ys = [res.val(s, wl, f, 100, cl) or 0 for f, wl, cl, _ in groups]
        xs = [j + (i - (len(pg) - 1) / 2) * w for j in range(len(groups))]
        ax.bar(xs, ys, w, label=LABEL[s], color=colors[s])
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([g[3] for g in groups], fontsize=9)
    ax.set_ylabel("bytes per record (100-byte value, 9-byte key)")
    ax.set_title("bytes per record, PostgreSQL systems")
    ax.axhline(100 + KEY_BYTES + 16, color="grey", ls=":", lw=1)
    ax.grid(axis="y", alpha=0.3)

    for ax, field, title, scale in ((axes[1][1], "records_per_s", "sustained run: throughput", 1),
                                    (axes[1][2], "size_bytes", "sustained run: size", 1e6)):
        for s in SYSTEMS:
            for wl, ls in (("sustained", "-"), ("sustained_inline", "--")):
                r = res.get(s, wl)
                if not r or r.get("error") or not r.get("samples"):
                    continue
                t = [x["t"] for x in r["samples"]]
                y = [x[field] / scale if x[field] is not None else None for x in r["samples"]]
                lab = LABEL[s] + (" (inline maintenance)" if wl == "sustained_inline" else "")
                ax.plot(t, y, ls, color=colors[s], label=lab, lw=1.6)
        ax.set_xlabel("seconds into the system's run")
        ax.set_title(title + " (100-byte values, 500 produced + 500 consumed per loop)")
        ax.grid(alpha=0.3)
        ax.title.set_fontsize(10)
    axes[1][1].set_ylabel("records/s")
    axes[1][1].set_ylim(bottom=0)
    axes[1][2].set_ylabel("MB (log scale)")
    axes[1][2].set_yscale("log")
    axes[1][2].legend(fontsize=8, loc="center right", framealpha=0.9)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    fig.savefig(path, dpi=80)


BEGIN = "<!-- bench:latest:begin -->"
END = "<!-- bench:latest:end -->"


def update_doc(path, md):
    """Put the latest tables into the doc, between its two markers, with
    the headings pushed one level down."""
    try:
        with open(path) as f:
            doc = f.read()
    except OSError as e:
        print("report.py: %s not updated: %s" % (path, e), file=sys.stderr)
        return
    if BEGIN not in doc or END not in doc:
        print("report.py: %s has no %s ... %s markers; not updated" % (path, BEGIN, END), file=sys.stderr)
        return
    body = "\n".join(("#" + line) if line.startswith("#") else line
                      for line in md.splitlines()[1:]).strip()
    head, rest = doc.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    with open(path, "w") as f:
        f.write(head + BEGIN + "\n" + body + "\n" + END + tail)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("jsonl")
    ap.add_argument("--md")
    ap.add_argument("--png")
    ap.add_argument("--doc", help="a Markdown file whose section between the markers "
                    "<!-- bench:latest:begin --> and <!-- bench:latest:end --> is replaced by the tables")
    ap.add_argument("--only-replication", action="store_true",
                    help="only the replication section (bench/run.sh --only replication)")
    ap.add_argument("--only-failover", action="store_true",
                    help="only the failover section (bench/run.sh --only failover)")
    ap.add_argument("--only-kafka", action="store_true",
                    help="only the Kafka clients' section (bench/run.sh --only kafka)")
    ap.add_argument("--only-scale", action="store_true",
                    help="only the scale section (bench/run.sh --only scale)")
    a = ap.parse_args()
    res = Results(load(a.jsonl))
    if not res.rows:
        print("report.py: no results in %s" % a.jsonl, file=sys.stderr)
        return 1
    md = (replication_only(res) if a.only_replication else
          failover_only(res) if a.only_failover else
          scale_only(res) if a.only_scale else
          kafka_only(res) if a.only_kafka else markdown(res, a.jsonl))
    if a.md:
        with open(a.md, "w") as f:
            f.write(md + "\n")
    else:
        print(md)
    if a.doc:
        update_doc(a.doc, md)
    if a.png:
        try:
            plot(res, a.png)
        except Exception as e:  # noqa: BLE001 - the table matters more than the plot
            print("report.py: no plot: %s" % e, file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
