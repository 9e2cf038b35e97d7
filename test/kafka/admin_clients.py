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
  admin_clients.py BOOTSTRAP kafka-python-describe-at BROKER TOPIC
      DescribeConfigs (its highest version, with synonyms) of TOPIC sent by
      kafka-python's client to broker id BROKER, whichever the admin client
      would pick (test/perl/168_kafka_cluster_forwarded_admin.pl compares
      brokers' answers); -> as kafka-python-describe
  admin_clients.py BOOTSTRAP raw-describe-v0 TOPIC KEY
      -> {"error", "name", "value", "read_only", "is_default", "sensitive"}
         (DescribeConfigs v0, which has is_default instead of a source)
  admin_clients.py BOOTSTRAP raw-create-v0 TOPIC PARTITIONS
      -> {"topic", "error"} (CreateTopics v0: no error_message)
  admin_clients.py BOOTSTRAP raw-hostile
      -> "truncated closed|answered", "absurd closed|answered",
         "duplicate E1 E2" (one topic named twice: both INVALID_REQUEST),
         "assignment E M" (an assignment to a broker there is not),
         "assignment-counts E M" (an assignment with counts of partitions
         and replicas),
         "describe-duplicate E1 E2" (DescribeConfigs naming topic "visible"
         twice: both INVALID_REQUEST)

The other admin APIs (test/perl/159_kafka_admin_apis.pl):

  admin_clients.py BOOTSTRAP confluent-partitions SPEC [validate]
  admin_clients.py BOOTSTRAP kafka-python-partitions SPEC [validate]
      SPEC: a JSON list of {"name", "count", "assign": [[broker, ...], ...]}
      -> {"topic", "error", "message"} a topic (kafka-python: one topic a
      call, its admin client raising the first error; "version" too)
  admin_clients.py BOOTSTRAP confluent-alter TYPE NAME CONFIG [validate]
  admin_clients.py BOOTSTRAP kafka-python-alter TYPE NAME CONFIG
      CONFIG: a JSON object of names and values (AlterConfigs: the whole
      config) -> {"error", "message"} (kafka-python: and "version"; its
      alter_configs has no validate_only)
  admin_clients.py BOOTSTRAP kafka-python-incremental NAME OPS [validate]
      IncrementalAlterConfigs v0 of topic NAME, sent by kafka-python's
      client with the schema below (its 2.0.2 has none); OPS: a JSON list of
      [name, op, value] -> {"error", "message"}
  admin_clients.py BOOTSTRAP kafka-python-delete-records SPEC
      DeleteRecords v1 likewise; SPEC: {topic: {partition: offset}}
      -> {"topic", "partition", "low_watermark", "error"} a partition
  admin_clients.py BOOTSTRAP kafka-python-log-dirs [SPEC]
      DescribeLogDirs v1 likewise; SPEC: {topic: [partition, ...]}, none
      for all -> {"log_dir", "error"} a directory, then {"topic",
      "partition", "size", "lag", "future"} a partition
  admin_clients.py BOOTSTRAP raw-flexible TOPIC COUNT
      the flexible versions, byte by byte, one line each:
      "partitions-v3 E M" (validate_only growth of TOPIC, of COUNT
      partitions, by one),
      "alter-v2 E M" (validate_only retention.ms of TOPIC),
      "incremental-v1 E M" (validate_only SET of retention.ms),
      "delete-records-v2 P LOW E" (TOPIC partition 0 up to -1),
      "log-dirs-v4 DIRS E DIR TOPIC PARTITIONS TOTAL USABLE" (TOPIC's),
      "cluster-v0 E ID CONTROLLER BROKER..." and "cluster-v1 ..." (as
      host:port:id), "cluster-v1-controllers E M"
  admin_clients.py BOOTSTRAP raw-many-deletes TOPIC N
      one DeleteRecords naming partition 0 of TOPIC N times, up to offsets
      1 to N -> "codes CODE=COUNT ... seconds S" (the request's time bound)
  admin_clients.py BOOTSTRAP raw-admin-hostile
      "NAME closed|answered" for a frame cut short and one claiming two
      billion entries, of each new API; "alter-twice E1 E2" (one topic
      named twice in AlterConfigs)
"""
import json
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clients import confluent_config, kafka_python, raw_connect  # noqa: E402
from kwire import TAGS, Reader, carr, cstr, kstr, raw_request  # noqa: E402

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
    confluent_topic_results(a.create_topics(new, validate_only=validate, operation_timeout=TIMEOUT,
                                            request_timeout=TIMEOUT), spec)


def confluent_topic_results(fs, spec):
    """each topic's future: {"topic", "error", "message"}"""
    from confluent_kafka import KafkaException
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


def out_config_resources(resources):
    """a DescribeConfigs answer's resources as kafka-python decodes them:
    each one's error, then each of its entries"""
    for code, msg, _rtype, _rname, entries in resources:
        out({'error': code, 'message': msg})
        for cname, value, read_only, source, sensitive, synonyms in entries:
            out({'name': cname, 'value': value, 'source': source, 'read_only': read_only,
                 'sensitive': sensitive, 'synonyms': [list(s) for s in synonyms]})


def kafka_python_describe(bootstrap, rtype, name, keys):
    from kafka.admin import ConfigResource, ConfigResourceType
    a = kafka_python_admin(bootstrap)
    t = ConfigResourceType.TOPIC if rtype == 'topic' else ConfigResourceType.BROKER
    resp = a.describe_configs([ConfigResource(t, name, configs=dict.fromkeys(keys) or None)], include_synonyms=True)[0]
    out_config_resources(resp.resources)
    a.close()


def kafka_python_describe_at(bootstrap, broker, name):
    from kafka.protocol.admin import DescribeConfigsRequest
    a = kafka_python_admin(bootstrap)
    version = a._matching_api_version(DescribeConfigsRequest)
    f = a._send_request_to_node(broker, DescribeConfigsRequest[version](
        resources=[(2, name, None)], include_synonyms=True))
    a._wait_for_futures([f])
    out_config_resources(f.value.resources)
    a.close()


def raw_describe_v0(bootstrap, topic, key):
    s = raw_connect(bootstrap)
    body = struct.pack('>i', 1) + struct.pack('>b', 2) + kstr(topic.encode()) \
        + struct.pack('>i', 1) + kstr(key.encode())
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
        body += kstr(name.encode()) + struct.pack('>ih', parts, repl)
        if assign:
            # partition 0 on broker 5, which a single node does not have
            body += struct.pack('>i', 1) + struct.pack('>ii', 0, 1) + struct.pack('>i', 5)
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


def resource_errors(r, described):
    """each resource's error code in a classic DescribeConfigs answer
    (described: each must have no configs) or AlterConfigs answer, r past
    its throttle_time_ms"""
    errors = []
    for _ in range(r.take('>i')):
        errors.append(r.take('>h'))
        r.string()      # error_message
        r.take('>b')    # resource_type
        r.string()      # resource_name
        if described:
            assert r.take('>i') == 0    # no configs
    return errors


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
    body = struct.pack('>i', 0x7fffffff) + kstr(b'x') + struct.pack('>ih', 1, 1)
    print('absurd %s' % closed(raw_request(s, 19, 4, 1, body), s))
    s.close()

    s = raw_connect(bootstrap)
    resp = raw_request(s, 19, 4, 1, create_body([('twice', 1, 1), ('twice', 1, 1)], 4))
    print('duplicate %s' % ' '.join(str(err) for _n, err, _m in create_answers(resp, 4)))
    resp = raw_request(s, 19, 4, 2, create_body([('placed', -1, -1)], 4, assign=True))
    (_n, err, msg), = create_answers(resp, 4)
    print('assignment %d %s' % (err, msg))
    resp = raw_request(s, 19, 4, 2, create_body([('placed_both', 2, 1)], 4, assign=True))
    (_n, err, msg), = create_answers(resp, 4)
    print('assignment-counts %d %s' % (err, msg))
    resource = struct.pack('>b', 2) + kstr(b'visible') + struct.pack('>i', -1)
    r = Reader(raw_request(s, 32, 1, 3, struct.pack('>i', 2) + resource * 2 + b'\x00'), 4)
    r.take('>i')        # throttle_time_ms
    errors = resource_errors(r, described=True)
    print('describe-duplicate %s' % ' '.join(map(str, errors)))
    s.close()


def confluent_partitions(bootstrap, spec, validate):
    from confluent_kafka.admin import NewPartitions
    a = confluent_admin(bootstrap)
    new = [NewPartitions(t['name'], t['count'], replica_assignment=t['assign']) if t.get('assign')
           else NewPartitions(t['name'], t['count']) for t in spec]
    confluent_topic_results(a.create_partitions(new, validate_only=validate, operation_timeout=TIMEOUT,
                                                request_timeout=TIMEOUT), spec)


def kafka_python_error(e):
    """a kafka-python admin error as (code, message)"""
    return getattr(e, 'errno', -1), str(e)


def kafka_python_partitions(bootstrap, spec, validate):
    from kafka.admin import NewPartitions
    from kafka.errors import KafkaError
    from kafka.protocol.admin import CreatePartitionsRequest
    a = kafka_python_admin(bootstrap)
    version = a._matching_api_version(CreatePartitionsRequest)
    for t in spec:
        try:
            resp = a.create_partitions({t['name']: NewPartitions(t['count'], t.get('assign'))},
                                       timeout_ms=TIMEOUT * 1000, validate_only=validate)
            (name, code, msg), = resp.topic_errors
            out({'topic': name, 'error': code, 'message': msg, 'version': version})
        except KafkaError as e:
            code, msg = kafka_python_error(e)
            out({'topic': t['name'], 'error': code, 'message': msg, 'version': version})
    a.close()


def confluent_alter(bootstrap, rtype, name, config, validate):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import ConfigResource
    a = confluent_admin(bootstrap)
    res = ConfigResource(rtype, name, set_config=config)
    fs = a.alter_configs([res], validate_only=validate, request_timeout=TIMEOUT)
    try:
        fs[res].result()
        out({'error': 0, 'message': None})
    except KafkaException as e:
        code, msg = confluent_error(e)
        out({'error': code, 'message': msg})


def kafka_python_alter(bootstrap, rtype, name, config):
    from kafka.admin import ConfigResource, ConfigResourceType
    from kafka.protocol.admin import AlterConfigsRequest
    a = kafka_python_admin(bootstrap)
    t = ConfigResourceType.TOPIC if rtype == 'topic' else ConfigResourceType.BROKER
    version = a._matching_api_version(AlterConfigsRequest)
    resp = a.alter_configs([ConfigResource(t, name, configs=config)])
    for code, msg, _rtype, _rname in resp.resources:
        out({'error': code, 'message': msg, 'version': version})
    a.close()


def kafka_python_schemas():
    """the requests kafka-python 2.0.2 has no class for, in its own terms
    (Kafka's message schemas, classic versions)"""
    from kafka.protocol.api import Request, Response
    from kafka.protocol.types import Array, Boolean, Int8, Int16, Int32, Int64, Schema, String

    class IncrementalAlterConfigsResponse_v0(Response):
        API_KEY, API_VERSION = 44, 0
        SCHEMA = Schema(('throttle_time_ms', Int32),
                        ('responses', Array(('error_code', Int16), ('error_message', String('utf-8')),
                                            ('resource_type', Int8), ('resource_name', String('utf-8')))))

    class IncrementalAlterConfigsRequest_v0(Request):
        API_KEY, API_VERSION = 44, 0
        RESPONSE_TYPE = IncrementalAlterConfigsResponse_v0
        SCHEMA = Schema(('resources', Array(('resource_type', Int8), ('resource_name', String('utf-8')),
                                            ('configs', Array(('name', String('utf-8')), ('op', Int8),
                                                              ('value', String('utf-8')))))),
                        ('validate_only', Boolean))

    class DeleteRecordsResponse_v1(Response):
        API_KEY, API_VERSION = 21, 1
        SCHEMA = Schema(('throttle_time_ms', Int32),
                        ('topics', Array(('name', String('utf-8')),
                                         ('partitions', Array(('partition', Int32), ('low_watermark', Int64),
                                                              ('error_code', Int16))))))

    class DeleteRecordsRequest_v1(Request):
        API_KEY, API_VERSION = 21, 1
        RESPONSE_TYPE = DeleteRecordsResponse_v1
        SCHEMA = Schema(('topics', Array(('name', String('utf-8')),
                                         ('partitions', Array(('partition', Int32), ('offset', Int64))))),
                        ('timeout_ms', Int32))

    class DescribeLogDirsResponse_v1(Response):
        API_KEY, API_VERSION = 35, 1
        SCHEMA = Schema(('throttle_time_ms', Int32),
                        ('results', Array(('error_code', Int16), ('log_dir', String('utf-8')),
                                          ('topics', Array(('name', String('utf-8')),
                                                           ('partitions', Array(('partition', Int32),
                                                                                ('size', Int64), ('lag', Int64),
                                                                                ('future', Boolean))))))))

    class DescribeLogDirsRequest_v1(Request):
        API_KEY, API_VERSION = 35, 1
        RESPONSE_TYPE = DescribeLogDirsResponse_v1
        SCHEMA = Schema(('topics', Array(('topic', String('utf-8')), ('partitions', Array(Int32)))))

    return IncrementalAlterConfigsRequest_v0, DeleteRecordsRequest_v1, DescribeLogDirsRequest_v1


def kafka_python_incremental(bootstrap, name, ops, validate):
    incremental, _, _ = kafka_python_schemas()
    a = kafka_python_admin(bootstrap)
    resp = kafka_python_send(a, incremental(resources=[(2, name, [tuple(o) for o in ops])],
                                            validate_only=validate))
    for code, msg, _rtype, _rname in resp.responses:
        out({'error': code, 'message': msg})
    a.close()


def kafka_python_delete_records(bootstrap, spec):
    _, delete_records, _ = kafka_python_schemas()
    a = kafka_python_admin(bootstrap)
    resp = kafka_python_send(a, delete_records(
        topics=[(t, [(int(p), o) for p, o in parts.items()]) for t, parts in spec.items()],
        timeout_ms=TIMEOUT * 1000))
    for name, parts in resp.topics:
        for p, low, code in parts:
            out({'topic': name, 'partition': p, 'low_watermark': low, 'error': code})
    a.close()


def kafka_python_log_dirs(bootstrap, spec):
    _, _, log_dirs = kafka_python_schemas()
    a = kafka_python_admin(bootstrap)
    # a null topic list (all of them) is an array of length -1: None
    resp = kafka_python_send(a, log_dirs(topics=None if spec is None else list(spec.items())))
    for code, log_dir, topics in resp.results:
        out({'log_dir': log_dir, 'error': code})
        for name, parts in topics:
            for p, size, lag, future in parts:
                out({'topic': name, 'partition': p, 'size': size, 'lag': lag, 'future': future})
    a.close()


def flex_request(s, key, version, corr, body):
    """a flexible request's response, after its header (v1: its tags)"""
    resp = raw_request(s, key, version, corr, body, flexible=True)
    r = Reader(resp, 4, flexible=True)
    r.tags()
    return r


def raw_resource_answers(r):
    """[(error, message)] of an AlterConfigs/IncrementalAlterConfigs answer"""
    r.take('>i')
    got = []
    for _ in range(r.array()):
        err, msg = r.take('>h'), r.string()
        r.take('>b')
        r.string()
        r.tags()
        got.append((err, msg))
    return got


def raw_flexible(bootstrap, topic, count):
    s = raw_connect(bootstrap)

    # CreatePartitions v3: the topic's count + 1, validate_only
    r = flex_request(s, 37, 3, 2, carr(1) + cstr(topic) + struct.pack('>i', count + 1) + carr(-1) + TAGS
                     + struct.pack('>i', 5000) + b'\x01' + TAGS)
    r.take('>i')
    for _ in range(r.array()):
        r.string()
        err, msg = r.take('>h'), r.string()
        r.tags()
        print('partitions-v3 %d %s' % (err, msg))

    # AlterConfigs v2, IncrementalAlterConfigs v1: validate_only
    r = flex_request(s, 33, 2, 3, carr(1) + b'\x02' + cstr(topic) + carr(1) + cstr('retention.ms')
                     + cstr('1234') + TAGS + TAGS + b'\x01' + TAGS)
    for err, msg in raw_resource_answers(r):
        print('alter-v2 %d %s' % (err, msg))
    r = flex_request(s, 44, 1, 4, carr(1) + b'\x02' + cstr(topic) + carr(1) + cstr('retention.ms')
                     + b'\x00' + cstr('1234') + TAGS + TAGS + b'\x01' + TAGS)
    for err, msg in raw_resource_answers(r):
        print('incremental-v1 %d %s' % (err, msg))

    # DeleteRecords v2: partition 0 up to the high watermark
    r = flex_request(s, 21, 2, 5, carr(1) + cstr(topic) + carr(1) + struct.pack('>iq', 0, -1) + TAGS + TAGS
                     + struct.pack('>i', 5000) + TAGS)
    r.take('>i')
    for _ in range(r.array()):
        r.string()
        for _ in range(r.array()):
            p, low, err = r.take('>i'), r.take('>q'), r.take('>h')
            r.tags()
            print('delete-records-v2 %d %d %d' % (p, low, err))
        r.tags()

    # DescribeLogDirs v4 of the topic's partitions 0 and 1
    r = flex_request(s, 35, 4, 6, carr(1) + cstr(topic) + carr(2) + struct.pack('>ii', 0, 1) + TAGS + TAGS)
    r.take('>i')
    top = r.take('>h')
    ndirs = r.array()
    for _ in range(ndirs):
        err, path = r.take('>h'), r.string()
        topics = []
        for _ in range(r.array()):
            name = r.string()
            parts = []
            for _ in range(r.array()):
                p, size, lag, future = r.take('>i'), r.take('>q'), r.take('>q'), r.take('>b')
                r.tags()
                parts.append('%d:%d:%d:%d' % (p, size, lag, future))
            r.tags()
            topics.append('%s=%s' % (name, ','.join(parts)))
        total, usable = r.take('>q'), r.take('>q')
        r.tags()
        print('log-dirs-v4 %d %d %d %s %s %d %d' % (ndirs, top, err, path, ';'.join(topics) or '-', total, usable))

    # DescribeCluster v0 and v1, and v1 asking for the controllers
    for version, corr, body in ((0, 7, b'\x00' + TAGS), (1, 8, b'\x00\x01' + TAGS), (1, 9, b'\x00\x02' + TAGS)):
        r = flex_request(s, 60, version, corr, body)
        r.take('>i')
        err, msg = r.take('>h'), r.string()
        if version >= 1:
            r.take('>b')
        cluster, controller = r.string(), r.take('>i')
        brokers = []
        for _ in range(r.array()):
            bid, host, port = r.take('>i'), r.string(), r.take('>i')
            r.string()      # rack
            r.tags()
            brokers.append('%s:%d:%d' % (host, port, bid))
        r.take('>i')
        r.tags()
        if corr == 9:
            print('cluster-v1-controllers %d %s' % (err, msg))
        else:
            print('cluster-v%d %d %s %d %s' % (version, err, cluster, controller, ' '.join(brokers)))
    s.close()


def raw_admin_hostile(bootstrap):
    absurd = struct.pack('>i', 0x7fffffff) + kstr(b'x') + struct.pack('>i', 1)
    frames = {
        'partitions': (37, 1, struct.pack('>i', 1) + kstr(b't') + struct.pack('>i', 3)),
        'alter': (33, 1, struct.pack('>i', 1) + b'\x02' + kstr(b't') + struct.pack('>i', 2)),
        'incremental': (44, 0, struct.pack('>i', 1) + b'\x02' + kstr(b't') + struct.pack('>i', 1)
                        + kstr(b'retention.ms')),
        'delete-records': (21, 1, struct.pack('>i', 1) + kstr(b't') + struct.pack('>i', 1)
                           + struct.pack('>i', 0)),
        'log-dirs': (35, 1, struct.pack('>i', 1) + kstr(b't') + struct.pack('>i', 5)),
    }
    for name, (key, version, body) in sorted(frames.items()):
        s = raw_connect(bootstrap)
        print('%s-truncated %s' % (name, 'closed' if raw_request(s, key, version, 1, body) is None else 'answered'))
        s.close()
        s = raw_connect(bootstrap)
        print('%s-absurd %s' % (name, 'closed' if raw_request(s, key, version, 1, absurd) is None else 'answered'))
        s.close()
    s = raw_connect(bootstrap)
    resource = b'\x02' + kstr(b'twice') + struct.pack('>i', 0)
    r = Reader(raw_request(s, 33, 1, 1, struct.pack('>i', 2) + resource * 2 + b'\x00'), 4)
    r.take('>i')        # throttle_time_ms
    errors = resource_errors(r, described=False)
    print('alter-twice %s' % ' '.join(map(str, errors)))
    s.close()


def raw_many_deletes(bootstrap, topic, n):
    """one DeleteRecords v1 naming partition 0 of topic n times, up to
    offsets 1, 2, ... n, each moving the log start by one record:
    "codes CODE=COUNT... seconds S" """
    s = raw_connect(bootstrap)
    s.settimeout(120)
    body = struct.pack('>i', 1) + kstr(topic.encode()) + struct.pack('>i', n) \
        + b''.join(struct.pack('>iq', 0, i + 1) for i in range(n)) + struct.pack('>i', 5000)
    hdr = struct.pack('>hhih', 21, 1, 1, 3) + b'raw'
    t0 = time.time()
    s.sendall(struct.pack('>i', len(hdr) + len(body)) + hdr + body)
    resp = b''
    while len(resp) < 4 or len(resp) < 4 + struct.unpack('>i', resp[:4])[0]:
        chunk = s.recv(1 << 16)
        if not chunk:
            raise SystemExit('the connection closed')
        resp += chunk
    took = time.time() - t0
    r = Reader(resp[4:], 4)
    r.take('>i')
    codes = {}
    for _ in range(r.take('>i')):
        r.string()
        for _ in range(r.take('>i')):
            r.take('>i'), r.take('>q')
            code = r.take('>h')
            codes[code] = codes.get(code, 0) + 1
    print('codes %s seconds %.1f' % (' '.join('%d=%d' % kv for kv in sorted(codes.items())), took))
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
    elif what == 'kafka-python-describe-at':
        kafka_python_describe_at(bootstrap, int(args[0]), args[1])
    elif what == 'raw-describe-v0':
        raw_describe_v0(bootstrap, args[0], args[1])
    elif what == 'raw-create-v0':
        raw_create_v0(bootstrap, args[0], int(args[1]))
    elif what == 'raw-hostile':
        raw_hostile(bootstrap)
    elif what == 'confluent-partitions':
        confluent_partitions(bootstrap, json.loads(args[0]), args[1:] == ['validate'])
    elif what == 'kafka-python-partitions':
        kafka_python_partitions(bootstrap, json.loads(args[0]), args[1:] == ['validate'])
    elif what == 'confluent-alter':
        confluent_alter(bootstrap, args[0], args[1], json.loads(args[2]), args[3:] == ['validate'])
    elif what == 'kafka-python-alter':
        kafka_python_alter(bootstrap, args[0], args[1], json.loads(args[2]))
    elif what == 'kafka-python-incremental':
        kafka_python_incremental(bootstrap, args[0], json.loads(args[1]), args[2:] == ['validate'])
    elif what == 'kafka-python-delete-records':
        kafka_python_delete_records(bootstrap, json.loads(args[0]))
    elif what == 'kafka-python-log-dirs':
        kafka_python_log_dirs(bootstrap, json.loads(args[0]) if args else None)
    elif what == 'raw-flexible':
        raw_flexible(bootstrap, args[0], int(args[1]))
    elif what == 'raw-admin-hostile':
        raw_admin_hostile(bootstrap)
    elif what == 'raw-many-deletes':
        raw_many_deletes(bootstrap, args[0], int(args[1]))
    else:
        raise SystemExit('unknown command %s' % what)


if __name__ == '__main__':
    main()
