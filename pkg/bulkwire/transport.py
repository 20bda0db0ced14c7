"""HTTP/1.1 transport for the document database's bulk insert protocol (RavenDB's): the
standard library's ``http.client`` connects; the requests' heads are written as it writes
them (:meth:`HttpTransport.head`), and the answers read by its rules (:class:`_Answer`).

* ``GET  {url}/databases/{db}/operations/next-operation-id``  -> ``{"Id": n, "NodeTag": "A"}``
* ``POST {url}/databases/{db}/bulk_insert?id={n}&skipOverwriteIfUnchanged={true|false}``,
  ``Transfer-Encoding: chunked`` (``Content-Encoding: gzip`` or ``zstd`` when compressing)
* ``GET  {url}/databases/{db}/operations/state?id={n}``  (the server's error after a failure)
* ``POST {url}/databases/{db}/operations/kill?id={n}``    (abort)

The body is written by :class:`BodySender` on a thread of its own, from one :class:`Body` (a
:class:`~bulkwire.bulk.BulkWriter`): one HTTP chunk per buffer the writer hands over, framed
by the C core. On a plain TCP socket, and over bulkwire's own TLS (:mod:`bulkwire.tls`), the
body pumps itself (``Body.pump``: the C pump sends the whole body with the GIL released, from
the buffers themselves, so the sender never waits for the encoding thread to let go of the
GIL); otherwise (Python's ssl, with ``ssl_context``) the sender passes the chunks of
``Body.http_chunks()`` to ``sendall``.

Every request raises only the exceptions of :mod:`bulkwire.errors` (the socket's,
``http.client``'s and the JSON decoder's own exception chained as ``__cause__``), naming the
request: :class:`~bulkwire.errors.ConnectError`, :class:`~bulkwire.errors.ConnectionLostError`,
:class:`~bulkwire.errors.TransportTimeoutError` for the network, :class:`ServerError` for an
error status and :class:`ProtocolError` for an answer that is not the protocol's. They are
re-exported here under their old names (``ServerError``, ``EarlyResponse``).

Its rooms: the requests (:class:`HttpTransport`, in ``_transport_requests``), the answers read
(``_transport_answer``) and the errors made from them (``_transport_errors``) are modules of
their own; the body's sender is here. Every name of theirs is importable from here.
"""
from __future__ import annotations

import enum
import http.client
import re
import select
import socket
import ssl
import threading
from typing import Any, Callable, Iterator, Optional, Protocol, Tuple

from . import _core
from ._kept_threads import KeptThreads
from .compression import content_encoding
from .errors import (BulkInsertError, EarlyResponse, ProtocolError, ServerError,  # noqa: F401
                     TransportError, _frames_let_go, bulk_insert_case)
from .tls import TlsSocket
# the answers read, the errors made from them and the requests: modules of their own, every
# name of them importable from here as before
from ._transport_answer import (HEADER_COUNT_LIMIT, HEADER_LINE_LIMIT,  # noqa: F401
                                MAX_ANSWER_BYTES, MAX_CHUNK_SIZE, MAX_INTERIM_ANSWERS,
                                MAX_INTERIM_BYTES, _Answer, _AnswerRefused, _answered,
                                _interim, _message_of, _plain_fields, _Prefixed, _PutBack,
                                _read_answer, _read_head_lines, chunk_size)
from ._transport_errors import (MAX_CAUSE_CHARS, _innermost_cause,  # noqa: F401
                                _json_answer, _message_member, _pending_alert, _protocol_error,
                                error_message, status_error, tls_error, transport_error)
from ._transport_requests import (FAULTED_WITHOUT_MESSAGE, HttpTransport)  # noqa: F401

__all__ = ["HttpTransport", "Body", "BodySender", "Sent", "ServerError", "ProtocolError",
           "EarlyResponse", "TransportError", "error_message", "transport_error"]


class Sent(enum.IntEnum):
    """How the sending of a body ended (the values are ``_core.pump_body``'s outcomes, the
    C pump's own ``_core.PUMP_*`` constants).

    The body's data ends with the last byte of the piece holding the array's closing ``]``
    (compressed, that piece is flushed or ends the stream, so it decodes whole on arrival);
    what may follow (a compressed stream's end, the terminating chunk) carries none of it.
    An answer that arrives before the last data byte is sent is early: the server cannot
    have read the whole array. One that arrives after it is the server's answer to the whole
    body: a server may answer once it has parsed the ``]`` (RavenDB does)."""

    #: every byte went out, the terminating chunk last; no answer before
    WHOLE = _core.PUMP_DONE
    #: the server answered before the last data byte: nothing more sent
    ANSWERED_EARLY = _core.PUMP_ANSWERED
    #: the server answered after the last data byte; the rest was tried
    ANSWERED_AT_END = _core.PUMP_ANSWERED_AT_END


class Body(Protocol):
    """What :class:`BodySender` sends: one request body, consumed once, by one of two means
    (:class:`~bulkwire.bulk.BulkWriter` is one).

    ``compression``: the compression backend, or None (``Content-Encoding``). ``pump(fd, timeout,
    tls=None)`` sends the whole body on a connected plain socket (through the
    ``_core.TlsConnection`` tls on it when given), HTTP chunks and terminating chunk
    included, and returns how that ended (a :class:`Sent` value), or None when this body
    cannot pump (nothing consumed). Otherwise ``http_chunks()`` yields the body as the bytes
    of a chunked body, the terminating chunk last; ``data_taken`` is true once it has yielded
    every chunk of the body's data (those it yields afterwards carry none).
    ``fail(error)``: the sender cannot take more; the producer raises ``error``.
    ``wait_ready()`` waits, consuming nothing, until the body's first data can be sent (or
    it ended or failed).
    """

    @property
    def compression(self) -> Optional[str]: ...

    def wait_ready(self) -> bool: ...

    @property
    def data_taken(self) -> bool: ...

    def pump(self, fd: int, timeout: Optional[float], tls: Any = None) -> Optional[int]: ...

    def http_chunks(self) -> Iterator[bytes]: ...

    def fail(self, error: BaseException) -> None: ...


#: The threads bodies are sent on, each kept a while for the next insert's body; while one
#: lives, the body buffer pool keeps its buffers for the next insert (whose writer then
#: writes into memory already backed rather than a fresh page per 4 KiB)
_SENDER_THREADS = KeptThreads("bulkwire-sender", hold=_core.hold_buffer_pool,
                              release=_core.release_buffer_pool)


class BodySender:
    """Streams the body on a thread of its own: one chunked POST, one HTTP chunk per piece.
    :meth:`start`, :meth:`join` and :meth:`is_alive` are ``threading.Thread``'s; the thread
    is one of the threads kept for the next insert (:mod:`bulkwire._kept_threads`).

    Success is recorded, never inferred: ``result`` holds ``(status, body)`` only when the
    server answered 2xx after every data byte of the body was sent (see :class:`Sent`). In
    every other case, however the thread ends (any exception, in the request or in
    ``explain``, or no answer at all), ``body.fail(error)`` is called once with a
    :class:`~bulkwire.errors.BulkInsertError`, which makes the producer raise it.
    ``explain(exc)`` (optional) may turn the error into a better one (the server's message).
    """

    def __init__(self, transport: HttpTransport, path: str, body: Body, *,
                 explain: Optional[Callable[[BaseException], BaseException]] = None,
                 conn: Optional[http.client.HTTPConnection] = None) -> None:
        self.name = _SENDER_THREADS.name
        # held from start() until run() returned: join() waits for it
        self._running = threading.Lock()
        self._started = False
        self._transport = transport
        # the connection of the request before this one (the operation id's), kept for the
        # body: once the thread starts, it owns and closes it
        self._conn = conn
        self._path = path
        self.what = f"POST {transport.url_of(path)}"
        self._body = body
        self._chunks: Optional[Any] = None  # body.http_chunks(), once sending them started
        self._explain = explain
        self._lock = threading.Lock()
        self._sock: Optional[socket.socket] = None
        self._cancelled = False
        self.data_sent = False  # every data byte of the body went out before the answer came
        self.result: Optional[Tuple[int, bytes]] = None
        self.error: Optional[BaseException] = None

    @property
    def succeeded(self) -> bool:
        """The server answered 2xx to the complete body."""
        return self.result is not None and self.data_sent

    def start(self) -> None:
        """Runs :meth:`run` on a sender thread (``RuntimeError`` when started twice, or when
        no thread can be started)."""
        if self._started:
            raise RuntimeError("a BodySender can only be started once")
        self._started = True
        self._running.acquire()
        try:
            _SENDER_THREADS.run(self._run_and_finish)
        except BaseException:
            self._running.release()
            raise

    def _run_and_finish(self) -> None:
        running = self._running
        try:
            self.run()
        finally:
            # run has returned: the frames its error passed through let go of what they
            # held, and this one of the sender (the error's traceback reaches it)
            error = self.error
            del self
            if error is not None:
                _frames_let_go(error)
            del error
            running.release()

    def join(self, timeout: Optional[float] = None) -> None:
        """Waits until :meth:`run` returned, ``timeout`` seconds at most (None: no limit)."""
        if not self._started:
            raise RuntimeError("cannot join a BodySender before it is started")
        if self._running.acquire(timeout=-1 if timeout is None else max(timeout, 0.0)):
            self._running.release()

    def is_alive(self) -> bool:
        """Started, and :meth:`run` has not returned yet."""
        return self._started and self._running.locked()

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
            self._post()
        except BaseException as exc:  # noqa: BLE001 - reported to the producer, never lost
            self.error = exc
        finally:
            try:
                if not self.succeeded:
                    self._report(self.error)  # first: the failure reported is this one
            finally:
                if self._chunks is not None:  # the body's own cleanup runs now, on this thread
                    self._chunks.close()

    def _report(self, exc: Optional[BaseException]) -> None:
        """Hands the failure to the producer; nothing here may keep it from getting there."""
        error: BaseException = exc if exc is not None else BulkInsertError(
            f"{self.what}: the sender stopped without the server's answer to the whole body")
        try:
            error = bulk_insert_case(error)  # a shared class raised by the C core: this insert's
            if not isinstance(error, BulkInsertError):
                wrapped = BulkInsertError(f"{self.what} failed: {error!r}")
                wrapped.__cause__ = error
                error = wrapped
            explain, self._explain = self._explain, None  # once: it refers to the request's owner
            if explain is not None:
                error = explain(error)
        except BaseException:  # noqa: BLE001 - explaining failed; the failure itself stands
            pass
        finally:
            self._body.fail(error)

    def _post(self) -> None:
        transport = self._transport
        conn, self._conn = self._conn, None
        kept = conn is not None  # the operation id's connection, used before
        if conn is None:
            conn = transport.connect()
        try:
            kept = not transport.open(conn, self.what) and kept
            try:
                try:
                    status, body = self._exchange(conn, kept)
                except _LetGo:
                    # the kept connection ended before any byte of the body was sent:
                    # nothing of it reached the server, and a new connection carries it
                    conn.close()
                    conn = transport.connect()
                    transport.open(conn, self.what)
                    status, body = self._exchange(conn, False)
            except (OSError, http.client.HTTPException) as exc:
                raise transport_error(exc, self.what, transport.timeout) from exc
        finally:
            with self._lock:
                self._sock = None
            conn.close()
        if not 200 <= status < 300:
            raise status_error(status, body, self.what, message_first=True)
        self.result = (status, body)  # the one place success is recorded

    def _exchange(self, conn: http.client.HTTPConnection, kept: bool) -> Tuple[int, bytes]:
        """Sends the request and the whole body; the server's ``(status, body)``. ``kept``:
        ``conn`` carried an earlier request, and :class:`_LetGo` is raised when it turns out
        to be closed before any byte of the body went out."""
        fields = [("Content-Type", "application/json; charset=utf-8"),
                  ("Transfer-Encoding", "chunked")]
        if self._body.compression is not None:
            fields.append(("Content-Encoding", content_encoding(self._body.compression)))
        sock = conn.sock
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self._sock = sock
            cancelled = self._cancelled
        if cancelled:
            raise ConnectionAbortedError("the bulk insert was aborted")
        taken = b""
        head = self._transport.head("POST", self._transport.base + self._path, fields)
        try:
            try:
                sock.sendall(head)
            except (BrokenPipeError, ConnectionResetError) as exc:
                if kept:  # closed before even the head went out
                    raise _LetGo() from exc
                raise
            self._body.wait_ready()
            before = self._before_the_body(sock, kept)
            if before is None:
                # the pump needs the socket's own descriptor, or bulkwire's own TLS session
                # on it: Python's ssl encrypts where the pump cannot reach
                if type(sock) is socket.socket:
                    outcome = self._body.pump(sock.fileno(), sock.gettimeout())
                elif isinstance(sock, TlsSocket):
                    outcome = self._body.pump(sock.fileno(), sock.gettimeout(), tls=sock.session)
                else:
                    outcome = None
                if outcome is None:
                    outcome, taken = self._send_http_chunks(sock)
        except (BrokenPipeError, ConnectionResetError) as exc:
            # the server closed its side before the last data byte: read what it said, if anything
            try:
                early = self._early(conn)
            except Exception:  # noqa: BLE001
                raise exc from None
            raise early from exc
        if before is not None:  # the server answered before the body's first byte
            raise self._early(conn, before)
        return self._answer(conn, Sent(outcome), taken)

    def _before_the_body(self, sock: Any, kept: bool) -> Optional[bytes]:
        """What the server said between the request's head and the body's first byte, once
        that byte is ready: None when nothing (the body goes out), else the first bytes of
        its answer (an early one). Interim answers (``100 Continue``, which a server may
        send unasked, ``102``, ``103``) are read and skipped, :data:`MAX_INTERIM_ANSWERS`
        at most; a kept connection the server closed raises :class:`_LetGo`."""
        for _ in range(MAX_INTERIM_ANSWERS + 1):
            taken = _early_answer(sock)
            if taken is None:
                return None
            try:
                head = taken + _head_bytes(sock, MAX_INTERIM_BYTES - len(taken))
            except (ConnectionResetError, BrokenPipeError, ssl.SSLEOFError):
                if kept and not taken:
                    raise _LetGo() from None
                raise
            if not head and kept:
                raise _LetGo()
            status = _STATUS_LINE.match(head)
            if status is None or not _interim(int(status.group(1))):
                return head  # the final answer (or what the answer reader will refuse)
        return b""  # more interim answers than are skipped: the reader refuses the next one

    def _answer(self, conn: http.client.HTTPConnection, sent: Sent, taken: bytes) -> Tuple[int, bytes]:
        """The one place either sender's outcome is judged: an answer before the last data
        byte is early (raised); otherwise the server's ``(status, body)`` to the whole body,
        read whole (``taken``: its first bytes, already read from the socket)."""
        if sent is Sent.ANSWERED_EARLY:
            raise self._early(conn, taken)
        self.data_sent = True
        return _read_answer(conn, "POST", taken)

    def _send_http_chunks(self, sock: socket.socket) -> Tuple[Sent, bytes]:
        """The body from its HTTP chunks, framed in C (Python's ssl, or a body that cannot
        pump); how that ended, and the answer's first bytes when they had to be read to see
        it. Before each chunk: an answer now is early while the chunk still carries data,
        and the answer to the whole body once only the stream's end and the terminating
        chunk are left (which are still sent, a failure to send them ignored)."""
        self._chunks = chunks = self._body.http_chunks()
        for chunk in chunks:
            carries_data = not self._body.data_taken
            taken = _early_answer(sock)
            if taken is None and carries_data:
                taken = _send_watching(sock, chunk)
            elif taken is None:
                sock.sendall(chunk)
            if taken is not None:
                if carries_data:
                    return Sent.ANSWERED_EARLY, taken
                try:
                    sock.sendall(chunk)
                    for rest in chunks:
                        sock.sendall(rest)
                except OSError:
                    pass  # the answer is in
                return Sent.ANSWERED_AT_END, taken
            del chunk
        return Sent.WHOLE, b""

    def _early(self, conn: http.client.HTTPConnection, taken: bytes = b"") -> BulkInsertError:
        """The error for an answer that came before the whole body was sent (``taken``: its
        first bytes, already read from the socket)."""
        status, body = _read_answer(conn, "POST", taken)
        if not 200 <= status < 300:
            return status_error(status, body, self.what, message_first=True)
        said = error_message(body) or (repr(body[:200]) if body else "no message")
        return EarlyResponse(f"the server finished {self.what} before all of the body was sent "
                             f"(HTTP {status}: {said})", status=status, body=body[:1000])


class _LetGo(Exception):
    """A kept connection the server closed before any byte of the body was sent on it."""


#: the status line of an HTTP/1.x answer, its status the group
_STATUS_LINE = re.compile(rb"HTTP/1\.[0-9] +([0-9]{3})[ \r\n]")


def _head_bytes(sock: Any, limit: int) -> bytes:
    """The bytes of an answer's head, up to and with its empty line, read a byte at a time so
    that nothing after it is taken from the socket (an interim answer is followed by nothing
    until the body is sent); fewer when the connection ends or ``limit`` bytes came first."""
    head = bytearray()
    one = bytearray(1)
    while len(head) < limit and not head.endswith(b"\r\n\r\n") and not head.endswith(b"\n\n"):
        if not sock.recv_into(one):
            break
        head += one
    return bytes(head)


def _send_watching(sock: Any, data: bytes) -> Optional[bytes]:
    """Sends every byte of ``data`` (a chunk of the body's data) unless the server answers
    while the send waits for room, as the C pump's watching writes do: None when it was
    sent, else the answer's first bytes already taken (see :func:`_early_answer`); the rest
    of ``data`` is then unsent. Each wait is bounded by the socket's timeout."""
    if isinstance(sock, TlsSocket):  # bulkwire's own TLS watches in C
        return b"" if sock.session.sendall(data, True) else None
    timeout = sock.gettimeout()
    view = memoryview(data)
    poller = select.poll()
    poller.register(sock, select.POLLIN | select.POLLOUT)
    sock.settimeout(0)  # every wait is the poll's
    try:
        while view:
            try:
                view = view[sock.send(view):]  # Python's ssl: all of it, or SSLWantWriteError
                continue
            except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
                pass
            events = poller.poll(None if timeout is None else timeout * 1000)
            if not events:
                raise TimeoutError("timed out")
            if events[0][1] & (select.POLLIN | select.POLLHUP | select.POLLERR):
                taken = _early_answer(sock)  # None: TLS records of Python's ssl's own
                if taken is not None:
                    return taken
    finally:
        sock.settimeout(timeout)
    return None


def _early_answer(sock: socket.socket) -> Optional[bytes]:
    """None while the server has said nothing mid-body; otherwise the bytes of its answer
    already taken from the socket (``b""``: none taken, or it closed). Over TLS a readable
    socket may hold records without any answer (TLS 1.3 session tickets follow the
    handshake): one byte is read, without waiting, to tell."""
    if isinstance(sock, TlsSocket):  # bulkwire's own TLS tells without consuming anything
        return b"" if sock.session.answered() else None
    if not isinstance(sock, ssl.SSLSocket):
        return b"" if _answered(sock) else None
    if not sock.pending() and not _answered(sock):
        return None
    timeout = sock.gettimeout()
    sock.settimeout(0)
    try:
        return sock.recv(1)
    except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
        return None  # only TLS records of its own: no answer
    finally:
        sock.settimeout(timeout)
