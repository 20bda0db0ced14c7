"""A fault-injection server for the bulk insert protocol (see ``bulkwire.transport``).

It answers the four requests of a bulk insert like a good server would (the loopback server in
``bulkwire.testing`` shows the shapes) unless told to misbehave at one of them::

    with FaultServer({"bulk_insert": "early_5xx", "state": "shape_result_int"}) as server:
        ...   # the POST is answered 500 before the body is read; the state is {"Result": 5}

Steps: ``next-operation-id``, ``bulk_insert`` (the POST), ``state`` (``operations/state``),
``kill`` (``operations/kill``). Faults (``FAULTS``):

- ``4xx`` / ``5xx``: an error status (400 / 500) with an error body, after the whole request;
- ``garbage``: 200 with a body that is not JSON; ``not_http``: bytes that are not an HTTP answer;
- ``early_2xx`` / ``early_5xx``: an answer before the request (its body) was read, then the
  connection is drained and closed;
- ``disconnect``: the whole request read, the connection closed without an answer;
- ``reset``: the connection reset (RST) after the head of the request, without an answer;
- ``stall``: the head read, then nothing (no reading, no answer) for ``stall_seconds``;
- ``shape_id_str``, ``shape_list``, ``shape_result_int``, ``shape_nested``: 200 with JSON of
  another shape (``{"Id": "x"}``, ``[]``, ``{"Status": "Faulted", "Result": 5}``, 100,000
  nested arrays).

Two more for the POST alone (``BODY_FAULTS``), once the decoded body holds the whole JSON
array (its closing ``]``), before the rest of the body (a compressed stream's end, the
terminating chunk) is read; then the rest is read (``PostRecord.end_after_answer``):

- ``2xx_at_array_end``: 201, not a fault but what RavenDB does;
- ``garbage_at_array_end``: bytes that are neither HTTP nor TLS, written on the socket itself
  (under the TLS session when there is one).

And ``2xx_mid_chunk`` (the POST alone, for a body whose first chunk is large): 64 KiB of the
first chunk's data read, then 200 and a pause (the client's write waits for room meanwhile),
then the rest read and dropped, the connection closed.

The server is bounded: raw sockets on 127.0.0.1, at most ``max_connections`` at a time, every
read with a timeout, every wait shorter than ``stall_seconds``, and it stops accepting by
itself after ``lifetime`` seconds. ``posts`` records what each POST received and what it was
answered, so a test can tell whether the server answered 2xx to the complete body.
"""
from __future__ import annotations

import json
import os
import socket
import ssl
import struct
import threading
import time
import urllib.parse
import zlib
from typing import Dict, Iterator, List, Optional

from bulkwire.testing import holds_whole_array

STEPS = ("next-operation-id", "bulk_insert", "state", "kill")
FAULTS = ("4xx", "5xx", "garbage", "not_http", "early_2xx", "early_5xx", "disconnect", "reset",
          "stall", "shape_id_str", "shape_list", "shape_result_int", "shape_nested")
BODY_FAULTS = ("2xx_at_array_end", "garbage_at_array_end")
POST_FAULTS = BODY_FAULTS + ("2xx_mid_chunk",)

SHAPES = {
    "shape_id_str": b'{"Id": "x", "NodeTag": "A"}',
    "shape_list": b"[]",
    "shape_result_int": b'{"Status": "Faulted", "Result": 5}',
    "shape_nested": b"[" * 100_000 + b"]" * 100_000,
}
GARBAGE_BODY = b"<html><body>502 Bad Gateway (not JSON)</body></html>"
NOT_HTTP = b"\x00\xffthis is not an HTTP answer\r\n\r\n"
_REASONS = {200: "OK", 201: "Created", 400: "Bad Request", 404: "Not Found",
            500: "Internal Server Error"}


class _ZstdDecoder:
    """The zstandard package's decoder with zlib's decompress / flush / eof."""

    def __init__(self) -> None:
        import zstandard
        self._d = zstandard.ZstdDecompressor().decompressobj()

    def decompress(self, data: bytes) -> bytes:
        return self._d.decompress(data)

    def flush(self) -> bytes:
        return b""

    @property
    def eof(self) -> bool:
        return self._d.eof


class PostRecord:
    """One bulk insert POST as the server saw it."""

    def __init__(self, op_id: int, encoding: str) -> None:
        self.op_id = op_id
        self.encoding = encoding     # "gzip", "zstd" or "" (Content-Encoding)
        self.body = bytearray()      # decoded
        # the whole JSON array read: the terminating chunk too and gzip/zstd ended, unless
        # answered at the array's end
        self.complete = False
        self.answered_before_end = False  # 2xx_at_array_end: 201 went out before the rest
        self.end_after_answer = False     # ... which then arrived, well formed
        self.status: Optional[int] = None  # what the server answered (None: no HTTP answer)
        self.documents = 0

    @property
    def ok_to_whole_body(self) -> bool:
        return self.complete and self.status is not None and 200 <= self.status < 300


class _Request:
    def __init__(self, method: str, path: str, query: Dict[str, str], headers: Dict[str, str]) -> None:
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers


class FaultServer:
    """See the module docstring. ``release``: when given, the POST reads nothing until it is
    set (at most ``stall_seconds``) before an early answer or a reset, so that a test can
    have the failure come while the producer is blocked on its full queue."""

    def __init__(self, faults: Optional[Dict[str, str]] = None, *, database: str = "db",
                 release: Optional[threading.Event] = None, stall_seconds: float = 3.0,
                 lifetime: float = 60.0,
                 recv_buffer: int = 16 << 10, max_connections: int = 16,
                 io_timeout: float = 5.0, ssl_context: Optional[ssl.SSLContext] = None) -> None:
        faults = dict(faults or {})
        for step, fault in faults.items():
            if step not in STEPS or fault not in FAULTS and not (
                    step == "bulk_insert" and fault in POST_FAULTS):
                raise ValueError(f"unknown step or fault: {step!r}: {fault!r}")
        self.faults = faults
        self.ssl_context = ssl_context  # HTTPS: every fault, over TLS
        self.database = database
        self.release = release
        self.stall_seconds = stall_seconds
        self.io_timeout = io_timeout
        self.max_connections = max_connections
        self.posts: List[PostRecord] = []
        self.log: List[str] = []
        self.states: Dict[int, dict] = {}
        self.killed: set = set()
        self._lock = threading.Lock()
        self._next_op = 0
        self._stop = threading.Event()
        self.answered_early = threading.Event()  # an early answer to a POST went out
        self.answered_at_array_end = threading.Event()  # a BODY_FAULTS answer went out
        self._conns: set = set()
        self._threads: List[threading.Thread] = []
        self._deadline = time.monotonic() + lifetime
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # accepted sockets inherit it: a small window makes a server that holds stall sooner
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, recv_buffer)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self._listener.settimeout(0.1)
        self._acceptor = threading.Thread(target=self._accept_loop, name="fault-server", daemon=True)
        self._acceptor.start()

    @property
    def url(self) -> str:
        host, port = self._listener.getsockname()[:2]
        return f"{'https' if self.ssl_context is not None else 'http'}://{host}:{port}"

    def ok_to_whole_body(self, op_id: Optional[int]) -> bool:
        """Whether the server answered 2xx to a complete body of this operation."""
        with self._lock:
            return any(p.op_id == op_id and p.ok_to_whole_body for p in self.posts)

    def close(self) -> None:
        self._stop.set()
        try:  # wakes the acceptor now rather than at its next poll
            socket.create_connection(self._listener.getsockname()[:2], timeout=1).close()
        except OSError:
            pass
        with self._lock:
            conns = list(self._conns)
        for conn in conns:  # wakes handlers blocked in a read
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._acceptor.join(5)
        for t in list(self._threads):
            t.join(5)
        self._listener.close()

    def __enter__(self) -> "FaultServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- connections ----

    def _accept_loop(self) -> None:
        def running() -> bool:
            return not self._stop.is_set() and time.monotonic() < self._deadline

        for conn in accepted(self._listener, running):
            if self._stop.is_set():
                conn.close()
                return
            with self._lock:
                if len(self._conns) >= self.max_connections:
                    conn.close()
                    continue
                self._conns.add(conn)
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(t)
            t.start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(self.io_timeout)
        if self.ssl_context is not None:
            raw = conn
            try:
                conn = self.ssl_context.wrap_socket(raw, server_side=True)
            except (OSError, ValueError):
                with self._lock:
                    self._conns.discard(raw)
                raw.close()
                return
            with self._lock:  # the TLS socket took the descriptor over
                self._conns.discard(raw)
                self._conns.add(conn)
        reader = conn.makefile("rb")
        try:
            self._handle(conn, reader)
        except (OSError, ValueError):
            pass  # the client went away, or sent what this server does not parse
        finally:
            with self._lock:
                self._conns.discard(conn)
            try:
                reader.close()
                conn.close()
            except OSError:
                pass

    def _wait(self, seconds: float) -> None:
        self._stop.wait(min(seconds, self.stall_seconds))

    @staticmethod
    def _send(conn: socket.socket, status: int, body: bytes = b"",
              content_type: str = "application/json; charset=utf-8") -> None:
        head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}\r\n"
                f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
                f"Connection: close\r\n\r\n").encode()
        conn.sendall(head + body)

    def _json(self, conn: socket.socket, status: int, payload: object) -> None:
        self._send(conn, status, json.dumps(payload).encode() if payload is not None else b"")

    def _drain_and_close(self, conn: socket.socket, reader: object) -> None:
        """After an early answer: no more writing; read (and drop) what the client still
        sends, for a bounded time, so that it sees the answer rather than a reset."""
        try:
            conn.shutdown(socket.SHUT_WR)
            conn.settimeout(0.1)
            deadline = time.monotonic() + self.stall_seconds
            while time.monotonic() < deadline and not self._stop.is_set():
                try:
                    if not conn.recv(1 << 16):
                        return
                except socket.timeout:
                    continue
        except OSError:
            return

    @staticmethod
    def _reset(conn: socket.socket) -> None:
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    # ---- requests ----

    def _read_head(self, reader) -> Optional[_Request]:
        line = reader.readline(8192)
        if not line:
            return None
        method, target, _ = line.decode("latin-1").split(" ", 2)
        headers: Dict[str, str] = {}
        for _ in range(100):
            h = reader.readline(8192)
            if h in (b"\r\n", b"\n", b""):
                break
            name, _, value = h.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        parsed = urllib.parse.urlsplit(target)
        return _Request(method, parsed.path, dict(urllib.parse.parse_qsl(parsed.query)), headers)

    @staticmethod
    def _read_plain_body(reader, headers: Dict[str, str]) -> None:
        length = int(headers.get("content-length") or 0)
        if length:
            reader.read(length)

    def _step(self, request: _Request) -> Optional[str]:
        prefix = f"/databases/{self.database}"
        if not request.path.startswith(prefix):
            return None
        rest = request.path[len(prefix):]
        return {("GET", "/operations/next-operation-id"): "next-operation-id",
                ("POST", "/bulk_insert"): "bulk_insert",
                ("GET", "/operations/state"): "state",
                ("POST", "/operations/kill"): "kill"}.get((request.method, rest))

    def _handle(self, conn: socket.socket, reader) -> None:
        request = self._read_head(reader)
        if request is None:
            return
        step = self._step(request)
        with self._lock:
            self.log.append(f"{request.method} {request.path}")
        if step is None:
            self._read_plain_body(reader, request.headers)
            return self._json(conn, 404, {"Message": f"no such endpoint: {request.path}"})
        fault = self.faults.get(step)
        if step == "bulk_insert":
            return self._bulk_insert(conn, reader, request, fault)
        # the requests without a body; an early answer goes out before even that is read
        if fault not in ("early_2xx", "early_5xx"):
            self._read_plain_body(reader, request.headers)
        if fault == "stall":
            return self._wait(self.stall_seconds)
        if fault == "reset":
            return self._reset(conn)
        if fault == "disconnect":
            return
        if fault == "not_http":
            return conn.sendall(NOT_HTTP)
        if fault == "early_2xx":
            self._send(conn, 200)
            return self._drain_and_close(conn, reader)
        if fault == "early_5xx":
            self._json(conn, 500, {"Message": f"fault injected: early 500 at {step}"})
            return self._drain_and_close(conn, reader)
        if fault == "4xx":
            return self._json(conn, 400, {"Message": f"fault injected: 400 at {step}"})
        if fault == "5xx":
            return self._json(conn, 500, {"Message": f"fault injected: 500 at {step}",
                                          "Error": "at FaultServer"})
        if fault == "garbage":
            return self._send(conn, 200, GARBAGE_BODY, "text/html")
        if fault in SHAPES:
            return self._send(conn, 200, SHAPES[fault])
        op = int(request.query.get("id", "0") or 0)
        if step == "next-operation-id":
            with self._lock:
                self._next_op += 1
                op = self._next_op
                self.states[op] = {"Status": "InProgress", "Result": None}
            return self._json(conn, 200, {"Id": op, "NodeTag": "A"})
        if step == "state":
            state = self.states.get(op)
            if state is None:
                return self._json(conn, 404, {"Message": "no such operation"})
            return self._json(conn, 200, state)
        # kill
        with self._lock:
            self.killed.add(op)
            self.states[op] = {"Status": "Canceled", "Result": None}
        return self._send(conn, 200)

    def _fault_state(self, op: int, message: str) -> None:
        with self._lock:
            if self.states.get(op, {}).get("Status") != "Canceled":
                self.states[op] = {"Status": "Faulted", "Result": {"Message": message,
                                                                  "Error": message + "\n at FaultServer"}}

    def _bulk_insert(self, conn: socket.socket, reader, request: _Request, fault: Optional[str]) -> None:
        op = int(request.query.get("id", "0") or 0)
        record = PostRecord(op, request.headers.get("content-encoding", "").lower())
        with self._lock:
            self.posts.append(record)
        if fault == "stall":
            return self._wait(self.stall_seconds)
        if fault in ("early_2xx", "early_5xx", "reset"):
            if self.release is not None:  # the client fills its buffers and queue meanwhile
                deadline = time.monotonic() + self.stall_seconds
                while not self.release.wait(0.02) and not self._stop.is_set():
                    if time.monotonic() > deadline:
                        break
            if fault == "reset":
                return self._reset(conn)
            if fault == "early_5xx":
                self._fault_state(op, "fault injected: the server failed before the end of the body")
                record.status = 500
                self._json(conn, 500, {"Message": "fault injected: the server failed before "
                                                  "the end of the body"})
            else:
                with self._lock:
                    self.states[op] = {"Status": "Completed", "Result": {"Total": 0}}
                record.status = 200
                self._json(conn, 200, {"Message": "fault injected: finished early"})
            self.answered_early.set()
            return self._drain_and_close(conn, reader)
        if fault in BODY_FAULTS:
            return self._answer_at_array_end(conn, reader, record, fault)
        if fault == "2xx_mid_chunk":
            reader.readline(1024)  # the first chunk's size line
            reader.read(64 << 10)  # a part of its data
            with self._lock:
                self.states[op] = {"Status": "Completed", "Result": {"Total": 0}}
            record.status = 200
            self._json(conn, 200, {"Message": "fault injected: finished in the middle of a chunk"})
            self.answered_early.set()
            self._wait(0.5)  # the client's write is waiting for room
            return self._drain_and_close(conn, reader)
        self._read_body(reader, record, request.headers)
        if fault == "disconnect":
            return
        if fault == "not_http":
            return conn.sendall(NOT_HTTP)
        if fault in ("4xx", "5xx"):
            status = 400 if fault == "4xx" else 500
            self._fault_state(op, f"fault injected: {status} for the bulk insert")
            record.status = status
            return self._json(conn, status, {"Message": f"fault injected: {status} for the bulk insert"})
        if not record.complete:
            self._fault_state(op, "the body was incomplete")
            record.status = 400
            return self._json(conn, 400, {"Message": "the body was incomplete"})
        with self._lock:
            if self.states.get(op, {}).get("Status") == "InProgress":
                self.states[op] = {"Status": "Completed", "Result": {"Total": record.documents}}
        record.status = 200
        if fault == "garbage":
            return self._send(conn, 200, GARBAGE_BODY, "text/html")
        if fault in SHAPES:
            return self._send(conn, 200, SHAPES[fault])
        return self._send(conn, 200)

    @staticmethod
    def _decoder(record: PostRecord) -> object:
        return (zlib.decompressobj(31) if record.encoding == "gzip"
                else _ZstdDecoder() if record.encoding == "zstd" else None)

    def _read_chunks(self, reader, record: PostRecord, decoder, until_array_end: bool = False,
                     after_data: bool = False) -> Optional[bool]:
        """Reads chunks into ``record.body`` (decoded): True at the terminating chunk, None
        when the client stopped first; with ``until_array_end``, False once the body holds a
        whole JSON array (the rest unread, from the CRLF that ends its last chunk on: read
        it with ``after_data``)."""
        while not self._stop.is_set():
            if after_data:  # the CRLF ending a chunk may come in front of the next one
                reader.readline(1024)
            size_line = reader.readline(1024)
            if not size_line:
                return None  # closed before the terminating chunk
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                reader.readline(1024)
                return True
            data = reader.read(size)
            if len(data) < size:
                return None
            after_data = True
            record.body += decoder.decompress(data) if decoder is not None else data
            if until_array_end and self._whole_array(record):
                return False
        return None

    @staticmethod
    def _whole_array(record: PostRecord) -> bool:
        """The body read so far is a whole JSON array: record it complete."""
        if not holds_whole_array(record.body):
            return False
        record.documents = len(json.loads(record.body))
        record.complete = True
        return True

    def _read_body(self, reader, record: PostRecord, headers: Dict[str, str]) -> None:
        """Reads a chunked body to its end (or until the client stops); decodes it."""
        decoder = self._decoder(record)
        if not self._read_chunks(reader, record, decoder):
            return
        if decoder is not None:
            record.body += decoder.flush()
            if not decoder.eof:
                return
        self._whole_array(record)

    def _answer_at_array_end(self, conn: socket.socket, reader, record: PostRecord,
                             fault: str) -> None:
        """The answer of ``fault`` (``BODY_FAULTS``) once the body holds the whole array,
        before its rest is read; then the rest."""
        decoder = self._decoder(record)
        if self._read_chunks(reader, record, decoder, until_array_end=True) is not False:
            record.status = 400  # the array never ended
            self._fault_state(record.op_id, "the body was incomplete")
            return self._json(conn, 400, {"Message": "the body was incomplete"})
        if fault == "garbage_at_array_end":
            os.write(conn.fileno(), NOT_HTTP)  # under TLS, if any: no TLS record either
        else:
            with self._lock:
                if self.states.get(record.op_id, {}).get("Status") == "InProgress":
                    self.states[record.op_id] = {"Status": "Completed",
                                                 "Result": {"Total": record.documents}}
            record.status = 201
            self._send(conn, 201)
        record.answered_before_end = True
        self.answered_at_array_end.set()
        whole = len(record.body)
        ended = self._read_chunks(reader, record, decoder, after_data=True)
        record.end_after_answer = bool(ended and len(record.body) == whole
                                       and (decoder is None or decoder.eof))


def shrink_send_buffers(monkeypatch) -> None:
    """Gives every connection bulkwire's transport makes (plain or TLS) a 32 KiB send buffer,
    like the server's receive buffer: a producer then waits on its queue after ~100 KiB, and
    a server that holds the body answers before the kernel's buffers took all of it."""
    import bulkwire.transport

    original = bulkwire.transport.HttpTransport.connect

    def connect(self, timeout=None):
        conn = original(self, timeout)
        plain = conn.connect

        def connect_small():
            plain()
            conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 32 << 10)

        conn.connect = connect_small
        return conn

    monkeypatch.setattr(bulkwire.transport.HttpTransport, "connect", connect)


def hold_the_end_until(bulk, answered, limit: float = 10.0) -> None:
    """Makes ``bulk`` end its body as a quick sender often does, here every time: the sender
    takes the last buffer (the one with the closing ``]``) before the producer has said it
    was the last, and the producer says so only once ``answered()`` is true (the server
    answered the array's end) or ``limit`` seconds passed. The server's answer then arrives
    after the last byte of the body's data but before the terminating chunk (and, gzip or
    zstd, before the stream's end when it comes as a piece of its own)."""
    writer = bulk._writer
    put = writer._put

    def put_then_hold(piece):
        taken = put(piece)
        if writer._closed:  # close() is handing over the body's last buffer
            deadline = time.monotonic() + limit
            while (len(writer._queue) or not answered()) and time.monotonic() < deadline:
                time.sleep(0.005)
            time.sleep(0.05)  # the answer's bytes reach the client's socket
        return taken

    writer._put = put_then_hold


def accepted(listener: socket.socket, running) -> Iterator[socket.socket]:
    """The connections ``listener`` (a listening socket with a timeout) accepts while
    ``running()`` is true, checked at each timeout; none once the listener is closed."""
    while running():
        try:
            conn, _ = listener.accept()
        except socket.timeout:
            continue
        except OSError:
            return
        yield conn


def read_chunked(reader) -> bytes:
    """A chunked request body read from ``reader`` (a socket's file), to its last chunk."""
    data = bytearray()
    while True:
        size = int(reader.readline().split(b";")[0], 16)
        data += reader.read(size)
        reader.readline()
        if size == 0:
            return bytes(data)


def eventually(predicate, limit: float = 10.0) -> bool:
    """Whether ``predicate()`` became true within ``limit`` seconds (what a server thread
    records after the client has already moved on)."""
    deadline = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True
