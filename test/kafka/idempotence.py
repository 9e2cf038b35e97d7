#!/usr/bin/python3
"""Idempotent producers against mqlog's Kafka listener, for 163_kafka_idempotence.pl.

  idempotence.py initpid HOST:PORT [VERSION]
      InitProducerId (v1 unless VERSION) without a transactional id; prints
      "ERROR PRODUCER_ID EPOCH".

  idempotence.py initpid-txn HOST:PORT TXN_ID
      InitProducerId v1 with a transactional id; prints "ERROR PRODUCER_ID EPOCH".

  idempotence.py batch PID EPOCH SEQ COUNT [PREFIX]
      Prints in hex one record batch v2 (kafka-python's encoder) of COUNT
      records with values (and keys) PREFIX-SEQ, PREFIX-SEQ+1, ... and producer id,
      epoch and base sequence as given.

  idempotence.py send HOST:PORT TOPIC PARTITION PID EPOCH SEQ COUNT [PREFIX]...
      Produce v7 (acks all) of such a batch, on one connection for each
      group of arguments after TOPIC PARTITION (6 at a time: PID EPOCH SEQ
      COUNT PREFIX REPEAT, REPEAT the times it is sent); prints
      "ERROR BASE_OFFSET" per answer.

  idempotence.py confluent HOST:PORT TOPIC N PREFIX [RESTART_AFTER]
      confluent-kafka (librdkafka) with enable.idempotence and acks all
      produces N records PREFIX-0 ... PREFIX-(N-1) to partition 0 and
      flushes; prints "delivered D failed F" and the producer's errors.
      With RESTART_AFTER, it waits after that many records for the file
      named by the environment's IDEM_GO to exist before going on (the test
      restarts the listener meanwhile).  The environment's IDEM_PACE_MS, if
      set, is slept after each record, so that a run lasts while the test
      cuts its connections.
"""
import os
import socket
import struct
import sys
import time

from kafka.record.default_records import DefaultRecordBatchBuilder

from kwire import frame, kstr, read_frame


def request(sock, key, version, body, corr=1):
    sock.sendall(frame(key, version, body, corr, "idem"))
    return read_frame(sock)[4:]          # after the correlation id


def connect(addr):
    host, port = addr.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=60)


def initpid(addr, version=1, txn=None):
    s = connect(addr)
    if version >= 2:
        # request header v2: client id, then tagged fields; compact string
        tx = b"\x00" if txn is None else bytes([len(txn) + 1]) + txn.encode()
        body = tx + struct.pack(">i", 60000)
        if version >= 3:
            body += struct.pack(">qh", -1, -1)
        body += b"\x00"
        s.sendall(frame(22, version, body, 1, "idem", flexible=True))
        data = read_frame(s)[5:]         # correlation id, response header tags
    else:
        data = request(s, 22, version, kstr(txn) + struct.pack(">i", 60000))
    _, err, pid, epoch = struct.unpack(">ihqh", data[:16])
    print(err, pid, epoch)


def batch(pid, epoch, seq, count, prefix):
    # a time of the last second (retention would drop an older one), the
    # same for every sending of the batch within that second
    now = int(time.time()) * 1000
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=pid, producer_epoch=epoch,
                                  base_sequence=seq, batch_size=1 << 30)
    for i in range(count):
        v = ("%s-%d" % (prefix, seq + i)).encode()
        b.append(i, timestamp=now + i, key=v, value=v, headers=[])
    return bytes(b.build())


def produce(sock, topic, partition, records):
    body = (kstr(None) + struct.pack(">hi", -1, 30000) + struct.pack(">i", 1) + kstr(topic)
            + struct.pack(">i", 1) + struct.pack(">i", partition)
            + struct.pack(">i", len(records)) + records)
    data = request(sock, 0, 7, body)
    # responses: [topic [partition error base_offset append_time log_start]]
    pos = 4
    tlen = struct.unpack(">h", data[pos:pos + 2])[0]
    pos += 2 + tlen + 4
    _, err, base = struct.unpack(">ihq", data[pos:pos + 14])
    return err, base


def send(addr, topic, partition, groups):
    for g in range(0, len(groups), 6):
        pid, epoch, seq, count, prefix, repeat = groups[g:g + 6]
        records = batch(int(pid), int(epoch), int(seq), int(count), prefix)
        for _ in range(int(repeat)):
            s = connect(addr)
            err, base = produce(s, topic, int(partition), records)
            s.close()
            print(err, base)


def confluent(addr, topic, n, prefix, restart_after=None):
    from confluent_kafka import Producer

    errors = []
    done = {"ok": 0, "failed": 0}

    def report(err, msg):
        if err is not None:
            done["failed"] += 1
            errors.append(str(err))
        else:
            done["ok"] += 1

    p = Producer({"bootstrap.servers": addr, "enable.idempotence": True, "acks": "all",
                  "linger.ms": 5, "batch.num.messages": 7, "message.timeout.ms": 120000,
                  "retry.backoff.ms": 200, "error_cb": lambda e: errors.append("error_cb: %s" % e)})
    pace = float(os.environ.get("IDEM_PACE_MS", "0")) / 1000.0
    for i in range(n):
        if pace:
            p.poll(pace)
        if restart_after is not None and i == restart_after:
            p.flush(60)
            go = os.environ["IDEM_GO"]
            print("waiting", flush=True)
            deadline = time.time() + 120
            while not os.path.exists(go) and time.time() < deadline:
                p.poll(0.2)
        while True:
            try:
                p.produce(topic, value=("%s-%d" % (prefix, i)).encode(), partition=0,
                          on_delivery=report)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    p.flush(120)
    print("delivered %d failed %d" % (done["ok"], done["failed"]))
    for e in errors:
        print(e)


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "initpid":
        initpid(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    elif cmd == "initpid-txn":
        initpid(sys.argv[2], 1, sys.argv[3])
    elif cmd == "batch":
        print(batch(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]),
                    sys.argv[6] if len(sys.argv) > 6 else "v").hex())
    elif cmd == "send":
        send(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
    elif cmd == "confluent":
        confluent(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5],
                  int(sys.argv[6]) if len(sys.argv) > 6 else None)
    else:
        sys.exit(__doc__)
