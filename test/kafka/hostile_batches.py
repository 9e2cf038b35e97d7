#!/usr/bin/python3
"""Hostile Kafka record batches for test/perl/090_kafka_format.pl.

Prints one line per batch: "<name> <hex>".  Each batch has a valid CRC-32C
(computed with python3-kafka's kafka.record.util.calc_crc32c), so that what
mqlog checks after the CRC is what is tested.  They are the cases a fuzzing
session found (see the test for what mqlog must answer).
"""
import gzip
import struct

import lz4.frame
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.util import calc_crc32c

TS = 1700000000000


def build(records, codec=0):
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 30)
    for i, (key, value, headers) in enumerate(records):
        b.append(i, timestamp=TS + i, key=key, value=value, headers=headers)
    return bytearray(b.build())


def fix(batch):
    """batchLength and CRC made right for whatever the bytes are now."""
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">I", batch, 17, calc_crc32c(bytes(batch[21:])))
    return batch


def with_records(batch, payload, codec):
    """The same header over other record bytes, with codec set."""
    out = bytearray(batch[:61]) + payload
    attrs = struct.unpack_from(">h", out, 21)[0]
    struct.pack_into(">h", out, 21, (attrs & ~7) | codec)
    return fix(out)


plain = build([(b"k%d" % i, b"value %d " % i * 20, [("h", b"x")]) for i in range(40)])
records = bytes(plain[61:])
half = len(records) // 2

cases = {}
# a client claiming log-append time: only a broker sets that bit
b = bytearray(plain)
struct.pack_into(">h", b, 21, 0x0008)
cases["log_append_time_bit"] = fix(b)
# a maxTimestamp that lies (0): readers skip batches by it
b = bytearray(plain)
struct.pack_into(">q", b, 35, 0)
cases["max_timestamp_zero"] = fix(b)
# timestamps timestamptz cannot hold
b = bytearray(plain)
struct.pack_into(">q", b, 27, 2 ** 63 - 1)
struct.pack_into(">q", b, 35, 2 ** 63 - 1)
cases["timestamp_huge"] = fix(b)
# a header key that is not UTF-8, and one with a zero byte
one = build([(b"k", b"v", [("h", b"x")])])
b = bytearray(one)
i = b.rindex(b"\x02h\x02x")
b[i + 1:i + 2] = b"\xff"
cases["header_key_not_utf8"] = fix(b)
b = bytearray(one)
b[i + 1:i + 2] = b"\x00"
cases["header_key_zero_byte"] = fix(b)
# a record longer than its fields (a byte of garbage inside it)
b = bytearray(one)
reclen_at = 61
assert b[reclen_at] == 0x18      # zigzag 12
b[reclen_at] = 0x1a              # 13
b += b"\x00"
cases["record_trailing_byte"] = fix(b)
# more record headers in one batch than mqlog decodes (1,000,000)
cases["too_many_headers"] = build(
    [(b"k", b"v", [("", b"")] * 1001) for _ in range(1000)], codec=4)
# valid and more than one stream: two gzip members, two lz4 frames
cases["gzip_two_members"] = with_records(plain, gzip.compress(records[:half]) + gzip.compress(records[half:]), 1)
cases["lz4_two_frames"] = with_records(plain, lz4.frame.compress(records[:half]) + lz4.frame.compress(records[half:]), 3)
# ... and one with garbage after the stream
cases["gzip_trailing_garbage"] = with_records(plain, gzip.compress(records) + b"garbage!", 1)
cases["lz4_trailing_garbage"] = with_records(plain, lz4.frame.compress(records) + b"garbage!", 3)

for name, batch in cases.items():
    print(name, bytes(batch).hex())
