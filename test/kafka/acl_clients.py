"""Kafka ACL admin clients against mqlog's listener (test/perl/159_kafka_acls.pl).

A binding (and a filter) is a JSON list
[resource_type, name, pattern_type, principal, host, operation, permission]
with Kafka's codes (resource 1 ANY, 2 TOPIC, 3 GROUP, 4 CLUSTER; pattern
1 ANY, 2 MATCH, 3 LITERAL, 4 PREFIXED; operation 1 ANY, 2 ALL, 3 READ,
4 WRITE, 6 DELETE, 7 ALTER, 8 DESCRIBE; permission 1 ANY, 2 DENY, 3 ALLOW);
a filter's name, principal and host may be null. One JSON object per line.

  acl_clients.py BOOTSTRAP CLIENT-create BINDINGS
      -> {"error", "message"} a binding, in order
  acl_clients.py BOOTSTRAP CLIENT-describe FILTER
      -> {"error", "message"} once, then {"binding": [...]} a binding
  acl_clients.py BOOTSTRAP CLIENT-delete FILTERS
      -> {"filter": i, "error", "message", "matched": [binding, ...]} a filter
  CLIENT: rdkafka (librdkafka 2.0.2's own Admin API, rd_kafka_CreateAcls and
  the rest, through ctypes: Debian's python3-confluent-kafka 1.7.0 predates
  its create_acls, which wraps the same calls), kafka-python
  (KafkaAdminClient).

  acl_clients.py BOOTSTRAP raw VERSION describe FILTER
  acl_clients.py BOOTSTRAP raw VERSION create BINDINGS
  acl_clients.py BOOTSTRAP raw VERSION delete FILTERS
      the request at that version (2 and 3 flexible), decoded as above
  acl_clients.py BOOTSTRAP raw-many COUNT
      -> "answered N timed_out T seconds S": a DeleteAcls v1 of COUNT
         filters that match nothing, how many filters were answered, how
         many REQUEST_TIMED_OUT, and how long it took
  acl_clients.py BOOTSTRAP raw-describe-stall
      -> {"error", "message", "bindings", "seconds", "other_seconds"}: a
         DescribeAcls v1 of every binding on one connection and, just
         after it, an ApiVersions on another: the DescribeAcls's answer,
         how many bindings it listed and when it came, and when the other
         connection's answer came (both from the DescribeAcls's sending)
  acl_clients.py BOOTSTRAP raw-hostile
      -> "truncated closed|answered", "absurd closed|answered" (a creation
         count of two billion), then "alive" if a DescribeAcls on a new
         connection is answered

With MQK_SASL_USER and MQK_SASL_PASSWORD in the environment the clients
authenticate with SASL PLAIN as that role (clients.py).
"""
import ctypes
import json
import os
import socket
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clients import (SASL_MECHANISM, SASL_PASSWORD, SASL_USER,  # noqa: E402
                     kafka_python, raw_connect)
from kwire import Reader, frame, karray, kstr, raw_request, read_frame  # noqa: E402

TIMEOUT_MS = 30000


def out(o):
    print(json.dumps(o, sort_keys=True), flush=True)


# ------------------------------------------------------------------------
# librdkafka's Admin API through ctypes
# ------------------------------------------------------------------------

def rdkafka():
    lib = ctypes.CDLL('librdkafka.so.1')
    p = ctypes.c_void_p
    sig = {
        'rd_kafka_conf_new': (p, []),
        'rd_kafka_conf_set': (ctypes.c_int, [p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]),
        'rd_kafka_new': (p, [ctypes.c_int, p, ctypes.c_char_p, ctypes.c_size_t]),
        'rd_kafka_destroy': (None, [p]),
        'rd_kafka_queue_new': (p, [p]),
        'rd_kafka_queue_destroy': (None, [p]),
        'rd_kafka_queue_poll': (p, [p, ctypes.c_int]),
        'rd_kafka_event_type': (ctypes.c_int, [p]),
        'rd_kafka_event_error': (ctypes.c_int, [p]),
        'rd_kafka_event_error_string': (ctypes.c_char_p, [p]),
        'rd_kafka_event_destroy': (None, [p]),
        'rd_kafka_AdminOptions_new': (p, [p, ctypes.c_int]),
        'rd_kafka_AdminOptions_set_request_timeout': (ctypes.c_int, [p, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]),
        'rd_kafka_AclBinding_new': (p, [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                                        ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_char_p,
                                        ctypes.c_size_t]),
        'rd_kafka_AclBindingFilter_new': (p, [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                                              ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_char_p,
                                              ctypes.c_size_t]),
        'rd_kafka_AclBinding_restype': (ctypes.c_int, [p]),
        'rd_kafka_AclBinding_name': (ctypes.c_char_p, [p]),
        'rd_kafka_AclBinding_resource_pattern_type': (ctypes.c_int, [p]),
        'rd_kafka_AclBinding_principal': (ctypes.c_char_p, [p]),
        'rd_kafka_AclBinding_host': (ctypes.c_char_p, [p]),
        'rd_kafka_AclBinding_operation': (ctypes.c_int, [p]),
        'rd_kafka_AclBinding_permission_type': (ctypes.c_int, [p]),
        'rd_kafka_CreateAcls': (None, [p, ctypes.POINTER(p), ctypes.c_size_t, p, p]),
        'rd_kafka_DescribeAcls': (None, [p, p, p, p]),
        'rd_kafka_DeleteAcls': (None, [p, ctypes.POINTER(p), ctypes.c_size_t, p, p]),
        'rd_kafka_event_CreateAcls_result': (p, [p]),
        'rd_kafka_event_DescribeAcls_result': (p, [p]),
        'rd_kafka_event_DeleteAcls_result': (p, [p]),
        'rd_kafka_CreateAcls_result_acls': (ctypes.POINTER(p), [p, ctypes.POINTER(ctypes.c_size_t)]),
        'rd_kafka_acl_result_error': (p, [p]),
        'rd_kafka_error_code': (ctypes.c_int, [p]),
        'rd_kafka_error_string': (ctypes.c_char_p, [p]),
        'rd_kafka_DescribeAcls_result_acls': (ctypes.POINTER(p), [p, ctypes.POINTER(ctypes.c_size_t)]),
        'rd_kafka_DeleteAcls_result_responses': (ctypes.POINTER(p), [p, ctypes.POINTER(ctypes.c_size_t)]),
        'rd_kafka_DeleteAcls_result_response_error': (p, [p]),
        'rd_kafka_DeleteAcls_result_response_matching_acls': (ctypes.POINTER(p), [p, ctypes.POINTER(ctypes.c_size_t)]),
    }
    for name, (res, args) in sig.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args
    return lib


class RdKafka:
    ADMIN_OP = {'create': 9, 'describe': 10, 'delete': 11}  # RD_KAFKA_ADMIN_OP_*ACLS

    def __init__(self, bootstrap):
        self.lib = lib = rdkafka()
        errstr = ctypes.create_string_buffer(512)
        conf = lib.rd_kafka_conf_new()
        settings = {'bootstrap.servers': bootstrap}
        if SASL_USER is not None:
            settings.update({'security.protocol': 'SASL_PLAINTEXT', 'sasl.mechanism': SASL_MECHANISM,
                             'sasl.username': SASL_USER, 'sasl.password': SASL_PASSWORD})
        for k, v in settings.items():
            if lib.rd_kafka_conf_set(conf, k.encode(), v.encode(), errstr, 512) != 0:
                raise SystemExit('conf %s: %s' % (k, errstr.value.decode()))
        self.rk = lib.rd_kafka_new(1, conf, errstr, 512)  # a producer handle
        if not self.rk:
            raise SystemExit('rd_kafka_new: %s' % errstr.value.decode())
        self.queue = lib.rd_kafka_queue_new(self.rk)

    def options(self, op):
        errstr = ctypes.create_string_buffer(512)
        o = self.lib.rd_kafka_AdminOptions_new(self.rk, self.ADMIN_OP[op])
        self.lib.rd_kafka_AdminOptions_set_request_timeout(o, TIMEOUT_MS, errstr, 512)
        return o

    def binding_of(self, spec, filt):
        errstr = ctypes.create_string_buffer(512)
        enc = [s.encode() if isinstance(s, str) else s for s in spec]
        new = self.lib.rd_kafka_AclBindingFilter_new if filt else self.lib.rd_kafka_AclBinding_new
        b = new(enc[0], enc[1], enc[2], enc[3], enc[4], enc[5], enc[6], errstr, 512)
        if not b:
            raise SystemExit('librdkafka refused %r: %s' % (spec, errstr.value.decode()))
        return b

    def spec_of(self, b):
        lib = self.lib

        def s(v):
            return v.decode() if v is not None else None
        return [lib.rd_kafka_AclBinding_restype(b), s(lib.rd_kafka_AclBinding_name(b)),
                lib.rd_kafka_AclBinding_resource_pattern_type(b), s(lib.rd_kafka_AclBinding_principal(b)),
                s(lib.rd_kafka_AclBinding_host(b)), lib.rd_kafka_AclBinding_operation(b),
                lib.rd_kafka_AclBinding_permission_type(b)]

    def wait(self):
        """the admin result event"""
        while True:
            ev = self.lib.rd_kafka_queue_poll(self.queue, TIMEOUT_MS)
            if not ev:
                raise SystemExit('librdkafka: no result within %d ms' % TIMEOUT_MS)
            if self.lib.rd_kafka_event_type(ev) in (0x400, 0x800, 0x1000):
                return ev
            self.lib.rd_kafka_event_destroy(ev)

    def error_of(self, err):
        if not err:
            return 0, None
        m = self.lib.rd_kafka_error_string(err)
        return self.lib.rd_kafka_error_code(err), m.decode() if m else None

    def call(self, fn, op, specs, filt):
        """CreateAcls or DeleteAcls of an array of bindings: the result event"""
        arr = (ctypes.c_void_p * len(specs))(*[self.binding_of(s, filt) for s in specs])
        fn(self.rk, arr, len(specs), self.options(op), self.queue)
        ev = self.wait()
        if self.lib.rd_kafka_event_error(ev):
            raise SystemExit('%s: %s' % (op, self.lib.rd_kafka_event_error_string(ev).decode()))
        return ev

    def create(self, specs):
        lib = self.lib
        ev = self.call(lib.rd_kafka_CreateAcls, 'create', specs, False)
        n = ctypes.c_size_t()
        res = lib.rd_kafka_CreateAcls_result_acls(lib.rd_kafka_event_CreateAcls_result(ev), ctypes.byref(n))
        for i in range(n.value):
            code, message = self.error_of(lib.rd_kafka_acl_result_error(res[i]))
            out({'error': code, 'message': message})

    def describe(self, spec):
        lib = self.lib
        lib.rd_kafka_DescribeAcls(self.rk, self.binding_of(spec, True), self.options('describe'), self.queue)
        ev = self.wait()
        code = lib.rd_kafka_event_error(ev)
        message = lib.rd_kafka_event_error_string(ev) if code else None
        out({'error': code, 'message': message.decode() if message else None})
        if code:
            return
        n = ctypes.c_size_t()
        res = lib.rd_kafka_DescribeAcls_result_acls(lib.rd_kafka_event_DescribeAcls_result(ev), ctypes.byref(n))
        for i in range(n.value):
            out({'binding': self.spec_of(res[i])})

    def delete(self, specs):
        lib = self.lib
        ev = self.call(lib.rd_kafka_DeleteAcls, 'delete', specs, True)
        n = ctypes.c_size_t()
        res = lib.rd_kafka_DeleteAcls_result_responses(lib.rd_kafka_event_DeleteAcls_result(ev), ctypes.byref(n))
        for i in range(n.value):
            code, message = self.error_of(lib.rd_kafka_DeleteAcls_result_response_error(res[i]))
            m = ctypes.c_size_t()
            acls = lib.rd_kafka_DeleteAcls_result_response_matching_acls(res[i], ctypes.byref(m))
            out({'filter': i, 'error': code, 'message': message,
                 'matched': [self.spec_of(acls[j]) for j in range(m.value)]})


# ------------------------------------------------------------------------
# kafka-python's KafkaAdminClient
# ------------------------------------------------------------------------

def kp_admin(bootstrap):
    from kafka import KafkaAdminClient
    return kafka_python(KafkaAdminClient, bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_MS)


def kp_pattern(spec, filt):
    from kafka.admin.acl_resource import (ACLResourcePatternType, ResourcePattern,
                                          ResourcePatternFilter, ResourceType)
    cls = ResourcePatternFilter if filt else ResourcePattern
    return cls(ResourceType(spec[0]), spec[1], ACLResourcePatternType(spec[2]))


def kp_acl(spec, filt):
    from kafka.admin.acl_resource import ACL, ACLFilter, ACLOperation, ACLPermissionType
    cls = ACLFilter if filt else ACL
    return cls(principal=spec[3], host=spec[4], operation=ACLOperation(spec[5]),
               permission_type=ACLPermissionType(spec[6]), resource_pattern=kp_pattern(spec, filt))


def kp_spec(acl):
    rp = acl.resource_pattern
    return [int(rp.resource_type), rp.resource_name, int(rp.pattern_type), acl.principal, acl.host,
            int(acl.operation), int(acl.permission_type)]


def kp_create(bootstrap, specs):
    acls = [kp_acl(s, False) for s in specs]
    res = kp_admin(bootstrap).create_acls(acls)
    failed = {id(a): e for a, e in res['failed']}
    for a in acls:
        e = failed.get(id(a))
        out({'error': e.errno if e else 0, 'message': None})


def kp_describe(bootstrap, spec):
    from kafka.errors import KafkaError
    try:
        acls, err = kp_admin(bootstrap).describe_acls(kp_acl(spec, True))
    except KafkaError as e:
        out({'error': e.errno, 'message': str(e)})
        return
    out({'error': err.errno, 'message': None})
    for a in acls:
        out({'binding': kp_spec(a)})


def kp_delete(bootstrap, specs):
    res = kp_admin(bootstrap).delete_acls([kp_acl(s, True) for s in specs])
    for i, (_, matched, err) in enumerate(res):
        out({'filter': i, 'error': err.errno, 'message': None,
             'matched': [kp_spec(a) for a, _ in matched]})


# ------------------------------------------------------------------------
# raw frames: the flexible versions, and hostile ones
# ------------------------------------------------------------------------

def w_binding(spec, version):
    flex = version >= 2
    b = struct.pack('>b', spec[0]) + kstr(spec[1], flex)
    if version >= 1:
        b += struct.pack('>b', spec[2])
    b += kstr(spec[3], flex) + kstr(spec[4], flex) + struct.pack('>bb', spec[5], spec[6])
    return b + (b'\x00' if flex else b'')


def connect(bootstrap):
    """a connection, authenticated with SASL PLAIN (SaslHandshake v1,
    SaslAuthenticate v0) when the environment asks for it"""
    s = raw_connect(bootstrap)
    if SASL_USER is not None:
        raw_request(s, 17, 1, 1, kstr('PLAIN', False))
        token = b'\0' + SASL_USER.encode() + b'\0' + SASL_PASSWORD.encode()
        got = raw_request(s, 36, 0, 2, struct.pack('>i', len(token)) + token)
        if got is None or struct.unpack_from('>h', got, 4)[0] != 0:
            raise SystemExit('authentication failed')
    return s


def raw(bootstrap, version, what, arg):
    flex = version >= 2
    key = {'describe': 29, 'create': 30, 'delete': 31}[what]
    spec = json.loads(arg)
    if what == 'describe':
        body = w_binding(spec, version)    # its tags are the request's
    else:
        body = karray(len(spec), flex) + b''.join(w_binding(s, version) for s in spec)
        body += b'\x00' if flex else b''
    s = connect(bootstrap)
    data = raw_request(s, key, version, 1, body, flexible=flex)
    if data is None:
        raise SystemExit('the connection closed instead of answering')
    r = Reader(data, flexible=flex)
    r.take('i')                            # correlation id
    r.tags()                               # response header v1
    r.take('i')                            # throttle_time_ms

    def binding(resource):
        b = [r.take('b'), r.string(), r.take('b') if version >= 1 else 3] if resource else []
        b += [r.string(), r.string(), r.take('b'), r.take('b')]
        return b
    if what == 'describe':
        out({'error': r.take('h'), 'message': r.string()})
        for _ in range(r.array()):
            res = [r.take('b'), r.string(), r.take('b') if version >= 1 else 3]
            for _ in range(r.array()):
                out({'binding': res + binding(False)})
                r.tags()
            r.tags()
    elif what == 'create':
        for _ in range(r.array()):
            out({'error': r.take('h'), 'message': r.string()})
            r.tags()
    else:
        for i in range(r.array()):
            code, message = r.take('h'), r.string()
            matched = []
            for _ in range(r.array()):
                e, m = r.take('h'), r.string()
                matched.append(binding(True) + [e, m])
                r.tags()
            out({'filter': i, 'error': code, 'message': message, 'matched': matched})
            r.tags()
    r.tags()
    if r.left():
        raise SystemExit('%d bytes left over in the answer' % r.left())


def closed_or_answered(bootstrap, key, version, body):
    s = connect(bootstrap)
    s.sendall(frame(key, version, body, 7, 'hostile'))
    s.settimeout(10)
    try:
        got = s.recv(4)
    except (ConnectionResetError, socket.timeout):
        got = b''
    return 'closed' if not got else 'answered'


def raw_hostile(bootstrap):
    one = w_binding([2, 't', 3, 'User:x', '*', 3, 3], 1)
    print('truncated', closed_or_answered(bootstrap, 30, 1, struct.pack('>i', 1) + one[:-3]))
    print('absurd', closed_or_answered(bootstrap, 30, 1, struct.pack('>i', 2000000000) + one))
    s = connect(bootstrap)
    if raw_request(s, 29, 1, 1, w_binding([1, None, 1, None, None, 1, 1], 1)) is not None:
        print('alive')


def raw_many(bootstrap, count):
    import time
    one = w_binding([2, 'no-such-topic', 3, 'User:*', '*', 3, 3], 1)
    s = connect(bootstrap)
    s.settimeout(120)
    body = struct.pack('>i', count) + one * count
    began = time.time()
    s.sendall(frame(31, 1, body, 1, 'many'))
    data = read_frame(s)
    took = time.time() - began
    r = Reader(data, False)
    r.take('i')
    r.take('i')
    answered = timed_out = 0
    for _ in range(r.array()):
        code = r.take('h')
        r.string()
        if r.array() != 0:
            raise SystemExit('a filter of no-such-topic matched something')
        answered += 1
        timed_out += code == 7
    print('answered %d timed_out %d seconds %.2f' % (answered, timed_out, took))


def raw_describe_stall(bootstrap):
    import time
    a, b = connect(bootstrap), connect(bootstrap)
    a.settimeout(120)
    b.settimeout(120)
    body = w_binding([1, None, 1, None, None, 1, 1], 1)
    began = time.time()
    a.sendall(frame(29, 1, body, 1, 'stall'))
    time.sleep(0.05)                       # the listener reads it first
    b.sendall(frame(18, 0, b'', 2, 'stall'))
    read_frame(b)
    other_seconds = time.time() - began
    data = read_frame(a)
    seconds = time.time() - began
    r = Reader(data)
    r.take('i')
    r.take('i')
    code, message, n = r.take('h'), r.string(), 0
    for _ in range(r.array()):
        r.take('b'), r.string(), r.take('b')
        for _ in range(r.array()):
            r.string(), r.string(), r.take('b'), r.take('b')
            n += 1
    out({'error': code, 'message': message, 'bindings': n,
         'seconds': seconds, 'other_seconds': other_seconds})


def main():
    bootstrap, mode = sys.argv[1], sys.argv[2]
    args = sys.argv[3:]
    if mode == 'raw':
        raw(bootstrap, int(args[0]), args[1], args[2])
    elif mode == 'raw-many':
        raw_many(bootstrap, int(args[0]))
    elif mode == 'raw-hostile':
        raw_hostile(bootstrap)
    elif mode == 'raw-describe-stall':
        raw_describe_stall(bootstrap)
    elif mode.startswith('rdkafka-'):
        getattr(RdKafka(bootstrap), mode[len('rdkafka-'):])(json.loads(args[0]))
    elif mode.startswith('kafka-python-'):
        {'create': kp_create, 'describe': kp_describe,
         'delete': kp_delete}[mode[len('kafka-python-'):]](bootstrap, json.loads(args[0]))
    else:
        raise SystemExit('unknown mode %s' % mode)


if __name__ == '__main__':
    main()
