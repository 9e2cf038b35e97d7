"""Raw TLS connections to mqlog's listener (test/perl/159_kafka_tls.pl).

  tls.py BOOTSTRAP subject CA
      -> the Common Name of the listener's certificate, verified against CA
  tls.py BOOTSTRAP stall CA SECONDS
      -> two connections that never finish their handshake, one silent and
         one that sends half a ClientHello, while a third, over TLS, sends a
         Metadata request every 100 ms and times the answers:
         "silent closed after S" and "partial closed after S" (or "... open
         after SECONDS"), then "watchdog N answered while stalled, slowest M
         ms" (the answers before both were closed)
  tls.py BOOTSTRAP hold CA N
      -> N connections that finish their handshake and have an ApiVersions
         answered, then "ready"; they are held until stdin closes
  tls.py BOOTSTRAP across CA
      -> one TLS connection with its ApiVersions answered, then "ready";
         at each line read from stdin, a Metadata request on it: "answered"
         or "closed" (a connection kept across a reload)
  tls.py BOOTSTRAP hellos N
      -> N connections each sending the start of a ClientHello that
         announces 131,000 bytes (about OpenSSL's cap) and the first 64 kB
         of it, then "sent"; held until stdin closes
  tls.py BOOTSTRAP metadata CA [CERT KEY]
      -> ApiVersions, then Metadata of all topics, over TLS with the client
         certificate CERT if given: "metadata answered", "metadata closed"
         (the connection closed instead), or "refused: REASON" (the
         handshake failed, or the listener's alert came at the first read)
  tls.py BOOTSTRAP pipelined CA
      -> a Metadata request of 8,000 topic names (80 kB, more than the
         listener's 64 kB buffer) and an ApiVersions request, sent in one
         write, so that TLS records hold the end of the first frame and
         the whole second one: "both answered" or "second unanswered"
         (within 10 s)
  tls.py BOOTSTRAP plaintext
      -> an ApiVersions request in clear to the TLS listener: "closed" when
         the listener closes the connection, "answered" otherwise
"""
import select
import socket
import ssl
import struct
import sys
import threading
import time

from kwire import Closed, frame, raw_request, read_frame


def connect(bootstrap):
    host, port = bootstrap.rsplit(':', 1)
    return socket.create_connection((host, int(port)), timeout=10)


def tls_connect(bootstrap, ca, cert=None, key=None):
    ctx = ssl.create_default_context(cafile=ca)
    if cert:
        ctx.load_cert_chain(cert, key)
    return ctx.wrap_socket(connect(bootstrap), server_hostname=bootstrap.rsplit(':', 1)[0])


def client_hello(ca):
    """the first flight of a TLS client, as Python's ssl would send it"""
    ctx = ssl.create_default_context(cafile=ca)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname='localhost')
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def closed(s):
    """has the peer closed s (read without blocking)?"""
    try:
        return s.recv(4096) == b''
    except (ConnectionResetError, BrokenPipeError):
        return True
    except (BlockingIOError, socket.timeout):
        return False


def subject(bootstrap, ca):
    s = tls_connect(bootstrap, ca)
    cert = s.getpeercert()
    for rdn in cert['subject']:
        for k, v in rdn:
            if k == 'commonName':
                print(v)
    s.close()


def stall(bootstrap, ca, seconds):
    silent = connect(bootstrap)
    partial = connect(bootstrap)
    hello = client_hello(ca)
    partial.sendall(hello[:len(hello) // 2])
    start = time.time()
    watchdog = tls_connect(bootstrap, ca)
    raw_request(watchdog, 18, 0, 0, b'')
    latencies = []
    stop = threading.Event()

    def watch():
        corr = 1
        while not stop.is_set():
            t0 = time.time()
            if raw_request(watchdog, 3, 1, corr, struct.pack('>i', -1)) is None:
                latencies.append((t0, None))
                return
            latencies.append((t0, time.time() - t0))
            corr += 1
            time.sleep(0.1)
    thread = threading.Thread(target=watch)
    thread.start()

    ends = {}
    socks = {'silent': silent, 'partial': partial}
    for s in socks.values():
        s.setblocking(False)
    while len(ends) < 2 and time.time() - start < seconds:
        ready, _, _ = select.select([s for n, s in socks.items() if n not in ends], [], [], 0.05)
        for name, s in socks.items():
            if s in ready and name not in ends and closed(s):
                ends[name] = time.time() - start
    stop.set()
    thread.join()
    for name in ('silent', 'partial'):
        if name in ends:
            print('%s closed after %.1f' % (name, ends[name]))
        else:
            print('%s open after %d' % (name, seconds))
    last = start + max(ends.values()) if ends else time.time()
    during = [l for t0, l in latencies if t0 < last]
    if any(l is None for l in during):
        print('watchdog closed')
    else:
        print('watchdog %d answered while stalled, slowest %d ms'
              % (len(during), max(during) * 1000 if during else -1))


def hold(bootstrap, ca, n):
    conns = []
    for i in range(n):
        s = tls_connect(bootstrap, ca)
        if raw_request(s, 18, 0, i, b'') is None:
            raise SystemExit('connection %d closed' % i)
        conns.append(s)
    print('ready', flush=True)
    sys.stdin.read()


def across(bootstrap, ca):
    s = tls_connect(bootstrap, ca)
    s.settimeout(30)
    if raw_request(s, 18, 0, 0, b'') is None:
        raise SystemExit('closed at once')
    print('ready', flush=True)
    corr = 1
    for _ in sys.stdin:
        try:
            answer = raw_request(s, 3, 1, corr, struct.pack('>i', -1))
        except (ssl.SSLError, OSError):
            answer = None
        print('answered' if answer is not None else 'closed', flush=True)
        corr += 1


def hellos(bootstrap, n):
    body_len = 131000
    # a handshake message header (ClientHello, 3-byte length), then its body
    message = struct.pack('>B', 1) + struct.pack('>I', body_len)[1:] + b'\x03\x03' + b'\x00' * 65536
    records = b''
    for i in range(0, len(message), 16384):
        chunk = message[i:i + 16384]
        records += struct.pack('>BHH', 22, 0x0301, len(chunk)) + chunk
    conns = []
    for _ in range(n):
        s = connect(bootstrap)
        s.sendall(records)
        conns.append(s)
    print('sent', flush=True)
    sys.stdin.read()


def metadata(bootstrap, ca, cert=None, key=None):
    try:
        s = tls_connect(bootstrap, ca, cert, key)
        if raw_request(s, 18, 0, 1, b'') is None:
            print('api_versions closed')
            return
        print('metadata %s' % ('closed' if raw_request(s, 3, 1, 2, struct.pack('>i', -1)) is None
                               else 'answered'))
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError) as e:
        print('refused: %s' % e)


def pipelined(bootstrap, ca):
    s = tls_connect(bootstrap, ca)
    names = b''.join(struct.pack('>h', 8) + (b'nope%04d' % i) for i in range(8000))
    frames = b''
    for corr, key, version, body in ((1, 3, 1, struct.pack('>i', 8000) + names), (2, 18, 0, b'')):
        frames += frame(key, version, body, corr)
    s.sendall(frames)
    s.settimeout(10)
    got = []
    try:
        for _ in range(2):
            body = read_frame(s)
            got.append(struct.unpack('>i', body[:4])[0])
    except (socket.timeout, Closed):
        pass
    print('both answered' if got == [1, 2] else 'second unanswered' if got == [1] else 'got %r' % got)


def plaintext(bootstrap):
    s = connect(bootstrap)
    try:
        print('closed' if raw_request(s, 18, 0, 1, b'') is None else 'answered')
    except (ConnectionResetError, BrokenPipeError):
        print('closed')


def main():
    bootstrap, what = sys.argv[1], sys.argv[2]
    args = sys.argv[3:]
    if what == 'subject':
        subject(bootstrap, args[0])
    elif what == 'stall':
        stall(bootstrap, args[0], int(args[1]))
    elif what == 'hold':
        hold(bootstrap, args[0], int(args[1]))
    elif what == 'across':
        across(bootstrap, args[0])
    elif what == 'hellos':
        hellos(bootstrap, int(args[0]))
    elif what == 'metadata':
        metadata(bootstrap, *args)
    elif what == 'pipelined':
        pipelined(bootstrap, args[0])
    elif what == 'plaintext':
        plaintext(bootstrap)
    else:
        raise SystemExit('unknown command %s' % what)


if __name__ == '__main__':
    main()
