"""Kafka clients against mqlog's listener (test/perl/150_kafka.pl).

  clients.py BOOTSTRAP confluent-produce TOPIC CODEC N   -> one line per record: key partition offset
  clients.py BOOTSTRAP kafka-python-produce TOPIC CODEC N
  clients.py BOOTSTRAP confluent-consume TOPIC PARTITIONS N [read_committed|read_uncommitted]
  clients.py BOOTSTRAP kafka-python-consume TOPIC PARTITIONS N
      -> one line per record: partition offset key value timestamp headers(json)
  clients.py BOOTSTRAP confluent-wait TOPIC PARTITION WAIT_MS
      -> "waiting" once the consumer has sat at the partition's end for two
         seconds with fetch.wait.max.ms = WAIT_MS, then "got OFFSET TIME"
         (TIME: time.time() when the record arrived) for the first record
         (test/perl/155_kafka_parked.pl)
  clients.py BOOTSTRAP confluent-metadata      -> the topics listed, one a line
  clients.py BOOTSTRAP kafka-python-metadata
  clients.py BOOTSTRAP kafka-python-topic-error TOPIC -> "TOPIC CODE" (Metadata)
  clients.py BOOTSTRAP raw-sasl-errors   -> see raw_sasl_errors
  clients.py BOOTSTRAP raw-before-auth
      -> "api_versions KEY..." (ApiVersions v0 answered before SASL), then
         "closed" if a Metadata request before SASL closes the connection,
         then "API closed|answered" for each admin API (CreateTopics,
         DeleteTopics, DescribeConfigs) sent first on a connection of its own

With MQK_SASL_USER and MQK_SASL_PASSWORD in the environment, every client
authenticates with SASL over plaintext (test/perl/152_kafka_sasl.pl), with
MQK_SASL_MECHANISM (PLAIN unless set, or SCRAM-SHA-256);
an authentication failure exits with "authentication failed: ...".
With MQK_SSL_CA (the CA file the broker's certificate is verified
against) every client connects with TLS (test/perl/159_kafka_tls.pl):
security.protocol SSL, or SASL_SSL with SASL, presenting the client
certificate MQK_SSL_CERT with its key MQK_SSL_KEY if set; a failed TLS
handshake exits with "tls failed: ...".

Records produced are keyed "<codec>-<i>" with value "value-<codec>-<i>",
a header h=<i> and a timestamp of 1700000000000 + i ms, partitioned by
Kafka's murmur2 (librdkafka's murmur2_random, kafka-python's default).
Consumers assign the partitions explicitly and read from the beginning
until N records arrived (or fail after 30 s).
"""
import json
import os
import socket
import struct
import sys
import time

from kwire import kstr, raw_request

# the classic string of kwire.py, by the name the clients that import it
# from here use (cluster.py)
raw_string = kstr

BASE_TS = 1700000000000
SASL_USER = os.environ.get('MQK_SASL_USER')
SASL_PASSWORD = os.environ.get('MQK_SASL_PASSWORD')
SASL_MECHANISM = os.environ.get('MQK_SASL_MECHANISM', 'PLAIN')
SSL_CA = os.environ.get('MQK_SSL_CA')
SSL_CERT = os.environ.get('MQK_SSL_CERT')
SSL_KEY = os.environ.get('MQK_SSL_KEY')


def security_protocol():
    return ('SASL_' if SASL_USER is not None else '') + ('SSL' if SSL_CA else 'PLAINTEXT')


def confluent_config(conf):
    """conf with SASL and TLS when the environment asks for them"""
    if SASL_USER is None and SSL_CA is None:
        return conf

    def error(err):
        from confluent_kafka import KafkaError
        if err.code() == KafkaError._AUTHENTICATION:
            raise SystemExit('authentication failed: %s' % err)
        if err.code() == KafkaError._SSL:
            raise SystemExit('tls failed: %s' % err)
    conf.update({'security.protocol': security_protocol(),
                 'message.timeout.ms': 15000, 'error_cb': error})
    if SASL_USER is not None:
        conf.update({'sasl.mechanism': SASL_MECHANISM,
                     'sasl.username': SASL_USER, 'sasl.password': SASL_PASSWORD})
    if SSL_CA:
        conf['ssl.ca.location'] = SSL_CA
    if SSL_CERT:
        conf.update({'ssl.certificate.location': SSL_CERT, 'ssl.key.location': SSL_KEY})
    return conf


def kafka_python_config(**conf):
    """conf with SASL and TLS when the environment asks for them"""
    conf['security_protocol'] = security_protocol()
    if SASL_USER is not None:
        conf.update(sasl_mechanism=SASL_MECHANISM,
                    sasl_plain_username=SASL_USER, sasl_plain_password=SASL_PASSWORD)
    if SSL_CA:
        conf.update(ssl_cafile=SSL_CA, ssl_check_hostname=True)
    if SSL_CERT:
        conf.update(ssl_certfile=SSL_CERT, ssl_keyfile=SSL_KEY)
    return conf


def kafka_python(cls, **conf):
    """a kafka-python client; an authentication failure exits saying so"""
    from kafka.errors import AuthenticationFailedError, NoBrokersAvailable
    try:
        return cls(**kafka_python_config(**conf))
    except (AuthenticationFailedError, NoBrokersAvailable) as e:
        if SASL_USER is None and SSL_CA is None:
            raise
        raise SystemExit('%s failed: %r' % ('authentication' if SASL_USER else 'tls', e))


def confluent_produce(bootstrap, topic, codec, n):
    from confluent_kafka import Producer
    out = []
    p = Producer(confluent_config({'bootstrap.servers': bootstrap, 'compression.type': codec,
                                   'partitioner': 'murmur2_random', 'linger.ms': 50,
                                   'acks': 'all'}))

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
    p = kafka_python(KafkaProducer, bootstrap_servers=bootstrap,
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
    c = Consumer(confluent_config({'bootstrap.servers': bootstrap, 'group.id': 'unused',
                                   'enable.auto.commit': False, 'isolation.level': isolation,
                                   'enable.partition.eof': False}))
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


def confluent_wait(bootstrap, topic, partition, wait_ms):
    from confluent_kafka import Consumer, TopicPartition, OFFSET_END
    c = Consumer(confluent_config({'bootstrap.servers': bootstrap, 'group.id': 'unused',
                                   'enable.auto.commit': False, 'fetch.wait.max.ms': wait_ms,
                                   'fetch.min.bytes': 1, 'enable.partition.eof': False}))
    c.assign([TopicPartition(topic, partition, OFFSET_END)])
    # librdkafka looks the end up (ListOffsets) and fetches from it within
    # these two seconds
    waiting_at = time.time() + 2
    said = False
    deadline = time.time() + 60
    while time.time() < deadline:
        m = c.poll(0.1)
        if m is not None:
            if m.error():
                raise SystemExit('consume failed: %s' % m.error())
            if not said:
                raise SystemExit('a record arrived before the consumer waited')
            print('got %d %.3f' % (m.offset(), time.time()), flush=True)
            c.close()
            return
        if not said and time.time() >= waiting_at:
            print('waiting', flush=True)
            said = True
    raise SystemExit('no record within 60 s')


def kafka_python_consume(bootstrap, topic, partitions, n):
    from kafka import KafkaConsumer, TopicPartition
    c = kafka_python(KafkaConsumer, bootstrap_servers=bootstrap, group_id=None,
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


def confluent_metadata(bootstrap):
    from confluent_kafka.admin import AdminClient
    md = AdminClient(confluent_config({'bootstrap.servers': bootstrap})).list_topics(timeout=15)
    print('\n'.join(sorted(t for t, tm in md.topics.items() if tm.error is None)))


def kafka_python_metadata(bootstrap):
    from kafka import KafkaConsumer
    c = kafka_python(KafkaConsumer, bootstrap_servers=bootstrap, group_id=None)
    print('\n'.join(sorted(c.topics())))
    c.close()


def kafka_python_topic_error(bootstrap, topic):
    """the error code Metadata answers for topic, asked by kafka-python's
    client (its producer waits out max_block_ms instead of reporting it)"""
    from kafka import KafkaClient
    from kafka.protocol.metadata import MetadataRequest
    c = kafka_python(KafkaClient, bootstrap_servers=bootstrap)
    deadline = time.time() + 15
    node = None
    while time.time() < deadline:
        node = c.least_loaded_node()
        if node is not None and c.ready(node):
            break
        c.poll(timeout_ms=200)
    f = c.send(node, MetadataRequest[1]([topic]))
    c.poll(future=f, timeout_ms=10000)
    for t in f.value.topics:
        print('%s %d' % (t[1], t[0]))
    c.close()


def raw_connect(bootstrap):
    host, port = bootstrap.rsplit(':', 1)
    return socket.create_connection((host, int(port)), timeout=10)


def raw_sasl_errors(bootstrap):
    """SASL's errors and its flexible version, byte by byte:
    "handshake GSSAPI error E mechanisms M... then closed|open",
    "authenticate before handshake error E then closed|open",
    "authenticate v2 error E" (SaslHandshake v1 PLAIN, then a flexible
    SaslAuthenticate v2 with MQK_SASL_USER's PLAIN token), and after it
    "metadata answered|closed"
    """
    def after(s):
        return 'closed' if s.recv(1) == b'' else 'open'
    s = raw_connect(bootstrap)
    resp = raw_request(s, 17, 1, 1, kstr(b'GSSAPI'))
    err, n = struct.unpack('>hi', resp[4:10])
    mechs, pos = [], 10
    for _ in range(n):
        ln = struct.unpack('>h', resp[pos:pos + 2])[0]
        mechs.append(resp[pos + 2:pos + 2 + ln].decode())
        pos += 2 + ln
    print('handshake GSSAPI error %d mechanisms %s then %s' % (err, ' '.join(mechs), after(s)))
    s.close()

    s = raw_connect(bootstrap)
    resp = raw_request(s, 36, 0, 1, struct.pack('>i', 3) + b'abc')
    print('authenticate before handshake error %d then %s'
          % (struct.unpack('>h', resp[4:6])[0], after(s)))
    s.close()

    s = raw_connect(bootstrap)
    resp = raw_request(s, 17, 1, 1, kstr(b'PLAIN'))
    token = ('\0%s\0%s' % (SASL_USER, SASL_PASSWORD)).encode()
    body = bytes([len(token) + 1]) + token + b'\x00'  # compact bytes, no tags
    resp = raw_request(s, 36, 2, 2, body, flexible=True)
    # response header v1: correlation id, tags; then error_code
    print('authenticate v2 error %d' % struct.unpack('>h', resp[5:7])[0])
    resp = raw_request(s, 3, 1, 3, struct.pack('>i', -1))
    print('metadata %s' % ('closed' if resp is None else 'answered'))
    s.close()


def raw_before_auth(bootstrap):
    """ApiVersions v0, then Metadata v1, on one connection without SASL"""
    s = raw_connect(bootstrap)

    def request(key, version, corr, body):
        return raw_request(s, key, version, corr, body)
    resp = request(18, 0, 1, b'')
    corr, err, n = struct.unpack('>ihi', resp[:10])
    keys = [struct.unpack('>h', resp[10 + 6 * i:12 + 6 * i])[0] for i in range(n)]
    print('api_versions error %d keys %s' % (err, ' '.join(map(str, sorted(keys)))))
    print('closed' if request(3, 1, 2, struct.pack('>i', -1)) is None else 'answered')
    s.close()
    admin = [('create_topics', 19, 4, struct.pack('>i', 1) + kstr(b'pre-auth')
              + struct.pack('>ihii', 1, 1, 0, 0) + struct.pack('>i', 5000) + b'\x00'),
             ('delete_topics', 20, 3, struct.pack('>i', 1) + kstr(b'pre-auth') + struct.pack('>i', 5000)),
             ('describe_configs', 32, 2, struct.pack('>ib', 1, 2) + kstr(b'pre-auth')
              + struct.pack('>i', -1) + b'\x00')]
    for name, key, version, body in admin:
        s = raw_connect(bootstrap)
        print('%s %s' % (name, 'closed' if raw_request(s, key, version, 1, body) is None else 'answered'))
        s.close()


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
    elif what == 'confluent-wait':
        confluent_wait(bootstrap, args[0], int(args[1]), int(args[2]))
    elif what == 'confluent-metadata':
        confluent_metadata(bootstrap)
    elif what == 'kafka-python-metadata':
        kafka_python_metadata(bootstrap)
    elif what == 'kafka-python-topic-error':
        kafka_python_topic_error(bootstrap, args[0])
    elif what == 'raw-sasl-errors':
        raw_sasl_errors(bootstrap)
    elif what == 'raw-before-auth':
        raw_before_auth(bootstrap)
    else:
        raise SystemExit('unknown command %s' % what)


if __name__ == '__main__':
    main()
