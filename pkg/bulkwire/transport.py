"""HTTP/1.1 transport for the document database's bulk insert protocol (SPEC §3), on the
standard library's ``http.client``.

* ``GET  {url}/databases/{db}/operations/next-operation-id``  -> ``{"Id": n, "NodeTag": "A"}``
* ``POST {url}/databases/{db}/bulk_insert?id={n}&skipOverwriteIfUnchanged={true|false}``,
  ``Transfer-Encoding: chunked`` (``Content-Encoding: gzip`` when compressing)
* ``GET  {url}/databases/{db}/operations/state?id={n}``  (the server's error after a failure)
* ``POST {url}/databases/{db}/operations/kill?id={n}``    (abort)

The body is written by :class:`BodySender` on its own thread: one HTTP chunk per buffer the
:class:`~bulkwire.bulk.BulkWriter` hands over, written from the buffer itself (no copy). On a
plain TCP socket the C pump (``_core.pump_body``) sends the whole body with the GIL released,
so the sender never waits for the encoding thread to let go of the GIL; otherwise (TLS) the
pieces of ``BulkWriter.chunks()`` are sent with ``socket.sendmsg``/``sendall``.
"""
from __future__ import annotations

import http.client
import json
import select
import socket
import threading
import urllib.parse
from typing import Any, Callable, Iterable, Optional, Tuple

__all__ = ["HttpTransport", "BodySender", "ServerError", "EarlyResponse", "error_message"]


class ServerError(Exception):
    """The server answered with an error status."""

    def __init__(self, status: int, body: bytes) -> None:
        self.status = status
        self.body = body
        super().__init__(f"HTTP {status}: {error_message(body) or body[:200]!r}")


class EarlyResponse(Exception):
    """The server answered the bulk insert request before the body was complete."""

    def __init__(self, status: int, body: bytes) -> None:
        self.status = status
        self.body = body
        super().__init__(f"the server finished the bulk insert request before all of the body "
                         f"was sent (HTTP {status}: {error_message(body) or body[:200]!r})")


def error_message(body: bytes) -> Optional[str]:
    """The message in a server error body (``{"Message": ..., "Error": ...}``), if any."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    if isinstance(data, dict):
        for key in ("Message", "Error"):
            if isinstance(data.get(key), str) and data[key]:
                return data[key]
    return None


class HttpTransport:
    """Requests of the bulk insert protocol against one server and database."""

    def __init__(self, url: str, database: str, *, timeout: Optional[float] = 300.0) -> None:
        if not isinstance(url, str):
            raise TypeError(f"url must be a str, not {type(url).__name__}")
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"url must be an http:// or https:// URL, not {url!r}")
        if not isinstance(database, str):
            raise TypeError(f"database must be a str, not {type(database).__name__}")
        if not database or database.isspace():
            raise ValueError("database must be a non-empty name")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or timeout <= 0):
            raise ValueError(f"timeout must be a positive number of seconds or None, not {timeout!r}")
        self.scheme = parsed.scheme
        self.host = parsed.hostname
        self.port = parsed.port
        self.timeout = timeout
        self.base = (parsed.path.rstrip("/") + "/databases/" +
                     urllib.parse.quote(database, safe=""))

    def connect(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        return cls(self.host, self.port, timeout=self.timeout)

    def request(self, method: str, path: str, *, timeout: Optional[float] = None) -> Tuple[int, bytes]:
        conn = self.connect()
        if timeout is not None:
            conn.timeout = timeout
        try:
            conn.request(method, self.base + path, headers={"Accept": "application/json"})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def next_operation_id(self) -> Tuple[int, Optional[str]]:
        status, body = self.request("GET", "/operations/next-operation-id")
        if status != 200:
            raise ServerError(status, body)
        data = json.loads(body)
        return int(data["Id"]), data.get("NodeTag")

    def operation_state(self, op_id: int, *, timeout: float = 5.0) -> Optional[dict]:
        status, body = self.request("GET", f"/operations/state?id={op_id}", timeout=timeout)
        if status != 200:
            return None
        data = json.loads(body)
        return data if isinstance(data, dict) else None

    def operation_error(self, op_id: int) -> Optional[str]:
        """The error the server recorded for the operation, when it is faulted."""
        try:
            state = self.operation_state(op_id)
        except (OSError, ValueError, http.client.HTTPException):
            return None  # the server is probably gone; the transport's error stands
        if not state or state.get("Status") != "Faulted":
            return None
        result = state.get("Result") or {}
        for key in ("Message", "Error"):
            if isinstance(result.get(key), str) and result[key]:
                return result[key]
        return "the server reported the operation as faulted"

    def kill(self, op_id: int) -> None:
        status, body = self.request("POST", f"/operations/kill?id={op_id}", timeout=10.0)
        if status >= 300:
            raise ServerError(status, body)

    def bulk_insert_path(self, op_id: int, skip_overwrite_if_unchanged: bool) -> str:
        flag = "true" if skip_overwrite_if_unchanged else "false"
        return f"/bulk_insert?id={op_id}&skipOverwriteIfUnchanged={flag}"


class BodySender(threading.Thread):
    """Streams the body on its own thread: one chunked POST, one HTTP chunk per piece.

    ``on_error(exc)`` is called once if anything goes wrong (including the server answering
    before the body is complete); ``result`` holds ``(status, body)`` on success.
    """

    def __init__(self, transport: HttpTransport, path: str, pieces: Iterable[Any], *,
                 gzip: bool, on_error: Callable[[BaseException], None],
                 pump: Optional[Callable[[int, Optional[float]], bool]] = None) -> None:
        super().__init__(name="bulkwire-sender", daemon=True)
        self._transport = transport
        self._path = path
        self._pieces = pieces
        # pump(fd, timeout) -> answered early: sends the whole body itself, from C without
        # the GIL (BulkWriter._pump); used on plain TCP sockets, pieces on others (TLS)
        self._pump = pump
        self._gzip = gzip
        self._on_error = on_error
        self._lock = threading.Lock()
        self._sock: Optional[socket.socket] = None
        self._cancelled = False
        self.result: Optional[Tuple[int, bytes]] = None
        self.error: Optional[BaseException] = None

    def cancel(self) -> None:
        """Abort the request: shut the socket down so that a blocked send returns."""
        with self._lock:
            self._cancelled = True
            sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def run(self) -> None:
        try:
            self.result = self._post()
        except BaseException as exc:  # noqa: BLE001 - reported to the producer, never lost
            self.error = exc
            self._on_error(exc)

    def _post(self) -> Tuple[int, bytes]:
        conn = self._transport.connect()
        try:
            conn.putrequest("POST", self._transport.base + self._path, skip_accept_encoding=True)
            conn.putheader("Content-Type", "application/json; charset=utf-8")
            conn.putheader("Transfer-Encoding", "chunked")
            if self._gzip:
                conn.putheader("Content-Encoding", "gzip")
            conn.endheaders()
            sock = conn.sock
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._sock = sock
                cancelled = self._cancelled
            if cancelled:
                raise ConnectionAbortedError("the bulk insert was aborted")
            try:
                if self._pump is not None and type(sock) is socket.socket:
                    if self._pump(sock.fileno(), sock.gettimeout()):
                        raise self._early(conn)
                else:
                    self._send_pieces(conn, sock)
            except (BrokenPipeError, ConnectionResetError) as exc:
                # the server closed its side: read what it said, if anything
                try:
                    early = self._early(conn)
                except Exception:  # noqa: BLE001
                    raise exc from None
                raise early from exc
            response = conn.getresponse()
            body = response.read()
            if response.status >= 300:
                raise ServerError(response.status, body)
            return response.status, body
        finally:
            with self._lock:
                self._sock = None
            conn.close()

    def _send_pieces(self, conn: http.client.HTTPConnection, sock: socket.socket) -> None:
        """The body from an iterable of pieces (any transport; TLS)."""
        send_chunk = _chunk_sender(sock)
        separator = b""
        for piece in self._pieces:
            if _answered(sock):
                raise self._early(conn)
            # the CRLF that ends the previous chunk rides with this chunk's size line; size
            # line and piece leave in one system call
            send_chunk(separator + b"%x\r\n" % len(piece), piece)
            del piece
            separator = b"\r\n"
        sock.sendall(separator + b"0\r\n\r\n")

    @staticmethod
    def _early(conn: http.client.HTTPConnection) -> EarlyResponse:
        response = conn.getresponse()
        body = response.read()
        if response.status >= 300:
            return ServerError(response.status, body)  # type: ignore[return-value]
        return EarlyResponse(response.status, body)


def _chunk_sender(sock: socket.socket) -> Callable[[bytes, Any], None]:
    """send(head, piece): head then piece, gathered (``sendmsg``) and without copying the
    piece; partial sends continue where they stopped."""
    if type(sock) is not socket.socket:  # TLS (no sendmsg): two sendall calls
        def send_both(head: bytes, piece: Any) -> None:
            sock.sendall(head)
            sock.sendall(piece)
        return send_both

    def send_gathered(head: bytes, piece: Any) -> None:
        sent = sock.sendmsg([head, piece])
        total = len(head) + len(piece)
        if sent < total:
            rest = memoryview(piece).cast("B")
            if sent < len(head):
                sock.sendall(head[sent:])
                sent = len(head)
            sock.sendall(rest[sent - len(head):])
    return send_gathered


def _answered(sock: socket.socket) -> bool:
    """True when the server already sent something (a response) mid-body."""
    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable)
