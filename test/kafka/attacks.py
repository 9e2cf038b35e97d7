#!/usr/bin/python3
"""Attacks on mqlog's Kafka listener, for test/perl/157_kafka_limits.pl.

  attacks.py PORT bomb TOPIC CODEC ENTRIES MB     one Produce of ENTRIES
        entries for partition 0 of TOPIC, each a CODEC batch (gzip, lz4,
        zstd) of one record whose value is MB megabytes of zeros
  attacks.py PORT slow-frames CONNS MB SECONDS    CONNS connections that
        never authenticate, each announcing a frame of MB megabytes and
        sending it a kilobyte at a time for SECONDS
  attacks.py PORT idle CONNS SECONDS              CONNS connections that
        send nothing for SECONDS
  attacks.py PORT commit-dups TOPIC N             one OffsetCommit of group
        "dups" naming partition 0 of TOPIC N times
  attacks.py PORT slow-readers GROUP KB CONNS N HOLD   a member of GROUP
        with KB kB of metadata; CONNS connections each send a DescribeGroups
        naming GROUP N times and read nothing for HOLD seconds
  attacks.py PORT configs-dups TOPIC N            one DescribeConfigs
        naming TOPIC N times
  attacks.py PORT many-elements N                 one Produce of N entries
        of no records each (8 bytes apiece)
  attacks.py PORT plain-timing USER N             N failed PLAIN logins as
        USER and N as a role that does not exist, each from a loopback
        address of its own (127.0.1.x, 127.0.2.x: no backoff applies):
        the median time of each, in ms
  attacks.py PORT plain-backoff USER PASSWORD N   N failed PLAIN logins as
        USER from 127.0.3.1, each on a new connection, then the right
        password from there, a failed one again, then a failed one from
        127.0.3.2: each whole login's time, in ms, and its error

While an attack runs, a watchdog sends Metadata on a connection of its own
(after PLAIN authentication as USER/PASSWORD when the environment sets
MQLOG_SASL_USER) every 100 ms and times each answer; the new connections
it needs for that are what "other clients keep being served" means for
the idle attack.  Prints one JSON object: the Produce answer's error codes
(bomb), how many attack connections the listener closed (slow-frames,
idle), the watchdog's answers, failures and slowest answer in ms.
"""
import gzip
import json
import os
import socket
import struct
import sys
import threading
import time

from kafka.record.util import calc_crc32c

import kwire
from kwire import kstr, read_frame

HOST = '127.0.0.1'


def frame(key, version, body, corr=1):
    return kwire.frame(key, version, body, corr, 'attack')


def response(sock):
    return read_frame(sock)


def authenticate(sock):
    """SaslHandshake v1 PLAIN and SaslAuthenticate, when the environment asks"""
    user = os.environ.get('MQLOG_SASL_USER')
    if not user:
        return
    password = os.environ.get('MQLOG_SASL_PASSWORD', '')
    sock.sendall(frame(17, 1, kstr(b'PLAIN')))
    response(sock)
    token = b'\0' + user.encode() + b'\0' + password.encode()
    sock.sendall(frame(36, 0, struct.pack('>i', len(token)) + token))
    answer = response(sock)
    if struct.unpack_from('>h', answer, 4)[0] != 0:
        raise RuntimeError('the watchdog could not authenticate')


def timed_request(key, version, body):
    """one request on a connection of its own (authenticated when the
    environment asks): its answer, and the seconds it took"""
    sock = connect(timeout=600)
    authenticate(sock)
    began = time.monotonic()
    sock.sendall(frame(key, version, body))
    answer = response(sock)
    took = time.monotonic() - began
    sock.close()
    return answer, took


def connect(timeout=10, source=None):
    sock = socket.create_connection((HOST, PORT), timeout=timeout,
                                    source_address=(source, 0) if source else None)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


# ---------------------------------------------------------------------------
# The watchdog: Metadata every 100 ms, each answer timed
# ---------------------------------------------------------------------------

class Watchdog(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.latencies = []
        self.failures = []

    def run(self):
        sock = None
        while not self.stop.is_set():
            began = time.monotonic()
            try:
                if sock is None:
                    sock = connect(timeout=30)
                    authenticate(sock)
                sock.sendall(frame(3, 1, struct.pack('>i', 0)))   # Metadata v1, no topics
                response(sock)
                self.latencies.append((time.monotonic() - began) * 1000)
            except Exception as e:      # noqa: BLE001: every failure is reported
                self.failures.append('%s after %.0f ms' % (e, (time.monotonic() - began) * 1000))
                if sock:
                    sock.close()
                sock = None
            self.stop.wait(0.1)
        if sock:
            sock.close()

    def report(self):
        return {'metadata_answers': len(self.latencies),
                'metadata_failures': self.failures[:5],
                'metadata_max_ms': round(max(self.latencies), 1) if self.latencies else None}


# ---------------------------------------------------------------------------
# The decompression bomb
# ---------------------------------------------------------------------------

def varint(n):
    n = (n << 1) ^ (n >> 63)
    out = b''
    while True:
        b = n & 0x7f
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def compress(codec, chunks):
    """chunks (bytes, repeat) compressed as concatenated frames or members,
    which every reader of the codec takes as one stream: a megabyte of
    zeros compresses once and is repeated"""
    if codec == 'gzip':
        one = lambda b: gzip.compress(b, 9)          # noqa: E731
        code = 1
    elif codec == 'lz4':
        import lz4.frame
        one = lambda b: lz4.frame.compress(b, block_size=lz4.frame.BLOCKSIZE_MAX64KB,  # noqa: E731
                                           block_linked=False)
        code = 3
    elif codec == 'zstd':
        import zstandard
        one = zstandard.ZstdCompressor().compress    # noqa: E731
        code = 4
    else:
        raise SystemExit('unknown codec ' + codec)
    return code, b''.join(one(data) * repeat for data, repeat in chunks)


def bomb_batch(codec, mb):
    """one record batch v2 of one record: no key, a value of mb MB of zeros"""
    size = mb << 20
    body = b'\0' + varint(0) + varint(0) + varint(-1) + varint(size)   # attrs, ts, offset, key
    record_len = len(body) + size + 1                                   # + headers count
    code, records = compress(codec, [(varint(record_len) + body, 1), (bytes(1 << 20), mb), (varint(0), 1)])
    ts = int(time.time() * 1000)
    after_crc = (struct.pack('>hiqqqhii', code, 0, ts, ts, -1, -1, -1, 1) + records)
    head = struct.pack('>qi', 0, 4 + 1 + 4 + len(after_crc)) + struct.pack('>ib', -1, 2)
    return head + struct.pack('>I', calc_crc32c(after_crc)) + after_crc


def bomb(topic, codec, entries, mb):
    batch = bomb_batch(codec, mb)
    part = struct.pack('>i', 0) + struct.pack('>i', len(batch)) + batch
    body = (struct.pack('>h', -1) + struct.pack('>hi', 1, 30000)     # no transactional id, acks 1
            + struct.pack('>i', 1) + kstr(topic.encode()) + struct.pack('>i', entries) + part * entries)
    answer, took = timed_request(0, 3, body)
    # correlation id, topics: 1, name, partitions: n x (index, error, offset, time)
    pos = 4 + 4
    pos += 2 + struct.unpack_from('>h', answer, pos)[0]
    n = struct.unpack_from('>i', answer, pos)[0]
    pos += 4
    errors = []
    for _ in range(n):
        errors.append(struct.unpack_from('>h', answer, pos + 4)[0])
        pos += 4 + 2 + 8 + 8
    return {'request_bytes': len(body), 'errors': errors, 'seconds': round(took, 2)}


# ---------------------------------------------------------------------------
# Connections that never authenticate
# ---------------------------------------------------------------------------

def closed_by_peer(sock):
    try:
        sock.setblocking(False)
        return sock.recv(1) == b''
    except BlockingIOError:
        return False
    except OSError:
        return True


def slow_frames(conns, mb, seconds):
    socks = [connect() for _ in range(conns)]
    for s in socks:
        s.sendall(struct.pack('>i', mb << 20))
    deadline = time.monotonic() + seconds
    chunk = bytes(1024)
    while time.monotonic() < deadline:
        for s in socks:
            try:
                s.send(chunk)
            except OSError:
                pass
        time.sleep(0.05)
    closed = sum(closed_by_peer(s) for s in socks)
    for s in socks:
        s.close()
    return {'connections': conns, 'closed_by_listener': closed}


def idle(conns, seconds):
    socks = []
    for _ in range(conns):
        try:
            socks.append(connect())
        except OSError:
            break
    # a new client, with every slot taken by them
    fresh = False
    try:
        sock = connect()
        authenticate(sock)
        sock.sendall(frame(3, 1, struct.pack('>i', 0)))
        response(sock)
        sock.close()
        fresh = True
    except Exception:       # noqa: BLE001: the check says it failed
        pass
    time.sleep(seconds)
    closed = sum(closed_by_peer(s) for s in socks)
    for s in socks:
        s.close()
    return {'connections': len(socks), 'closed_by_listener': closed, 'fresh_client': fresh}


# ---------------------------------------------------------------------------
# Requests that name many partitions
# ---------------------------------------------------------------------------

def partition_errors(answer, pos):
    """the partitions array at pos of a classic (not flexible) answer whose
    partitions are an index and an error code (OffsetCommit, OffsetDelete):
    how many, and how many of each error code"""
    count = struct.unpack_from('>i', answer, pos)[0]
    pos += 4
    errors = {}
    for _ in range(count):
        e = struct.unpack_from('>h', answer, pos + 4)[0]
        errors[str(e)] = errors.get(str(e), 0) + 1
        pos += 6
    return count, errors


def commit_dups(topic, n):
    part = struct.pack('>iq', 0, 1) + struct.pack('>h', -1)       # index, offset, no metadata
    body = (kstr(b'dups') + struct.pack('>i', -1) + kstr(b'') + struct.pack('>q', -1)
            + struct.pack('>i', 1) + kstr(topic.encode()) + struct.pack('>i', n) + part * n)
    answer, took = timed_request(8, 2, body)
    pos = 4 + 4                                   # correlation id, 1 topic
    pos += 2 + struct.unpack_from('>h', answer, pos)[0]
    count, errors = partition_errors(answer, pos)
    return {'request_bytes': len(body), 'answered': count, 'errors': errors, 'seconds': round(took, 2)}


def delete_dups(group, topic, n):
    """an OffsetDelete v0 of group naming partition 0 of topic n times: its
    group error and its partitions' errors by code"""
    body = (kstr(group.encode()) + struct.pack('>i', 1) + kstr(topic.encode())
            + struct.pack('>i', n) + struct.pack('>i', 0) * n)
    answer, took = timed_request(47, 0, body)
    group_error = struct.unpack_from('>h', answer, 4)[0]
    pos = 4 + 2 + 4 + 4                           # correlation id, error, throttle, 1 topic
    pos += 2 + struct.unpack_from('>h', answer, pos)[0]
    count, errors = partition_errors(answer, pos)
    return {'group_error': group_error, 'answered': count, 'errors': errors, 'seconds': round(took, 2)}


def fetch_dups(topic, offset, n):
    """a Fetch v4 naming one partition n times, each with a
    partition_max_bytes of 1 (its first batch is read whole, then cut)"""
    part = struct.pack('>iqi', 0, offset, 1)
    body = (struct.pack('>iiiib', -1, 0, 0, 50 << 20, 0) + struct.pack('>i', 1) + kstr(topic.encode())
            + struct.pack('>i', n) + part * n)
    answer, took = timed_request(1, 4, body)
    return {'request_bytes': len(body), 'answer_bytes': len(answer), 'seconds': round(took, 2)}


def join_group(group, meta_bytes, member=b'', session_ms=30000, protocols=1):
    """JoinGroup v0 of a consumer subscribed to topic 'big' with meta_bytes
    of user data, naming that many protocols: its error"""
    meta = (struct.pack('>h', 0) + struct.pack('>i', 1) + kstr(b'big')
            + struct.pack('>i', meta_bytes) + b'u' * meta_bytes)
    named = b''.join(kstr(b'p%d' % i) + struct.pack('>i', len(meta)) + meta for i in range(protocols))
    body = (kstr(group.encode()) + struct.pack('>i', session_ms) + kstr(member) + kstr(b'consumer')
            + struct.pack('>i', protocols) + named)
    answer, _ = timed_request(11, 0, body)
    error = struct.unpack_from('>h', answer, 4)[0]
    return error


def fat_group(group, kb, n):
    """a member with kb kB of subscription metadata, then a DescribeGroups
    naming its group n times: the join's error, the describe's errors by
    code, and the answer's size; and a join with 2 MB of metadata"""
    joined = join_group(group, kb * 1024)
    body = struct.pack('>i', n) + kstr(group.encode()) * n
    answer, took = timed_request(15, 0, body)
    pos = 4
    count = struct.unpack_from('>i', answer, pos)[0]
    pos += 4
    errors = {}
    for _ in range(count):
        e = struct.unpack_from('>h', answer, pos)[0]
        errors[str(e)] = errors.get(str(e), 0) + 1
        pos += 2
        for _field in range(4):                 # group_id, state, protocol type, protocol
            pos += 2 + struct.unpack_from('>h', answer, pos)[0]
        members = struct.unpack_from('>i', answer, pos)[0]
        pos += 4
        for _m in range(members):
            for _field in range(3):             # member id, client id, client host
                pos += 2 + struct.unpack_from('>h', answer, pos)[0]
            for _field in range(2):             # metadata, assignment
                pos += 4 + max(0, struct.unpack_from('>i', answer, pos)[0])
    return {'join_error': joined, 'answered': count, 'errors': errors, 'answer_bytes': len(answer),
            'seconds': round(took, 2), 'join_2mb_error': join_group(group + '-big', 2 << 20)}


def slow_readers(group, kb, conns, n, hold):
    """a member with kb kB of subscription metadata, then conns connections
    that each send a DescribeGroups naming its group n times and read
    nothing of the answer for hold seconds (a receive buffer of 4 kB): the
    join's error and how many sent their request"""
    joined = join_group(group, kb * 1024)
    body = struct.pack('>i', n) + kstr(group.encode()) * n
    socks = []
    for _ in range(conns):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(30)
        sock.connect((HOST, PORT))
        authenticate(sock)
        sock.sendall(frame(15, 0, body))
        socks.append(sock)
        time.sleep(0.2)
    time.sleep(hold)
    for sock in socks:
        sock.close()
    return {'join_error': joined, 'sent': len(socks)}


def configs_dups(topic, n):
    """one DescribeConfigs v0 naming topic n times: the answer's size and
    its resources' errors by code"""
    body = struct.pack('>i', n) + (struct.pack('>b', 2) + kstr(topic.encode()) + struct.pack('>i', -1)) * n
    answer, took = timed_request(32, 0, body)
    pos = 8                                     # correlation id, throttle_time_ms
    count = struct.unpack_from('>i', answer, pos)[0]
    pos += 4
    errors = {}
    with_message = 0
    for _ in range(count):
        e = struct.unpack_from('>h', answer, pos)[0]
        errors[str(e)] = errors.get(str(e), 0) + 1
        pos += 2
        mlen = struct.unpack_from('>h', answer, pos)[0]
        with_message += mlen >= 0
        pos += 2 + max(mlen, 0) + 1             # message, resource type
        pos += 2 + struct.unpack_from('>h', answer, pos)[0]
        entries = struct.unpack_from('>i', answer, pos)[0]
        pos += 4
        for _e in range(max(entries, 0)):
            pos += 2 + struct.unpack_from('>h', answer, pos)[0]
            pos += 2 + max(0, struct.unpack_from('>h', answer, pos)[0])
            pos += 3                            # read_only, is_default, is_sensitive
    return {'answered': count, 'errors': errors, 'with_message': with_message,
            'request_bytes': len(body), 'answer_bytes': len(answer), 'seconds': round(took, 2)}


def group_fill(prefix, n, kb, session_ms):
    """n members, each in a group of its own and with kb kB of metadata,
    that never heartbeat (they leave after session_ms): each join's error;
    and a join naming 100 protocols"""
    errors = [join_group('%s-%d' % (prefix, i), kb * 1024, session_ms=session_ms) for i in range(n)]
    return {'errors': errors, 'protocols_100_error': join_group(prefix + '-p', 10, protocols=100)}


def many_elements(n):
    body = (struct.pack('>h', -1) + struct.pack('>hi', 1, 30000) + struct.pack('>i', 1) + kstr(b'bomb')
            + struct.pack('>i', n) + struct.pack('>ii', 0, -1) * n)
    sock = connect(timeout=600)
    authenticate(sock)
    sock.sendall(frame(0, 3, body))
    try:
        response(sock)
        closed = False
    except (ConnectionError, OSError):
        closed = True
    sock.close()
    return {'request_bytes': len(body), 'closed': closed}


# ---------------------------------------------------------------------------
# SASL PLAIN: what a failure takes, and what many of them take
# ---------------------------------------------------------------------------

def plain_login(user, password, source):
    """the time of one SaslAuthenticate round trip and of the whole login
    (connection, handshake, authentication) in ms, and its error"""
    start = time.monotonic()
    sock = connect(timeout=60, source=source)
    sock.sendall(frame(17, 1, kstr(b'PLAIN')))
    response(sock)
    token = b'\0' + user.encode() + b'\0' + password.encode()
    began = time.monotonic()
    sock.sendall(frame(36, 0, struct.pack('>i', len(token)) + token))
    answer = response(sock)
    done = time.monotonic()
    sock.close()
    return round((done - began) * 1000, 2), round((done - start) * 1000, 2), struct.unpack_from('>h', answer, 4)[0]


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def plain_timing(user, n):
    known = [plain_login(user, 'wrong', '127.0.1.%d' % (i + 1))[0] for i in range(n)]
    unknown = [plain_login('no_such_role_%d' % i, 'wrong', '127.0.2.%d' % (i + 1))[0] for i in range(n)]
    return {'existing_ms': median(known), 'unknown_ms': median(unknown),
            'existing_all': known, 'unknown_all': unknown}


def plain_backoff(user, password, n):
    failed = [plain_login(user, 'wrong', '127.0.3.1') for _ in range(n)]
    right = plain_login(user, password, '127.0.3.1')
    after = plain_login(user, 'wrong', '127.0.3.1')
    other = plain_login(user, 'wrong', '127.0.3.2')
    return {'failed_ms': [t for _, t, _ in failed], 'failed_errors': [e for _, _, e in failed],
            'right': list(right[1:]), 'after_right': list(after[1:]), 'other_address': list(other[1:])}


if __name__ == '__main__':
    PORT = int(sys.argv[1])
    what = sys.argv[2]
    dog = Watchdog()
    dog.start()
    time.sleep(0.3)
    if what == 'bomb':
        result = bomb(sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]))
    elif what == 'slow-frames':
        result = slow_frames(int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
    elif what == 'idle':
        result = idle(int(sys.argv[3]), float(sys.argv[4]))
    elif what == 'commit-dups':
        result = commit_dups(sys.argv[3], int(sys.argv[4]))
    elif what == 'delete-dups':
        result = delete_dups(sys.argv[3], sys.argv[4], int(sys.argv[5]))
    elif what == 'group-fill':
        result = group_fill(sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))
    elif what == 'fetch-dups':
        result = fetch_dups(sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    elif what == 'fat-group':
        result = fat_group(sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    elif what == 'slow-readers':
        result = slow_readers(sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]),
                              float(sys.argv[7]))
    elif what == 'configs-dups':
        result = configs_dups(sys.argv[3], int(sys.argv[4]))
    elif what == 'many-elements':
        result = many_elements(int(sys.argv[3]))
    elif what == 'plain-timing':
        result = plain_timing(sys.argv[3], int(sys.argv[4]))
    elif what == 'plain-backoff':
        result = plain_backoff(sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        raise SystemExit('unknown attack ' + what)
    time.sleep(0.3)
    dog.stop.set()
    dog.join(60)
    result.update(dog.report())
    print(json.dumps(result))
