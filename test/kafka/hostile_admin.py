#!/usr/bin/python3
"""A hostile client of the Kafka admin and group APIs, for
test/perl/164_kafka_hostile_admin.pl.  Raw requests (classic versions),
each connection authenticated with SASL PLAIN as USER/PASSWORD.

  hostile_admin.py PORT USER PASSWORD bad-utf8 TOPIC
        an OffsetCommit whose metadata is not UTF-8, one whose group id is
        not, and a CreateAcls whose group name is not, each on a connection
        of its own: "closed" or the answer's error codes; then a commit of
        UTF-8 metadata and group id, fetched back
  hostile_admin.py PORT USER PASSWORD probe OWNED_GROUP OTHER_TOPIC
        what a role that may not use OWNED_GROUP nor touch OTHER_TOPIC gets
        from each group and admin API aimed at them, and the ACL APIs
  hostile_admin.py PORT USER PASSWORD describe GROUP
        DescribeGroups v2 of GROUP: its error, state and members, each as
        [member id, client id, client host]
  hostile_admin.py PORT - - preauth-storm SECONDS
        for SECONDS, connection after connection from 127.0.0.7, a
        Metadata request before authenticating; then ApiVersions from the
        same address, timed
  hostile_admin.py PORT - - plaintext-storm SECONDS
        for SECONDS, from 4 threads, connection after connection sending
        a plaintext frame to a TLS listener: how many connections

Prints one JSON object.
"""
import json
import socket
import sys
import threading
import time

from kwire import Closed, Reader, frame, i8, i32, i64, kstr, read_frame

HOST = '127.0.0.1'


def arr(items):
    return i32(-1) if items is None else i32(len(items)) + b''.join(items)


def request(s, key, version, body, corr=7):
    s.sendall(frame(key, version, body, corr, 'hostile'))
    try:
        r = Reader(read_frame(s))
    except (ConnectionResetError, socket.timeout):
        raise Closed()
    assert r.i32() == corr
    return r


def connect(port, user, password, source=None):
    s = socket.create_connection((HOST, port), timeout=30,
                                 source_address=(source, 0) if source else None)
    if user:
        assert request(s, 17, 1, kstr('PLAIN')).i16() == 0
        token = b'\0' + user.encode() + b'\0' + password.encode()
        r = request(s, 36, 0, i32(len(token)) + token)
        code = r.i16()
        assert code == 0, 'authentication failed: %d %s' % (code, r.string('replace'))
    return s


def commit(s, group, topic, metadata):
    """OffsetCommit v2 of partition 0 at offset 0, without a member: its codes"""
    body = (kstr(group) + i32(-1) + kstr('') + i64(-1)
            + arr([kstr(topic) + arr([i32(0) + i64(0) + kstr(metadata)])]))
    r = request(s, 8, 2, body)
    return [[r.string('replace'), [[r.i32(), r.i16()] for _ in range(r.i32())]] for _ in range(r.i32())]


def offset_fetch(s, group, topics=None):
    """OffsetFetch v5 (topics None: all): error, [topic, partition, offset, metadata, error]"""
    body = kstr(group) + arr(None if topics is None else
                             [kstr(t) + arr([i32(0)]) for t in topics])
    r = request(s, 9, 5, body)
    r.i32()
    out = []
    for _ in range(r.i32()):
        t = r.string('replace')
        for _ in range(r.i32()):
            p, off = r.i32(), r.i64()
            r.i32()
            out.append([t, p, off, r.string('replace'), r.i16()])
    return r.i16(), out


def binding(resource, name, principal, operation, version=1):
    """a LITERAL ALLOW binding for host *, or a filter (name None: any)"""
    pattern = 3 if name is not None else 1
    b = i8(resource) + kstr(name) + (i8(pattern) if version >= 1 else b'')
    return b + kstr(principal) + kstr('*' if name is not None else None) + i8(operation) \
        + i8(3 if name is not None else 1)


def create_acls(s, bindings):
    r = request(s, 30, 1, arr([binding(*b) for b in bindings]))
    r.i32()
    return [[r.i16(), r.string('replace')] for _ in range(r.i32())]


def describe_acls(s):
    """DescribeAcls v1 of every binding: [resource, name, principal, operation]"""
    r = request(s, 29, 1, binding(1, None, None, 1))
    r.i32()
    code, _ = r.i16(), r.string('replace')
    out = []
    for _ in range(r.i32()):
        res, name = r.i8(), r.string('replace')
        r.i8()
        for _ in range(r.i32()):
            principal, _host, op, _perm = r.string('replace'), r.string('replace'), r.i8(), r.i8()
            out.append([res, name, principal, op])
    return code, out


def delete_acls_all(s):
    """DeleteAcls v1 with a filter matching everything: the bindings deleted"""
    r = request(s, 31, 1, arr([binding(1, None, None, 1)]))
    r.i32()
    out = []
    for _ in range(r.i32()):
        r.i16()
        r.string('replace')
        for _ in range(r.i32()):
            code, _msg, res, name = r.i16(), r.string('replace'), r.i8(), r.string('replace')
            r.i8()
            principal, _host, op, _perm = r.string('replace'), r.string('replace'), r.i8(), r.i8()
            out.append([code, res, name, principal, op])
    return out


def bad_utf8(port, user, password, topic):
    out = {}
    attempts = {
        'metadata': lambda s: commit(s, 'hostile-g', topic, b'md\xff\xfe'),
        'group': lambda s: commit(s, b'g\xc3(', topic, 'md'),
        'acl_group': lambda s: create_acls(s, [(3, b'g\xff', 'User:' + user, 2)]),
    }
    for label, attempt in attempts.items():
        s = connect(port, user, password)
        try:
            out[label] = attempt(s)
        except Closed:
            out[label] = 'closed'
        s.close()
    s = connect(port, user, password)
    out['utf8_commit'] = commit(s, 'gr\u00fcn-\u4e2d', topic, 'm\u00e9ta')
    out['utf8_fetch'] = offset_fetch(s, 'gr\u00fcn-\u4e2d')
    return out


def probe(port, user, password, group, topic):
    s = connect(port, user, password)
    out = {}
    r = request(s, 16, 2, b'')                      # ListGroups v2
    r.i32()
    code = r.i16()
    out['list_groups'] = [code, [[r.string('replace'), r.string('replace')][0] for _ in range(r.i32())]]
    r = request(s, 15, 2, arr([kstr(group)]))       # DescribeGroups v2
    r.i32()
    r.i32()
    out['describe_group'] = r.i16()
    out['offset_fetch_all'] = offset_fetch(s, group)
    out['offset_fetch_topic'] = offset_fetch(s, group, [topic])
    r = request(s, 47, 0, kstr(group) + arr([kstr(topic) + arr([i32(0)])]))   # OffsetDelete v0
    out['offset_delete'] = r.i16()
    r = request(s, 42, 1, arr([kstr(group)]))       # DeleteGroups v1
    r.i32()
    r.i32()
    r.string('replace')
    out['delete_group'] = r.i16()
    # AlterConfigs v1 and IncrementalAlterConfigs v0 of the topic
    r = request(s, 33, 1, arr([i8(2) + kstr(topic) + arr([kstr('retention.ms') + kstr('1')])]) + i8(0))
    r.i32()
    r.i32()
    out['alter_configs'] = r.i16()
    r = request(s, 44, 0, arr([i8(2) + kstr(topic) + arr([kstr('retention.ms') + i8(0) + kstr('1')])]) + i8(0))
    r.i32()
    r.i32()
    out['incremental_alter_configs'] = r.i16()
    r = request(s, 37, 1, arr([kstr(topic) + i32(4) + i32(-1)]) + i32(10000) + i8(0))   # CreatePartitions v1
    r.i32()
    r.i32()
    r.string('replace')
    out['create_partitions'] = r.i16()
    r = request(s, 21, 1, arr([kstr(topic) + arr([i32(0) + i64(-1)])]) + i32(10000))   # DeleteRecords v1
    r.i32()
    r.i32()
    r.string('replace')
    r.i32()
    r.i32()
    r.i64()
    out['delete_records'] = r.i16()
    out['grant_self_topic'] = create_acls(s, [(2, topic, 'User:' + user, 2)])[0][0]
    out['grant_public_topic'] = create_acls(s, [(2, topic, 'User:*', 3)])[0][0]
    out['grant_self_group'] = create_acls(s, [(3, group, 'User:' + user, 2)])[0][0]
    out['describe_acls'] = describe_acls(s)
    out['delete_acls'] = delete_acls_all(s)
    # Metadata v4 naming a new topic, auto-creation allowed
    r = request(s, 3, 4, arr([kstr('hostile-auto')]) + i8(1))
    r.i32()
    for _ in range(r.i32()):
        r.i32()
        r.string('replace')
        r.i32()
        r.string('replace')
    r.string('replace')
    r.i32()
    r.i32()
    out['auto_create'] = r.i16()
    return out


def describe(port, user, password, group):
    s = connect(port, user, password)
    r = request(s, 15, 2, arr([kstr(group)]))
    r.i32()
    r.i32()
    code, _group = r.i16(), r.string('replace')
    state, _ptype, _protocol = r.string('replace'), r.string('replace'), r.string('replace')
    members = []
    for _ in range(r.i32()):
        members.append([r.string('replace'), r.string('replace'), r.string('replace')])
        r.bytes()                                   # metadata
        r.bytes()                                   # assignment
    return {'error': code, 'state': state, 'members': members}


def preauth_storm(port, seconds):
    connections = 0
    end = time.time() + seconds
    while time.time() < end:
        try:
            s = socket.create_connection((HOST, port), timeout=2, source_address=('127.0.0.7', 0))
            connections += 1
            request(s, 3, 1, arr([]))
        except (Closed, OSError):
            pass
        s.close()
    t = time.time()
    s = socket.create_connection((HOST, port), timeout=30, source_address=('127.0.0.7', 0))
    request(s, 18, 0, b'')
    return {'connections': connections, 'api_versions_ms': int((time.time() - t) * 1000)}


def plaintext_storm(port, seconds):
    count = [0]

    def storm():
        end = time.time() + seconds
        while time.time() < end:
            try:
                s = socket.create_connection((HOST, port), timeout=5)
                count[0] += 1
                s.sendall(i32(16) + b'x' * 16)
                s.recv(10)
                s.close()
            except OSError:
                pass

    threads = [threading.Thread(target=storm) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {'connections': count[0]}


def main():
    port, user, password, what = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    args = sys.argv[5:]
    if what == 'bad-utf8':
        out = bad_utf8(port, user, password, *args)
    elif what == 'probe':
        out = probe(port, user, password, *args)
    elif what == 'describe':
        out = describe(port, user, password, *args)
    elif what == 'plaintext-storm':
        out = plaintext_storm(port, float(args[0]))
    elif what == 'preauth-storm':
        out = preauth_storm(port, float(args[0]))
    else:
        sys.exit('unknown command ' + what)
    print(json.dumps(out))


if __name__ == '__main__':
    main()
