"""Bounded, seeded fuzzing of mqlog's Kafka listener (test/perl/150_kafka.pl).

  fuzz.py HOST PORT SEED ITERATIONS MAX_FRAME TOPIC

Each iteration opens a connection and sends one of: a truncated frame, an
oversized frame, random bytes, an unknown API key, an unknown version, a
valid request header with a random or mutated body (Metadata, Produce,
Fetch, ListOffsets, ApiVersions), or a valid request cut off mid-frame;
then reads what comes back for a moment and closes.  Prints one summary
line; exits non-zero only when a check that must hold fails (ApiVersions
at an unknown version is answered with UNSUPPORTED_VERSION).
"""
import random
import socket
import struct
import sys

from kwire import kstr


def header(key, ver, corr=1, client=b'fuzz', flexible=False):
    h = struct.pack('>hhi', key, ver, corr) + kstr(client)
    return h + (b'\x00' if flexible else b'')


def frame(payload):
    return struct.pack('>i', len(payload)) + payload


def valid_bodies(topic):
    t = topic.encode()
    metadata = struct.pack('>i', 1) + kstr(t) + b'\x01'
    batch = bytes(61)  # a header of zeros: a corrupt batch
    produce = (struct.pack('>h', -1) + struct.pack('>hi', 1, 1000) + struct.pack('>i', 1) + kstr(t)
               + struct.pack('>i', 1) + struct.pack('>i', 0) + struct.pack('>i', len(batch)) + batch)
    fetch = (struct.pack('>iiiib', -1, 100, 1, 1 << 20, 1) + struct.pack('>i', 1) + kstr(t)
             + struct.pack('>i', 1) + struct.pack('>iqqi', 0, 0, -1, 1 << 20))
    list_offsets = (struct.pack('>ib', -1, 0) + struct.pack('>i', 1) + kstr(t)
                    + struct.pack('>i', 1) + struct.pack('>iq', 0, -1))
    return [(3, 4, metadata), (0, 5, produce), (1, 5, fetch), (2, 2, list_offsets),
            (18, 2, b'')]


def read_until(s, timeout, done):
    """what s sends until done(data), the server closes or timeout passes
    without a byte"""
    s.settimeout(timeout)
    data = b''
    try:
        while not done(data):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except (socket.timeout, ConnectionError, OSError):
        pass
    return data


def read_some(s, timeout=0.05):
    return read_until(s, timeout, lambda data: len(data) >= 1 << 20)


def read_response(s, timeout=5.0):
    """one whole response, size prefix included (b'' if the server closed)"""
    return read_until(s, timeout,
                      lambda data: len(data) >= 4 and len(data) >= 4 + struct.unpack('>i', data[:4])[0])


def main():
    host, port, seed, n, max_frame, topic = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]),
                                             int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
    rng = random.Random(seed)
    src_rng = random.Random(seed + 1)   # apart, so that a seed fuzzes as it did
    bodies = valid_bodies(topic)
    counts = {}
    for i in range(n):
        kind = rng.choice(['truncated', 'oversized', 'random', 'unknown_key', 'unknown_version',
                           'random_body', 'mutated', 'cut', 'negative', 'apiversions_high'])
        counts[kind] = counts.get(kind, 0) + 1
        # a loopback address of its own per connection: the listener holds
        # an address's requests it does not serve after the first
        # (backoff.c), and 500 of them from one address would be a storm
        src = ('127.%d.%d.%d' % (64 + src_rng.randrange(64), src_rng.randrange(256),
                                 src_rng.randrange(1, 255)), 0) \
            if host.startswith('127.') else None
        s = socket.create_connection((host, port), source_address=src)
        try:
            if kind == 'truncated':
                key, ver, body = rng.choice(bodies)
                p = header(key, ver) + body
                s.sendall(frame(p)[:rng.randrange(1, len(p) + 4)])
            elif kind == 'oversized':
                s.sendall(struct.pack('>i', max_frame + rng.randrange(1, 1 << 20)) + b'x' * 100)
            elif kind == 'negative':
                s.sendall(struct.pack('>i', -rng.randrange(1, 1 << 30)))
            elif kind == 'random':
                s.sendall(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300))))
            elif kind == 'unknown_key':
                s.sendall(frame(header(rng.choice([7, 19, 55, 999, -1, 32767]), 0)))
            elif kind == 'unknown_version':
                key = rng.choice([0, 1, 2, 3])
                s.sendall(frame(header(key, rng.choice([-1, 99, 12, 32767])) + b'\x00' * 20))
            elif kind == 'apiversions_high':
                s.sendall(frame(header(18, 99, corr=4242)))
                data = read_response(s)
                if len(data) < 10 or struct.unpack('>i', data[4:8])[0] != 4242 or \
                        struct.unpack('>h', data[8:10])[0] != 35:
                    raise SystemExit('ApiVersions v99 was not answered with UNSUPPORTED_VERSION: %r'
                                     % data[:20])
            elif kind == 'random_body':
                key, ver, _ = rng.choice(bodies)
                body = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 200)))
                s.sendall(frame(header(key, ver, flexible=(key == 18 and ver >= 3)) + body))
            elif kind == 'mutated':
                key, ver, body = rng.choice(bodies)
                b = bytearray(body)
                for _ in range(rng.randrange(1, 6)):
                    if b:
                        b[rng.randrange(len(b))] = rng.randrange(256)
                s.sendall(frame(header(key, ver) + bytes(b)))
            elif kind == 'cut':
                key, ver, body = rng.choice(bodies)
                f = frame(header(key, ver) + body)
                s.sendall(f[:rng.randrange(4, len(f))])
                s.close()
                continue
            read_some(s)
        except (ConnectionError, BrokenPipeError):
            pass
        finally:
            s.close()
    print(' '.join('%s=%d' % kv for kv in sorted(counts.items())))


if __name__ == '__main__':
    main()
