#!/usr/bin/python3
"""A seeded, structure-aware fuzzer of mqlog's Kafka listener, bounded in
time, with a watchdog (test/perl/156_kafka_fuzz.pl; doc/testing.md).

  listener_fuzz.py --port PORT --pid LISTENER_PID --topic T --seed N --seconds S
                   [--sasl-user U --sasl-password P] [bounds, see --help]

It asks the listener which APIs and versions it serves (ApiVersions v0),
and needs a schema of its own (SCHEMAS below, after Kafka's message
definitions) for every one: a version served without one is a failure that
says which, so a version added to src/kafka/api_versions.c is fuzzed or the
test says it is not.  For each API at each version it builds a valid
request (flexible versions with compact strings, compact arrays and tagged
fields, request header v2) and sends it first unchanged, to prove the
schema: every valid request is answered, with its correlation id.  Then,
until the time is up, round-robin over every (API, version) and every
connection state, it sends the request mutated:

  - in its values: array elements repeated (the same partition many
    times), integers at their limits, null and over-long strings, strings
    with zero bytes and invalid UTF-8, random tagged fields (flexible
    versions), an unknown version or API key;
  - in its bytes, where the encoder marked each field: bit flips, a string
    or bytes length or an array count set to -1, 2^31 - 1, 2^31, 2^32 - 1,
    one more or one less, over-long varints, the frame truncated or with
    junk after it, a size field that lies (more than is sent, negative,
    zero), two requests in one frame, several frames in one write;
  - Produce's record batches: header fields (record count, offsets delta,
    magic, codec 5-7, control and transactional bits, timestamps), the
    records inside the compression mutated and compressed again, the
    compressed bytes flipped or cut, a batch compressed twice, a batch
    inside a batch, several streams with garbage between; each with its
    CRC made right again, so the mutation reaches the decompression and the
    record decoder, not just the CRC check.  Codecs: gzip, snappy (xerial
    and raw), lz4, zstd.

Decompression bombs, several times a run: batches of a few kB to a few MB
that decompress to about 960 MB each (gzip members, lz4 frames, a zstd
frame, of zeros, under codec.c's 1 GB refusal; a valid batch whose one
record's value is 960 MB of zeros; snappy blocks of 128 MB; a raw snappy
block whose header claims 1 GB), one Produce with one per partition and one
with the zstd bomb 16 times for the same partition.

Connection states: without SASL; with SASL, before authentication (every
API frame, expected to close the connection unanswered, except ApiVersions,
SaslHandshake and SaslAuthenticate; SASL's own exchange mutated, PLAIN and
SCRAM-SHA-256 tokens) and after a successful PLAIN (or SCRAM) exchange.
Beside them, all along: connections that send nothing and connections idle
after authenticating (after one request, without SASL) (--idle, half and
half, each opened again once the listener closed it), connections that
announce a 64 MB frame and trickle a byte every 0.25 s (--trickle, opened
again likewise), and twice a run, connections that each send a whole frame
of --big-mb at once (--big).  Each fuzzing connection comes from a loopback
address of its own (127.64.0.0/10): the listener slows down failed logins
per address, and the fuzzer's own must slow down neither its valid logins
nor the watchdog's, which come from 127.0.0.1.

The watchdog: a thread reads the listener's /proc/PID/status every 50 ms
(VmRSS, VmHWM, RssAnon), and another sends Metadata every 0.5 s on a
well-behaved connection of its own (authenticated when SASL is on) and
times the answer.  Failures (exit 1, each on a line of its own on stderr,
then the summary):

  - the listener is not the same process at the end (pid and start time);
  - its peak resident size (VmHWM) passed --max-rss-mb (default 256);
  - a Metadata of the watchdog took longer than --max-latency (default
    1 s) or was not answered, or its connection was closed;
  - a valid request was not answered, or an answer carried another
    correlation id than its request's (framing lost);
  - before authentication, a request other than ApiVersions, SaslHandshake
    and SaslAuthenticate was answered, or any request after a failed
    authentication was;
  - with --expect-auth-close S (--expect-idle-close S): a connection that
    sent nothing (that is idle after authenticating, or after a request)
    still open S + 2 seconds after its last byte (more on a machine loaded
    beyond its cores: idle_slack);

To protect the machine, the listener's address space is capped at
--cap-as-mb (default 3072, prlimit: the listener gets out-of-memory errors
instead of taking the host's memory) and it is killed (SIGKILL) when its
VmRSS passes --kill-rss-mb (default 1536); either is reported.

The run is bounded whatever the listener does: every socket has a timeout,
the loop stops at --seconds, and the threads are joined with timeouts.  On
success it prints one line: requests per API, peak RSS, latency.  The
sequence of mutations is the seed's (timing still varies from run to run).
"""
import argparse
import base64
import hashlib
import hmac
import gzip
import os
import random
import resource
import select
import signal
import socket
import struct
import sys
import threading
import time
import traceback

import lz4.frame
import snappy
import zstandard
from kafka.record.default_records import DefaultRecordBatchBuilder

try:  # the C extension is a hundred times faster than kafka-python's CRC
    import crcmod.predefined
    calc_crc32c = crcmod.predefined.mkCrcFun('crc-32c')
except ImportError:
    from kafka.record.util import calc_crc32c

MB = 1 << 20
SENT_NOTHING, AFTER_AUTH, AFTER_REQUEST = 'that sent nothing', 'idle after authentication', 'idle after a request'


def idle_slack():
    """the seconds an idle connection may outlive its timeout: the listener
    looks at idle connections between turns of its loop, and a turn takes
    longer when the machine runs more than its cores (2 s, and 2 s more per
    core's worth of load above one per core: 10 s at a load of 10 on 2)"""
    per_core = os.getloadavg()[0] / (os.cpu_count() or 1)
    return 2.0 + 2.0 * max(0.0, per_core - 1.0)
PRE_AUTH_KEYS = (17, 18, 36)    # served before SASL authentication
API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36

# ---------------------------------------------------------------------------
# Schemas, after Kafka's clients/src/main/resources/common/message/*.json.
# A field: (name, type, versions); struct arrays carry their fields.
# Types: int8 int16 int32 int64 bool uuid, str (nullable or not: a null is a
# mutation), bytes, records, [str] [int32] (arrays of those), [] (array of
# structs).  Versions: "3+" or "0-2".
# ---------------------------------------------------------------------------


def f(name, typ, versions='0+', sub=None):
    if versions.endswith('+'):
        lo, hi = int(versions[:-1]), 1 << 15
    else:
        lo, hi = (int(x) for x in versions.split('-'))
    return (name, typ, lo, hi, sub)


# an ACL binding, and the filter of the same shape (the ACL APIs)
ACL_FILTER = [
    f('resource_type', 'int8'),
    f('resource_name', 'str'),
    f('pattern_type', 'int8', '1+'),
    f('principal', 'str'),
    f('host', 'str'),
    f('operation', 'int8'),
    f('permission_type', 'int8')]

# key: (name, first flexible version, versions known here, fields)
SCHEMAS = {
    0: ('Produce', 9, (0, 9), [
        f('transactional_id', 'str', '3+'),
        f('acks', 'int16'),
        f('timeout_ms', 'int32'),
        f('topics', '[]', sub=[
            f('name', 'str'),
            f('partitions', '[]', sub=[
                f('index', 'int32'),
                f('records', 'records')])])]),
    1: ('Fetch', 12, (0, 12), [
        f('replica_id', 'int32'),
        f('max_wait_ms', 'int32'),
        f('min_bytes', 'int32'),
        f('max_bytes', 'int32', '3+'),
        f('isolation_level', 'int8', '4+'),
        f('session_id', 'int32', '7+'),
        f('session_epoch', 'int32', '7+'),
        f('topics', '[]', sub=[
            f('topic', 'str'),
            f('partitions', '[]', sub=[
                f('partition', 'int32'),
                f('current_leader_epoch', 'int32', '9+'),
                f('fetch_offset', 'int64'),
                f('last_fetched_epoch', 'int32', '12+'),
                f('log_start_offset', 'int64', '5+'),
                f('partition_max_bytes', 'int32')])]),
        f('forgotten_topics_data', '[]', '7+', sub=[
            f('topic', 'str'),
            f('partitions', '[int32]')]),
        f('rack_id', 'str', '11+')]),
    2: ('ListOffsets', 6, (0, 7), [
        f('replica_id', 'int32'),
        f('isolation_level', 'int8', '2+'),
        f('topics', '[]', sub=[
            f('name', 'str'),
            f('partitions', '[]', sub=[
                f('partition_index', 'int32'),
                f('current_leader_epoch', 'int32', '4+'),
                f('timestamp', 'int64'),
                f('max_num_offsets', 'int32', '0-0')])])]),
    3: ('Metadata', 9, (0, 12), [
        f('topics', '[]', sub=[
            f('topic_id', 'uuid', '10+'),
            f('name', 'str')]),
        f('allow_auto_topic_creation', 'bool', '4+'),
        f('include_cluster_authorized_operations', 'bool', '8-10'),
        f('include_topic_authorized_operations', 'bool', '8+')]),
    8: ('OffsetCommit', 8, (0, 8), [
        f('group_id', 'str'),
        f('generation_id', 'int32', '1+'),
        f('member_id', 'str', '1+'),
        f('group_instance_id', 'str', '7+'),
        f('retention_time_ms', 'int64', '2-4'),
        f('topics', '[]', sub=[
            f('name', 'str'),
            f('partitions', '[]', sub=[
                f('partition_index', 'int32'),
                f('committed_offset', 'int64'),
                f('committed_leader_epoch', 'int32', '6+'),
                f('commit_timestamp', 'int64', '1-1'),
                f('committed_metadata', 'str')])])]),
    9: ('OffsetFetch', 6, (0, 7), [
        f('group_id', 'str'),
        f('topics', '[]', sub=[
            f('name', 'str'),
            f('partition_indexes', '[int32]')]),
        f('require_stable', 'bool', '7+')]),
    10: ('FindCoordinator', 3, (0, 3), [
        f('key', 'str'),
        f('key_type', 'int8', '1+')]),
    11: ('JoinGroup', 6, (0, 7), [
        f('group_id', 'str'),
        f('session_timeout_ms', 'int32'),
        f('rebalance_timeout_ms', 'int32', '1+'),
        f('member_id', 'str'),
        f('group_instance_id', 'str', '5+'),
        f('protocol_type', 'str'),
        f('protocols', '[]', sub=[
            f('name', 'str'),
            f('metadata', 'bytes')])]),
    12: ('Heartbeat', 4, (0, 4), [
        f('group_id', 'str'),
        f('generation_id', 'int32'),
        f('member_id', 'str'),
        f('group_instance_id', 'str', '3+')]),
    13: ('LeaveGroup', 4, (0, 4), [
        f('group_id', 'str'),
        f('member_id', 'str', '0-2'),
        f('members', '[]', '3+', sub=[
            f('member_id', 'str'),
            f('group_instance_id', 'str')])]),
    14: ('SyncGroup', 4, (0, 5), [
        f('group_id', 'str'),
        f('generation_id', 'int32'),
        f('member_id', 'str'),
        f('group_instance_id', 'str', '3+'),
        f('protocol_type', 'str', '5+'),
        f('protocol_name', 'str', '5+'),
        f('assignments', '[]', sub=[
            f('member_id', 'str'),
            f('assignment', 'bytes')])]),
    15: ('DescribeGroups', 5, (0, 5), [
        f('groups', '[str]'),
        f('include_authorized_operations', 'bool', '3+')]),
    16: ('ListGroups', 3, (0, 5), [
        f('states_filter', '[str]', '4+'),
        f('types_filter', '[str]', '5+')]),
    17: ('SaslHandshake', 99, (0, 1), [
        f('mechanism', 'str')]),
    18: ('ApiVersions', 3, (0, 3), [
        f('client_software_name', 'str', '3+'),
        f('client_software_version', 'str', '3+')]),
    19: ('CreateTopics', 5, (0, 5), [
        f('topics', '[]', sub=[
            f('name', 'str'),
            f('num_partitions', 'int32'),
            f('replication_factor', 'int16'),
            f('assignments', '[]', sub=[
                f('partition_index', 'int32'),
                f('broker_ids', '[int32]')]),
            f('configs', '[]', sub=[
                f('name', 'str'),
                f('value', 'str')])]),
        f('timeout_ms', 'int32'),
        f('validate_only', 'bool', '1+')]),
    20: ('DeleteTopics', 4, (0, 5), [
        f('topic_names', '[str]'),
        f('timeout_ms', 'int32')]),
    23: ('OffsetForLeaderEpoch', 4, (0, 4), [
        f('replica_id', 'int32', '3+'),
        f('topics', '[]', sub=[
            f('topic', 'str'),
            f('partitions', '[]', sub=[
                f('partition', 'int32'),
                f('current_leader_epoch', 'int32', '2+'),
                f('leader_epoch', 'int32')])])]),
    29: ('DescribeAcls', 2, (0, 3), ACL_FILTER),
    30: ('CreateAcls', 2, (0, 3), [
        f('creations', '[]', sub=ACL_FILTER)]),
    31: ('DeleteAcls', 2, (0, 3), [
        f('filters', '[]', sub=ACL_FILTER)]),
    32: ('DescribeConfigs', 4, (0, 4), [
        f('resources', '[]', sub=[
            f('resource_type', 'int8'),
            f('resource_name', 'str'),
            f('configuration_keys', '[str]')]),
        f('include_synonyms', 'bool', '1+'),
        f('include_documentation', 'bool', '3+')]),
    21: ('DeleteRecords', 2, (0, 2), [
        f('topics', '[]', sub=[
            f('name', 'str'),
            f('partitions', '[]', sub=[
                f('partition_index', 'int32'),
                f('offset', 'int64')])]),
        f('timeout_ms', 'int32')]),
    22: ('InitProducerId', 2, (0, 5), [
        f('transactional_id', 'str'),
        f('transaction_timeout_ms', 'int32'),
        f('producer_id', 'int64', '3+'),
        f('producer_epoch', 'int16', '3+')]),
    24: ('AddPartitionsToTxn', 3, (0, 3), [
        f('transactional_id', 'str'),
        f('producer_id', 'int64'),
        f('producer_epoch', 'int16'),
        f('topics', '[]', sub=[
            f('name', 'str'),
            f('partitions', '[int32]')])]),
    25: ('AddOffsetsToTxn', 3, (0, 3), [
        f('transactional_id', 'str'),
        f('producer_id', 'int64'),
        f('producer_epoch', 'int16'),
        f('group_id', 'str')]),
    26: ('EndTxn', 3, (0, 3), [
        f('transactional_id', 'str'),
        f('producer_id', 'int64'),
        f('producer_epoch', 'int16'),
        f('committed', 'bool')]),
    28: ('TxnOffsetCommit', 3, (0, 3), [
        f('transactional_id', 'str'),
        f('group_id', 'str'),
        f('producer_id', 'int64'),
        f('producer_epoch', 'int16'),
        f('generation_id', 'int32', '3+'),
        f('member_id', 'str', '3+'),
        f('group_instance_id', 'str', '3+'),
        f('topics', '[]', sub=[
            f('name', 'str'),
            f('partitions', '[]', sub=[
                f('partition_index', 'int32'),
                f('committed_offset', 'int64'),
                f('committed_leader_epoch', 'int32', '2+'),
                f('committed_metadata', 'str')])])]),
    33: ('AlterConfigs', 2, (0, 2), [
        f('resources', '[]', sub=[
            f('resource_type', 'int8'),
            f('resource_name', 'str'),
            f('configs', '[]', sub=[
                f('name', 'str'),
                f('value', 'str')])]),
        f('validate_only', 'bool')]),
    35: ('DescribeLogDirs', 2, (0, 4), [
        f('topics', '[]', sub=[
            f('topic', 'str'),
            f('partitions', '[int32]')])]),
    37: ('CreatePartitions', 2, (0, 3), [
        f('topics', '[]', sub=[
            f('name', 'str'),
            f('count', 'int32'),
            f('assignments', '[]', sub=[
                f('broker_ids', '[int32]')])]),
        f('timeout_ms', 'int32'),
        f('validate_only', 'bool')]),
    42: ('DeleteGroups', 2, (0, 2), [
        f('groups_names', '[str]')]),
    44: ('IncrementalAlterConfigs', 1, (0, 1), [
        f('resources', '[]', sub=[
            f('resource_type', 'int8'),
            f('resource_name', 'str'),
            f('configs', '[]', sub=[
                f('name', 'str'),
                f('config_operation', 'int8'),
                f('value', 'str')])]),
        f('validate_only', 'bool')]),
    36: ('SaslAuthenticate', 2, (0, 2), [
        f('auth_bytes', 'bytes')]),
    47: ('OffsetDelete', 1, (0, 1), [
        f('group_id', 'str'),
        f('topics', '[]', sub=[
            f('name', 'str'),
            f('partitions', '[]', sub=[
                f('partition_index', 'int32')])])]),
    60: ('DescribeCluster', 0, (0, 1), [
        f('include_cluster_authorized_operations', 'bool'),
        f('endpoint_type', 'int8', '1+')]),
}


def api_name(key):
    return SCHEMAS[key][0] if key in SCHEMAS else 'key%d' % key


def is_flexible(key, version):
    return key in SCHEMAS and version >= SCHEMAS[key][1]

# ---------------------------------------------------------------------------
# The encoder: bytes, and a mark for every field a mutation may aim at
# ---------------------------------------------------------------------------


def uvarint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7f
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def varint(n):
    return uvarint((n << 1) ^ (n >> 63))


class Enc:
    """bytes being built, with marks (offset, size, kind): kinds len16,
    len32, count (int32 lengths and counts), ulen, ucount, tags, tag,
    tagsize (unsigned varints), int8 int16 int32 int64"""

    def __init__(self):
        self.buf = bytearray()
        self.marks = []

    def put(self, fmt, v, kind):
        self.marks.append((len(self.buf), struct.calcsize(fmt), kind))
        self.buf += struct.pack(fmt, v)

    def uv(self, v, kind):
        b = uvarint(v)
        self.marks.append((len(self.buf), len(b), kind))
        self.buf += b

    def raw(self, b):
        self.buf += b


INT_FMT = {'int8': '>b', 'bool': '>b', 'int16': '>h', 'int32': '>i', 'int64': '>q'}


def to_bytes(s):
    return s.encode('utf-8', 'surrogatepass') if isinstance(s, str) else s


def enc_int(e, typ, v):
    fmt = INT_FMT[typ]
    bits = struct.calcsize(fmt) * 8
    v = int(v) & ((1 << bits) - 1)
    if v >= 1 << (bits - 1):
        v -= 1 << bits
    e.put(fmt, v, 'int%d' % bits)


def enc_str(e, v, flex, kind16='len16'):
    """a string (int16 length) or bytes (int32 length) or, flexible, compact"""
    if v is None:
        if flex:
            e.uv(0, 'ulen')
        elif kind16 == 'len16':
            e.put('>h', -1, 'len16')
        else:
            e.put('>i', -1, 'len32')
        return
    b = to_bytes(v)
    if flex:
        e.uv(len(b) + 1, 'ulen')
    elif kind16 == 'len16':
        e.put('>H', len(b) & 0xffff, 'len16')   # over 32767: misframed, on purpose
    else:
        e.put('>i', len(b), 'len32')
    e.raw(b)


def enc_count(e, v, flex):
    if v is None:
        if flex:
            e.uv(0, 'ucount')
        else:
            e.put('>i', -1, 'count')
    elif flex:
        e.uv(len(v) + 1, 'ucount')
    else:
        e.put('>i', len(v), 'count')


def enc_tags(e, tags):
    e.uv(len(tags), 'tags')
    for tag, data in tags:
        e.uv(tag, 'tag')
        e.uv(len(data), 'tagsize')
        e.raw(data)


def enc_struct(e, fields, value, version, flex):
    for name, typ, lo, hi, sub in fields:
        if not lo <= version <= hi:
            continue
        v = value.get(name)
        if typ in INT_FMT:
            enc_int(e, typ, v or 0)
        elif typ == 'uuid':
            e.raw(v if isinstance(v, bytes) and len(v) == 16 else bytes(16))
        elif typ == 'str':
            enc_str(e, v if name in value else '', flex)
        elif typ in ('bytes', 'records'):
            enc_str(e, v if name in value else b'', flex, 'len32')
        elif typ == '[]':
            v = value.get(name, [])
            enc_count(e, v, flex)
            for elem in v or []:
                enc_struct(e, sub, elem, version, flex)
        elif typ == '[str]':
            v = value.get(name, [])
            enc_count(e, v, flex)
            for s in v or []:
                enc_str(e, s, flex)
        elif typ == '[int32]':
            v = value.get(name, [])
            enc_count(e, v, flex)
            for n in v or []:
                enc_int(e, 'int32', n)
        else:
            raise ValueError(typ)
    if flex:
        enc_tags(e, value.get('_tags', []))


def encode_request(key, version, corr, value, client_id='fuzz', header_tags=()):
    """the whole frame, size first, and the marks of its fields"""
    flex = is_flexible(key, version)
    e = Enc()
    e.put('>i', 0, 'size')
    e.put('>h', key, 'int16')
    e.put('>h', version, 'int16')
    e.put('>i', corr, 'int32')
    enc_str(e, client_id, False)
    if flex:
        enc_tags(e, list(header_tags))
    if key in SCHEMAS:
        enc_struct(e, SCHEMAS[key][3], value, version, flex)
    else:
        e.raw(value.get('_raw', b''))
    struct.pack_into('>i', e.buf, 0, len(e.buf) - 4)
    return e

# ---------------------------------------------------------------------------
# Record batches (v2): valid ones from python3-kafka's builder, then ours
# ---------------------------------------------------------------------------


def gzip_c(b):
    return gzip.compress(b, 6)


def snappy_xerial(b, block=32 * 1024):
    out = bytearray(b'\x82SNAPPY\x00' + struct.pack('>ii', 1, 1))
    for i in range(0, max(len(b), 1), block):
        c = snappy.compress(b[i:i + block])
        out += struct.pack('>i', len(c)) + c
    return bytes(out)


def lz4_c(b):
    return lz4.frame.compress(b)


def zstd_c(b):
    return zstandard.ZstdCompressor().compress(b)


COMPRESS = {0: lambda b: b, 1: gzip_c, 2: snappy_xerial, 3: lz4_c, 4: zstd_c}
CODEC_NAMES = {0: 'none', 1: 'gzip', 2: 'snappy', 3: 'lz4', 4: 'zstd'}
TS = 1700000000000


def valid_batch(rng, codec, nrecords=None):
    """a batch python3-kafka built, codec as asked"""
    n = nrecords or rng.choice([1, 1, 2, 5, 20])
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 30)
    for i in range(n):
        key = None if rng.random() < 0.3 else b'k%d' % rng.randrange(1000)
        value = None if rng.random() < 0.05 else bytes(rng.randrange(256) for _ in range(rng.randrange(0, 64)))
        headers = [('h%d' % j, b'v') for j in range(rng.choice([0, 0, 1, 3]))]
        b.append(i, timestamp=TS + i, key=key, value=value, headers=headers)
    return bytearray(b.build())


def fix_batch(batch):
    """batchLength and CRC right for whatever the bytes are now"""
    if len(batch) >= 61:
        struct.pack_into('>i', batch, 8, len(batch) - 12)
        struct.pack_into('>I', batch, 17, calc_crc32c(bytes(batch[21:])))
    return batch


def with_payload(batch, payload, codec):
    out = bytearray(batch[:61]) + payload
    attrs = struct.unpack_from('>h', out, 21)[0]
    struct.pack_into('>h', out, 21, (attrs & ~7) | (codec & 7))
    return fix_batch(out)


def flip_bits(rng, b, n):
    b = bytearray(b)
    for _ in range(n):
        if b:
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
    return b


def mutate_records(rng, records):
    """the uncompressed records, hurt where their varints are"""
    r = bytearray(records)
    choice = rng.randrange(6)
    if choice == 0 and r:       # the first record's length: huge or negative
        r[0:1] = rng.choice([varint(2 ** 31 - 1), varint(-5), varint(0), uvarint(2 ** 64 - 1),
                             b'\xff' * 10])
    elif choice == 1:           # a record cut short
        r = r[:rng.randrange(len(r) + 1)]
    elif choice == 2:           # junk after the records
        r += bytes(rng.randrange(256) for _ in range(rng.randrange(1, 50)))
    elif choice == 3:           # a header count of 2^31 - 1 in a record of its own
        rec = b'\x00' + varint(0) + varint(0) + varint(-1) + varint(-1) + varint(2 ** 31 - 1)
        r = bytearray(varint(len(rec)) + rec)
    elif choice == 4:           # a key length past the end
        rec = b'\x00' + varint(0) + varint(0) + varint(2 ** 30) + b'k'
        r = bytearray(varint(len(rec)) + rec)
    else:
        r = flip_bits(rng, r, rng.randrange(1, 8))
    return bytes(r)


def mutated_batch(rng):
    """a record batch hurt in one of many ways, its CRC right again unless
    the CRC is what is hurt"""
    codec = rng.randrange(5)
    plain = valid_batch(rng, 0)
    records = bytes(plain[61:])
    kind = rng.randrange(12)
    if kind == 0:               # header fields
        b = valid_batch(rng, codec)
        at, fmt = rng.choice([(57, '>i'), (23, '>i'), (0, '>q'), (27, '>q'), (35, '>q'),
                              (43, '>q'), (51, '>h'), (53, '>i'), (12, '>i')])
        v = rng.choice([0, -1, 1, 2 ** 31 - 1, -2 ** 31, 2 ** 63 - 1, 12345])
        try:
            struct.pack_into(fmt, b, at, v)
        except struct.error:
            struct.pack_into(fmt, b, at, -1)
        return bytes(fix_batch(b))
    if kind == 1:               # magic, attributes: codecs 5-7, control, transactional
        b = valid_batch(rng, codec)
        if rng.random() < 0.3:
            b[16] = rng.choice([0, 1, 3, 255])
        else:
            attrs = rng.choice([5, 6, 7, 0x10, 0x20, 0x08, 0x30 | codec, 0xffff, 0x40 | codec])
            struct.pack_into('>h', b, 21, attrs - 0x10000 if attrs >= 0x8000 else attrs)
        return bytes(fix_batch(b))
    if kind == 2:               # the records hurt inside the compression
        return bytes(with_payload(plain, COMPRESS[codec](mutate_records(rng, records)), codec))
    if kind == 3:               # the compressed bytes flipped
        c = COMPRESS[codec or 4](records)
        return bytes(with_payload(plain, flip_bits(rng, c, rng.randrange(1, 6)), codec or 4))
    if kind == 4:               # the compressed bytes cut
        c = COMPRESS[codec or 1](records)
        return bytes(with_payload(plain, c[:rng.randrange(len(c))], codec or 1))
    if kind == 5:               # compressed twice
        c1, c2 = rng.randrange(1, 5), rng.randrange(1, 5)
        return bytes(with_payload(plain, COMPRESS[c2](COMPRESS[c1](records)), c2))
    if kind == 6:               # a batch inside a batch
        inner = valid_batch(rng, rng.randrange(5))
        c = rng.randrange(1, 5)
        return bytes(with_payload(plain, COMPRESS[c](bytes(inner)), c))
    if kind == 7:               # two streams with garbage between
        c = rng.choice([1, 3, 4])
        half = len(records) // 2
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 16)))
        return bytes(with_payload(plain, COMPRESS[c](records[:half]) + junk + COMPRESS[c](records[half:]), c))
    if kind == 8:               # raw snappy without xerial's framing, or a lying block length
        c = snappy.compress(records)
        if rng.random() < 0.5:
            c = uvarint(rng.choice([2 ** 32 - 1, 2 ** 30, len(records) * 1000])) + c[len(uvarint(len(records))):]
        return bytes(with_payload(plain, c, 2))
    if kind == 9:               # two batches, or a batch and junk, in one records field
        tail = bytes(valid_batch(rng, codec)) if rng.random() < 0.5 else b'\x00' * rng.randrange(1, 70)
        return bytes(valid_batch(rng, codec)) + tail
    if kind == 10:              # bit flips with no CRC fix: the CRC check's turn
        return bytes(flip_bits(rng, valid_batch(rng, codec), rng.randrange(1, 4)))
    b = valid_batch(rng, codec)  # cut: shorter than its header, or than its length
    return bytes(b[:rng.randrange(len(b))])


# ---------------------------------------------------------------------------
# Decompression bombs
# ---------------------------------------------------------------------------

BOMB_PIECE = 64 * MB
BOMB_PIECES = 15                # 960 MB: under codec.c's 1 GB refusal


def bomb_header(records_count, last_delta, codec):
    h = bytearray(61)
    struct.pack_into('>qii', h, 0, 0, 0, 0)
    h[16] = 2
    struct.pack_into('>hiqqqhii', h, 21, codec, last_delta, TS, TS, -1, -1, -1, records_count)
    return h


def build_bombs(log):
    """{name: a record batch}: small batches that decompress to ~1 GB"""
    t0 = time.time()
    zeros = bytes(BOMB_PIECE)
    gz_piece = gzip.compress(zeros, 9)
    lz_piece = lz4.frame.compress(zeros, block_size=lz4.frame.BLOCKSIZE_MAX4MB)
    zc = zstandard.ZstdCompressor(level=3).compressobj()
    zs = b''.join(zc.compress(zeros) for _ in range(BOMB_PIECES)) + zc.flush()
    bombs = {
        'gzip': fix_batch(bomb_header(1, 0, 1) + gz_piece * BOMB_PIECES),
        'lz4': fix_batch(bomb_header(1, 0, 3) + lz_piece * BOMB_PIECES),
        'zstd': fix_batch(bomb_header(1, 0, 4) + zs),
    }
    # a valid batch: one record whose value is 960 MB of zeros
    size = BOMB_PIECE * BOMB_PIECES
    body = b'\x00' + varint(0) + varint(0) + varint(-1) + varint(size)
    rec_head = varint(len(body) + size + 1) + body
    zc = zstandard.ZstdCompressor(level=3).compressobj()
    zv = zc.compress(rec_head) + b''.join(zc.compress(zeros) for _ in range(BOMB_PIECES))
    zv += zc.compress(varint(0)) + zc.flush()
    bombs['zstd-valid'] = fix_batch(bomb_header(1, 0, 4) + zv)
    # snappy's ratio is 21: 8 xerial blocks of 16 MB, 128 MB in 6 MB
    sblock = snappy.compress(bytes(16 * MB))
    bombs['snappy'] = fix_batch(bomb_header(1, 0, 2) + b'\x82SNAPPY\x00' + struct.pack('>ii', 1, 1)
                                + (struct.pack('>i', len(sblock)) + sblock) * 8)
    # a raw snappy block whose header claims 1 GB - 2, with 4 bytes of data
    bombs['snappy-lie'] = fix_batch(bomb_header(1, 0, 2) + uvarint((1 << 30) - 2) + b'\x00\x00\x00\x00')
    log('bombs built in %.1f s: %s' % (time.time() - t0, ', '.join(
        '%s %d kB' % (k, len(v) // 1024) for k, v in bombs.items())))
    return {k: bytes(v) for k, v in bombs.items()}

# ---------------------------------------------------------------------------
# Sockets
# ---------------------------------------------------------------------------


class Closed(Exception):
    pass


def connect(host, port, timeout=5.0, source=None):
    s = socket.create_connection((host, port), timeout=timeout,
                                 source_address=(source, 0) if source else None)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def recv_exact(s, n, deadline):
    data = bytearray()
    while len(data) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout()
        s.settimeout(left)
        chunk = s.recv(min(n - len(data), 1 << 20))
        if not chunk:
            raise Closed()
        data += chunk
    return bytes(data)


def read_answer(s, timeout, limit=256 * MB):
    """('answer', bytes after the size) | ('closed', None) | ('silent', None)"""
    deadline = time.monotonic() + timeout
    try:
        size = struct.unpack('>i', recv_exact(s, 4, deadline))[0]
        if size < 0 or size > limit:
            return 'answer', b''
        return 'answer', recv_exact(s, size, deadline + 30)
    except Closed:
        return 'closed', None
    except (socket.timeout, TimeoutError):
        return 'silent', None
    except OSError:
        return 'closed', None


def request(s, key, version, corr, value, timeout=5.0):
    s.settimeout(timeout)
    s.sendall(bytes(encode_request(key, version, corr, value).buf))
    return read_answer(s, timeout)


def kstr(b):
    return struct.pack('>h', len(b)) + b


def sasl_plain(s, user, password, version=1, auth_version=None):
    """PLAIN on s: True when authenticated"""
    st, ans = request(s, SASL_HANDSHAKE, version, 1, {'mechanism': 'PLAIN'})
    if st != 'answer' or struct.unpack('>h', ans[4:6])[0] != 0:
        return False
    token = b'\x00' + user.encode() + b'\x00' + password.encode()
    if version == 0:
        s.sendall(struct.pack('>i', len(token)) + token)
        st, ans = read_answer(s, 5.0)
        return st == 'answer'
    av = 1 if auth_version is None else auth_version
    st, ans = request(s, SASL_AUTHENTICATE, av, 2, {'auth_bytes': token})
    off = 5 if is_flexible(SASL_AUTHENTICATE, av) else 4
    return st == 'answer' and struct.unpack('>h', ans[off:off + 2])[0] == 0


def scram_first(user, nonce):
    return ('n,,n=%s,r=%s' % (user, nonce)).encode()


def scram_final(password, client_first_bare, server_first):
    attrs = dict(kv.split('=', 1) for kv in server_first.split(','))
    salted = hashlib.pbkdf2_hmac('sha256', password.encode(), base64.b64decode(attrs['s']),
                                 int(attrs['i']))
    client_key = hmac.new(salted, b'Client Key', hashlib.sha256).digest()
    stored = hashlib.sha256(client_key).digest()
    without_proof = 'c=biws,r=%s' % attrs['r']
    auth = '%s,%s,%s' % (client_first_bare, server_first, without_proof)
    sig = hmac.new(stored, auth.encode(), hashlib.sha256).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, sig))
    return ('%s,p=%s' % (without_proof, base64.b64encode(proof).decode())).encode()


def sasl_scram(s, user, password, rng):
    """SCRAM-SHA-256 on s: True when authenticated"""
    st, ans = request(s, SASL_HANDSHAKE, 1, 1, {'mechanism': 'SCRAM-SHA-256'})
    if st != 'answer' or struct.unpack('>h', ans[4:6])[0] != 0:
        return False
    nonce = base64.b64encode(bytes(rng.randrange(256) for _ in range(18))).decode()
    first = scram_first(user, nonce)
    st, ans = request(s, SASL_AUTHENTICATE, 1, 2, {'auth_bytes': first})
    if st != 'answer' or struct.unpack('>h', ans[4:6])[0] != 0:
        return False
    server_first = sasl_auth_bytes(ans, 1)
    final = scram_final(password, first[3:].decode(), server_first.decode())
    st, ans = request(s, SASL_AUTHENTICATE, 1, 3, {'auth_bytes': final})
    return st == 'answer' and struct.unpack('>h', ans[4:6])[0] == 0


def sasl_auth_bytes(ans, version):
    """auth_bytes of a classic SaslAuthenticate answer (after the corr id)"""
    pos = 6
    n = struct.unpack('>h', ans[pos:pos + 2])[0]
    pos += 2 + max(n, 0)
    n = struct.unpack('>i', ans[pos:pos + 4])[0]
    return ans[pos + 4:pos + 4 + n]

# ---------------------------------------------------------------------------
# The listener's memory, and the watchdog
# ---------------------------------------------------------------------------


def proc_status(pid):
    out = {}
    with open('/proc/%d/status' % pid) as fh:
        for line in fh:
            k, _, v = line.partition(':')
            if k in ('VmRSS', 'VmHWM', 'RssAnon'):
                out[k] = int(v.split()[0])
    return out


def proc_start_time(pid):
    """the start time of a live process (OSError when it is gone or a zombie)"""
    with open('/proc/%d/stat' % pid) as fh:
        fields = fh.read().rsplit(')', 1)[1].split()
    if fields[0] in ('Z', 'X'):
        raise ProcessLookupError(pid)
    return fields[19]


class Watchdog:
    def __init__(self, args, failures, stop):
        self.args = args
        self.failures = failures
        self.stop = stop
        self.max_rss = self.max_hwm = self.max_anon = 0
        self.latencies = []
        self.slow = []
        self.reconnects = 0
        self.killed = False
        self.threads = [threading.Thread(target=self.memory, daemon=True),
                        threading.Thread(target=self.probe, daemon=True)]

    def start(self):
        for t in self.threads:
            t.start()

    def join(self):
        for t in self.threads:
            t.join(timeout=30)

    def memory(self):
        a = self.args
        while not self.stop.is_set():
            try:
                st = proc_status(a.pid)
            except OSError:
                self.failures.append('the listener (pid %d) is gone' % a.pid)
                self.stop.set()
                return
            self.max_rss = max(self.max_rss, st.get('VmRSS', 0))
            self.max_hwm = max(self.max_hwm, st.get('VmHWM', 0))
            self.max_anon = max(self.max_anon, st.get('RssAnon', 0))
            if st.get('VmRSS', 0) > a.kill_rss_mb * 1024 and not self.killed:
                self.killed = True
                self.failures.append('the listener\'s VmRSS reached %d MB, over --kill-rss-mb %d: '
                                     'killed it (SIGKILL) to protect the machine'
                                     % (st['VmRSS'] // 1024, a.kill_rss_mb))
                try:
                    os.kill(a.pid, signal.SIGKILL)
                except OSError:
                    pass
                self.stop.set()
                return
            time.sleep(0.05)

    def connect(self):
        a = self.args
        s = connect(a.host, a.port)
        if a.sasl_user and not sasl_plain(s, a.sasl_user, a.sasl_password):
            s.close()
            raise Closed('the watchdog could not authenticate')
        return s

    def probe(self):
        a = self.args
        s = None
        corr = 1000
        topics = {'topics': [{'name': a.topic}]}
        while not self.stop.is_set():
            t_next = time.monotonic() + a.probe_interval
            try:
                if s is None:
                    s = self.connect()
                corr += 1
                t0 = time.monotonic()
                s.settimeout(a.probe_timeout)
                s.sendall(bytes(encode_request(3, 1, corr, topics, client_id='watchdog').buf))
                st, ans = read_answer(s, a.probe_timeout)
                dt = time.monotonic() - t0
                if st == 'answer' and struct.unpack('>i', ans[:4])[0] == corr:
                    self.latencies.append(dt)
                    if dt > a.max_latency:
                        self.slow.append((t0, dt))
                else:
                    self.latencies.append(dt)
                    self.failures.append('the watchdog\'s Metadata %d, sent %.1f s into the run, was %s after %.3f s '
                                         '(its connection: %s:%d)' % (
                        corr, t0 - START, {'answer': 'answered with another correlation id', 'closed':
                                           'not answered: its connection was closed',
                                           'silent': 'not answered'}[st], dt, *s.getsockname()[:2]))
                    s.close()
                    s = None
                    self.reconnects += 1
            except (OSError, Closed) as e:
                self.failures.append('the watchdog could not reach the listener: %s' % (e or type(e).__name__))
                if s is not None:
                    s.close()
                s = None
                self.reconnects += 1
                if self.reconnects > 5:
                    self.stop.set()
                    return
            self.stop.wait(max(0.0, t_next - time.monotonic()))
        if s is not None:
            s.close()


# ---------------------------------------------------------------------------
# Background connections: idle, trickling, big frames
# ---------------------------------------------------------------------------


class Background:
    """connections that send nothing, trickle, or send a big frame at once;
    when the listener closes each one"""

    def __init__(self, args, rng, stop, failures):
        self.args = args
        self.stop = stop
        self.failures = failures
        self.rng = random.Random(rng.random())
        self.idle = []              # {sock, since: its last byte, kind}
        self.idle_closed = []       # (kind, seconds after its last byte)
        self.trickle = []
        self.trickle_closed = []    # seconds after it opened
        self.big = {}               # what came of the big frames: answer, closed, stalled, ...
        self.history = []           # the big frames, for Fuzzer.history
        self.threads = []
        self.lock = threading.Lock()

    def open_idle(self, kind):
        """a connection that goes idle: one that sends nothing, or one idle
        after authenticating (SASL) or after one request (no SASL)"""
        a = self.args
        try:
            s = connect(a.host, a.port)
            if kind == AFTER_AUTH and not sasl_plain(s, a.sasl_user, a.sasl_password):
                self.failures.append('an idle connection could not authenticate')
            elif kind == AFTER_REQUEST and request(s, API_VERSIONS, 0, 1, {})[0] != 'answer':
                self.failures.append('the ApiVersions of an idle connection was not answered')
            self.idle.append({'sock': s, 'since': time.monotonic(), 'kind': kind})
        except OSError as e:
            self.failures.append('could not open an idle connection: %s' % e)

    def watch_idle(self):
        """note the idle connections the listener closed, how long after
        their last byte, and open others in their place (a poll, no wait)"""
        now = time.monotonic()
        for c in list(self.idle):
            r, _, _ = select.select([c['sock']], [], [], 0)
            if not r:
                continue
            try:
                data = c['sock'].recv(4096)
            except OSError:
                data = b''
            if not data:
                c['sock'].close()
                self.idle.remove(c)
                self.idle_closed.append((c['kind'], now - c['since']))
                if not self.stop.is_set():
                    self.open_idle(c['kind'])

    def open_trickle(self, n):
        self.trickle = [None] * n
        t = threading.Thread(target=self.trickle_loop, daemon=True)
        t.start()
        self.threads.append(t)

    def trickle_loop(self):
        """connections that announce a 64 MB Produce and send a byte of it
        every 0.25 s; one the listener closed is opened again"""
        a = self.args
        while not self.stop.is_set():
            for i, c in enumerate(self.trickle):
                try:
                    if c is None:
                        s = connect(a.host, a.port)
                        s.sendall(struct.pack('>i', 64 * MB) + struct.pack('>hhi', 0, 7, 1) + kstr(b'trickle'))
                        self.trickle[i] = c = {'sock': s, 'opened': time.monotonic()}
                    c['sock'].settimeout(0.5)
                    c['sock'].send(bytes([self.rng.randrange(256)]))
                except OSError:
                    if c is not None:
                        c['sock'].close()
                        self.trickle_closed.append(time.monotonic() - c['opened'])
                    self.trickle[i] = None
            self.stop.wait(0.25)

    def big_frames(self, n, size_mb):
        """n connections each sending a whole frame of size_mb at once"""
        a = self.args
        if n <= 0:
            return
        size = min(size_mb * MB, a.max_frame) - 4
        body = bytearray(size)
        hdr = struct.pack('>hhi', 3, 1, 99) + kstr(b'big')
        body[:len(hdr)] = hdr
        struct.pack_into('>i', body, len(hdr), 0)     # Metadata v1 of no topic, then junk
        frame = struct.pack('>i', size) + bytes(body)

        def send():
            t0 = time.monotonic()
            try:
                s = connect(a.host, a.port, timeout=10)
                s.settimeout(10)
                try:
                    s.sendall(frame)
                    st, _ = read_answer(s, 10)
                except (socket.timeout, TimeoutError):
                    st = 'stalled'
                except OSError:
                    st = 'closed'      # before the whole frame was in
                s.close()
            except OSError:
                st = 'refused'
            with self.lock:
                self.big[st] = self.big.get(st, 0) + 1
            self.history.append((t0, time.monotonic(), 'a frame of %d MB%s: %s' % (
                (size + 4) // MB, ' before authentication' if a.sasl_user else '', st), 'silent'))
        for _ in range(n):
            t = threading.Thread(target=send, daemon=True)
            t.start()
            self.threads.append(t)

    def close(self):
        self.watch_idle()
        for t in self.threads:
            t.join(timeout=15)
        for c in self.idle + self.trickle:
            if c is not None:
                c['sock'].close()


# ---------------------------------------------------------------------------
# Valid requests, and their mutations
# ---------------------------------------------------------------------------


class Context:
    def __init__(self, args, rng):
        self.args = args
        self.rng = rng
        self.topic = args.topic
        self.partitions = args.partitions
        self.n = 0

    def unique(self, prefix):
        self.n += 1
        return '%s-%d-%d' % (prefix, os.getpid(), self.n)


def valid_value(ctx, key, version, baseline=False):
    """a request a Kafka client could send, as a value for the encoder"""
    rng = ctx.rng
    t = ctx.topic
    p = rng.randrange(ctx.partitions)
    group = ctx.unique('fuzz-join') if baseline else rng.choice(['fuzz-g0', 'fuzz-g1', ctx.unique('fuzz-g')])
    if key == 0:
        return {'transactional_id': None, 'acks': 1 if baseline or rng.random() < 0.8 else rng.choice([-1, 0]),
                'timeout_ms': 5000,
                'topics': [{'name': t, 'partitions': [
                    {'index': p, 'records': bytes(valid_batch(rng, rng.randrange(5)))}]}]}
    if key == 1:
        return {'replica_id': -1, 'max_wait_ms': 0 if baseline else rng.choice([0, 0, 10, 100]),
                'min_bytes': 1, 'max_bytes': 1 << 20, 'isolation_level': rng.randrange(2),
                'session_id': 0, 'session_epoch': -1,
                'topics': [{'topic': t, 'partitions': [
                    {'partition': p, 'current_leader_epoch': -1 if baseline else rng.choice([-1, -1, 0, 1]),
                     'fetch_offset': rng.choice([0, 0, 5, 1 << 40]),
                     # KIP-320: epoch 0 diverges past the log end, 3 is OFFSET_OUT_OF_RANGE
                     'last_fetched_epoch': -1 if baseline else rng.choice([-1, -1, 0, 3]),
                     'log_start_offset': -1, 'partition_max_bytes': 65536}]}],
                'forgotten_topics_data': [], 'rack_id': ''}
    if key == 2:
        return {'replica_id': -1, 'isolation_level': rng.randrange(2),
                'topics': [{'name': t, 'partitions': [
                    {'partition_index': p, 'current_leader_epoch': -1,
                     'timestamp': rng.choice([-1, -2, TS]), 'max_num_offsets': 1}]}]}
    if key == 3:
        topics = [{'name': t}] if version == 0 or rng.random() < 0.7 else None
        return {'topics': topics, 'allow_auto_topic_creation': 0,
                'include_cluster_authorized_operations': 0, 'include_topic_authorized_operations': 0}
    if key == 8:
        return {'group_id': 'fuzz-commit', 'generation_id': -1, 'member_id': '', 'group_instance_id': None,
                'retention_time_ms': -1,
                'topics': [{'name': t, 'partitions': [
                    {'partition_index': p, 'committed_offset': rng.randrange(100), 'committed_leader_epoch': -1,
                     'commit_timestamp': -1, 'committed_metadata': ''}]}]}
    if key == 9:
        return {'group_id': 'fuzz-commit', 'topics': [{'name': t, 'partition_indexes': [0, p]}],
                'require_stable': 0}
    if key == 10:
        return {'key': 'fuzz-g0', 'key_type': 0}
    if key == 11:
        return {'group_id': group, 'session_timeout_ms': 3000, 'rebalance_timeout_ms': 3000,
                'member_id': '', 'group_instance_id': None, 'protocol_type': 'consumer',
                'protocols': [{'name': 'range',   # ConsumerProtocolSubscription v0
                               'metadata': struct.pack('>hi', 0, 1) + kstr(t.encode()) + struct.pack('>i', -1)}]}
    if key == 12:
        return {'group_id': group, 'generation_id': 1, 'member_id': 'nobody', 'group_instance_id': None}
    if key == 13:
        return {'group_id': group, 'member_id': 'nobody',
                'members': [{'member_id': 'nobody', 'group_instance_id': None}]}
    if key == 14:
        return {'group_id': group, 'generation_id': 1, 'member_id': 'nobody', 'group_instance_id': None,
                'protocol_type': 'consumer', 'protocol_name': 'range',
                'assignments': [{'member_id': 'nobody', 'assignment': b'\x00\x01' + b'\x00' * 8}]}
    if key == 15:
        return {'groups': [group, 'fuzz-commit'], 'include_authorized_operations': rng.randrange(2)}
    if key == 16:
        return {'states_filter': [] if rng.random() < 0.5 else ['Stable', 'empty'], 'types_filter': []}
    if key == 17:
        return {'mechanism': rng.choice(['PLAIN', 'SCRAM-SHA-256', 'GSSAPI'])}
    if key == 18:
        return {'client_software_name': 'fuzz', 'client_software_version': '1.0'}
    if key == 19:
        return {'topics': [{'name': ctx.unique('fuzz-new'), 'num_partitions': rng.choice([1, -1, 3]),
                            'replication_factor': rng.choice([1, -1]), 'assignments': [],
                            'configs': [{'name': 'retention.ms', 'value': '60000'}]}],
                'timeout_ms': 5000, 'validate_only': rng.randrange(2)}
    if key == 20:
        return {'topic_names': [rng.choice([t, 'fuzz-none'])], 'timeout_ms': 5000}
    if key == 21:
        # offset 0 deletes nothing; 1 and -1 move the fuzzed topic's log start
        return {'topics': [{'name': rng.choice([t, t, 'fuzz-none']), 'partitions': [
                    {'partition_index': p, 'offset': 0 if baseline else rng.choice([0, 0, 1, -1])}]}],
                'timeout_ms': 5000}
    if key == 22:
        # an idempotent producer's request; now and then a transactional one
        # (the coordinator's) or a KIP-360 bump naming an old id
        return {'transactional_id': None if baseline or rng.random() < 0.8 else rng.choice(['fuzz-tx', '']),
                'transaction_timeout_ms': 60000,
                'producer_id': -1 if baseline else rng.choice([-1, 1, 1 << 50]),
                'producer_epoch': -1 if baseline else rng.choice([-1, 0, 32767])}
    if key == 23:
        # a single-node topic is epoch 0: -1 skips the check, 1 is newer
        # (UNKNOWN_LEADER_EPOCH); epoch 0 ends at the log end, 5 is unknown
        return {'replica_id': -1,
                'topics': [{'topic': rng.choice([t, t, 'fuzz-none']), 'partitions': [
                    {'partition': p, 'current_leader_epoch': -1 if baseline else rng.choice([-1, 0, 1]),
                     'leader_epoch': 0 if baseline else rng.choice([0, 0, -1, 5])}]}]}
    if key in (24, 25, 26, 28):
        # a transactional producer's requests, for ids and epochs the
        # coordinator mostly does not know (INVALID_PRODUCER_ID_MAPPING),
        # now and then fuzz-tx's, which InitProducerId may have made
        txn = {'transactional_id': rng.choice(['fuzz-tx', 'fuzz-tx', ctx.unique('fuzz-tx'), '']),
               'producer_id': rng.choice([-1, 1, 2, 1 << 50]), 'producer_epoch': rng.choice([-1, 0, 1, 32767])}
        if key == 24:
            txn['topics'] = [{'name': rng.choice([t, 'fuzz-none']), 'partitions': [p]}]
        elif key == 25:
            txn['group_id'] = rng.choice(['fuzz-g0', ''])
        elif key == 26:
            txn['committed'] = rng.randrange(2)
        else:
            txn.update({'group_id': 'fuzz-g0', 'generation_id': -1, 'member_id': '', 'group_instance_id': None,
                        'topics': [{'name': t, 'partitions': [
                            {'partition_index': p, 'committed_offset': rng.randrange(100),
                             'committed_leader_epoch': -1, 'committed_metadata': ''}]}]})
        return txn
    if key == 33:
        return {'resources': [{'resource_type': rng.choice([2, 2, 4]), 'resource_name': t,
                               'configs': [{'name': 'segment.ms', 'value': '604800000'}]}],
                'validate_only': 1 if baseline else rng.randrange(2)}
    if key == 35:
        return {'topics': None if rng.random() < 0.5 else [{'topic': t, 'partitions': [0, p]}]}
    if key == 37:
        # the count it has (INVALID_PARTITIONS), or one more as a dry run
        return {'topics': [{'name': rng.choice([t, 'fuzz-none']),
                            'count': ctx.partitions + (0 if rng.random() < 0.5 else 1),
                            'assignments': None if rng.random() < 0.7 else [{'broker_ids': [0]}]}],
                'timeout_ms': 5000, 'validate_only': 1}
    if key == 44:
        return {'resources': [{'resource_type': 2, 'resource_name': t,
                               'configs': [{'name': 'cleanup.policy', 'config_operation': rng.randrange(4),
                                            'value': 'delete'}]}],
                'validate_only': 1 if baseline else rng.randrange(2)}
    if key == 60:
        return {'include_cluster_authorized_operations': rng.randrange(2), 'endpoint_type': 1}
    if key == 32:
        return {'resources': [{'resource_type': 2, 'resource_name': t,
                               'configuration_keys': None if rng.random() < 0.5 else ['retention.ms']},
                              {'resource_type': 4, 'resource_name': '0', 'configuration_keys': None}],
                'include_synonyms': rng.randrange(2), 'include_documentation': 0}
    if key in (29, 30, 31):
        # a grant on the fuzz topic: the fuzz roles own nothing, so creating
        # is refused and deleting finds nothing, whatever a mutation makes of it
        acl = {'resource_type': rng.choice([1, 2, 3]), 'resource_name': rng.choice([t, 'fuzz-g0', None]),
               'pattern_type': rng.choice([1, 3, 4]), 'principal': rng.choice(['User:*', 'User:fuzzer', None]),
               'host': rng.choice(['*', None]), 'operation': rng.choice([1, 2, 3, 4, 8]),
               'permission_type': rng.choice([1, 3])}
        if key == 29:
            return acl
        if key == 30:
            acl.update(resource_type=2, resource_name=t, pattern_type=3, principal='User:*', host='*',
                       permission_type=3, operation=rng.choice([2, 3, 4, 8]))
            return {'creations': [acl]}
        return {'filters': [acl]}
    if key == 42:
        return {'groups_names': [ctx.unique('fuzz-del'), group]}
    if key == 47:
        return {'group_id': 'fuzz-commit', 'topics': [{'name': t, 'partitions': [{'partition_index': p}]}]}
    if key == 36:
        a = ctx.args
        user = a.sasl_user or 'nobody'
        return {'auth_bytes': b'\x00' + user.encode() + b'\x00' + (a.sasl_password or 'x').encode()}
    return {'_raw': b''}


INT_LIMITS = [0, -1, 1, 2 ** 31 - 1, -2 ** 31, 2 ** 63 - 1, -2 ** 63, 32767, -32768, 255, 1 << 40]
BAD_STRINGS = ['', '\x00', 'a\x00b', '\udcff\udcfe', '..', '.', 'x' * 250, 'x' * 32767, 'x' * 40000,
               '\u00e9\u4e2d', None]


def walk(value, path=()):
    """(path, container, key) of every field in a value, depth first"""
    if isinstance(value, dict):
        for k, v in value.items():
            if k.startswith('_'):
                continue
            yield path + (k,), value, k
            if isinstance(v, (dict, list)):
                yield from walk(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            if isinstance(v, (dict, list)):
                yield from walk(v, path + (i,))


def mutate_value(rng, key, version, value, stats, max_repeat):
    """one change of a request's value; its name"""
    fields = list(walk(value))
    arrays = [(c, k) for _, c, k in fields if isinstance(c[k], list) and c[k]]
    kind = rng.choice(['repeat', 'repeat', 'int', 'string', 'null', 'tags', 'batch', 'batch', 'empty'])
    if is_flexible(key, version) and rng.random() < 0.3:
        kind = 'tags'
    if kind == 'repeat' and arrays:
        c, k = rng.choice(arrays)
        elem_size = max(1, len(repr(c[k])) // len(c[k]))
        times = rng.choice([2, 3, 10, 100, 1000, 5000])
        if key == 0:
            times = min(times, 200)         # each a subtransaction that appends
        times = max(2, min(times, max_repeat, (256 * 1024) // elem_size))
        c[k] = c[k] * times
        return 'repeat(%s x%d)' % (k, times)
    if kind == 'int':
        ints = [(c, k) for _, c, k in fields if isinstance(c[k], int)]
        if ints:
            c, k = rng.choice(ints)
            c[k] = rng.choice(INT_LIMITS)
            return 'int'
    if kind == 'string':
        strs = [(c, k) for _, c, k in fields if isinstance(c[k], str)]
        if strs:
            c, k = rng.choice(strs)
            c[k] = rng.choice(BAD_STRINGS)
            return 'string'
    if kind == 'null':
        nullable = [(c, k) for _, c, k in fields if isinstance(c[k], (str, bytes, list))]
        if nullable:
            c, k = rng.choice(nullable)
            c[k] = None
            return 'null'
    if kind == 'empty' and arrays:
        c, k = rng.choice(arrays)
        c[k] = []
        return 'empty'
    if kind == 'tags' and is_flexible(key, version):
        structs = [value] + [c[k] for _, c, k in fields if isinstance(c[k], dict)]
        structs += [e for _, c, k in fields if isinstance(c[k], list) for e in c[k] if isinstance(e, dict)]
        s = rng.choice(structs)
        s['_tags'] = [(rng.choice([0, 1, 7, 127, 128, 2 ** 31 - 1, 2 ** 32 - 1]),
                       bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 5, 300]))))
                      for _ in range(rng.choice([1, 2, 3, 50]))]
        return 'tags'
    if kind == 'batch' and key == 0:
        parts = [e for _, c, k in fields if k == 'partitions' and isinstance(c[k], list)
                 for e in c[k] if isinstance(e, dict)]
        if parts:
            rng.choice(parts)['records'] = mutated_batch(rng)
            stats['batches'] = stats.get('batches', 0) + 1
            return 'batch'
    return 'none'


def set_varint_at(buf, marks, i, newbytes):
    """replace the varint of marks[i] by newbytes, moving the marks after it"""
    off, size, kind = marks[i]
    buf[off:off + size] = newbytes
    delta = len(newbytes) - size
    marks[i] = (off, len(newbytes), kind)
    for j in range(len(marks)):
        if marks[j][0] > off:
            marks[j] = (marks[j][0] + delta, marks[j][1], marks[j][2])


def mutate_bytes(rng, e, key):
    """one change of a request's bytes, where the marks say; its name.  The
    frame's size is made right again after, unless it is what changed."""
    buf, marks = e.buf, e.marks
    lengths = [i for i, m in enumerate(marks) if m[2] in ('len16', 'len32', 'count', 'ulen', 'ucount',
                                                          'tags', 'tagsize', 'tag')]
    kind = rng.choice(['flip', 'length', 'length', 'count', 'int', 'truncate', 'junk', 'varint'])
    if kind == 'flip':
        for _ in range(rng.choice([1, 1, 2, 4, 8])):
            i = rng.randrange(4, len(buf))
            buf[i] ^= 1 << rng.randrange(8)
        return 'flip'
    if kind in ('length', 'count', 'varint') and lengths:
        i = rng.choice(lengths)
        off, size, mk = marks[i]
        if mk in ('len16',):
            old = struct.unpack_from('>h', buf, off)[0]
            v = rng.choice([-1, -2, 32767, -32768, old + 1, old - 1, 0])
            struct.pack_into('>H', buf, off, v & 0xffff)
        elif mk in ('len32', 'count'):
            old = struct.unpack_from('>i', buf, off)[0]
            v = rng.choice([-1, -2, 2 ** 31 - 1, -2 ** 31, old + 1, old - 1, 0, 1 << 30, old * 2 + 1])
            struct.pack_into('>I', buf, off, v & 0xffffffff)
        else:
            v = rng.choice([0, 1, 2 ** 31, 2 ** 31 - 1, 2 ** 32 - 1, 2 ** 35, 127, 128])
            nb = uvarint(v) if rng.random() < 0.8 else b'\xff' * rng.choice([5, 6, 10, 11])
            set_varint_at(buf, marks, i, nb)
        if kind == 'count' or mk in ('count', 'ucount'):
            return 'count'
        return 'length'
    if kind == 'int':
        ints = [i for i, m in enumerate(marks) if m[2].startswith('int') and m[0] >= 4]
        if ints:
            off, size, mk = marks[rng.choice(ints)]
            fmt = {1: '>b', 2: '>h', 4: '>i', 8: '>q'}[size]
            bits = size * 8
            struct.pack_into(fmt, buf, off, rng.choice([0, -1, 1, (1 << (bits - 1)) - 1, -(1 << (bits - 1))]))
            return 'int'
    if kind == 'truncate':
        cut = rng.randrange(4, len(buf)) if len(buf) > 4 else 4
        del buf[cut:]
        return 'truncate'
    if kind == 'junk':
        buf += bytes(rng.randrange(256) for _ in range(rng.choice([1, 7, 100, 5000])))
        return 'junk'
    i = rng.randrange(4, len(buf)) if len(buf) > 4 else 4
    buf[i:i] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
    return 'insert'


# ---------------------------------------------------------------------------
# The fuzzing session
# ---------------------------------------------------------------------------


class Fuzzer:
    def __init__(self, args):
        self.a = args
        self.rng = random.Random(args.seed)
        self.ctx = Context(args, self.rng)
        self.failures = []
        self.stop = threading.Event()
        self.counts = {}            # api name -> requests
        self.mode_counts = {}       # mode -> requests
        self.mutations = {}         # mutation name -> count
        self.stats = {}
        self.outcomes = {'answer': 0, 'closed': 0, 'silent': 0}
        self.conn = {}              # mode -> (socket, authenticated)
        self.corr = 0
        self.bomb_times = []
        self.history = []           # (sent at, done at, what): what a slow probe waited behind
        self.silent = {}            # api name -> complete requests left unanswered
        self.own_errors = 0         # exceptions of the fuzzer's own

    def log(self, msg):
        print('# %s' % msg, file=sys.stderr, flush=True)

    def fail(self, msg):
        if len(self.failures) < 200:
            self.failures.append(msg)

    # -- connections per mode ------------------------------------------------

    def source(self):
        """a loopback address of its own for a fuzzing connection: the
        listener slows down failed logins per address (backoff.c), and the
        fuzzer's failures must not slow down its own valid logins, nor the
        watchdog's, which comes from the default address"""
        if not self.a.host.startswith('127.'):
            return None
        r = self.rng.randrange(1, 1 << 22)
        return '127.%d.%d.%d' % (64 + (r >> 16), (r >> 8) & 255, r & 255)

    def open(self, mode):
        """a connection in the state mode names: plain (no SASL), pre (SASL
        configured, not authenticated), post (authenticated)"""
        a = self.a
        s = connect(a.host, a.port, source=self.source())
        if mode == 'post':
            r = self.rng.random()
            if r < 0.15:
                ok = sasl_scram(s, a.sasl_user, a.sasl_password, self.rng)
            elif r < 0.3:
                ok = sasl_plain(s, a.sasl_user, a.sasl_password, version=0)
            else:
                ok = sasl_plain(s, a.sasl_user, a.sasl_password, version=1,
                                auth_version=self.rng.choice([0, 1, 2]))
            if not ok:
                s.close()
                self.fail('a valid SASL authentication as "%s" failed' % a.sasl_user)
                raise Closed()
        return s

    def conn_for(self, mode):
        s = self.conn.get(mode)
        if s is None or mode == 'pre':
            if s is not None:
                s.close()
            s = self.conn[mode] = self.open(mode)
        return s

    def drop(self, mode):
        s = self.conn.pop(mode, None)
        if s is not None:
            s.close()

    def next_corr(self):
        self.corr = (self.corr + 1) % (1 << 31)
        return self.corr

    # -- one request ---------------------------------------------------------

    def check_answer(self, mode, key, version, corr, st, ans, what):
        """what an answer to one well-framed request must be"""
        self.outcomes[st] += 1
        if st != 'answer':
            return
        if mode == 'pre' and key not in PRE_AUTH_KEYS:
            self.fail('before authentication, %s v%d (%s) was answered: %r'
                      % (api_name(key), version, what, ans[:32]))
            return
        if len(ans) >= 4 and struct.unpack('>i', ans[:4])[0] != corr:
            self.fail('%s v%d (%s): the answer carries correlation id %d, the request %d'
                      % (api_name(key), version, what, struct.unpack('>i', ans[:4])[0], corr))

    def baseline(self, mode, pairs):
        """every valid request once, on a fresh connection: answered, with its
        correlation id (before authentication: only the SASL APIs and
        ApiVersions are, the others close the connection)"""
        for key, version in pairs:
            if self.stop.is_set():
                return
            try:
                s = self.open(mode)
            except (OSError, Closed) as e:
                self.fail('baseline: cannot connect (%s)' % e)
                continue
            corr = self.next_corr()
            value = valid_value(self.ctx, key, version, baseline=True)
            try:
                s.settimeout(5)
                s.sendall(bytes(encode_request(key, version, corr, value).buf))
                st, ans = read_answer(s, 5.0)
            except OSError:
                st, ans = 'closed', None
            s.close()
            self.count(mode, key)
            if mode == 'pre' and key not in PRE_AUTH_KEYS:
                if st == 'answer':
                    self.fail('before authentication, a valid %s v%d was answered' % (api_name(key), version))
                continue
            if st != 'answer':
                self.fail('a valid %s v%d (%s) was not answered: the connection was %s'
                          % (api_name(key), version, mode, 'closed' if st == 'closed' else 'silent for 5 s'))
            elif struct.unpack('>i', ans[:4])[0] != corr:
                self.fail('a valid %s v%d: answered with correlation id %d, sent %d'
                          % (api_name(key), version, struct.unpack('>i', ans[:4])[0], corr))

    def count(self, mode, key):
        n = api_name(key)
        self.counts[n] = self.counts.get(n, 0) + 1
        self.mode_counts[mode] = self.mode_counts.get(mode, 0) + 1

    def one(self, mode, key, version):
        """a mutated request of key at version on a connection in mode"""
        rng = self.rng
        value = valid_value(self.ctx, key, version)
        names = []
        r = rng.random()
        send_key, send_version = key, version
        if r < 0.1:
            names.append('valid')
        else:
            if r < 0.55:
                names.append(mutate_value(rng, key, version, value, self.stats, self.a.max_repeat))
            if r >= 0.45 or names == ['none']:
                names.append('')     # bytes below
            if rng.random() < 0.03:
                send_version = rng.choice([-1, 32767, SCHEMAS[key][2][1] + 1])
                names.append('version')
        corr = self.next_corr()
        header_tags = ()
        if is_flexible(key, version) and rng.random() < 0.1:
            header_tags = [(rng.randrange(1 << 20), bytes(rng.randrange(4))) for _ in range(rng.choice([1, 3]))]
        e = encode_request(send_key, send_version, corr, value, header_tags=header_tags)
        if '' in names:
            names.remove('')
            names.append(mutate_bytes(rng, e, key))
        framing = rng.random()
        if framing < 0.05:            # the size claims more than is sent
            struct.pack_into('>i', e.buf, 0, len(e.buf) - 4 + rng.choice([1, 100, 1 << 20]))
            names.append('short')
        elif framing < 0.07:          # a size that is negative, zero or over the maximum
            struct.pack_into('>i', e.buf, 0, rng.choice([-1, -2 ** 31, 0, 1, self.a.max_frame + 1]))
            names.append('size')
        else:
            struct.pack_into('>i', e.buf, 0, len(e.buf) - 4)
        for n in names:
            base = n.split('(')[0]
            self.mutations[base] = self.mutations.get(base, 0) + 1
        frame = bytes(e.buf)
        consistent = names[-1] not in ('short', 'size')
        # the key and correlation id the listener will read, if the header survived
        sent_key = struct.unpack_from('>h', frame, 4)[0] if len(frame) >= 6 else -1
        sent_corr = struct.unpack_from('>i', frame, 8)[0] if len(frame) >= 12 else -1
        pipeline = rng.random() < 0.05
        try:
            s = self.conn_for(mode)
        except (OSError, Closed):
            self.drop(mode)
            return
        self.count(mode, key)
        t0 = time.monotonic()
        try:
            s.settimeout(5)
            if pipeline and consistent:
                extra = encode_request(18, 0, self.next_corr(), {})
                s.sendall(frame + bytes(extra.buf) + frame)
            else:
                s.sendall(frame)
            wait = 0.3 if consistent else 0.05
            st, ans = read_answer(s, wait)
        except OSError:
            st, ans = 'closed', None
        what = '%s %s v%d %s%s: %s' % (mode, api_name(key), version, '+'.join(names),
                                        ' pipelined' if pipeline else '', st)
        if consistent:      # a frame cut short keeps the listener waiting, not busy
            self.history.append((t0, time.monotonic(), what, st))
        if consistent and not pipeline and len(frame) >= 12:
            self.check_answer(mode, sent_key, version, sent_corr, st, ans, '+'.join(names))
            if st == 'silent':
                self.silent[api_name(key)] = self.silent.get(api_name(key), 0) + 1
        else:
            self.outcomes[st] += 1
        if st != 'answer' or pipeline or mode == 'pre' or sent_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
            self.drop(mode)

    # -- SASL's own exchange, mutated ----------------------------------------

    def sasl_exchange(self):
        """before authentication: SaslHandshake, then SaslAuthenticate with a
        token hurt somewhere, then a Metadata request, which must not be
        answered unless the exchange succeeded"""
        a, rng = self.a, self.rng
        try:
            s = connect(a.host, a.port, source=self.source())
        except OSError:
            return
        self.count('pre', SASL_AUTHENTICATE)
        try:
            mech = rng.choice(['PLAIN', 'SCRAM-SHA-256'])
            hv = rng.choice([0, 1])
            st, ans = request(s, SASL_HANDSHAKE, hv, 1, {'mechanism': mech})
            if st != 'answer' or struct.unpack('>h', ans[4:6])[0] != 0:
                self.fail('SaslHandshake v%d for %s was refused: %s' % (hv, mech, st))
                return
            user, pw = a.sasl_user, a.sasl_password
            if mech == 'PLAIN':
                token = rng.choice([b'\x00%s\x00%s', b'%s\x00%s\x00%s', b'\x00%s', b'%s\x00\x00%s',
                                    b'\x00%s\x00%s\x00', b'\x00%s\x00%sx'])
                parts = (user.encode(), user.encode(), pw.encode())[-token.count(b'%s'):]
                token = token % parts
                if rng.random() < 0.5:
                    token = bytes(flip_bits(rng, token, rng.randrange(1, 4)))
                if rng.random() < 0.1:
                    token = b'\x00' + b'u' * rng.choice([63, 64, 1000, 70000]) + b'\x00' + pw.encode()
                tokens = [token]
            else:
                nonce = base64.b64encode(bytes(rng.randrange(256) for _ in range(18))).decode()
                first = rng.choice([
                    'n,,n=%s,r=%s' % (user, nonce), 'p=tls-unique,,n=%s,r=%s' % (user, nonce),
                    'n,,n=%s' % user, 'n,a=other,n=%s,r=%s' % (user, nonce), 'y,,n=%s,r=%s,e=x' % (user, nonce),
                    'n,,n=%s,r=%s' % ('u' * 2000, nonce), 'n,,m=ext,n=%s,r=%s' % (user, nonce), 'n,,',
                    'n,,n=%s,r=%s' % (user, 'x' * 900)])
                tokens = [first.encode()]
            raw = hv == 0
            ok = None
            for i, token in enumerate(tokens):
                if raw:
                    s.sendall(struct.pack('>i', len(token)) + token)
                    st, ans = read_answer(s, 5.0)
                    ok = st == 'answer'
                    srv = ans
                else:
                    st, ans = request(s, SASL_AUTHENTICATE, rng.choice([0, 1]), 2 + i, {'auth_bytes': token})
                    ok = st == 'answer' and struct.unpack('>h', ans[4:6])[0] == 0
                    srv = sasl_auth_bytes(ans, 1) if ok else None
                if ok and mech == 'SCRAM-SHA-256' and i == 0 and srv:
                    # the client-final message: valid, or hurt
                    try:
                        final = scram_final(pw, tokens[0][3:].decode(), srv.decode())
                    except Exception:
                        final = b'c=biws,r=x,p=AAAA'
                    if rng.random() < 0.8:
                        final = rng.choice([bytes(flip_bits(rng, final, rng.randrange(1, 4))),
                                            final[:rng.randrange(len(final))], final + b',x=y',
                                            b'c=biws,r=' + b'n' * 3000 + b',p=' + b'A' * 44,
                                            final.replace(b'c=biws', b'c=cD10bHMtdW5pcXVlLCw=')])
                    tokens.append(final)
                if not ok:
                    break
            # then Metadata: answered only if the exchange succeeded
            corr = self.next_corr()
            try:
                s.settimeout(2)
                s.sendall(bytes(encode_request(3, 1, corr, {'topics': None}).buf))
                st, ans = read_answer(s, 1.0)
            except OSError:
                st, ans = 'closed', None
            if st == 'answer' and not ok:
                self.fail('after a failed SASL %s exchange, Metadata was answered' % mech)
            self.mutations['sasl-' + mech] = self.mutations.get('sasl-' + mech, 0) + 1
        except (OSError, struct.error, IndexError):
            pass
        finally:
            s.close()

    # -- bombs ---------------------------------------------------------------

    def bomb(self, mode, name, entries):
        """a Produce whose entries are bombs: [(partition, batch)]"""
        a, rng = self.a, self.rng
        version = rng.choice([v for v in self.versions[0] if v >= 3])
        value = {'transactional_id': None, 'acks': 1, 'timeout_ms': 5000,
                 'topics': [{'name': a.bomb_topic, 'partitions': [
                     {'index': p, 'records': b} for p, b in entries]}]}
        corr = self.next_corr()
        frame = bytes(encode_request(0, version, corr, value).buf)
        self.count(mode, 0)
        self.mutations['bomb'] = self.mutations.get('bomb', 0) + 1
        t0 = time.monotonic()
        timeout = max(1.0, min(a.bomb_timeout, self.hard_deadline - t0))
        try:
            s = self.open(mode)
            s.settimeout(timeout)
            s.sendall(frame)
            st, ans = read_answer(s, timeout)
            s.close()
        except (OSError, Closed):
            st, ans = 'closed', None
        dt = time.monotonic() - t0
        self.history.append((t0, time.monotonic(), '%s Produce v%d bomb %s: %s' % (mode, version, name, st), st))
        self.bomb_times.append((name, mode, round(dt, 2), st))
        self.log('bomb %s (%s, Produce v%d, %d entries, %d kB): %s after %.2f s%s'
                 % (name, mode, version, len(entries), len(frame) // 1024, st, dt,
                    ', errors ' + produce_errors(ans, version) if st == 'answer' else ''))
        if mode == 'pre' and st == 'answer':
            self.fail('before authentication, a Produce (bomb %s) was answered' % name)

    def bombs_all(self, mode):
        p = self.a.partitions
        b = self.bomb_batches
        self.bomb(mode, 'one per codec', [(0, b['gzip']), (1 % p, b['lz4']), (2 % p, b['zstd']),
                                          (3 % p, b['snappy']), (0, b['snappy-lie'])])
        if self.stop.is_set() or time.monotonic() > self.hard_deadline:
            return
        self.bomb(mode, 'zstd x16, one partition', [(0, b['zstd'])] * 16)
        if self.stop.is_set() or time.monotonic() > self.hard_deadline:
            return
        self.bomb(mode, 'valid zstd x4', [(1 % p, b['zstd-valid'])] * 4)

    # -- the run -------------------------------------------------------------

    def ask_versions(self):
        """{key: [versions]} from ApiVersions v0, checked against SCHEMAS"""
        a = self.a
        s = connect(a.host, a.port)
        st, ans = request(s, API_VERSIONS, 0, 1, {})
        s.close()
        if st != 'answer':
            raise SystemExit('ApiVersions v0 was not answered (%s)' % st)
        err, n = struct.unpack('>hi', ans[4:10])
        versions = {}
        for i in range(n):
            key, lo, hi = struct.unpack('>hhh', ans[10 + 6 * i:16 + 6 * i])
            versions[key] = list(range(lo, hi + 1))
        missing = []
        for key, vs in sorted(versions.items()):
            if key not in SCHEMAS:
                missing.append('API key %d (all versions)' % key)
                continue
            lo, hi = SCHEMAS[key][2]
            for v in vs:
                if not lo <= v <= hi:
                    missing.append('%s v%d' % (api_name(key), v))
        if missing:
            self.fail('the listener serves what listener_fuzz.py has no schema for: %s; add them to SCHEMAS'
                      % ', '.join(missing))
        return {k: [v for v in vs if k in SCHEMAS and SCHEMAS[k][2][0] <= v <= SCHEMAS[k][2][1]]
                for k, vs in versions.items() if k in SCHEMAS}

    def run(self):
        global START
        a = self.a
        self.bomb_batches = {} if a.no_bombs else build_bombs(self.log)
        try:
            resource.prlimit(a.pid, resource.RLIMIT_AS, (a.cap_as_mb * MB, a.cap_as_mb * MB))
        except (OSError, ValueError) as e:
            self.log('could not cap the listener\'s address space: %s' % e)
        self.start_time = proc_start_time(a.pid)
        self.versions = self.ask_versions()
        pairs = [(k, v) for k in sorted(self.versions) for v in self.versions[k]]
        modes = ['pre', 'post'] if a.sasl_user else ['plain']
        START = time.monotonic()
        deadline = START + a.seconds
        self.hard_deadline = deadline + a.grace
        watchdog = Watchdog(a, self.failures, self.stop)
        watchdog.start()
        bg = Background(a, self.rng, self.stop, self.failures)
        for i in range(a.idle):
            bg.open_idle(SENT_NOTHING if i % 2 == 0 else AFTER_AUTH if a.sasl_user else AFTER_REQUEST)
        bg.open_trickle(a.trickle)

        for mode in modes:
            self.baseline(mode, pairs)
        self.log('baseline: every valid request of %d API versions sent in %s in %.1f s'
                 % (len(pairs), ' and '.join(modes), time.monotonic() - START))

        # scheduled: big frames at 10% and 60% of the run, bombs at 20% and 70%
        events = [(0.1, 'big'), (0.2, 'bombs'), (0.6, 'big'), (0.7, 'bombs')]
        work = [(m, k, v) for m in modes for k, v in pairs]
        i = len(work)
        while not self.stop.is_set() and time.monotonic() < deadline:
            frac = (time.monotonic() - START) / a.seconds
            while events and frac >= events[0][0]:
                _, ev = events.pop(0)
                if ev == 'big':
                    for mode in modes:
                        if mode != 'post':
                            bg.big_frames(a.big, a.big_mb)
                elif not a.no_bombs:
                    for mode in modes:
                        if not self.stop.is_set() and time.monotonic() < deadline:
                            self.bombs_all(mode)
            if i >= len(work):
                self.rng.shuffle(work)
                i = 0
            mode, key, version = work[i]
            i += 1
            try:
                if mode == 'pre' and self.rng.random() < 0.15:
                    self.sasl_exchange()
                else:
                    self.one(mode, key, version)
            except Exception:
                # the fuzzer's own bug: say so, go on fuzzing
                self.own_errors += 1
                if self.own_errors == 1:
                    self.fail('the fuzzer itself failed (%s %s v%d): %s'
                              % (mode, api_name(key), version, traceback.format_exc()))
                self.drop(mode)
            bg.watch_idle()

        for mode in list(self.conn):
            self.drop(mode)
        # the idle connections the listener should close: give them the time
        self.stop.set()
        expected = [c for c in bg.idle if self.close_bound(c['kind']) is not None]
        if expected:
            end = max(c['since'] + self.close_bound(c['kind']) + idle_slack() for c in expected)
            while time.monotonic() < min(end, self.hard_deadline) and any(c in bg.idle for c in expected):
                bg.watch_idle()
                time.sleep(0.2)
        watchdog.join()
        bg.close()
        self.history += bg.history
        return watchdog, bg

    def close_bound(self, kind):
        """within how many seconds the listener must close an idle connection of this kind"""
        return self.a.expect_auth_close if kind == SENT_NOTHING else self.a.expect_idle_close

    def report(self, watchdog, bg):
        a = self.a
        try:
            st = proc_status(a.pid)
            same = proc_start_time(a.pid) == self.start_time
        except OSError:
            st, same = {}, False
        hwm = max(watchdog.max_hwm, st.get('VmHWM', 0))
        same = same and not watchdog.killed
        if not same:
            self.fail('the listener is not the process it was (pid %d %s)'
                      % (a.pid, 'killed' if watchdog.killed else 'gone' if not st else 'started again'))
        if hwm > a.max_rss_mb * 1024:
            self.fail('the listener\'s peak resident size (VmHWM) is %d MB, over --max-rss-mb %d'
                      % (hwm // 1024, a.max_rss_mb))
        lat = watchdog.latencies
        max_lat = max(lat) if lat else float('inf')
        if not lat:
            self.fail('the watchdog got no answer at all')
        if watchdog.slow:
            self.fail('%d of %d Metadata requests of the watchdog took longer than %.2f s, the longest %.2f s'
                      % (len(watchdog.slow), len(lat), a.max_latency, max_lat))
            for t0, dt in watchdog.slow[:5]:
                # what the listener may have been busy with: requests sent in
                # the 3 s before, the unanswered ones first
                behind = sorted([(st != 'silent', -s0, w) for s0, s1, w, st in self.history
                                 if t0 - 3 <= s0 <= t0])
                self.fail('  the Metadata sent %.1f s into the run took %.2f s; the fuzzer had sent before it '
                          '(unanswered first, latest first): %s'
                          % (t0 - START, dt, '; '.join('%.1f s %s' % (-ms0 - START, w)
                                                       for _, ms0, w in behind[:6]) or 'nothing'))
        now = time.monotonic()
        for kind in (SENT_NOTHING, AFTER_AUTH, AFTER_REQUEST):
            bound = self.close_bound(kind)
            lives = [t for k, t in bg.idle_closed if k == kind] + \
                [now - c['since'] for c in bg.idle if c['kind'] == kind]
            if bound is not None and lives and max(lives) > bound + idle_slack():
                self.fail('a connection %s was open %.1f s after its last byte, past the %.0f s it was given '
                          '(and %.1f s of slack)' % (kind, max(lives), bound, idle_slack()))
        idle_max = max([t for _, t in bg.idle_closed] or [0])
        per_api = ', '.join('%s %d' % kv for kv in sorted(self.counts.items()))
        modes = ', '.join('%s %d' % kv for kv in sorted(self.mode_counts.items()))
        muts = ', '.join('%s %d' % kv for kv in sorted(self.mutations.items()))
        nversions = sum(len(v) for v in self.versions.values())
        summary = ('listener fuzz, seed %d, %.0f s, %s: %d requests (%s; %s) over %d versions of %d APIs; '
                   'peak RSS %d MB (bound %d, RssAnon %d MB); watchdog %d Metadata, max %.3f s (bound %.2f); '
                   'idle connections closed %d (the longest after %.1f s), trickling %d; listener pid %d %s'
                   % (a.seed, time.monotonic() - START, 'SASL' if a.sasl_user else 'no SASL',
                      sum(self.counts.values()), modes, per_api, nversions, len(self.versions),
                      hwm // 1024, a.max_rss_mb, watchdog.max_anon // 1024, len(lat), max_lat,
                      a.max_latency, len(bg.idle_closed), idle_max, len(bg.trickle_closed),
                      a.pid, 'throughout' if same else 'LOST'))
        self.log('mutations: %s; outcomes %s (left unanswered: %s); frames of %d MB: %s; bombs %s'
                 % (muts, self.outcomes, ', '.join('%s %d' % kv for kv in sorted(self.silent.items())),
                    a.big_mb, ', '.join('%s %d' % kv for kv in sorted(bg.big.items())) or 'none',
                    self.bomb_times))
        if self.failures:
            for f_ in self.failures:
                print('FAIL: %s' % f_, file=sys.stderr)
            print(summary)
            return 1
        print(summary)
        return 0


START = time.monotonic()


def produce_errors(ans, version):
    """the error codes of a Produce answer (v3-v8), as "code x count" """
    codes = {}
    try:
        pos = 4                                     # after the correlation id
        ntopics = struct.unpack_from('>i', ans, pos)[0]
        pos += 4
        for _ in range(ntopics):
            pos += 2 + struct.unpack_from('>h', ans, pos)[0]
            nparts = struct.unpack_from('>i', ans, pos)[0]
            pos += 4
            for _ in range(nparts):
                err = struct.unpack_from('>h', ans, pos + 4)[0]
                codes[err] = codes.get(err, 0) + 1
                pos += 4 + 2 + 8 + 8 + (8 if version >= 5 else 0)
                if version >= 8:                    # record_errors (none), error_message
                    pos += 4
                    pos += 2 + max(struct.unpack_from('>h', ans, pos)[0], 0)
    except struct.error:
        return '?'
    return ' '.join('%d x%d' % kv for kv in sorted(codes.items())) or 'none'


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--host', default='127.0.0.1')
    p.add_argument('--port', type=int, required=True)
    p.add_argument('--pid', type=int, required=True, help="the listener's pid (pg_stat_activity)")
    p.add_argument('--seed', type=int, default=None)
    p.add_argument('--seconds', type=float, default=60)
    p.add_argument('--topic', required=True, help='a topic the role may produce to, consume and describe')
    p.add_argument('--bomb-topic', help='a topic the role may produce to (default: --topic)')
    p.add_argument('--partitions', type=int, default=4, help="the topics' partitions")
    p.add_argument('--sasl-user')
    p.add_argument('--sasl-password')
    p.add_argument('--max-rss-mb', type=int, default=256)
    p.add_argument('--max-latency', type=float, default=1.0)
    p.add_argument('--kill-rss-mb', type=int, default=1024)
    p.add_argument('--cap-as-mb', type=int, default=3072)
    p.add_argument('--max-frame', type=int, default=104857600, help='mqlog.kafka_max_frame_size')
    p.add_argument('--idle', type=int, default=16)
    p.add_argument('--trickle', type=int, default=4)
    p.add_argument('--big', type=int, default=3)
    p.add_argument('--big-mb', type=int, default=100)
    p.add_argument('--expect-auth-close', type=float, default=None,
                   help='connections idle before authentication must be closed within this many seconds')
    p.add_argument('--expect-idle-close', type=float, default=None,
                   help='idle connections (authenticated, or without SASL) must be closed within this many seconds')
    p.add_argument('--probe-interval', type=float, default=0.5)
    p.add_argument('--probe-timeout', type=float, default=20.0)
    p.add_argument('--bomb-timeout', type=float, default=60.0)
    p.add_argument('--no-bombs', action='store_true', help='send no decompression bomb')
    p.add_argument('--max-repeat', type=int, default=5000,
                   help='the most times a mutation repeats an array element (a partition, a topic)')
    p.add_argument('--grace', type=float, default=60.0,
                   help='how long past --seconds a bomb or the closing checks may take')
    a = p.parse_args()
    if a.seed is None:
        a.seed = random.randrange(1 << 31)
    a.bomb_topic = a.bomb_topic or a.topic
    if bool(a.sasl_user) != bool(a.sasl_password):
        p.error('--sasl-user and --sasl-password go together')
    sys.setswitchinterval(0.001)
    fz = Fuzzer(a)
    fz.log('seed %d' % a.seed)
    watchdog, bg = fz.run()
    sys.exit(fz.report(watchdog, bg))


if __name__ == '__main__':
    main()
