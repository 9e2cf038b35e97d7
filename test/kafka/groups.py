"""Kafka consumer groups against mqlog's listener (test/perl/151_kafka_groups.pl).

  groups.py BOOTSTRAP confluent-member GROUP TOPIC LOG
      A subscribe() member of GROUP (librdkafka), committing synchronously
      after every record.  Appends to LOG, flushed line by line:
        assigned P,P,...      (on every assignment)
        revoked
        record P O KEY
        commit-failed ERROR
        closed
      and runs until LOG.stop exists, then close()s (LeaveGroup).
  groups.py BOOTSTRAP confluent-error GROUP TOPIC
      -> the name of the first error a subscribe() consumer of GROUP gets
         (or "none" after 20 s)
  groups.py BOOTSTRAP raw GROUP TOPIC
      The coordinator's answers and errors over raw requests on two
      connections (JoinGroup v4 with MEMBER_ID_REQUIRED, a join parked
      while the other connection is answered, SyncGroup, Heartbeat,
      OffsetCommit, OffsetFetch, LeaveGroup).
      -> one line per check: NAME VALUE
  groups.py BOOTSTRAP kafka-python-member GROUP TOPIC N
      A KafkaConsumer with group_id: consumes N records, commits, closes.
      -> one line per record: P O KEY, then "committed" and its
         committed offsets (P=O, ...)

Sessions are short (session.timeout.ms 6000, heartbeat.interval.ms 1000)
so that the test's rebalances take seconds.
"""
import os
import socket
import struct
import sys
import time

from kwire import Reader, frame, kbytes, kstr, read_frame

SESSION = {'session.timeout.ms': 6000, 'heartbeat.interval.ms': 1000,
           'max.poll.interval.ms': 10000}


def run_member(bootstrap, group, topic, logpath, session, on_record, log=None):
    """a confluent-kafka subscribe() member of group, without auto-commit,
    that writes "assigned P,P,...", "revoked", "error E" and at the end
    "closed" lines to logpath (or to log, an object with write(), if
    given), calls on_record(consumer, message, log) for each record, and
    runs until logpath.stop exists"""
    if log is None:
        log = open(logpath, 'a', buffering=1)
    c = subscribed_member(bootstrap, group, topic, log, session)
    stop = logpath + '.stop'
    while not os.path.exists(stop):
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error():
            log.write('error %s\n' % m.error().name())
            continue
        on_record(c, m, log)
    c.close()
    log.write('closed\n')


def subscribed_member(bootstrap, group, topic, log, session):
    """run_member's consumer, subscribed"""
    from confluent_kafka import Consumer
    conf = {'bootstrap.servers': bootstrap, 'group.id': group,
            'enable.auto.commit': False, 'auto.offset.reset': 'earliest',
            'enable.partition.eof': False}
    conf.update(session)
    c = Consumer(conf)

    def on_assign(consumer, parts):
        log.write('assigned %s\n' % ','.join(str(p.partition) for p in
                                              sorted(parts, key=lambda p: p.partition)))

    def on_revoke(consumer, parts):
        log.write('revoked\n')

    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    return c


def confluent_member(bootstrap, group, topic, logpath):
    from confluent_kafka import KafkaException

    def on_record(c, m, log):
        try:
            c.commit(message=m, asynchronous=False)
        except KafkaException as e:
            log.write('commit-failed %s\n' % e.args[0].name())
            return
        log.write('record %d %d %s\n' % (m.partition(), m.offset(), m.key().decode()))

    run_member(bootstrap, group, topic, logpath, SESSION, on_record)


def confluent_error(bootstrap, group, topic):
    from confluent_kafka import Consumer
    conf = {'bootstrap.servers': bootstrap, 'group.id': group,
            'enable.auto.commit': False, 'auto.offset.reset': 'earliest'}
    conf.update(SESSION)
    c = Consumer(conf)
    c.subscribe([topic])
    deadline = time.time() + 20
    found = 'none'
    while time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error():
            found = m.error().name()
            break
    c.close()
    print(found)


def kafka_python_member(bootstrap, group, topic, n):
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                      enable_auto_commit=False, auto_offset_reset='earliest',
                      session_timeout_ms=6000, heartbeat_interval_ms=1000)
    got = []
    deadline = time.time() + 60
    while len(got) < n and time.time() < deadline:
        for tp, msgs in c.poll(timeout_ms=500).items():
            for m in msgs:
                got.append('%d %d %s' % (m.partition, m.offset, m.key.decode()))
    c.commit()
    parts = sorted(c.assignment(), key=lambda tp: tp.partition)
    committed = ['%d=%s' % (tp.partition, c.committed(tp)) for tp in parts]
    c.close()
    print('\n'.join(got))
    print('committed ' + ','.join(committed))


class Conn:
    """One connection speaking classic (non-flexible) request versions."""

    def __init__(self, bootstrap):
        host, port = bootstrap.rsplit(':', 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.corr = 0

    def send(self, key, version, body):
        self.corr += 1
        self.sock.sendall(frame(key, version, body, self.corr))

    def recv(self, timeout=30):
        self.sock.settimeout(timeout)
        return Reader(read_frame(self.sock), 4)     # past the correlation id


def join_v4(group, member):
    return (kstr(group) + struct.pack('>ii', 6000, 6000) + kstr(member) + kstr(b'consumer') +
            struct.pack('>i', 1) + kstr(b'range') + kbytes(b'meta-' + (member or b'new')))


def read_join(r):
    r.take('>i')
    err, gen = r.take('>h'), r.take('>i')
    proto, leader, member = r.string(), r.string(), r.string()
    members = []
    for _ in range(r.take('>i')):
        members.append(r.string())
        r.bytes()
    return err, gen, proto, leader, member, members


def heartbeat(c, group, gen, member):
    c.send(12, 1, kstr(group) + struct.pack('>i', gen) + kstr(member))
    r = c.recv()
    r.take('>i')
    return r.take('>h')


def raw(bootstrap, group, topic):
    group, topic = group.encode(), topic.encode()
    c1, c2 = Conn(bootstrap), Conn(bootstrap)
    out = []
    c1.send(11, 4, join_v4(group, b''))
    err, gen, _, _, m1, _ = read_join(c1.recv())
    out.append('join-no-member-id %d' % err)
    c1.send(11, 4, join_v4(group, m1.encode()))
    err, gen, proto, leader, member, members = read_join(c1.recv())
    out.append('join %d gen=%d proto=%s leader=%s members=%d' % (
        err, gen, proto, 'self' if leader == m1 else leader, len(members)))
    out.append('heartbeat-completing %d' % heartbeat(c1, group, gen, m1.encode()))
    out.append('heartbeat-old-generation %d' % heartbeat(c1, group, gen + 5, m1.encode()))
    out.append('heartbeat-unknown-member %d' % heartbeat(c1, group, gen, b'nobody'))
    c1.send(14, 1, kstr(group) + struct.pack('>i', gen) + kstr(m1.encode()) +
            struct.pack('>i', 1) + kstr(m1.encode()) + kbytes(b'assignment-1'))
    r = c1.recv()
    r.take('>i')
    out.append('sync %d %s' % (r.take('>h'), r.bytes().decode()))
    out.append('heartbeat-stable %d' % heartbeat(c1, group, gen, m1.encode()))
    # a JoinGroup v0 of another protocol type is refused at once
    c2.send(11, 0, kstr(group) + struct.pack('>i', 6000) + kstr(b'') + kstr(b'other') +
            struct.pack('>i', 1) + kstr(b'x') + kbytes(b''))
    r = c2.recv()
    out.append('join-other-protocol-type %d' % r.take('>h'))
    # a second member: its join parks, the first connection is still answered
    c2.send(11, 4, join_v4(group, b''))
    m2 = read_join(c2.recv())[4]
    c2.send(11, 4, join_v4(group, m2.encode()))
    time.sleep(0.5)         # served before the heartbeat below
    start = time.time()
    out.append('heartbeat-while-other-joins %d' % heartbeat(c1, group, gen, m1.encode()))
    out.append('answered-while-parked %d' % (time.time() - start < 5))
    c1.send(11, 4, join_v4(group, m1.encode()))
    err1, gen1, _, leader1, _, members1 = read_join(c1.recv())
    err2, gen2, _, leader2, _, members2 = read_join(c2.recv())
    out.append('rejoin %d %d gen=%d,%d leader=%s,%s members=%d,%d' % (
        err1, err2, gen1, gen2, 'first' if leader1 == m1 else leader1,
        'first' if leader2 == m1 else leader2, len(members1), len(members2)))
    gen = gen1
    # the follower's sync waits for the leader's
    c2.send(14, 1, kstr(group) + struct.pack('>i', gen) + kstr(m2.encode()) + struct.pack('>i', 0))
    c1.send(14, 1, kstr(group) + struct.pack('>i', gen) + kstr(m1.encode()) +
            struct.pack('>i', 2) + kstr(m1.encode()) + kbytes(b'for-1') + kstr(m2.encode()) +
            kbytes(b'for-2'))
    for name, c in (('leader', c1), ('follower', c2)):
        r = c.recv()
        r.take('>i')
        out.append('sync-%s %d %s' % (name, r.take('>h'), r.bytes().decode()))
    # offsets: a member's commit, a stale generation's, a fetch
    def commit(c, gen, member, offset):
        c.send(8, 2, kstr(group) + struct.pack('>i', gen) + kstr(member) +
               struct.pack('>q', -1) + struct.pack('>i', 1) + kstr(topic) +
               struct.pack('>i', 1) + struct.pack('>iq', 0, offset) + kstr(b''))
        r = c.recv()        # v2: no throttle_time_ms
        r.take('>i')
        r.string()
        r.take('>i')
        r.take('>i')
        return r.take('>h')
    def fetch(c):
        """OffsetFetch v1 of partition 0: (offset, error)"""
        c.send(9, 1, kstr(group) + struct.pack('>i', 1) + kstr(topic) + struct.pack('>ii', 1, 0))
        r = c.recv()
        r.take('>i')
        r.string()
        r.take('>i')
        r.take('>i')
        off = r.take('>q')
        r.string()
        return off, r.take('>h')
    out.append('commit %d' % commit(c1, gen, m1.encode(), 3))
    out.append('commit-old-generation %d' % commit(c1, gen - 1, m1.encode(), 9))
    out.append('commit-unknown-member %d' % commit(c1, gen, b'nobody', 9))
    out.append('fetch %d %d' % fetch(c1))
    # past the log end, as Kafka's coordinator takes it; a negative one is refused
    out.append('commit-past-end %d' % commit(c1, gen, m1.encode(), 1000000))
    out.append('fetch-past-end %d %d' % fetch(c1))
    out.append('commit-negative %d' % commit(c1, gen, m1.encode(), -5))
    out.append('commit-back %d' % commit(c1, gen, m1.encode(), 3))
    # leaving: the other one is told to rejoin
    c2.send(13, 1, kstr(group) + kstr(m2.encode()))
    r = c2.recv()
    r.take('>i')
    out.append('leave %d' % r.take('>h'))
    out.append('heartbeat-after-leave %d' % heartbeat(c1, group, gen, m1.encode()))
    out.append('heartbeat-left-member %d' % heartbeat(c1, group, gen, m2.encode()))
    c1.send(13, 1, kstr(group) + kstr(m1.encode()))
    c1.recv()
    print('\n'.join(out))


def main():
    bootstrap, what = sys.argv[1], sys.argv[2]
    args = sys.argv[3:]
    if what == 'confluent-member':
        confluent_member(bootstrap, args[0], args[1], args[2])
    elif what == 'confluent-error':
        confluent_error(bootstrap, args[0], args[1])
    elif what == 'raw':
        raw(bootstrap, args[0], args[1])
    elif what == 'kafka-python-member':
        kafka_python_member(bootstrap, args[0], args[1], int(args[2]))
    else:
        raise SystemExit('unknown command %s' % what)


if __name__ == '__main__':
    main()
