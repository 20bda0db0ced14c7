"""The loopback server: a real HTTP/1.1 server on 127.0.0.1 that speaks RavenDB's bulk insert
protocol (:class:`LoopbackServer`), the requests it received (:class:`ReceivedRequest`), and
:func:`serve`, which runs one until interrupted."""
from __future__ import annotations

import json
import re
import socket
import ssl
import threading
import time
import traceback
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple, Union

from .commands import _MarkerCounter, holds_whole_array, parse_commands
from .wire import (MAX_BODY_BYTES, MAX_CHUNK_SIZE, ChunkedReader, GzipInflater, LengthReader,
                   RequestError, ZstdInflater)

_LINGER_SECONDS = 2.0         # after an early error answer: how long to swallow the rest ...
_LINGER_BYTES = 64 << 20      # ... and how much, so the client reads the answer, not a reset

_FAULT_TYPE = "Raven.Client.Documents.Operations.OperationExceptionResult, Raven.Client"
_NO_DATABASE = "Raven.Client.Exceptions.Database.DatabaseDoesNotExistException"
_TIMEOUT = "System.TimeoutException"
_INTERNAL = "System.InvalidOperationException"

_OPERATION_ID = re.compile(r"[0-9]{1,18}\Z")  # fits a signed 64-bit operation id


class ReceivedRequest:
    """One bulk insert request as the server saw it."""

    def __init__(self, op_id: int, headers: Dict[str, str], query: Dict[str, str]) -> None:
        self.op_id = op_id
        self.headers = headers
        self.query = query
        self.wire_chunks: List[int] = []     # size of each HTTP chunk on the wire
        self.wire = bytearray()               # the body as sent (when the server keeps it)
        self.decoded_chunks: List[bytes] = []  # what each chunk decoded to, on arrival
        self.body = bytearray()               # the decoded (uncompressed) body
        self.body_bytes = 0                   # its length (also when the body is not kept)
        self.put_commands = 0                 # PUT commands counted (when the body is not kept)
        self.complete = False                 # the terminating chunk arrived (or, answered at
                                              # the array's end, its closing "]")
        self.answered_before_end = False      # 201 went out before the terminating chunk was read
        self.end_after_answer = False         # ... and then the body's end arrived, well formed
        self.commands: Optional[list] = None  # parsed commands, when complete
        self.error: Optional[str] = None
        self.status: Optional[int] = None     # the status the server answered

    @property
    def succeeded(self) -> bool:
        """The server answered the request 2xx: every command in it is stored."""
        return self.status is not None and 200 <= self.status < 300


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, address: Any, handler: type, recv_buffer: Optional[int],
                 owner: "LoopbackServer") -> None:
        self._recv_buffer = recv_buffer
        self._owner = owner
        super().__init__(address, handler)

    def get_request(self) -> Tuple[socket.socket, Any]:
        connection, address = super().get_request()
        # An answer leaves in more than one write (the handler writes the status line and
        # headers, then the body). With Nagle's algorithm on, a later write waits until the
        # earlier one is acknowledged, and a client delays that acknowledgement (about 40 ms
        # on Linux) on a kept-alive connection: every answer would arrive that late.
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        context = self._owner.ssl_context
        if context is not None:  # the handshake runs on the handler's thread, under its timeout
            connection = context.wrap_socket(connection, server_side=True,
                                             do_handshake_on_connect=False)
        return connection, address

    def server_bind(self) -> None:
        if self._recv_buffer:  # accepted sockets inherit it: a small window stalls sooner
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._recv_buffer)
        super().server_bind()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # an exception escaped a handler (the dispatcher catches everything it runs, so this
        # is the standard library's part): recorded, never just printed
        self._owner._unexpected(traceback.format_exc())


def _error_body(message: str, error_type: str) -> dict:
    return {"Type": error_type, "Message": message, "Error": message + "\n   at LoopbackServer"}


def _operation_id(query: Dict[str, List[str]]) -> int:
    values = query.get("id")
    if not values:
        raise RequestError("the id parameter is missing (the operation id from "
                           "operations/next-operation-id)")
    if len(values) > 1:
        raise RequestError("the id parameter is given more than once")
    if not _OPERATION_ID.match(values[0]):
        raise RequestError(f"the id parameter must be a non-negative integer operation id, "
                           f"not {values[0][:40]!r}")
    return int(values[0])


def _content_length(values: List[str]) -> int:
    distinct = {value.strip() for value in values}
    if len(distinct) > 1:
        raise RequestError("conflicting Content-Length headers")
    value = distinct.pop()
    if not value.isascii() or not value.isdigit():
        raise RequestError(f"Content-Length must be a non-negative integer, not {value[:40]!r}")
    if len(value) > 20:
        raise RequestError(f"a Content-Length of {len(value)} digits is larger than the server "
                           f"accepts", 413)
    return int(value)


class LoopbackServer:
    """A real HTTP/1.1 server on 127.0.0.1 implementing the bulk insert endpoints.

    ``timeout``: seconds a connection may stay silent (waiting for a request, or in the middle
    of a body) before it is closed (a body cut short is answered 408). ``max_chunk_size``,
    ``max_body_bytes``: larger chunks, and bodies (on the wire or decoded), are answered 413.
    ``unexpected_errors`` lists the tracebacks of failures inside the server itself (each
    answered 500, its operation faulted); a correct server never has any.

    ``ssl_context`` (a server-side :class:`ssl.SSLContext`): the server speaks HTTPS (``url``
    says ``https://``); with ``verify_mode = ssl.CERT_REQUIRED`` it requires a client
    certificate. Handshakes that fail are listed in ``tls_failures`` (OpenSSL's reasons).
    ``connections_accepted`` counts the TCP connections clients made.

    ``answer_at_array_end`` (needs ``keep_body``): a bulk insert is answered 201 as soon as
    the decoded body holds the whole JSON array (its closing ``]``), before the rest of the
    body (a compressed stream's end, the terminating chunk) is read, as RavenDB answers; the
    rest is read afterwards (``ReceivedRequest.answered_before_end``, ``end_after_answer``).
    """

    HILO_RANGE = 32  #: ids per HiLo range (small, so that clients ask again and again)

    def __init__(self, database: str = "db", *, keep_decoded_chunks: bool = True,
                 parse: bool = True, keep_wire: bool = False, keep_body: bool = True,
                 recv_buffer: Optional[int] = None, port: int = 0, timeout: float = 30.0,
                 max_chunk_size: int = MAX_CHUNK_SIZE, max_body_bytes: int = MAX_BODY_BYTES,
                 ssl_context: Optional[ssl.SSLContext] = None,
                 answer_at_array_end: bool = False) -> None:
        if answer_at_array_end and not keep_body:
            raise ValueError("answer_at_array_end needs keep_body: the array's end is found "
                             "in the body it keeps")
        self.database = database
        self.ssl_context = ssl_context
        self.tls_failures: List[str] = []
        self.keep_decoded_chunks = keep_decoded_chunks
        self.parse = parse
        self.documents: Dict[str, Any] = {}
        self.counters: Dict[str, Dict[str, int]] = {}  # document id -> counter -> value
        # (document id, series name) -> [(unix ms, values, tag)] in the order they arrived
        self.time_series: Dict[Tuple[str, str], List[tuple]] = {}
        # (document id, attachment name) -> (content type or None, bytes)
        self.attachments: Dict[Tuple[str, str], Tuple[Optional[str], bytes]] = {}
        self.requests: List[ReceivedRequest] = []
        self.log: List[str] = []  # "METHOD path" of every request
        self.operations: Dict[int, dict] = {}
        self.killed: set = set()
        self.unexpected_errors: List[str] = []
        self.timeout = timeout
        self.max_chunk_size = max_chunk_size
        self.max_body_bytes = max_body_bytes
        self._lock = threading.Lock()
        self._connections: set = set()
        self.connections_accepted = 0  # TCP connections taken, over the server's life
        self._next_op = 0
        self._hilo: Dict[str, int] = {}  # collection tag -> the last id handed out
        self._running = threading.Event()
        self._running.set()
        self._resume = threading.Event()
        self._resume.set()
        self.stalled_at: Optional[int] = None  # decoded bytes received when the stall began
        self.stall_after_bytes: Optional[int] = None
        self.fail_after_bytes: Optional[int] = None
        self.fail_message = "Simulated failure on the server"
        self.finish_after_bytes: Optional[int] = None
        self.read_delay = 0.0  # seconds to sleep after each chunk (a slow server)
        self.answer_at_array_end = answer_at_array_end
        self.keep_wire = keep_wire  # keep each request's body exactly as it came off the wire
        self.node_tag = "A"  # its cluster tag: in next-operation-id's answer and the topology
        self.version = "7.2.0"  # the RavenDB version GET /build/version reports
        # GET /topology: None answers this node alone; a callable returns the answer (a JSON
        # value, or bytes sent as they are)
        self.topology: Optional[Any] = None
        self.down_status: Optional[int] = None  # a failing node: every request gets this status
        self.journal: Optional[list] = None  # (url, "METHOD path") of every request, shared
        self.keep_body = keep_body  # False: count bytes and PUT commands only (benchmarks)
        if not keep_body:
            self.parse = self.keep_decoded_chunks = False
        self._httpd = _Server(("127.0.0.1", port), self._handler_class(), recv_buffer, self)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="bulkwire-loopback", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"{'https' if self.ssl_context is not None else 'http'}://{host}:{port}"

    # ---- control ----

    def stall(self, after_bytes: int = 0) -> None:
        """Stop reading bulk insert bodies once ``after_bytes`` decoded bytes have arrived."""
        self.stall_after_bytes = after_bytes
        self._resume.clear()

    def resume(self) -> None:
        self.stall_after_bytes = None
        self._resume.set()

    @property
    def stalled(self) -> bool:
        return self.stalled_at is not None and not self._resume.is_set()

    def wait_stalled(self, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.stalled:
                return True
            time.sleep(0.01)
        return False

    def close(self) -> None:
        """Stop serving; open connections are shut down, so handlers waiting on a silent
        client end at once (waits up to 5 s for them)."""
        self._running.clear()
        self._resume.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by its handler
        deadline = time.monotonic() + 5.0
        while self._connections and time.monotonic() < deadline:
            time.sleep(0.005)
        self._thread.join(5)

    def __enter__(self) -> "LoopbackServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _unexpected(self, trace: str) -> None:
        with self._lock:
            self.unexpected_errors.append(trace)

    # ---- request handling ----

    def _handler_class(self) -> type:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = server.timeout  # a silent client never holds a handler forever

            def setup(self) -> None:
                self.loopback_tls_failed = False
                with server._lock:
                    server._connections.add(self.request)
                    server.connections_accepted += 1
                if isinstance(self.request, ssl.SSLSocket):
                    try:
                        self.request.settimeout(server.timeout)
                        self.request.do_handshake()
                    except (ssl.SSLError, OSError) as exc:  # refused: recorded, not a server failure
                        self.loopback_tls_failed = True
                        with server._lock:
                            server.tls_failures.append(getattr(exc, "reason", None) or str(exc))
                super().setup()

            def handle(self) -> None:
                if self.loopback_tls_failed:
                    return
                try:
                    super().handle()
                except ConnectionError:
                    # reset or broken while the standard library read a request line or
                    # headers (a client killed between requests): the client is gone, and
                    # that is no failure of the server (the dispatcher handles a body cut)
                    self.close_connection = True

            def finish(self) -> None:
                try:
                    super().finish()
                except OSError:
                    pass  # the client is gone; nothing left to flush to it
                finally:
                    with server._lock:
                        server._connections.discard(self.connection)

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def send_error(self, code: int, message: Optional[str] = None,
                           explain: Optional[str] = None) -> None:
                # the standard library's refusals (bad request line, headers too long, unknown
                # method) in the server's own error shape
                text = message or explain or self.responses.get(code, ("error",))[0]
                self.loopback_op = self.loopback_request = None  # nothing of an earlier request
                self.loopback_answered = False
                self.loopback_unread_body = True  # where the stream stands is unknown
                if self.request_version == "HTTP/0.9":  # the line did not parse: no version yet
                    self.request_version = self.protocol_version  # answer with a status line
                server._refuse(self, RequestError(f"{text} (HTTP {code})", code))

            def do_GET(self) -> None:
                server._dispatch(self, "GET")

            def do_POST(self) -> None:
                server._dispatch(self, "POST")

            def do_PUT(self) -> None:
                server._dispatch(self, "PUT")

            def do_DELETE(self) -> None:
                server._dispatch(self, "DELETE")

            def do_PATCH(self) -> None:
                server._dispatch(self, "PATCH")

        return Handler

    def _reply(self, h: BaseHTTPRequestHandler, status: int, payload: Any, *, close: bool = False) -> None:
        """Answers; a request whose body was not read to its end is answered with
        ``Connection: close`` (its bytes cannot be taken for the next request) and lingered."""
        unread = getattr(h, "loopback_unread_body", False)
        close = close or unread
        body = (payload if isinstance(payload, bytes) else
                json.dumps(payload).encode() if payload is not None else b"")
        h.loopback_answered = True  # type: ignore[attr-defined]
        h.send_response(status)
        h.send_header("Content-Type", "application/json; charset=utf-8")
        h.send_header("Content-Length", str(len(body)))
        if close:
            h.send_header("Connection", "close")
            h.close_connection = True
        h.end_headers()
        if getattr(h, "command", None) != "HEAD":
            h.wfile.write(body)
        h.wfile.flush()
        if unread:
            self._linger(h)

    def _dispatch(self, h: BaseHTTPRequestHandler, method: str) -> None:
        """Runs one request; whatever goes wrong ends in an answer (and a faulted operation)."""
        h.loopback_op = None            # type: ignore[attr-defined]  # set once it owns one
        h.loopback_request = None       # type: ignore[attr-defined]
        h.loopback_answered = False     # type: ignore[attr-defined]
        h.loopback_unread_body = (      # type: ignore[attr-defined]
            bool(h.headers.get_all("Transfer-Encoding"))
            or any(v.strip() not in ("", "0") for v in h.headers.get_all("Content-Length") or []))
        with self._lock:
            self.log.append(f"{method} {h.path}")
        if self.journal is not None:
            self.journal.append((self.url, f"{method} {h.path}"))
        try:
            self._route(h, method)
        except RequestError as error:
            self._refuse(h, error)
        except TimeoutError:
            self._refuse(h, RequestError(f"the client sent nothing for {self.timeout:g} s in the "
                                         f"middle of the request", 408, _TIMEOUT))
        except ConnectionError:
            self._refuse(h, RequestError("the client closed the connection in the middle of the "
                                         "request"))
        except OSError as exc:
            if self._running.is_set():  # not the server's own shutdown closing it
                self._unexpected(traceback.format_exc())
            self._refuse(h, RequestError(f"the connection failed: {exc!r}", 500, _INTERNAL))
        except Exception as exc:
            self._unexpected(traceback.format_exc())
            self._refuse(h, RequestError(f"the loopback server failed: {exc!r}", 500, _INTERNAL))

    def _refuse(self, h: BaseHTTPRequestHandler, error: RequestError) -> None:
        """Faults the request's operation, then answers the error and closes the connection."""
        op = getattr(h, "loopback_op", None)
        request: Optional[ReceivedRequest] = getattr(h, "loopback_request", None)
        if request is not None:
            request.error = error.message
            request.status = error.status
        if op is not None:
            self._fault(op, error.message, error.status)  # before the answer: the client asks next
        h.close_connection = True
        if getattr(h, "loopback_answered", False):
            return  # an answer already went out; the connection just ends
        try:
            self._reply(h, error.status, _error_body(error.message, error.error_type), close=True)
        except OSError:
            pass  # the client is gone: nobody to answer

    def _linger(self, h: BaseHTTPRequestHandler) -> None:
        """After an answer sent before the body was read: end our side, then swallow what the
        client still sends for a bounded time. Closing with unread data would reset the
        connection, and the reset can reach the client before it has read the answer."""
        connection = h.connection  # type: ignore[attr-defined]
        try:
            connection.shutdown(socket.SHUT_WR)
        except OSError:
            return
        deadline = time.monotonic() + _LINGER_SECONDS
        swallowed = 0
        while swallowed < _LINGER_BYTES and self._running.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                connection.settimeout(left)
                data = connection.recv(1 << 16)
            except OSError:  # timeout, reset: either way it is over
                break
            if not data:
                break
            swallowed += len(data)

    def _route(self, h: BaseHTTPRequestHandler, method: str) -> None:
        parsed = urllib.parse.urlsplit(h.path)
        path = parsed.path
        try:
            query = urllib.parse.parse_qs(parsed.query, keep_blank_values=True, errors="strict",
                                          max_num_fields=64)
        except ValueError as exc:
            raise RequestError(f"bad query string: {exc}") from None
        if self.down_status is not None:
            raise RequestError(f"node {self.node_tag} is failing", self.down_status, _INTERNAL)
        if path.startswith("/databases/"):
            name, _, rest = path[len("/databases/"):].partition("/")
            try:
                database = urllib.parse.unquote(name, errors="strict")
            except UnicodeDecodeError:
                raise RequestError(f"the database name {name[:60]!r} is not percent-encoded "
                                   f"UTF-8") from None
            if database != self.database:
                raise RequestError(f"database {database[:60]!r} does not exist (this server has "
                                   f"{self.database!r})", 404, _NO_DATABASE)
            rest = "/" + rest
            if method == "GET" and rest == "/operations/next-operation-id":
                with self._lock:
                    self._next_op += 1
                    op = self._next_op
                    self.operations[op] = {"Status": "InProgress", "Result": None}
                return self._reply(h, 200, {"Id": op, "NodeTag": self.node_tag})
            if method == "POST" and rest == "/bulk_insert":
                return self._bulk_insert(h, query)
            if method == "GET" and rest == "/operations/state":
                op = _operation_id(query)
                with self._lock:
                    state = self.operations.get(op)
                if state is None:
                    raise RequestError(f"there is no operation {op}", 404)
                return self._reply(h, 200, state)
            if method == "POST" and rest == "/operations/kill":
                op = _operation_id(query)
                with self._lock:
                    if op not in self.operations:
                        raise RequestError(f"there is no operation {op}", 404)
                    self.killed.add(op)
                    self.operations[op] = {"Status": "Canceled", "Result": None}
                return self._reply(h, 200, None)
            if method == "GET" and rest == "/topology":
                return self._reply(h, 200, self._topology())
            if method == "GET" and rest == "/hilo/next":
                return self._reply(h, 200, self._hilo_next(query))
            if method == "PUT" and rest == "/hilo/return":
                return self._reply(h, 200, None)  # unused ids stay unused, as a server may
        elif method == "GET" and path == "/topology":
            names = query.get("name") or [""]
            if names[0] != self.database:
                raise RequestError(f"database {names[0][:60]!r} does not exist (this server has "
                                   f"{self.database!r})", 404, _NO_DATABASE)
            return self._reply(h, 200, self._topology())
        elif method == "GET" and path == "/cluster/topology":
            return self._reply(h, 200, {"Topology": {"TopologyId": "t", "AllNodes": {"A": self.url},
                                                     "Members": {"A": self.url}, "Promotables": {},
                                                     "Watchers": {}, "LastNodeId": "A", "Etag": 1},
                                        "Leader": "A", "NodeTag": "A", "Etag": 1, "Status": {}})
        elif method == "GET" and path == "/_loopback/last":
            return self._reply(h, 200, self.last_request_summary())
        elif method == "GET" and path.startswith("/build/version"):
            major, minor = (self.version.split(".") + ["0"])[:2]
            return self._reply(h, 200, {"BuildVersion": int(major) * 10000 + int(minor) * 1000,
                                        "ProductVersion": f"{major}.{minor}",
                                        "CommitHash": "loopback", "FullVersion": self.version})
        raise RequestError(f"not implemented by the loopback server: {method} {path[:200]}", 404)

    def last_request_summary(self) -> dict:
        """What the last bulk insert request looked like (also at GET /_loopback/last)."""
        if not self.requests:
            return {}
        r = self.requests[-1]
        return {"op_id": r.op_id, "complete": r.complete, "error": r.error,
                "wire_chunks": len(r.wire_chunks), "wire_bytes": sum(r.wire_chunks),
                "body_bytes": r.body_bytes,
                "documents": len(r.commands) if r.commands is not None else r.put_commands,
                "content_encoding": r.headers.get("Content-Encoding")}

    def _hilo_next(self, query: Dict[str, List[str]]) -> dict:
        """The next range of ids of a collection (``tag``), as the database hands them out:
        ``HILO_RANGE`` ids per range, each tag counting on its own, ids ``<tag><separator><n>-A``
        (the prefix is the tag and the client's ``identityPartsSeparator``)."""
        tag = query.get("tag", [""])[-1]
        separator = query.get("identityPartsSeparator", ["/"])[-1] or "/"
        with self._lock:
            low = self._hilo.get(tag, 0) + 1
            self._hilo[tag] = high = low + self.HILO_RANGE - 1
        return {"Prefix": f"{tag}{separator}", "Low": low, "High": high,
                "LastSize": self.HILO_RANGE, "ServerTag": "A",
                "LastRangeAt": "2020-01-01T00:00:00.0000000"}

    def _topology(self) -> Any:
        if self.topology is not None:
            return self.topology()
        return {"Nodes": [{"Url": self.url, "ClusterTag": self.node_tag, "Database": self.database,
                           "ServerRole": "Member"}], "Etag": 1}

    def _body_reader(self, h: BaseHTTPRequestHandler,
                     keeps: bool) -> Tuple[Union[ChunkedReader, LengthReader],
                                           Union[GzipInflater, ZstdInflater, None]]:
        """The reader and inflater the request's headers call for (refused when unsupported)."""
        encodings = h.headers.get_all("Transfer-Encoding") or []
        lengths = h.headers.get_all("Content-Length") or []
        content_encoding = ",".join(h.headers.get_all("Content-Encoding") or []).strip().lower()
        if content_encoding not in ("", "identity", "gzip", "zstd"):
            raise RequestError(f"Content-Encoding {content_encoding[:40]!r} is not supported "
                               f"(gzip, zstd or none)", 415)
        inflater: Union[GzipInflater, ZstdInflater, None] = (
            GzipInflater() if content_encoding == "gzip"
            else ZstdInflater() if content_encoding == "zstd" else None)
        if encodings:
            transfer = ",".join(encodings).strip().lower()
            if transfer != "chunked":
                raise RequestError(f"Transfer-Encoding {transfer[:40]!r} is not supported "
                                   f"(chunked only)")
            if lengths:
                raise RequestError("both Transfer-Encoding and Content-Length are given")
            return ChunkedReader(h.rfile, max_chunk_size=self.max_chunk_size,
                                 reuse_buffer=not keeps and inflater is None), inflater
        length = _content_length(lengths) if lengths else 0
        if length > self.max_body_bytes:
            raise RequestError(f"a body of {length} bytes is larger than the server accepts "
                               f"({self.max_body_bytes} bytes)", 413)
        return LengthReader(h.rfile, length), inflater

    def _bulk_insert(self, h: BaseHTTPRequestHandler, query: Dict[str, List[str]]) -> None:
        op = _operation_id(query)
        request = ReceivedRequest(op, dict(h.headers.items()),
                                  {key: values[-1] for key, values in query.items()})
        h.loopback_request = request  # type: ignore[attr-defined]
        with self._lock:
            self.requests.append(request)
            if op in self.killed:  # killed before the body arrived: dropped, as when killed mid-body
                request.error = "killed"
                h.close_connection = True
                return
            state = self.operations.get(op)
            if state is None:  # the id was not handed out here; the server takes it as given
                self.operations[op] = {"Status": "InProgress", "Result": None}
            elif state["Status"] != "InProgress":
                raise RequestError(f"operation {op} has already ended ({state['Status']}): ask "
                                   f"operations/next-operation-id for a new one", 409)
        h.loopback_op = op  # type: ignore[attr-defined]  # from here on, a refusal faults it
        keeps = self.keep_body or self.keep_wire or self.keep_decoded_chunks
        reader, inflater = self._body_reader(h, keeps)
        counter = None if self.keep_body else _MarkerCounter()
        wire_bytes = 0
        while self._running.is_set():
            if self.stall_after_bytes is not None and request.body_bytes >= self.stall_after_bytes:
                self.stalled_at = request.body_bytes
                while not self._resume.wait(0.05):
                    if not self._running.is_set():
                        break
                self.stalled_at = None
            if op in self.killed:
                request.error = "killed"
                h.close_connection = True
                return
            data = reader.read_chunk()
            if data is None:
                h.loopback_unread_body = False  # type: ignore[attr-defined]
                break
            wire_bytes += len(data)
            if wire_bytes > self.max_body_bytes:
                raise RequestError(f"the body is larger than the server accepts "
                                   f"({self.max_body_bytes} bytes on the wire)", 413)
            request.wire_chunks.append(len(data))
            if self.keep_wire:
                request.wire += data
            decoded_pieces = []
            for piece in (inflater.feed(data) if inflater is not None else (data,)):
                request.body_bytes += len(piece)
                if request.body_bytes > self.max_body_bytes:
                    raise RequestError(f"the body is larger than the server accepts "
                                       f"({self.max_body_bytes} bytes decoded)", 413)
                if self.keep_decoded_chunks:
                    decoded_pieces.append(piece)
                if self.keep_body:
                    request.body += piece
                else:
                    counter.feed(piece)  # type: ignore[union-attr]
            if self.keep_decoded_chunks:
                request.decoded_chunks.append(b"".join(decoded_pieces))
            if counter is not None:
                request.put_commands = counter.count
            if self.read_delay:
                time.sleep(self.read_delay)
            if self.fail_after_bytes is not None and request.body_bytes >= self.fail_after_bytes:
                raise RequestError(self.fail_message, 500, "Raven.Server.BulkInsertFailed")
            if self.finish_after_bytes is not None and request.body_bytes >= self.finish_after_bytes:
                request.error = "finished early"
                self._complete(op)
                return self._reply(h, 200, {"Message": "The server finished the bulk insert early"},
                                   close=True)
            if self.answer_at_array_end and holds_whole_array(request.body):
                return self._answer_at_array_end(h, request, reader, inflater)
        if not self._running.is_set():  # closed while reading: the body did not end
            request.error = "the server shut down before the end of the body"
            h.close_connection = True
            return
        request.complete = True
        if inflater is not None:
            inflater.finish()
        if self.parse:
            commands = parse_commands(request.body)
            request.commands = commands
            with self._lock:
                for command in commands:
                    self._record(command)
        self._complete(op, request)
        request.status = 201  # Created, with no body: what RavenDB answers a bulk insert
        self._reply(h, 201, None)

    def _answer_at_array_end(self, h: BaseHTTPRequestHandler, request: ReceivedRequest,
                             reader: Union[ChunkedReader, LengthReader],
                             inflater: Union[GzipInflater, ZstdInflater, None]) -> None:
        """The body's array has ended: its commands are kept and 201 goes out at once, before
        the rest of the body is read; then the rest (a compressed stream's end, the
        terminating chunk) is read, as the server's HTTP layer reads it, and the connection
        closed. ``request.end_after_answer`` says whether that rest arrived, well formed."""
        request.complete = True
        commands = parse_commands(request.body) if self.parse else None
        request.commands = commands
        with self._lock:
            for command in commands or ():
                self._record(command)
        self._complete(request.op_id, request)
        request.status = 201
        h.loopback_unread_body = False  # type: ignore[attr-defined]  # read below, not lingered
        self._reply(h, 201, None, close=True)
        request.answered_before_end = True
        try:
            while (data := reader.read_chunk()) is not None:
                if any(inflater.feed(data) if inflater is not None else (data,)):
                    return  # data after the array's end
            if inflater is not None:
                inflater.finish()
        except (RequestError, OSError):
            return  # the client stopped sending: the answer was in
        request.end_after_answer = True

    def _record(self, command: dict) -> None:
        """Keeps what a parsed command did (with the lock held)."""
        kind, doc_id = command["Type"], command["Id"]
        if kind == "PUT":
            self.documents[doc_id] = command["Document"]
        elif kind == "Counters":
            counters = self.counters.setdefault(command["Counters"]["DocumentId"], {})
            for op in command["Counters"]["Operations"]:
                counters[op["CounterName"]] = counters.get(op["CounterName"], 0) + op["Delta"]
        elif kind == "TimeSeriesBulkInsert":
            series = command["TimeSeries"]
            entries = self.time_series.setdefault((doc_id, series["Name"]), [])
            for entry in series["Appends"]:
                n = entry[1]
                entries.append((entry[0], entry[2:2 + n], entry[2 + n] if len(entry) > 2 + n else None))
        else:
            self.attachments[(doc_id, command["Name"])] = (command.get("ContentType"), command["Bytes"])

    def _fault(self, op: int, message: str, status: int = 500) -> None:
        with self._lock:
            state = self.operations.get(op)
            if state is not None and state["Status"] != "InProgress":
                return  # a killed operation stays killed, a completed one completed, whatever
                        # its connection does afterwards; the first fault stands
            self.operations[op] = {"Status": "Faulted",
                                   "Result": {"$type": _FAULT_TYPE, "Message": message,
                                              "Error": message + "\n   at LoopbackServer",
                                              "StatusCode": status}}

    def _complete(self, op: int, request: Optional[ReceivedRequest] = None) -> None:
        """Marks the operation Completed, with RavenDB's result: ``Total`` commands, and how
        many of each kind (the counting mode counts PUT commands only)."""
        kinds = {"PUT": 0, "AttachmentPUT": 0, "Counters": 0, "TimeSeriesBulkInsert": 0}
        if request is not None:
            if request.commands is not None:
                for command in request.commands:
                    kinds[command["Type"]] += 1
            else:
                kinds["PUT"] = request.put_commands
        result = {"Total": sum(kinds.values()), "DocumentsProcessed": kinds["PUT"],
                  "AttachmentsProcessed": kinds["AttachmentPUT"],
                  "CountersProcessed": kinds["Counters"],
                  "TimeSeriesProcessed": kinds["TimeSeriesBulkInsert"]}
        with self._lock:
            if self.operations.get(op, {}).get("Status") == "InProgress":
                self.operations[op] = {"Status": "Completed", "Result": result}



def serve(port: int = 0, database: str = "db", **options: Any) -> None:
    """Run a server until interrupted, printing its URL first; ``options`` are
    :class:`LoopbackServer`'s. The command line (``bulkwire serve``, which ``python -m
    bulkwire.testing`` also runs) has its own defaults, defined once in :mod:`bulkwire.cli`."""
    with LoopbackServer(database, port=port, **options) as server:
        print(server.url, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
