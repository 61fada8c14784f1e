"""An object store on loopback for the remote-read tests.

Serves the files under `root` over HTTP/1.1 (keep-alive) with ranged GETs,
ETag and Last-Modified, in two ways at once: plain paths (http://host/p
-> root/p) and path-style S3 (http://host/bucket/key -> root/bucket/key),
with ListObjectsV2 on GET /bucket?list-type=2.

When `secret` is set, every request must carry an AWS Signature V4 that
this server recomputes from the secret (s3rver does not check them): a
wrong one is a 403 SignatureDoesNotMatch.

Faults, set on the server object by a test:
  reset_prob    a response body is cut at a random offset by a TCP reset
  fail_next     that many next requests answer 503 (a burst)
  delay         seconds before each response (added latency)
  on_request    fn(server, path, n): called before each GET (n counts them),
                e.g. to replace an object between two ranges
Counters: requests, resets, failed, bytes_sent, paths (every GET's path).
"""

import email.utils
import hashlib
import hmac
import os
import random
import socket
import struct
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from xml.sax.saxutils import escape


def _quote(s, safe):
    return urllib.parse.quote(s, safe=safe)


def signature(secret, method, path, query, headers, signed, stamp, scope):
    """AWS Signature V4 of a request, computed here from the secret:
    headers maps lowercase names to values, signed lists the names."""
    pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
    cq = "&".join(sorted("%s=%s" % (_quote(k, "-_.~"), _quote(v, "-_.~")) for k, v in pairs))
    cpath = _quote(urllib.parse.unquote(path), "/-_.~")
    hdrs = "".join("%s:%s\n" % (h, " ".join(str(headers.get(h, "")).split())) for h in signed)
    creq = "\n".join([method, cpath, cq, hdrs, ";".join(signed),
                      headers.get("x-amz-content-sha256", "")])
    sts = "\n".join(["AWS4-HMAC-SHA256", stamp, scope,
                     hashlib.sha256(creq.encode()).hexdigest()])
    k = ("AWS4" + secret).encode()
    for m in scope.split("/"):
        k = hmac.new(k, m.encode(), hashlib.sha256).digest()
    return hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()


def put_object(endpoint, bucket, key, data, akid, secret, region="us-east-1"):
    """Uploads data to endpoint/bucket/key (path-style), signed."""
    import http.client
    host = endpoint.split("://", 1)[1]
    path = "/%s/%s" % (bucket, _quote(key, "/-_.~"))
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    scope = "%s/%s/s3/aws4_request" % (stamp[:8], region)
    headers = {"host": host, "x-amz-date": stamp,
               "x-amz-content-sha256": hashlib.sha256(data).hexdigest()}
    signed = sorted(headers)
    sig = signature(secret, "PUT", path, "", headers, signed, stamp, scope)
    headers["Authorization"] = ("AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, "
                                "Signature=%s" % (akid, scope, ";".join(signed), sig))
    c = http.client.HTTPConnection(host, timeout=30)
    c.request("PUT", path, body=data, headers=headers)
    r = c.getresponse()
    body = r.read()
    c.close()
    if r.status != 200:
        raise RuntimeError("PUT %s: %d %s" % (path, r.status, body[:300]))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # small answers (an index file) go out at once, as a store sends them,
    # not held by Nagle until the client's delayed ACK (40 ms)
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    # ---- signatures ----

    def _signature_ok(self, path, query):
        srv = self.server
        auth = self.headers.get("Authorization", "")
        if not auth.startswith("AWS4-HMAC-SHA256 "):
            return False
        parts = dict(p.strip().split("=", 1) for p in auth[len("AWS4-HMAC-SHA256 "):].split(","))
        akid, date, region, service, term = parts["Credential"].split("/")
        if akid != srv.access_key or service != "s3" or term != "aws4_request":
            return False
        signed = parts["SignedHeaders"].split(";")
        if "host" not in signed or "x-amz-date" not in signed:
            return False
        headers = {h: self.headers.get(h, "") for h in signed}
        want = signature(srv.secret, "GET", path, query, headers, signed,
                         self.headers.get("x-amz-date", ""),
                         "/".join([date, region, service, term]))
        srv.signed += 1
        return hmac.compare_digest(want, parts["Signature"])

    # ---- answers ----

    def _plain(self, status, body=b"", ctype="application/xml", extra=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status, code):
        body = ("<?xml version=\"1.0\"?><Error><Code>%s</Code></Error>" % code).encode()
        self._plain(status, body)

    def _list(self, bucket, q):
        srv = self.server
        prefix = q.get("prefix", [""])[0]
        after = q.get("continuation-token", [""])[0]
        limit = int(q.get("max-keys", [str(srv.max_keys)])[0])
        base = os.path.join(srv.root, bucket)
        keys = []
        for d, _, files in os.walk(base):
            for f in files:
                k = os.path.relpath(os.path.join(d, f), base)
                if k.startswith(prefix) and not f.startswith(".tmp"):
                    keys.append(k)
        keys = sorted(k for k in keys if k > after)
        page, more = keys[:limit], len(keys) > limit
        items = "".join("<Contents><Key>%s</Key><Size>%d</Size></Contents>"
                        % (escape(k), os.path.getsize(os.path.join(base, k))) for k in page)
        token = ("<NextContinuationToken>%s</NextContinuationToken>" % escape(page[-1])
                 if more else "")
        body = ("<?xml version=\"1.0\"?><ListBucketResult><Name>%s</Name><KeyCount>%d</KeyCount>"
                "<IsTruncated>%s</IsTruncated>%s%s</ListBucketResult>"
                % (bucket, len(page), "true" if more else "false", token, items)).encode()
        srv.lists += 1
        self._plain(200, body)

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        srv = self.server
        with srv.lock:
            srv.active += 1
        try:
            self._get()
        finally:
            with srv.lock:
                srv.active -= 1

    def _get(self):
        srv = self.server
        path, _, query = self.path.partition("?")
        with srv.lock:
            srv.requests += 1
            n = srv.requests
            srv.paths.append(path)
            burst = srv.fail_next > 0
            if burst:
                srv.fail_next -= 1
                srv.failed += 1
        if srv.delay:
            time.sleep(srv.delay)
        if srv.on_request:
            srv.on_request(srv, path, n)
        if srv.secret and not self._signature_ok(path, query):
            srv.bad_signatures += 1
            return self._error(403, "SignatureDoesNotMatch")
        if burst:
            return self._error(503, "SlowDown")
        q = urllib.parse.parse_qs(query)
        rel = urllib.parse.unquote(path).lstrip("/")
        if "list-type" in q:
            return self._list(rel.rstrip("/"), q)
        full = os.path.realpath(os.path.join(srv.root, rel))
        if not full.startswith(os.path.realpath(srv.root) + os.sep) or not os.path.isfile(full):
            return self._error(404, "NoSuchKey")
        if srv.forbidden and rel.startswith(srv.forbidden):
            return self._error(403, "AccessDenied")
        f = open(full, "rb")
        try:
            self._send_object(f, rel)
        finally:
            f.close()

    def _send_object(self, f, rel):
        srv = self.server
        st = os.fstat(f.fileno())
        # (mtime, size, inode): changes when the object is replaced or edited
        tag = '"%x-%x-%x"' % (st.st_mtime_ns, st.st_size, st.st_ino)
        meta = [("ETag", tag), ("Last-Modified", email.utils.formatdate(st.st_mtime, usegmt=True)),
                ("Accept-Ranges", "bytes")]
        size = st.st_size
        rng = self.headers.get("Range")
        status, a, b = 200, 0, size - 1
        if rng and rng.startswith("bytes="):
            lo, _, hi = rng[6:].partition("-")
            a = int(lo)
            b = min(int(hi), size - 1) if hi else size - 1
            if a >= size:
                return self._plain(416, b"", extra=[("Content-Range", "bytes */%d" % size)] + meta)
            status = 206
        n = b + 1 - a
        self.send_response(status)
        self.send_header("Content-Length", str(n))
        if status == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (a, b, size))
        for k, v in meta:
            self.send_header(k, v)
        self.end_headers()
        if self.command == "HEAD":
            return
        cut = random.randrange(n) if n and random.random() < srv.reset_prob else None
        if cut is None:  # the kernel copies (sendfile): little CPU of this process
            self.wfile.flush()
            sent = self.connection.sendfile(f, a, n)
            with srv.lock:
                srv.bytes_sent += sent
                srv.bytes_of[rel] = srv.bytes_of.get(rel, 0) + sent
            return
        f.seek(a)
        sent = 0
        while sent < n:
            piece = f.read(min(1 << 20, n - sent, (cut - sent) if cut is not None else n))
            if not piece:
                break
            self.wfile.write(piece)
            sent += len(piece)
            if cut is not None and sent >= cut:
                break
        with srv.lock:
            srv.bytes_sent += sent
            srv.bytes_of[rel] = srv.bytes_of.get(rel, 0) + sent
        if cut is not None:
            self.wfile.flush()
            with srv.lock:
                srv.resets += 1
            # a TCP reset, as a dropped connection or a killed proxy gives
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256  # (5 by default: connections past it wait for a SYN resent 1 s later)

    def __init__(self, root, secret=None, access_key="AKIDTEST"):
        super().__init__(("127.0.0.1", 0), Handler)
        self.root = root
        self.secret = secret
        self.access_key = access_key
        self.lock = threading.Lock()
        self.reset_prob = 0.0
        self.fail_next = 0
        self.delay = 0.0
        self.on_request = None
        self.forbidden = None
        self.max_keys = 1000
        self.requests = self.resets = self.failed = self.bytes_sent = 0
        self.signed = self.bad_signatures = self.lists = 0
        self.paths = []
        self.bytes_of = {}  # path -> body bytes sent
        self.active = 0  # requests being answered
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)

    def handle_error(self, request, client_address):
        pass  # a client that hung up (or the reset above): nothing to report

    def shard_bytes(self):
        """Body bytes sent of every path but indexes (.idx), once the answers
        in progress are done: a client may have its bytes before the
        handler has counted them."""
        for _ in range(500):
            with self.lock:
                if self.active == 0:
                    return sum(v for k, v in self.bytes_of.items() if not k.endswith(".idx"))
            time.sleep(0.01)
        raise TimeoutError("the test store is still answering")

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.server_address[1]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.shutdown()
        self.server_close()
