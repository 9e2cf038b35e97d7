"""Kafka's wire format, as the test clients in test/kafka hand-roll it.

The clients here send what Debian's Kafka clients cannot (the newest or
oldest versions of an API, frames cut short, bytes that are not UTF-8) and
read the answers field by field.  This module is the one codec they share:
the primitive types of Kafka's protocol, classic and flexible (KIP-482:
compact strings and arrays as an unsigned varint of length + 1, tagged
fields), a request frame, and a reader of a response.

  i8, i16, i32, i64           big-endian integers
  uvarint(n)                  an unsigned varint
  kstr(s, flex)               a string (str or bytes; None: null)
  karray(n, flex)             an array's length (-1: null)
  kbytes(b, flex)             bytes (None: null)
  cstr(s), carr(n)            the compact ones, as flexible versions have them
  TAGS                        an empty tagged-field section
  frame(key, version, body, corr, client, flexible)
                              a request, size first (header v1, or v2
                              with its empty tags if flexible)
  recv_exact(s, n)            n bytes, else Closed
  read_frame(s)               one response after its size, else Closed
  raw_request(s, key, version, corr, body, flexible)
                              one request; its response after the size,
                              or None if the connection closed instead
  Reader(data, pos, flexible) a response read field by field, from pos
"""
import struct

TAGS = b'\x00'


def i8(v):
    return struct.pack('>b', v)


def i16(v):
    return struct.pack('>h', v)


def i32(v):
    return struct.pack('>i', v)


def i64(v):
    return struct.pack('>q', v)


def uvarint(n):
    b = b''
    while n >= 0x80:
        b += bytes([(n & 0x7f) | 0x80])
        n >>= 7
    return b + bytes([n])


def kstr(s, flex=False):
    """a string, compact if flex; None is the null string"""
    if s is None:
        return uvarint(0) if flex else i16(-1)
    if isinstance(s, str):
        s = s.encode()
    return (uvarint(len(s) + 1) if flex else i16(len(s))) + s


def karray(n, flex=False):
    """an array's length, compact if flex; -1 is the null array"""
    return uvarint(n + 1) if flex else i32(n)


def kbytes(b, flex=False):
    """bytes, compact if flex; None is null"""
    if b is None:
        return uvarint(0) if flex else i32(-1)
    return (uvarint(len(b) + 1) if flex else i32(len(b))) + b


def cstr(s):
    return kstr(s, True)


def carr(n):
    return karray(n, True)


def frame(key, version, body, corr=1, client='raw', flexible=False):
    """a request with its size: header v1, or v2 (tags after the client
    id, which stays a classic string) if flexible"""
    header = struct.pack('>hhi', key, version, corr) + kstr(client)
    if flexible:
        header += TAGS
    return i32(len(header) + len(body)) + header + body


class Closed(ConnectionError):
    """the connection closed before the whole answer came"""


def recv_exact(s, n):
    """n bytes (a socket may return fewer at a time), else Closed"""
    buf = b''
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise Closed('the connection closed after %d of %d bytes' % (len(buf), n))
        buf += chunk
    return buf


def read_frame(s):
    """one response, after its size (correlation id first)"""
    return recv_exact(s, struct.unpack('>i', recv_exact(s, 4))[0])


def raw_request(s, key, version, corr, body, flexible=False):
    """one request on socket s (client id "raw"); the response after its
    size, or None when the connection closed instead"""
    s.sendall(frame(key, version, body, corr, flexible=flexible))
    try:
        return read_frame(s)
    except Closed:
        return None


class Reader:
    """a response read field by field; a format without a byte order is
    big-endian, as Kafka's"""

    def __init__(self, data, pos=0, flexible=False):
        self.data, self.pos, self.flex = data, pos, flexible

    def take(self, fmt):
        if fmt[0] not in '<>!=@':
            fmt = '>' + fmt
        v = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v[0] if len(v) == 1 else v

    def i8(self):
        return self.take('b')

    def i16(self):
        return self.take('h')

    def i32(self):
        return self.take('i')

    def i64(self):
        return self.take('q')

    def uvarint(self):
        shift = v = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            v |= (b & 0x7f) << shift
            if not b & 0x80:
                return v
            shift += 7

    def string(self, errors='strict'):
        n = self.uvarint() - 1 if self.flex else self.i16()
        if n < 0:
            return None
        s = self.data[self.pos:self.pos + n].decode('utf-8', errors)
        self.pos += n
        return s

    def bytes(self):
        n = self.uvarint() - 1 if self.flex else self.i32()
        v = self.data[self.pos:self.pos + max(n, 0)]
        self.pos += max(n, 0)
        return v

    def array(self):
        return self.uvarint() - 1 if self.flex else self.i32()

    def tags(self):
        if self.flex:
            for _ in range(self.uvarint()):
                self.uvarint()
                self.pos += self.uvarint()

    def left(self):
        return len(self.data) - self.pos
