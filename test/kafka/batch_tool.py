#!/usr/bin/python3
"""Kafka record batches with python3-kafka (kafka.record), for the tests.

mqlog's tests use it as an encoder and decoder that nobody here wrote:

  batch_tool.py decode HEX [HEX ...]
      Decode record batches v2 (hex, as psql prints bytea without the \\x),
      check each CRC, and print one JSON line per record:
      {"batch": i, "offset": o, "timestamp": ms, "key": hex|null,
       "value": hex|null, "headers": [[key, hex|null], ...], "codec": name}

  batch_tool.py encode CODEC < records.json
      Encode the records (a JSON list of {"timestamp", "key", "value",
      "headers"} with hex strings) as one batch, base offset 0, and print
      it in hex.  CODEC: none, gzip, snappy, lz4, zstd.
"""
import json
import sys

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
NAMES = {v: k for k, v in CODECS.items()}


def unhex(h):
    return None if h is None else bytes.fromhex(h)


def tohex(b):
    return None if b is None else bytes(b).hex()


def decode(hexes):
    for i, h in enumerate(hexes):
        buf = bytearray(bytes.fromhex(h))
        batch = DefaultRecordBatch(buf)
        if not batch.validate_crc():
            print("batch %d: CRC mismatch" % i, file=sys.stderr)
            sys.exit(1)
        for rec in batch:
            print(json.dumps({
                "batch": i,
                "offset": rec.offset,
                "timestamp": rec.timestamp,
                "key": tohex(rec.key),
                "value": tohex(rec.value),
                "headers": [[k, tohex(v)] for k, v in rec.headers],
                "codec": NAMES[batch.compression_type],
            }, sort_keys=True))


def encode(codec):
    records = json.load(sys.stdin)
    b = DefaultRecordBatchBuilder(magic=2, compression_type=CODECS[codec],
                                  is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 30)
    for i, r in enumerate(records):
        meta = b.append(i, timestamp=r["timestamp"], key=unhex(r.get("key")),
                        value=unhex(r.get("value")),
                        headers=[(k, unhex(v)) for k, v in r.get("headers", [])])
        if meta is None:
            sys.exit("record %d does not fit" % i)
    print(bytes(b.build()).hex())


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "decode":
        decode(sys.argv[2:] if len(sys.argv) > 2 else sys.stdin.read().split())
    elif len(sys.argv) == 3 and sys.argv[1] == "encode":
        encode(sys.argv[2])
    else:
        sys.exit(__doc__)
