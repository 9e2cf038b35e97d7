"""Kafka clients against mqlog's listener (test/perl/150_kafka.pl).

  clients.py BOOTSTRAP confluent-produce TOPIC CODEC N   -> one line per record: key partition offset
  clients.py BOOTSTRAP kafka-python-produce TOPIC CODEC N
  clients.py BOOTSTRAP confluent-consume TOPIC PARTITIONS N [read_committed|read_uncommitted]
  clients.py BOOTSTRAP kafka-python-consume TOPIC PARTITIONS N
      -> one line per record: partition offset key value timestamp headers(json)

Records produced are keyed "<codec>-<i>" with value "value-<codec>-<i>",
a header h=<i> and a timestamp of 1700000000000 + i ms, partitioned by
Kafka's murmur2 (librdkafka's murmur2_random, kafka-python's default).
Consumers assign the partitions explicitly and read from the beginning
until N records arrived (or fail after 30 s).
"""
import json
import sys
import time

BASE_TS = 1700000000000


def confluent_produce(bootstrap, topic, codec, n):
    from confluent_kafka import Producer
    out = []
    p = Producer({'bootstrap.servers': bootstrap, 'compression.type': codec,
                  'partitioner': 'murmur2_random', 'linger.ms': 50,
                  'acks': 'all'})

    def report(err, msg):
        if err is not None:
            raise SystemExit('delivery failed: %s' % err)
        out.append('%s %d %d' % (msg.key().decode(), msg.partition(), msg.offset()))
    for i in range(n):
        p.produce(topic, key='%s-%d' % (codec, i), value='value-%s-%d' % (codec, i),
                  headers=[('h', str(i).encode())], timestamp=BASE_TS + i,
                  on_delivery=report)
    if p.flush(30) != 0:
        raise SystemExit('records left unsent')
    print('\n'.join(out))


def kafka_python_produce(bootstrap, topic, codec, n):
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=bootstrap,
                      compression_type=None if codec == 'none' else codec,
                      linger_ms=50, acks=1)
    futures = []
    for i in range(n):
        futures.append(('%s-%d' % (codec, i),
                        p.send(topic, key=('%s-%d' % (codec, i)).encode(),
                               value=('value-%s-%d' % (codec, i)).encode(),
                               headers=[('h', str(i).encode())],
                               timestamp_ms=BASE_TS + i)))
    p.flush(30)
    for key, f in futures:
        md = f.get(timeout=30)
        print('%s %d %d' % (key, md.partition, md.offset))
    p.close()


def confluent_consume(bootstrap, topic, partitions, n, isolation):
    from confluent_kafka import Consumer, TopicPartition, OFFSET_BEGINNING
    c = Consumer({'bootstrap.servers': bootstrap, 'group.id': 'unused',
                  'enable.auto.commit': False, 'isolation.level': isolation,
                  'enable.partition.eof': False})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got = []
    deadline = time.time() + 30
    while len(got) < n and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            raise SystemExit('consume failed: %s' % m.error())
        got.append('%d %d %s %s %d %s' % (
            m.partition(), m.offset(), (m.key() or b'').decode(), (m.value() or b'').decode(),
            m.timestamp()[1],
            json.dumps([[k, v.decode()] for k, v in (m.headers() or [])])))
    c.close()
    print('\n'.join(got))


def kafka_python_consume(bootstrap, topic, partitions, n):
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                      enable_auto_commit=False, auto_offset_reset='earliest')
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    got = []
    deadline = time.time() + 30
    while len(got) < n and time.time() < deadline:
        for tp, msgs in c.poll(timeout_ms=500).items():
            for m in msgs:
                got.append('%d %d %s %s %d %s' % (
                    m.partition, m.offset, (m.key or b'').decode(), (m.value or b'').decode(),
                    m.timestamp, json.dumps([[k, v.decode()] for k, v in (m.headers or [])])))
    c.close()
    print('\n'.join(got))


def main():
    bootstrap, what = sys.argv[1], sys.argv[2]
    args = sys.argv[3:]
    if what == 'confluent-produce':
        confluent_produce(bootstrap, args[0], args[1], int(args[2]))
    elif what == 'kafka-python-produce':
        kafka_python_produce(bootstrap, args[0], args[1], int(args[2]))
    elif what == 'confluent-consume':
        confluent_consume(bootstrap, args[0], int(args[1]), int(args[2]),
                          args[3] if len(args) > 3 else 'read_committed')
    elif what == 'kafka-python-consume':
        kafka_python_consume(bootstrap, args[0], int(args[1]), int(args[2]))
    else:
        raise SystemExit('unknown command %s' % what)


if __name__ == '__main__':
    main()
