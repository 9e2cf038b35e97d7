"""Kafka's group admin APIs against mqlog's listener, with Debian's
kafka-python 2.0.2 and confluent-kafka 1.7.0 (librdkafka 2.0.2), for
test/perl/159_kafka_group_admin.pl.  One JSON object per line on stdout.

  group_admin.py BOOTSTRAP kp-list
      KafkaAdminClient.list_consumer_groups (ListGroups v2):
      {"group", "protocol_type"} a group
  group_admin.py BOOTSTRAP kp-describe GROUP
      KafkaAdminClient.describe_consumer_groups (DescribeGroups v3):
      {"group", "state", "protocol_type", "protocol", "members": [{"member_id",
      "client_id", "client_host", "topics", "assignment": {topic: [p, ...]}}]},
      or {"error": Kafka's error name}
  group_admin.py BOOTSTRAP kp-offsets GROUP
      KafkaAdminClient.list_consumer_group_offsets without partitions
      (OffsetFetch v3, a null topic list): {"topic", "partition", "offset",
      "metadata"} a partition, or {"error": name}
  group_admin.py BOOTSTRAP kp-delete GROUP...
      KafkaAdminClient.delete_consumer_groups (DeleteGroups v1): {"group",
      "error": Kafka's error name}
  group_admin.py BOOTSTRAP kp-commit GROUP TOPIC PARTITION OFFSET METADATA
      KafkaConsumer(group_id).commit() of an assign()ed partition with a
      metadata string (OffsetCommit v2, generation -1): {"committed": true}
      or {"error": name}
  group_admin.py BOOTSTRAP cf-list
      confluent-kafka AdminClient.list_groups (librdkafka's ListGroups v0
      and DescribeGroups v0): {"group", "state", "protocol_type",
      "protocol", "error", "members": [{"id", "client_id", "client_host",
      "assignment_len", "metadata_len"}]} a group
  group_admin.py BOOTSTRAP raw-list VERSION [STATE...]
      ListGroups at VERSION (v3+ flexible, v4 with the states filter):
      {"error"} then {"group", "protocol_type", "state"} a group
  group_admin.py BOOTSTRAP raw-fetch-all GROUP VERSION
      OffsetFetch of all topics at VERSION (v6+ flexible): {"error"} then
      {"topic", "partition", "offset", "metadata", "error"} a partition
  group_admin.py BOOTSTRAP raw-delete GROUP...
      DeleteGroups v1: {"group", "error"} a group
  group_admin.py BOOTSTRAP raw-offset-delete GROUP TOPIC PARTITION...
      OffsetDelete v0: {"error"} then {"topic", "partition", "error"}
  group_admin.py BOOTSTRAP raw-bad-versions
      DescribeGroups v5, ListGroups v5, DeleteGroups v2 and OffsetDelete v1,
      none of which mqlog serves: {"api", "version", "answer": "closed" or
      "answered"} each
"""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clients import kafka_python, raw_connect  # noqa: E402
from kwire import Reader, karray, kstr, raw_request  # noqa: E402

TIMEOUT = 30


def out(o):
    print(json.dumps(o, sort_keys=True), flush=True)


def kp_admin(bootstrap):
    from kafka import KafkaAdminClient
    return kafka_python(KafkaAdminClient, bootstrap_servers=bootstrap,
                        request_timeout_ms=TIMEOUT * 1000)


def kp_list(bootstrap):
    a = kp_admin(bootstrap)
    for g, ptype in sorted(a.list_consumer_groups()):
        out({'group': g, 'protocol_type': ptype})
    a.close()


def kp_describe(bootstrap, group):
    from kafka.errors import KafkaError
    a = kp_admin(bootstrap)
    try:
        [d] = a.describe_consumer_groups([group])
    except KafkaError as e:
        out({'error': type(e).__name__})
        a.close()
        return
    members = []
    for m in d.members:
        members.append({
            'member_id': m.member_id, 'client_id': m.client_id, 'client_host': m.client_host,
            'topics': sorted(m.member_metadata.subscription) if m.member_metadata else None,
            'assignment': {t: sorted(ps) for t, ps in m.member_assignment.assignment}
            if m.member_assignment else None})
    out({'group': d.group, 'state': d.state, 'protocol_type': d.protocol_type,
         'protocol': d.protocol, 'members': members})
    a.close()


def kp_offsets(bootstrap, group):
    from kafka.errors import KafkaError
    a = kp_admin(bootstrap)
    try:
        offsets = a.list_consumer_group_offsets(group)
    except KafkaError as e:
        out({'error': type(e).__name__})
        a.close()
        return
    for tp in sorted(offsets):
        om = offsets[tp]
        out({'topic': tp.topic, 'partition': tp.partition, 'offset': om.offset,
             'metadata': om.metadata})
    a.close()


def kp_delete(bootstrap, groups):
    a = kp_admin(bootstrap)
    for g, err in sorted(a.delete_consumer_groups(groups)):
        out({'group': g, 'error': err.__name__})
    a.close()


def kp_commit(bootstrap, group, topic, partition, offset, metadata):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError
    from kafka.structs import OffsetAndMetadata
    c = kafka_python(KafkaConsumer, bootstrap_servers=bootstrap, group_id=group,
                     enable_auto_commit=False)
    tp = TopicPartition(topic, int(partition))
    c.assign([tp])
    try:
        c.commit({tp: OffsetAndMetadata(int(offset), metadata)})
        out({'committed': True})
    except KafkaError as e:
        out({'error': type(e).__name__})
    c.close()


def cf_list(bootstrap):
    from confluent_kafka.admin import AdminClient
    a = AdminClient({'bootstrap.servers': bootstrap})
    for g in sorted(a.list_groups(timeout=TIMEOUT), key=lambda g: g.id):
        out({'group': g.id, 'state': g.state, 'protocol_type': g.protocol_type,
             'protocol': g.protocol, 'error': g.error.name() if g.error else None,
             'members': [{'id': m.id, 'client_id': m.client_id, 'client_host': m.client_host,
                          'assignment_len': len(m.assignment or b''),
                          'metadata_len': len(m.metadata or b'')} for m in g.members]})


# ---- raw requests: the versions Debian's Python clients do not send ----------

def response_body(resp, flex):
    r = Reader(resp, flexible=flex)
    r.take('>i')            # correlation id
    r.tags()                # response header v1
    return r


def raw_list(bootstrap, version, states):
    v = int(version)
    flex = v >= 3
    body = b''
    if v >= 4:
        body += karray(len(states), flex) + b''.join(kstr(s, flex) for s in states)
    if flex:
        body += b'\x00'
    s = raw_connect(bootstrap)
    r = response_body(raw_request(s, 16, v, 1, body, flexible=flex), flex)
    if v >= 1:
        r.take('>i')        # throttle_time_ms
    out({'error': r.take('>h')})
    for _ in range(r.array()):
        g = {'group': r.string(), 'protocol_type': r.string()}
        g['state'] = r.string() if v >= 4 else None
        r.tags()
        out(g)


def raw_fetch_all(bootstrap, group, version):
    v = int(version)
    flex = v >= 6
    body = kstr(group, flex) + karray(-1, flex)
    if v >= 7:
        body += b'\x00'     # require_stable
    if flex:
        body += b'\x00'
    s = raw_connect(bootstrap)
    r = response_body(raw_request(s, 9, v, 1, body, flexible=flex), flex)
    if v >= 3:
        r.take('>i')
    parts = []
    for _ in range(r.array()):
        topic = r.string()
        for _ in range(r.array()):
            p = {'topic': topic, 'partition': r.take('>i'), 'offset': r.take('>q')}
            if v >= 5:
                r.take('>i')
            p['metadata'] = r.string()
            p['error'] = r.take('>h')
            r.tags()
            parts.append(p)
        r.tags()
    out({'error': r.take('>h')})
    for p in parts:
        out(p)


def raw_delete(bootstrap, groups):
    body = karray(len(groups), False) + b''.join(kstr(g, False) for g in groups)
    s = raw_connect(bootstrap)
    r = response_body(raw_request(s, 42, 1, 1, body), False)
    r.take('>i')
    for _ in range(r.array()):
        out({'group': r.string(), 'error': r.take('>h')})


def raw_offset_delete(bootstrap, group, topic, partitions):
    body = (kstr(group, False) + karray(1, False) + kstr(topic, False)
            + karray(len(partitions), False)
            + b''.join(struct.pack('>i', int(p)) for p in partitions))
    s = raw_connect(bootstrap)
    r = response_body(raw_request(s, 47, 0, 1, body), False)
    out({'error': r.take('>h')})
    r.take('>i')
    for _ in range(r.array()):
        t = r.string()
        for _ in range(r.array()):
            out({'topic': t, 'partition': r.take('>i'), 'error': r.take('>h')})


def raw_bad_versions(bootstrap):
    for key, name, v, body in ((15, 'DescribeGroups', 5, b'\x01\x00\x00'),
                               (16, 'ListGroups', 5, b'\x01\x01\x00'),
                               (42, 'DeleteGroups', 2, b'\x01\x00'),
                               (47, 'OffsetDelete', 1, b'\x02g\x01\x00')):
        s = raw_connect(bootstrap)
        try:
            resp = raw_request(s, key, v, 1, body, flexible=True)
        except OSError:
            resp = None
        out({'api': name, 'version': v, 'answer': 'answered' if resp else 'closed'})
        s.close()


def main():
    bootstrap, mode, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    if mode == 'kp-list':
        kp_list(bootstrap)
    elif mode == 'kp-describe':
        kp_describe(bootstrap, args[0])
    elif mode == 'kp-offsets':
        kp_offsets(bootstrap, args[0])
    elif mode == 'kp-delete':
        kp_delete(bootstrap, args)
    elif mode == 'kp-commit':
        kp_commit(bootstrap, *args)
    elif mode == 'cf-list':
        cf_list(bootstrap)
    elif mode == 'raw-list':
        raw_list(bootstrap, args[0], args[1:])
    elif mode == 'raw-fetch-all':
        raw_fetch_all(bootstrap, args[0], args[1])
    elif mode == 'raw-delete':
        raw_delete(bootstrap, args)
    elif mode == 'raw-offset-delete':
        raw_offset_delete(bootstrap, args[0], args[1], args[2:])
    elif mode == 'raw-bad-versions':
        raw_bad_versions(bootstrap)
    else:
        raise SystemExit('unknown mode %s' % mode)


if __name__ == '__main__':
    main()
