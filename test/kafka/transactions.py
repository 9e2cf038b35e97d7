#!/usr/bin/python3
"""Kafka transactions against mqlog's Kafka listener with confluent-kafka
(librdkafka), for 164_kafka_transactions.pl.

  transactions.py commit HOST:PORT TOPIC TXN_ID N PREFIX
  transactions.py abort HOST:PORT TOPIC TXN_ID N PREFIX
      A transactional producer writes N records PREFIX-0 ... to partition 0
      in one transaction, flushes, and commits (or aborts) it; prints "ok"
      or the error.

  transactions.py consume HOST:PORT TOPIC ISOLATION
      A consumer (isolation.level ISOLATION, no group) reads partition 0
      from the start to its end; prints each value on a line.

  transactions.py fenced HOST:PORT TOPIC TXN_ID
      Producer A begins a transaction and writes a record; producer B
      initializes the same transactional id (fencing A, whose transaction
      is aborted); A's commit fails: prints "fenced" when librdkafka calls
      the error fatal and names it _FENCED or PRODUCER_FENCED /
      INVALID_PRODUCER_EPOCH, else the error.  B then commits B-0: "ok".

  transactions.py open HOST:PORT TOPIC TXN_ID N PREFIX TIMEOUT_MS [KEY]
      Begins a transaction with transaction.timeout.ms TIMEOUT_MS, writes N
      records (with the key KEY if given: a compacted topic wants one), flushes, prints "open" and waits for a line on stdin; then
      tries to commit and prints "ok" or the error (and whether it is fatal).

  transactions.py loop HOST:PORT IN OUT GROUP TXN_ID [STOP_AFTER]
      Consume-transform-produce: reads IN (read_committed, group GROUP) and
      for each record writes "out-VALUE" to OUT and the record's next offset
      with send_offsets_to_transaction, one transaction per record, until IN
      has nothing more; with STOP_AFTER, exits abruptly (os._exit) after
      that many records while the next transaction is open.  Prints the
      count done.

  transactions.py raw HOST:PORT TOPIC TXN_ID
      Raw requests (kafka-python's batch encoder): a transactional batch to
      a partition not added, and without a transactional id;
      AddPartitionsToTxn with an unknown topic beside a good one, then the
      good one; a transactional batch; EndTxn of an unknown id, of an old
      epoch, commit, commit again, abort.  Prints NAME=ERROR_CODE pairs.

  transactions.py steps HOST:PORT TOPIC TXN_ID
      One transactional producer runs a transaction per line of stdin,
      "commit KEY VALUE" or "abort KEY VALUE" (one record to partition 0),
      until "end" or the end of stdin; after each it prints "ok" or the
      error (then aborts the transaction if the error requires it, printing
      "abort: ERROR" if that fails too), then "step".  A fatal error ends
      it.

  transactions.py fetch HOST:PORT TOPIC ISOLATION
      A raw Fetch v4 of partition 0 from offset 0 (ISOLATION 0 or 1);
      prints "aborted=PID:FIRST,... first_batch=OFFSET" (aborted=null for
      a null list).

  transactions.py findcoord HOST:PORT KEY
      FindCoordinator v1 with key type 1 (a transactional id); prints
      "ERROR_CODE ERROR_MESSAGE".
"""
import os
import struct
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition


def producer(addr, txn_id, extra=None):
    conf = {"bootstrap.servers": addr, "transactional.id": txn_id,
            "enable.idempotence": True, "acks": "all", "linger.ms": 5}
    conf.update(extra or {})
    p = Producer(conf)
    p.init_transactions(30)
    return p


def error_name(e):
    err = e.args[0] if e.args else e
    if isinstance(err, KafkaError):
        return "%s fatal=%s abortable=%s" % (err.name(), err.fatal(), err.txn_requires_abort())
    return str(e)


def write(addr, topic, txn_id, n, prefix, commit):
    p = producer(addr, txn_id)
    p.begin_transaction()
    for i in range(n):
        p.produce(topic, value=("%s-%d" % (prefix, i)).encode(), partition=0)
    p.flush(30)
    try:
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
        print("ok")
    except KafkaException as e:
        print(error_name(e))


def reader(addr, group, isolation):
    """A consumer from the start that reports a partition's end (until_eof stops there)."""
    return Consumer({"bootstrap.servers": addr, "group.id": group,
                     "isolation.level": isolation, "enable.auto.commit": False,
                     "enable.partition.eof": True, "auto.offset.reset": "earliest"})


def until_eof(c, seconds):
    """Each message c polls, records and errors, until a partition's end or
    `seconds` have passed: the caller decides what an error means."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        m = c.poll(1.0)
        if m is None:
            continue
        if m.error() and m.error().code() == KafkaError._PARTITION_EOF:
            return
        yield m


def consume(addr, topic, isolation):
    c = reader(addr, "txn-reader-%d" % os.getpid(), isolation)
    c.assign([TopicPartition(topic, 0, 0)])
    for m in until_eof(c, 30):
        if m.error():
            print("error %s" % m.error())
            break
        print(m.value().decode())
    c.close()


def fenced(addr, topic, txn_id):
    a = producer(addr, txn_id)
    a.begin_transaction()
    a.produce(topic, value=b"A-0", partition=0)
    a.flush(30)
    b = producer(addr, txn_id)
    try:
        a.produce(topic, value=b"A-1", partition=0)
        a.flush(10)
        a.commit_transaction(30)
        print("A committed")
    except KafkaException as e:
        err = e.args[0]
        if err.fatal() and ("FENCED" in err.name() or err.code() == KafkaError.INVALID_PRODUCER_EPOCH):
            print("fenced")
        else:
            print(error_name(e))
    b.begin_transaction()
    b.produce(topic, value=b"B-0", partition=0)
    b.flush(30)
    b.commit_transaction(30)
    print("ok")


def open_txn(addr, topic, txn_id, n, prefix, timeout_ms, key=None):
    p = producer(addr, txn_id, {"transaction.timeout.ms": timeout_ms})
    p.begin_transaction()
    for i in range(n):
        p.produce(topic, key=key.encode() if key else None,
                  value=("%s-%d" % (prefix, i)).encode(), partition=0)
    p.flush(30)
    print("open", flush=True)
    sys.stdin.readline()
    try:
        p.commit_transaction(30)
        print("ok")
    except KafkaException as e:
        print(error_name(e))
    sys.stdout.flush()


def steps(addr, topic, txn_id):
    p = producer(addr, txn_id)
    print("ready", flush=True)
    for line in sys.stdin:
        parts = line.split()
        if not parts or parts[0] == "end":
            break
        what, key, value = parts
        fatal = False
        try:
            p.begin_transaction()
            p.produce(topic, key=key.encode(), value=value.encode(), partition=0)
            p.flush(30)
            if what == "commit":
                p.commit_transaction(30)
            else:
                p.abort_transaction(30)
            print("ok")
        except KafkaException as e:
            err = e.args[0]
            print(error_name(e))
            fatal = err.fatal()
            if not fatal and err.txn_requires_abort():
                try:
                    p.abort_transaction(30)
                except KafkaException as e2:
                    print("abort: " + error_name(e2))
        print("step", flush=True)
        if fatal:
            break


def loop(addr, src, dst, group, txn_id, stop_after=None):
    c = reader(addr, group, "read_committed")
    c.subscribe([src])
    p = producer(addr, txn_id)
    done = 0
    for m in until_eof(c, 60):
        if m.error():
            continue
        p.begin_transaction()
        p.produce(dst, value=b"out-" + m.value(), partition=0)
        p.send_offsets_to_transaction(
            [TopicPartition(m.topic(), m.partition(), m.offset() + 1)],
            c.consumer_group_metadata(), 30)
        if stop_after is not None and done == stop_after:
            p.flush(30)
            print(done, flush=True)
            os._exit(0)
        p.commit_transaction(30)
        done += 1
    print(done)
    c.close()


def raw(addr, topic, txn_id):
    from kafka.record.default_records import DefaultRecordBatchBuilder
    from idempotence import connect, kstr, request

    s = connect(addr)
    data = request(s, 22, 1, kstr(txn_id) + struct.pack(">i", 60000))
    _, err, pid, epoch = struct.unpack(">ihqh", data[:16])
    out = ["init=%d" % err]

    def batch(seq):
        b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True,
                                      producer_id=pid, producer_epoch=epoch,
                                      base_sequence=seq, batch_size=1 << 30)
        b.append(0, timestamp=int(time.time() * 1000), key=None, value=b"raw-%d" % seq, headers=[])
        return bytes(b.build())

    def produce(txn, records):
        body = (kstr(txn) + struct.pack(">hi", -1, 30000) + struct.pack(">i", 1) + kstr(topic)
                + struct.pack(">i", 1) + struct.pack(">i", 0)
                + struct.pack(">i", len(records)) + records)
        d = request(s, 0, 7, body)
        pos = 4 + 2 + struct.unpack(">h", d[4:6])[0] + 4
        return struct.unpack(">ihq", d[pos:pos + 14])[1]

    def add_partitions(topics):
        body = kstr(txn_id) + struct.pack(">qh", pid, epoch) + struct.pack(">i", len(topics))
        for t in topics:
            body += kstr(t) + struct.pack(">ii", 1, 0)
        d = request(s, 24, 0, body)
        pos, errs = 8, []
        for _ in topics:
            pos += 2 + struct.unpack(">h", d[pos:pos + 2])[0] + 4
            errs.append(struct.unpack(">ih", d[pos:pos + 6])[1])
            pos += 6
        return errs

    def end(txn, e, commit):
        d = request(s, 26, 0, kstr(txn) + struct.pack(">qhb", pid, e, 1 if commit else 0))
        return struct.unpack(">ih", d[:6])[1]

    out.append("not_added=%d" % produce(txn_id, batch(0)))
    out.append("no_txn_id=%d" % produce(None, batch(0)))
    errs = add_partitions(["no-such-topic", topic])
    out.append("add_unknown=%d add_beside=%d" % tuple(errs))
    out.append("add=%d" % add_partitions([topic])[0])
    out.append("produce=%d" % produce(txn_id, batch(0)))
    out.append("end_unknown=%d" % end(txn_id + "-none", epoch, True))
    out.append("end_old_epoch=%d" % end(txn_id, epoch - 1, True))
    out.append("commit=%d" % end(txn_id, epoch, True))
    out.append("commit_again=%d" % end(txn_id, epoch, True))
    out.append("abort_after=%d" % end(txn_id, epoch, False))
    print(" ".join(out))


def fetch(addr, topic, isolation):
    from idempotence import connect, kstr, request

    body = (struct.pack(">iiiib", -1, 0, 1, 1 << 20, int(isolation)) + struct.pack(">i", 1) + kstr(topic)
            + struct.pack(">i", 1) + struct.pack(">iqi", 0, 0, 1 << 20))
    d = request(connect(addr), 1, 4, body)
    pos = 4 + 4                                     # throttle, topics count
    pos += 2 + struct.unpack(">h", d[pos:pos + 2])[0] + 4
    pos += 4 + 2 + 8 + 8                            # index, error, hw, lso
    n = struct.unpack(">i", d[pos:pos + 4])[0]
    pos += 4
    aborted = []
    for _ in range(max(n, 0)):
        aborted.append("%d:%d" % struct.unpack(">qq", d[pos:pos + 16]))
        pos += 16
    rlen = struct.unpack(">i", d[pos:pos + 4])[0]
    first = struct.unpack(">q", d[pos + 4:pos + 12])[0] if rlen > 0 else -1
    print("aborted=%s first_batch=%d" % ("null" if n < 0 else ",".join(aborted), first))


def findcoord(addr, key):
    from idempotence import connect, kstr, request

    d = request(connect(addr), 10, 1, kstr(key) + struct.pack(">b", 1))
    err = struct.unpack(">h", d[4:6])[0]
    mlen = struct.unpack(">h", d[6:8])[0]
    print(err, d[8:8 + mlen].decode() if mlen > 0 else "")


def main():
    cmd = sys.argv[1]
    a = sys.argv[2:]
    if cmd in ("commit", "abort"):
        write(a[0], a[1], a[2], int(a[3]), a[4], cmd == "commit")
    elif cmd == "consume":
        consume(a[0], a[1], a[2])
    elif cmd == "fenced":
        fenced(a[0], a[1], a[2])
    elif cmd == "open":
        open_txn(a[0], a[1], a[2], int(a[3]), a[4], int(a[5]), a[6] if len(a) > 6 else None)
    elif cmd == "fetch":
        fetch(a[0], a[1], a[2])
    elif cmd == "findcoord":
        findcoord(a[0], a[1])
    elif cmd == "raw":
        raw(a[0], a[1], a[2])
    elif cmd == "steps":
        steps(a[0], a[1], a[2])
    elif cmd == "loop":
        loop(a[0], a[1], a[2], a[3], a[4], int(a[5]) if len(a) > 5 else None)
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
