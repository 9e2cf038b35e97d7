"""Kafka clients for fetching from followers (KIP-392,
test/perl/166_kafka_follower_fetch.pl).

  follower_fetch.py BOOTSTRAP racks
      -> JSON of a raw Metadata v7's brokers: {id: rack or null}
  follower_fetch.py BOOTSTRAP fetch VERSION TOPIC PARTITION OFFSET RACK [ISOLATION [MAX_WAIT_MS]]
      -> JSON of a raw Fetch (v4-v11; RACK is rack_id, v11 only, "-" for
         empty) of one partition, min_bytes 1, max_wait_ms 0 unless given:
         {"error", "hw", "lso", "log_start", "preferred" (v11, else -1),
          "batches": [[base offset, last offset], ...]}

(A consumer with client.rack is cluster.py's consume.)
"""
import json
import struct
import sys

from admin_clients import Reader
from clients import raw_connect, raw_request, raw_string


def racks(bootstrap):
    s = raw_connect(bootstrap)
    r = Reader(raw_request(s, 3, 7, 1, struct.pack('>ib', -1, 0)), 4)
    s.close()
    r.take('>i')                # throttle
    out = {}
    for _ in range(r.take('>i')):
        node = r.take('>i')
        r.string()              # host
        r.take('>i')            # port
        out[node] = r.string()
    print(json.dumps(out, sort_keys=True))


def fetch(bootstrap, version, topic, partition, offset, rack, isolation, max_wait):
    body = struct.pack('>iiiib', -1, max_wait, 1, 1048576, isolation)
    if version >= 7:
        body += struct.pack('>ii', 0, -1)       # no session
    part = struct.pack('>i', partition)
    if version >= 9:
        part += struct.pack('>i', -1)           # current_leader_epoch
    part += struct.pack('>q', offset)
    if version >= 5:
        part += struct.pack('>q', -1)           # log_start_offset
    part += struct.pack('>i', 1048576)
    body += struct.pack('>i', 1) + raw_string(topic.encode()) + struct.pack('>i', 1) + part
    if version >= 7:
        body += struct.pack('>i', 0)            # forgotten topics
    if version >= 11:
        body += raw_string(b'' if rack == '-' else rack.encode())
    s = raw_connect(bootstrap)
    s.settimeout(max_wait / 1000.0 + 10)
    r = Reader(raw_request(s, 1, version, 1, body), 4)
    s.close()
    r.take('>i')                # throttle
    out = {'error': 0, 'preferred': -1, 'batches': []}
    if version >= 7:
        out['error'] = r.take('>h')
        r.take('>i')            # session id
    for _ in range(r.take('>i')):
        r.string()
        for _ in range(r.take('>i')):
            r.take('>i')
            out['error'] = r.take('>h') or out['error']
            out['hw'], out['lso'] = r.take('>q'), r.take('>q')
            if version >= 5:
                out['log_start'] = r.take('>q')
            n = r.take('>i')    # aborted transactions
            for _ in range(max(n, 0)):
                r.take('>qq')
            if version >= 11:
                out['preferred'] = r.take('>i')
            size = r.take('>i')
            records = r.data[r.pos:r.pos + max(size, 0)]
            r.pos += max(size, 0)
            pos = 0
            # whole batches only: base offset, length, then the header
            while pos + 61 <= len(records):
                base, length = struct.unpack_from('>qi', records, pos)
                if pos + 12 + length > len(records):
                    break
                delta = struct.unpack_from('>i', records, pos + 23)[0]
                out['batches'].append([base, base + delta])
                pos += 12 + length
    print(json.dumps(out, sort_keys=True))


if __name__ == '__main__':
    boot, what = sys.argv[1], sys.argv[2]
    if what == 'racks':
        racks(boot)
    elif what == 'fetch':
        a = sys.argv[3:]
        fetch(boot, int(a[0]), a[1], int(a[2]), int(a[3]), a[4],
              int(a[5]) if len(a) > 5 else 0, int(a[6]) if len(a) > 6 else 0)
    else:
        sys.exit('unknown command %s' % what)
