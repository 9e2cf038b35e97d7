"""One Kafka group coordinator across an mqlog cluster
(test/perl/128_kafka_cluster_groups.pl).

  cluster_groups.py BOOTSTRAP find-coordinator GROUP
      -> a raw FindCoordinator v1 of GROUP: "ERROR NODE_ID HOST:PORT"
  cluster_groups.py BOOTSTRAP find-many PREFIX N
      -> N raw FindCoordinator v1 of groups PREFIX-0 ... PREFIX-(N-1) on one
         connection, one after the other: "ok K", "unavailable K" (the
         counts of errors 0 and 15), "other K" and "seconds S" (how long)
  cluster_groups.py BOOTSTRAP raw-group GROUP TOPIC
      -> the error codes of raw requests about GROUP: "heartbeat E"
         (Heartbeat v0 of a made-up member), "offset_fetch E" (OffsetFetch
         v1 of TOPIC partition 0), "describe E" (DescribeGroups v0)
  cluster_groups.py BOOTSTRAP member GROUP TOPIC LOG DELAY_MS
      A subscribe() member of GROUP (librdkafka) bootstrapped at BOOTSTRAP
      alone, committing synchronously after every record.  Appends to LOG,
      flushed line by line:
        assigned P,P,...      (on every assignment)
        revoked
        got P O KEY           (a record delivered, before its commit)
        committed P O         (its commit succeeded)
        commit-failed ERROR   (it did not: the record may come again)
        closed
      sleeping DELAY_MS after each record (so that a test can act while
      records are in flight), until LOG.stop exists, then close()s.
"""
import struct
import sys
import time

from clients import raw_connect
from kwire import Reader, kstr, raw_request
from groups import run_member

SESSION = {'session.timeout.ms': 6000, 'heartbeat.interval.ms': 1000,
           'max.poll.interval.ms': 30000}


def find_coordinator(bootstrap, group):
    s = raw_connect(bootstrap)
    r = Reader(raw_request(s, 10, 1, 1, kstr(group.encode()) + struct.pack('>b', 0)), 4)
    s.close()
    r.take('>i')                # throttle_time_ms
    error = r.take('>h')
    r.string()                  # error_message
    node = r.take('>i')
    host = r.string()
    port = r.take('>i')
    print('%d %d %s:%d' % (error, node, host, port))


def find_many(bootstrap, prefix, n):
    s = raw_connect(bootstrap)
    counts = {0: 0, 15: 0, 'other': 0}
    began = time.time()
    for i in range(n):
        key = ('%s-%d' % (prefix, i)).encode()
        r = Reader(raw_request(s, 10, 1, i, kstr(key) + struct.pack('>b', 0)), 4)
        r.take('>i')            # throttle_time_ms
        e = r.take('>h')
        counts[e if e in counts else 'other'] += 1
    elapsed = time.time() - began
    s.close()
    print('ok %d\nunavailable %d\nother %d\nseconds %.3f' % (counts[0], counts[15], counts['other'], elapsed))


def raw_group(bootstrap, group, topic):
    s = raw_connect(bootstrap)
    g = kstr(group.encode())
    r = Reader(raw_request(s, 12, 0, 1, g + struct.pack('>i', 1) + kstr(b'nobody')), 4)
    print('heartbeat %d' % r.take('>h'))
    body = g + struct.pack('>i', 1) + kstr(topic.encode()) + struct.pack('>ii', 1, 0)
    r = Reader(raw_request(s, 9, 1, 2, body), 4)
    r.take('>i')                # topics
    r.string()
    r.take('>i')                # partitions
    r.take('>i')                # partition
    r.take('>q')                # offset
    r.string()                  # metadata
    print('offset_fetch %d' % r.take('>h'))
    r = Reader(raw_request(s, 15, 0, 3, struct.pack('>i', 1) + g), 4)
    r.take('>i')                # groups
    print('describe %d' % r.take('>h'))
    s.close()


def commit_each(delay_ms):
    """run_member's on_record that logs "got P O KEY", commits the record
    synchronously and logs "committed P O" or "commit-failed ERROR", then
    sleeps delay_ms (also test/kafka/faults.py's)"""
    from confluent_kafka import KafkaException

    def on_record(c, m, log):
        log.write('got %d %d %s\n' % (m.partition(), m.offset(), m.key().decode()))
        try:
            c.commit(message=m, asynchronous=False)
            log.write('committed %d %d\n' % (m.partition(), m.offset()))
        except KafkaException as e:
            log.write('commit-failed %s\n' % e.args[0].name())
        if delay_ms > 0:
            time.sleep(delay_ms / 1000.0)
    return on_record


def member(bootstrap, group, topic, logpath, delay_ms):
    run_member(bootstrap, group, topic, logpath, SESSION, commit_each(delay_ms))


def main():
    bootstrap, what = sys.argv[1], sys.argv[2]
    args = sys.argv[3:]
    if what == 'find-coordinator':
        find_coordinator(bootstrap, args[0])
    elif what == 'find-many':
        find_many(bootstrap, args[0], int(args[1]))
    elif what == 'raw-group':
        raw_group(bootstrap, args[0], args[1])
    elif what == 'member':
        member(bootstrap, args[0], args[1], args[2], int(args[3]))
    else:
        sys.exit('unknown command ' + what)


if __name__ == '__main__':
    main()
