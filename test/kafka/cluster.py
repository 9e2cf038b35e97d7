"""Kafka clients against the listeners of an mqlog cluster
(test/perl/125_kafka_cluster.pl).

  cluster.py BOOTSTRAP metadata
      -> JSON of a raw Metadata v7 (all topics): {"brokers": {id: "host:port"},
         "controller": id, "cluster_id": s, "topics": {name: {"error": e,
         "partitions": {p: {"error", "leader", "epoch", "replicas", "isr",
         "offline"}}}}}
  cluster.py BOOTSTRAP confluent-metadata
      -> JSON of confluent-kafka's list_topics: {"brokers": {id: "host:port"},
         "controller": id, "topics": {name: {p: {"leader", "replicas", "isrs",
         "error"}}}}
  cluster.py BOOTSTRAP produce TOPIC PARTITION PREFIX N [INTERVAL_MS]
      -> confluent-kafka, acks=all, with retries: N records "<PREFIX>-<i>" to
         the partition, one every INTERVAL_MS (0: all at once); a line
         "ack VALUE OFFSET" as each is acknowledged (flushed at once), or
         "fail VALUE ERROR"; then "done"
  cluster.py BOOTSTRAP consume TOPIC PARTITION N [SECONDS [RACK]]
      -> confluent-kafka, assigned from the beginning: "OFFSET VALUE" per
         record until N arrived (or SECONDS, 30 by default, passed); with
         RACK, as client.rack (KIP-392: a leader may send it to a follower
         in that rack)
  cluster.py BOOTSTRAP raw-errors TOPIC PARTITION
      -> the error codes of a raw Produce v3 (acks -1, one record), Fetch v4
         and ListOffsets v1 of the partition: "produce E", "fetch E",
         "list_offsets E"
  cluster.py BOOTSTRAP raw-admin TOPIC PARTITION [DELETED]
      -> the error codes of a raw OffsetCommit v2 (no member) of the
         partition, DescribeConfigs v1, DeleteTopics v1 (of DELETED when
         given, else of the topic) and CreateTopics v0 (1 partition,
         replication factor 1) of the topic:
         "offset_commit E", "describe_configs E", "delete_topics E",
         "create_topics E"
"""
import json
import os
import struct
import sys
import time

from admin_clients import Reader
from clients import raw_connect, raw_request, raw_string


def int32s(r):
    """an array of int32 from Reader r"""
    return [r.take('>i') for _ in range(r.take('>i'))]


def metadata(bootstrap):
    s = raw_connect(bootstrap)
    # v7: null topic list (all), allow_auto_topic_creation false
    r = Reader(raw_request(s, 3, 7, 1, struct.pack('>ib', -1, 0)))
    s.close()
    r.take('>i')                # correlation id
    r.take('>i')                # throttle
    out = {'brokers': {}, 'topics': {}}
    for _ in range(r.take('>i')):
        node, host, port = r.take('>i'), r.string(), r.take('>i')
        r.string()              # rack
        out['brokers'][node] = '%s:%d' % (host, port)
    out['cluster_id'] = r.string()
    out['controller'] = r.take('>i')
    for _ in range(r.take('>i')):
        err, name = r.take('>h'), r.string()
        r.take('>b')            # is_internal
        parts = {}
        for _ in range(r.take('>i')):
            perr, p, leader, epoch = r.take('>h'), r.take('>i'), r.take('>i'), r.take('>i')
            parts[p] = {'error': perr, 'leader': leader, 'epoch': epoch,
                        'replicas': int32s(r), 'isr': int32s(r), 'offline': int32s(r)}
        out['topics'][name] = {'error': err, 'partitions': parts}
    print(json.dumps(out, sort_keys=True))


def confluent_metadata(bootstrap):
    from confluent_kafka.admin import AdminClient
    md = AdminClient({'bootstrap.servers': bootstrap}).list_topics(timeout=15)
    print(json.dumps({
        'brokers': {b.id: '%s:%d' % (b.host, b.port) for b in md.brokers.values()},
        'controller': md.controller_id,
        'topics': {t: {p.id: {'leader': p.leader, 'replicas': p.replicas, 'isrs': p.isrs,
                              'error': p.error.code() if p.error else 0}
                       for p in tm.partitions.values()}
                   for t, tm in md.topics.items()}}, sort_keys=True))


def produce(bootstrap, topic, partition, prefix, n, interval_ms):
    from confluent_kafka import Producer
    # MQ_IDEMPOTENT=1 in the environment: an idempotent producer (KIP-98)
    p = Producer({'bootstrap.servers': bootstrap, 'acks': 'all', 'linger.ms': 5,
                  'message.timeout.ms': 30000, 'retry.backoff.ms': 200,
                  'topic.metadata.refresh.interval.ms': 1000,
                  'socket.timeout.ms': 10000,
                  'enable.idempotence': os.environ.get('MQ_IDEMPOTENT') == '1'})

    def report(err, msg):
        if err is not None:
            print('fail %s %s' % (msg.value().decode(), err), flush=True)
        else:
            print('ack %s %d' % (msg.value().decode(), msg.offset()), flush=True)
    for i in range(n):
        p.produce(topic, value='%s-%d' % (prefix, i), partition=partition, on_delivery=report)
        if interval_ms:
            p.poll(interval_ms / 1000.0)
    if p.flush(90) != 0:
        print('fail left unsent', flush=True)
    print('done', flush=True)


def consume(bootstrap, topic, partition, n, seconds=30, rack=None):
    from confluent_kafka import Consumer, TopicPartition, OFFSET_BEGINNING
    conf = {'bootstrap.servers': bootstrap, 'group.id': 'unused',
            'enable.auto.commit': False, 'enable.partition.eof': False,
            'topic.metadata.refresh.interval.ms': 1000}
    if rack is not None:
        conf.update({'client.rack': rack, 'client.id': 'rack-' + rack})
    c = Consumer(conf)
    c.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
    got = 0
    deadline = time.time() + seconds
    while got < n and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            print('error %s' % m.error(), flush=True)
            continue
        print('%d %s' % (m.offset(), m.value().decode()), flush=True)
        got += 1
    c.close()


def raw_errors(bootstrap, topic, partition):
    from kafka.record.default_records import DefaultRecordBatchBuilder
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 20)
    b.append(0, timestamp=int(time.time() * 1000), key=None, value=b'raw', headers=[])
    batch = bytes(b.build())
    t = raw_string(topic.encode())
    s = raw_connect(bootstrap)
    # Produce v3: transactional_id null, acks -1, timeout, [topic [partition records]]
    body = struct.pack('>hhi', -1, -1, 10000) + struct.pack('>i', 1) + t + \
        struct.pack('>ii', 1, partition) + struct.pack('>i', len(batch)) + batch
    r = Reader(raw_request(s, 0, 3, 1, body))
    r.take('>i')
    r.take('>i')
    r.string()
    r.take('>i')
    r.take('>i')
    print('produce %d' % r.take('>h'))
    # Fetch v4: replica -1, max_wait 0, min_bytes 0, max_bytes, isolation 1
    body = struct.pack('>iiiib', -1, 0, 0, 1 << 20, 1) + struct.pack('>i', 1) + t + \
        struct.pack('>iiqi', 1, partition, 0, 1 << 20)
    r = Reader(raw_request(s, 1, 4, 2, body))
    r.take('>i')
    r.take('>i')                # throttle
    r.take('>i')
    r.string()
    r.take('>i')
    r.take('>i')
    print('fetch %d' % r.take('>h'))
    # ListOffsets v1: replica -1, [topic [partition timestamp(-1)]]
    body = struct.pack('>i', -1) + struct.pack('>i', 1) + t + struct.pack('>iiq', 1, partition, -1)
    r = Reader(raw_request(s, 2, 1, 3, body))
    r.take('>i')
    r.take('>i')
    r.string()
    r.take('>i')
    r.take('>i')
    print('list_offsets %d' % r.take('>h'))
    s.close()


def raw_admin(bootstrap, topic, partition, deleted=None):
    t = raw_string(topic.encode())
    s = raw_connect(bootstrap)
    # OffsetCommit v2: group, generation -1, member "", retention -1, [topic [partition offset metadata]]
    body = raw_string(b'g126') + struct.pack('>i', -1) + raw_string(b'') + struct.pack('>q', -1) + \
        struct.pack('>i', 1) + t + struct.pack('>iiq', 1, partition, 1) + raw_string(b'')
    r = Reader(raw_request(s, 8, 2, 1, body))
    r.take('>i')
    r.take('>i')
    r.string()
    r.take('>i')
    r.take('>i')
    print('offset_commit %d' % r.take('>h'))
    # DescribeConfigs v1: [type 2, name, all keys], no synonyms
    body = struct.pack('>ib', 1, 2) + t + struct.pack('>ib', -1, 0)
    r = Reader(raw_request(s, 32, 1, 2, body))
    r.take('>i')
    r.take('>i')                # throttle
    r.take('>i')
    print('describe_configs %d' % r.take('>h'))
    # DeleteTopics v1: [name], timeout
    d = raw_string(deleted.encode()) if deleted else t
    r = Reader(raw_request(s, 20, 1, 3, struct.pack('>i', 1) + d + struct.pack('>i', 5000)))
    r.take('>i')
    r.take('>i')
    r.take('>i')
    r.string()
    print('delete_topics %d' % r.take('>h'))
    # CreateTopics v0: [name, 1 partition, factor 1, no assignments, no configs], timeout
    body = struct.pack('>i', 1) + t + struct.pack('>ihii', 1, 1, 0, 0) + struct.pack('>i', 5000)
    r = Reader(raw_request(s, 19, 0, 4, body))
    r.take('>i')
    r.take('>i')
    r.string()
    print('create_topics %d' % r.take('>h'))
    s.close()


def main():
    bootstrap, what = sys.argv[1], sys.argv[2]
    args = sys.argv[3:]
    if what == 'metadata':
        metadata(bootstrap)
    elif what == 'confluent-metadata':
        confluent_metadata(bootstrap)
    elif what == 'produce':
        produce(bootstrap, args[0], int(args[1]), args[2], int(args[3]),
                int(args[4]) if len(args) > 4 else 0)
    elif what == 'consume':
        consume(bootstrap, args[0], int(args[1]), int(args[2]),
                int(args[3]) if len(args) > 3 else 30, *args[4:5])
    elif what == 'raw-errors':
        raw_errors(bootstrap, args[0], int(args[1]))
    elif what == 'raw-admin':
        raw_admin(bootstrap, args[0], int(args[1]), args[2] if len(args) > 2 else None)
    else:
        raise SystemExit('unknown command %s' % what)


if __name__ == '__main__':
    main()
