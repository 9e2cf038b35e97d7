"""Kafka admin clients against mqlog's listener (test/perl/153_kafka_admin.pl).

One JSON object per line on stdout.

  admin_clients.py BOOTSTRAP confluent-create SPEC [validate]
  admin_clients.py BOOTSTRAP kafka-python-create SPEC [validate]
      SPEC: a JSON list of {"name", "partitions", "replication",
      "config": {...}, "assign": {partition: [broker, ...]}} (partitions and
      replication default to -1); -> {"topic", "error", "message"} a topic
      (error 0 when created, else Kafka's code)
  admin_clients.py BOOTSTRAP confluent-delete TOPIC...
  admin_clients.py BOOTSTRAP kafka-python-delete TOPIC...
      -> {"topic", "error"} a topic
  admin_clients.py BOOTSTRAP confluent-describe TYPE NAME [KEY...]
  admin_clients.py BOOTSTRAP kafka-python-describe TYPE NAME [KEY...]
      TYPE: topic or broker; -> {"error", "message"} once, then one
      {"name", "value", "source", "read_only", "sensitive", "synonyms"} a
      config (kafka-python asks for synonyms, DescribeConfigs v2; confluent
      does not); confluent's keys are filtered here, kafka-python's by the
      broker
  admin_clients.py BOOTSTRAP raw-describe-v0 TOPIC KEY
      -> {"error", "name", "value", "read_only", "is_default", "sensitive"}
         (DescribeConfigs v0, which has is_default instead of a source)
  admin_clients.py BOOTSTRAP raw-create-v0 TOPIC PARTITIONS
      -> {"topic", "error"} (CreateTopics v0: no error_message)
  admin_clients.py BOOTSTRAP raw-hostile
      -> "truncated closed|answered", "absurd closed|answered",
         "duplicate E1 E2" (one topic named twice: both INVALID_REQUEST),
         "assignment E M" (manual replica assignment refused),
         "describe-duplicate E1 E2" (DescribeConfigs naming topic "visible"
         twice: both INVALID_REQUEST)
"""
import json
import os
import socket
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clients import (confluent_config, kafka_python, raw_connect,  # noqa: E402
                     raw_request, raw_string)

TIMEOUT = 30


def out(o):
    print(json.dumps(o, sort_keys=True))


def spec_of(arg):
    topics = json.loads(arg)
    for t in topics:
        t.setdefault('partitions', -1)
        t.setdefault('replication', -1)
        t.setdefault('config', {})
        t.setdefault('assign', None)
    return topics


def confluent_admin(bootstrap):
    from confluent_kafka.admin import AdminClient
    return AdminClient(confluent_config({'bootstrap.servers': bootstrap}))


def confluent_error(e):
    err = e.args[0]
    return err.code(), err.str()


def confluent_create(bootstrap, spec, validate):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic
    a = confluent_admin(bootstrap)
    new = []
    for t in spec:
        if t['assign']:
            new.append(NewTopic(t['name'], len(t['assign']),
                                replica_assignment=[t['assign'][k] for k in sorted(t['assign'])],
                                config=t['config']))
        else:
            new.append(NewTopic(t['name'], t['partitions'], t['replication'], config=t['config']))
    fs = a.create_topics(new, validate_only=validate, operation_timeout=TIMEOUT, request_timeout=TIMEOUT)
    for t in spec:
        try:
            fs[t['name']].result()
            out({'topic': t['name'], 'error': 0, 'message': None})
        except KafkaException as e:
            code, msg = confluent_error(e)
            out({'topic': t['name'], 'error': code, 'message': msg})


def confluent_delete(bootstrap, topics):
    from confluent_kafka import KafkaException
    a = confluent_admin(bootstrap)
    fs = a.delete_topics(topics, operation_timeout=TIMEOUT, request_timeout=TIMEOUT)
    for t in topics:
        try:
            fs[t].result()
            out({'topic': t, 'error': 0})
        except KafkaException as e:
            out({'topic': t, 'error': confluent_error(e)[0]})


def confluent_describe(bootstrap, rtype, name, keys):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import ConfigResource
    a = confluent_admin(bootstrap)
    res = ConfigResource(rtype, name)
    fs = a.describe_configs([res], request_timeout=TIMEOUT)
    try:
        configs = fs[res].result()
    except KafkaException as e:
        code, msg = confluent_error(e)
        out({'error': code, 'message': msg})
        return
    out({'error': 0, 'message': None})
    for k in sorted(configs):
        c = configs[k]
        if keys and k not in keys:
            continue
        out({'name': k, 'value': c.value, 'source': c.source, 'read_only': c.is_read_only,
             'sensitive': c.is_sensitive, 'synonyms': None})


def kafka_python_admin(bootstrap):
    from kafka import KafkaAdminClient
    return kafka_python(KafkaAdminClient, bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT * 1000)


def kafka_python_send(a, request):
    """request to the controller, its response whatever its errors (the
    admin client's own send raises at the first topic that failed)"""
    f = a._send_request_to_node(a._controller_id, request)
    a._wait_for_futures([f])
    return f.value


def kafka_python_create(bootstrap, spec, validate):
    from kafka.admin import NewTopic
    from kafka.protocol.admin import CreateTopicsRequest
    a = kafka_python_admin(bootstrap)
    # NewTopic wants an assignment (empty will do) exactly when a count is -1
    new = [NewTopic(t['name'], t['partitions'], t['replication'],
                    replica_assignments=None if -1 not in (t['partitions'], t['replication'])
                    else {int(k): v for k, v in (t['assign'] or {}).items()},
                    topic_configs=t['config']) for t in spec]
    version = a._matching_api_version(CreateTopicsRequest)
    resp = kafka_python_send(a, CreateTopicsRequest[version](
        create_topic_requests=[a._convert_new_topic_request(t) for t in new],
        timeout=TIMEOUT * 1000, validate_only=validate))
    for name, code, msg in resp.topic_errors:
        out({'topic': name, 'error': code, 'message': msg, 'version': version})
    a.close()


def kafka_python_delete(bootstrap, topics):
    from kafka.protocol.admin import DeleteTopicsRequest
    a = kafka_python_admin(bootstrap)
    version = a._matching_api_version(DeleteTopicsRequest)
    resp = kafka_python_send(a, DeleteTopicsRequest[version](topics=topics, timeout=TIMEOUT * 1000))
    for name, code in resp.topic_error_codes:
        out({'topic': name, 'error': code, 'version': version})
    a.close()


def kafka_python_describe(bootstrap, rtype, name, keys):
    from kafka.admin import ConfigResource, ConfigResourceType
    a = kafka_python_admin(bootstrap)
    t = ConfigResourceType.TOPIC if rtype == 'topic' else ConfigResourceType.BROKER
    resp = a.describe_configs([ConfigResource(t, name, configs=dict.fromkeys(keys) or None)], include_synonyms=True)[0]
    for code, msg, _rtype, _rname, entries in resp.resources:
        out({'error': code, 'message': msg})
        for cname, value, read_only, source, sensitive, synonyms in entries:
            out({'name': cname, 'value': value, 'source': source, 'read_only': read_only,
                 'sensitive': sensitive, 'synonyms': [list(s) for s in synonyms]})
    a.close()


class Reader:
    """a response read field by field (classic encoding)"""

    def __init__(self, data, pos=0):
        self.data, self.pos = data, pos

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v[0] if len(v) == 1 else v

    def string(self):
        n = self.take('>h')
        if n < 0:
            return None
        v = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return v


def raw_describe_v0(bootstrap, topic, key):
    s = raw_connect(bootstrap)
    body = struct.pack('>i', 1) + struct.pack('>b', 2) + raw_string(topic.encode()) \
        + struct.pack('>i', 1) + raw_string(key.encode())
    r = Reader(raw_request(s, 32, 0, 1, body), 4)    # after the correlation id
    r.take('>i')        # throttle_time_ms
    for _ in range(r.take('>i')):
        err = r.take('>h')
        r.string()      # error_message
        r.take('>b')    # resource_type
        r.string()      # resource_name
        for _ in range(r.take('>i')):
            name, value = r.string(), r.string()
            ro, dflt, sens = r.take('>bbb')
            out({'error': err, 'name': name, 'value': value, 'read_only': ro, 'is_default': dflt,
                 'sensitive': sens})
    s.close()


def create_body(topics, version, assign=None):
    """a CreateTopics body: topics [(name, partitions, replication)]"""
    body = struct.pack('>i', len(topics))
    for name, parts, repl in topics:
        body += raw_string(name.encode()) + struct.pack('>ih', parts, repl)
        if assign:
            body += struct.pack('>i', 1) + struct.pack('>ii', 0, 1) + struct.pack('>i', 0)
        else:
            body += struct.pack('>i', 0)
        body += struct.pack('>i', 0)    # configs
    body += struct.pack('>i', 5000)
    if version >= 1:
        body += b'\x00'
    return body


def create_answers(resp, version):
    """[(topic, error, message)] of a CreateTopics response"""
    r = Reader(resp, 4)
    if version >= 2:
        r.take('>i')    # throttle_time_ms
    got = []
    for _ in range(r.take('>i')):
        name, err = r.string(), r.take('>h')
        got.append((name, err, r.string() if version >= 1 else None))
    return got


def raw_create_v0(bootstrap, topic, partitions):
    s = raw_connect(bootstrap)
    resp = raw_request(s, 19, 0, 1, create_body([(topic, partitions, 1)], 0))
    for name, err, _msg in create_answers(resp, 0):
        out({'topic': name, 'error': err})
    s.close()


def raw_hostile(bootstrap):
    def closed(resp, s):
        return 'closed' if resp is None else 'answered'

    # a frame cut in the middle of its first topic's config array
    s = raw_connect(bootstrap)
    body = create_body([('cut-short', 1, 1)], 4)[:-9]
    print('truncated %s' % closed(raw_request(s, 19, 4, 1, body), s))
    s.close()

    # a count of two billion topics in a frame of a few bytes
    s = raw_connect(bootstrap)
    body = struct.pack('>i', 0x7fffffff) + raw_string(b'x') + struct.pack('>ih', 1, 1)
    print('absurd %s' % closed(raw_request(s, 19, 4, 1, body), s))
    s.close()

    s = raw_connect(bootstrap)
    resp = raw_request(s, 19, 4, 1, create_body([('twice', 1, 1), ('twice', 1, 1)], 4))
    print('duplicate %s' % ' '.join(str(err) for _n, err, _m in create_answers(resp, 4)))
    resp = raw_request(s, 19, 4, 2, create_body([('placed', -1, -1)], 4, assign=True))
    (_n, err, msg), = create_answers(resp, 4)
    print('assignment %d %s' % (err, msg))
    resource = struct.pack('>b', 2) + raw_string(b'visible') + struct.pack('>i', -1)
    r = Reader(raw_request(s, 32, 1, 3, struct.pack('>i', 2) + resource * 2 + b'\x00'), 4)
    r.take('>i')        # throttle_time_ms
    errors = []
    for _ in range(r.take('>i')):
        errors.append(r.take('>h'))
        r.string()
        r.take('>b')
        r.string()
        assert r.take('>i') == 0    # no configs
    print('describe-duplicate %s' % ' '.join(map(str, errors)))
    s.close()


def main():
    bootstrap, what = sys.argv[1], sys.argv[2]
    args = sys.argv[3:]
    if what == 'confluent-create':
        confluent_create(bootstrap, spec_of(args[0]), args[1:] == ['validate'])
    elif what == 'kafka-python-create':
        kafka_python_create(bootstrap, spec_of(args[0]), args[1:] == ['validate'])
    elif what == 'confluent-delete':
        confluent_delete(bootstrap, args)
    elif what == 'kafka-python-delete':
        kafka_python_delete(bootstrap, args)
    elif what == 'confluent-describe':
        confluent_describe(bootstrap, args[0], args[1], args[2:])
    elif what == 'kafka-python-describe':
        kafka_python_describe(bootstrap, args[0], args[1], args[2:])
    elif what == 'raw-describe-v0':
        raw_describe_v0(bootstrap, args[0], args[1])
    elif what == 'raw-create-v0':
        raw_create_v0(bootstrap, args[0], int(args[1]))
    elif what == 'raw-hostile':
        raw_hostile(bootstrap)
    else:
        raise SystemExit('unknown command %s' % what)


if __name__ == '__main__':
    main()
