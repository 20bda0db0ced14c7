"""HTTP/1.1 transport for the document database's bulk insert protocol (RavenDB's): the
standard library's ``http.client`` connects; the requests' heads are written here, as it
writes them (:meth:`HttpTransport.head`), and the answers read by its rules (:class:`_Answer`).

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
"""
from __future__ import annotations

import email.parser
import enum
import http.client
import io
import json
import re
import select
import socket
import ssl
import threading
import urllib.parse
from typing import Any, Callable, Iterator, Optional, Protocol, Sequence, Tuple, Union

from . import _core
from ._kept_threads import KeptThreads
from .compression import content_encoding
from .errors import (BulkInsertError, ConnectError, ConnectionLostError, EarlyResponse, LoadError,
                     ProtocolError, ServerError, TLSError, TransportError, TransportTimeoutError,
                     _frames_let_go, bulk_insert_case)
from .tls import TlsSettings, TlsSocket
from .urls import DEFAULT_PORTS, ServerUrl, parse_server_url

__all__ = ["HttpTransport", "Body", "BodySender", "Sent", "ServerError", "ProtocolError",
           "EarlyResponse", "TransportError", "error_message", "transport_error"]

# The protocol's answers (an id, an operation's state, an error) are small: reading more than
# this is a server that does not speak it, and must not fill the client's memory.
MAX_ANSWER_BYTES = 1 << 20
# operation_error() when the state says Faulted but gives no message of its own
FAULTED_WITHOUT_MESSAGE = "the server reported the operation as faulted"


def error_message(body: bytes) -> Optional[str]:
    """The message in a server error body (``{"Message": ..., "Error": ...}``), if any."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return _message_member(data)


def _message_member(data: Any) -> Optional[str]:
    """RavenDB's error text in a decoded error object: its "Message", else its "Error"; with
    the innermost exception of "Error" after it when the message does not say it (a failed
    bulk insert's message is "Failed to process bulk insert ...", its cause only in "Error")."""
    if isinstance(data, dict):
        for key in ("Message", "Error"):
            value = data.get(key)
            if isinstance(value, str) and value:
                cause = _innermost_cause(data.get("Error"))
                return f"{value}: {cause}" if cause and cause not in value else value
    return None


#: the longest cause taken from an error's stack trace into a message
MAX_CAUSE_CHARS = 300


def _innermost_cause(error: Any) -> Optional[str]:
    r"""``"Type: message"`` of the innermost exception in a .NET exception text (``Outer: a
    ---> Inner: b\n   at ...``), or None when it names no inner exception.

    >>> _innermost_cause("System.X: failed ---> System.IO.Y: disk full\n   at Z()")
    'System.IO.Y: disk full'
    """
    if not isinstance(error, str):
        return None
    head = error.split("\n   at ", 1)[0]
    if " ---> " not in head:
        return None
    cause = head.rsplit(" ---> ", 1)[1].strip()
    return cause[:MAX_CAUSE_CHARS] or None


def _protocol_error(message: str, **fields: Any) -> BaseException:
    """A RavenDB server's :class:`~bulkwire.errors.ProtocolError` saying ``message``."""
    return bulk_insert_case(ProtocolError(message, **fields))


def status_error(status: int, body: bytes, what: str, *, message_first: bool = False) -> ServerError:
    """The error for an answer with a status outside 2xx to the request ``what``.
    ``message_first``: the server's message leads (its verdict on the body matters most)."""
    said = error_message(body)
    if said and message_first:
        message = f"{said} (HTTP {status} from {what})"
    else:
        message = f"HTTP {status} from {what}: {said or (repr(body[:200]) if body else 'no message')}"
    return bulk_insert_case(ServerError(message, status=status, body=body[:1000]))


def tls_error(exc: BaseException, what: str) -> TLSError:
    """The :class:`TLSError` for a TLS failure of bulkwire's own (``_core.TlsError``) or of
    Python's ssl (``ssl.SSLError``) during the request ``what``."""
    if isinstance(exc, ssl.SSLError):
        reason = getattr(exc, "verify_message", None) or getattr(exc, "reason", None) or str(exc)
        verify_failed = isinstance(exc, ssl.SSLCertVerificationError)
        reason = f"certificate verify failed: {reason}" if verify_failed else str(reason).lower().replace("_", " ")
    else:
        reason = str(exc)
        verify_failed = bool(getattr(exc, "verify_failed", False))
    if verify_failed:
        message = (f"{what}: the server's certificate failed verification ({reason}); give ca= "
                   f"the CA bundle that signed it (ca=False skips verification)")
    elif "alert" in reason.lower():
        message = (f"{what}: the server refused the TLS session ({reason}); a server that "
                   f"requires a client certificate refuses a missing or untrusted one (certificate=)")
    else:
        message = f"{what}: TLS failed: {reason}"
    return bulk_insert_case(TLSError(message, reason=reason, verify_failed=verify_failed))


def transport_error(exc: BaseException, what: str, timeout: Optional[float], *,
                    connecting: bool = False) -> BaseException:
    """The :mod:`bulkwire.errors` exception for ``exc``, raised by the socket or
    ``http.client`` during the request ``what`` (``exc`` itself when it is not one of theirs).
    The caller chains it (``raise ... from exc``)."""
    if isinstance(exc, LoadError):  # a shared class raised below this: the bulk insert's case
        return bulk_insert_case(exc)
    if isinstance(exc, TimeoutError):  # socket.timeout, and the pump's
        return bulk_insert_case(TransportTimeoutError(
            f"{what} timed out: nothing moved for {timeout} s"))
    if isinstance(exc, (_core.TlsError, ssl.SSLError)) and not isinstance(exc, ssl.SSLEOFError):
        return tls_error(exc, what)
    if connecting and isinstance(exc, OSError):  # refused, unreachable, unknown host, TLS
        return bulk_insert_case(ConnectError(f"cannot reach the server for {what}: {exc}"))
    if isinstance(exc, http.client.RemoteDisconnected):  # before ConnectionError: it is both
        return bulk_insert_case(ConnectionLostError(
            f"{what}: the server closed the connection without answering"))
    if isinstance(exc, ConnectionError):  # reset, broken pipe, aborted
        return bulk_insert_case(ConnectionLostError(f"{what}: the connection was lost: {exc}"))
    if isinstance(exc, http.client.IncompleteRead):
        return bulk_insert_case(ConnectionLostError(
            f"{what}: the connection was closed in the middle of the answer"))
    if isinstance(exc, _AnswerRefused):  # what _Answer refuses, in its own words
        return bulk_insert_case(ProtocolError(f"{what}: {exc}"))
    if isinstance(exc, http.client.HTTPException):  # a bad status line, headers too long, ...
        return bulk_insert_case(ProtocolError(
            f"{what}: the answer is not HTTP/1.1: {exc!r}"))
    if isinstance(exc, OSError):
        return bulk_insert_case(TransportError(f"{what}: {exc}"))
    return exc


def _pending_alert(conn: http.client.HTTPConnection, exc: BaseException) -> BaseException:
    """The TLS alert the server sent before it closed, when writing to it failed (``exc``):
    with TLS 1.3 a server that refuses the client's certificate says so after the handshake,
    and a request written meanwhile meets the closed connection before the alert is read.
    Reading it tells the refusal from a lost connection; ``exc`` when there is none."""
    sock = conn.sock
    if not isinstance(sock, ssl.SSLSocket) or not isinstance(exc, (ssl.SSLEOFError,
                                                                     ConnectionError)):
        return exc
    try:
        sock.settimeout(1.0)
        sock.recv(1)
    except ssl.SSLError as alert:
        if not isinstance(alert, ssl.SSLEOFError):
            return alert
    except OSError:
        pass
    return exc


def _json_answer(status: int, body: bytes, what: str) -> Any:
    if not 200 <= status < 300:
        raise status_error(status, body, what)
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise _protocol_error(f"{what}: the answer is not JSON: {body[:200]!r}", status=status,
                            body=body[:1000]) from exc


#: http.client's own bounds on an answer's head: a line's bytes, and the number of headers
HEADER_LINE_LIMIT = 65536
HEADER_COUNT_LIMIT = 100
#: the interim (1xx) answers skipped before an answer's final one, at most, and their bytes
MAX_INTERIM_ANSWERS = 16
MAX_INTERIM_BYTES = 64 << 10
#: the largest chunk size an answer may give (what a signed 64-bit size holds)
MAX_CHUNK_SIZE = (1 << 63) - 1

# A chunk's size line by RFC 9112: chunk-size (1*HEXDIG), then chunk extensions
# (*( BWS ";" BWS name [ BWS "=" BWS ( token / quoted-string ) ] )), then the line's end
# (CRLF, or a bare LF, which a recipient may take as one)
_TOKEN = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_QUOTED = rb'"(?:[\t \x21\x23-\x5b\x5d-\x7e\x80-\xff]|\\[\t \x20-\x7e\x80-\xff])*"'
_CHUNK_SIZE_LINE = re.compile(
    rb"([0-9A-Fa-f]+)(?:[ \t]*;[ \t]*" + _TOKEN + rb"(?:[ \t]*=[ \t]*(?:" + _TOKEN + rb"|"
    + _QUOTED + rb"))?)*\r?\n")


def _interim(status: int) -> bool:
    """Whether an answer of ``status`` is an interim one, skipped before the final answer:
    1xx, but ``101 Switching Protocols`` (refused)."""
    return 100 <= status < 200 and status != http.client.SWITCHING_PROTOCOLS


class _AnswerRefused(http.client.HTTPException):
    """An answer :class:`_Answer` does not read on (a chunk size that is not one, an
    interim answer where none may be, too many interim answers); the transport raises it
    as a :class:`~bulkwire.errors.ProtocolError` naming the request."""


def chunk_size(line: bytes) -> int:
    r"""The size of a chunk from its size line (with its line end), by RFC 9112's grammar:
    hexadecimal digits only (no sign, no ``0x``, no spaces before, no ``_``), at most
    :data:`MAX_CHUNK_SIZE`, then chunk extensions (ignored); :class:`_AnswerRefused` for
    anything else.

    >>> chunk_size(b"1a;name=value\r\n")
    26
    >>> chunk_size(b"-1\r\n")
    Traceback (most recent call last):
    ...
    bulkwire.transport._AnswerRefused: the answer's chunk size line b'-1\r\n' is not a hexadecimal chunk size (RFC 9112)
    """
    match = _CHUNK_SIZE_LINE.fullmatch(line)
    size = int(match.group(1), 16) if match is not None else -1
    if not 0 <= size <= MAX_CHUNK_SIZE:
        raise _AnswerRefused(f"the answer's chunk size line {line[:80]!r} is not a hexadecimal "
                            f"chunk size (RFC 9112)" if match is None else
                            f"the answer's chunk size {size:#x} is larger than any answer can be")
    return size


class _Answer(http.client.HTTPResponse):
    """``http.client``'s response, with the head read by :meth:`begin` here: a head of
    plain header lines (``Name: value``, the name without spaces, no folding, no stray
    carriage return) is read without the ``email`` package's parser, which costs ~40 µs an
    answer, two answers a bulk insert, and its ``HTTPMessage`` is made only if someone asks
    for ``headers``; any other head goes through that parser as before. The result is the
    same either way: the status, version and reason, the headers as an
    ``http.client.HTTPMessage``, and the body's framing (chunked, a length, or until the
    connection closes) judged by http.client's rules, with its exceptions for a status line
    that is not one, a line too long or too many headers.

    Where it departs from http.client, to read by RFC 9110 and 9112: every interim answer
    (1xx, not only ``100 Continue``) before the final one is skipped, at most
    :data:`MAX_INTERIM_ANSWERS` of them and :data:`MAX_INTERIM_BYTES` of their heads, and
    ``101 Switching Protocols`` is refused; a chunk size is read by the grammar
    (:func:`chunk_size`). Both refusals are :class:`_AnswerRefused`."""

    _fields: Optional[list] = None  # a plain head's (name, value) pairs, until headers is read
    _message: Optional[http.client.HTTPMessage] = None

    @property
    def headers(self) -> Optional[http.client.HTTPMessage]:  # type: ignore[override]
        if self._message is None and self._fields is not None:
            self._message = _message_of(self._fields)
            self._fields = None
        return self._message

    @headers.setter
    def headers(self, value: Optional[http.client.HTTPMessage]) -> None:
        self._message, self._fields = value, None

    msg = headers  # http.client's other name for them

    def read_at_most(self, limit: int) -> bytes:
        """The body, ``limit`` bytes of it at most (a longer one is the caller's to refuse).
        A body that ends before its ``Content-Length`` (the connection closed) raises
        ``IncompleteRead``, as ``read()`` does: ``read(amt)`` returns it short, and a
        server that lies about the length must not pass for one that answered whole."""
        body = self.read(limit)
        if self.length and len(body) < limit:
            raise http.client.IncompleteRead(body, self.length)
        return body

    def _read_next_chunk_size(self) -> int:
        """The next chunk's size (:func:`chunk_size`), read before any of its data: a size
        http.client would take (``-1``, which it reads as "to the end", ``+5``, `` 5``,
        ``5_0``) is refused here."""
        line = self.fp.readline(HEADER_LINE_LIMIT + 1)
        if len(line) > HEADER_LINE_LIMIT:
            raise http.client.LineTooLong("chunk size")
        if not line:  # the connection closed in the middle of the answer
            raise http.client.IncompleteRead(b"")
        try:
            return chunk_size(line)
        except _AnswerRefused:
            self._close_conn()  # type: ignore[attr-defined]
            raise

    def _field(self, name: str) -> Optional[str]:
        """The value of the first header named ``name`` (lower case), as ``headers.get``
        gives it."""
        if self._fields is None:
            return self.headers.get(name) if self.headers is not None else None
        for key, value in self._fields:
            if key.lower() == name:
                return value
        return None

    def begin(self) -> None:
        if self._fields is not None or self._message is not None:  # read already
            return
        interim, interim_bytes = 0, 0
        while True:
            version, status, reason = self._read_status()  # type: ignore[attr-defined]
            if status == http.client.SWITCHING_PROTOCOLS:
                raise _AnswerRefused("the server answered HTTP 101 (switching protocols), "
                                    "which no request of bulkwire asks for")
            if not _interim(status):
                break
            # an interim answer (100 Continue, 102 Processing, 103 Early Hints, ...): its
            # head is skipped, and the final answer read after it (RFC 9110, 15.2)
            interim += 1
            interim_bytes += sum(len(line) for line in _read_head_lines(self.fp))
            if interim > MAX_INTERIM_ANSWERS or interim_bytes > MAX_INTERIM_BYTES:
                raise _AnswerRefused(f"the server sent more than {MAX_INTERIM_ANSWERS} interim "
                                    f"(1xx) answers or {MAX_INTERIM_BYTES} bytes of them "
                                    f"before its final answer")
        self.code = self.status = status
        self.reason = reason.strip()
        if version in ("HTTP/1.0", "HTTP/0.9"):
            self.version = 10
        elif version.startswith("HTTP/1."):
            self.version = 11
        else:
            raise http.client.UnknownProtocol(version)
        lines = _read_head_lines(self.fp)
        fields = _plain_fields(lines)
        if fields is None:
            self.headers = email.parser.Parser(_class=http.client.HTTPMessage).parsestr(
                "".join(lines))
        else:
            self._fields = fields
        transfer = self._field("transfer-encoding")
        self.chunked = bool(transfer) and transfer.lower() == "chunked"
        self.chunk_left = None
        self.will_close = self._closes()
        self.length = None
        length = self._field("content-length")
        if length and not self.chunked:
            try:
                self.length = int(length)
            except ValueError:
                self.length = None
            if self.length is not None and self.length < 0:
                self.length = None
        if (status in (http.client.NO_CONTENT, http.client.NOT_MODIFIED)
                or self._method == "HEAD"):  # type: ignore[attr-defined]
            self.length = 0
        if not self.will_close and not self.chunked and self.length is None:
            self.will_close = True  # the body ends where the connection does

    def _closes(self) -> bool:
        """Whether the server closes the connection after this answer, by its headers:
        HTTP/1.1 keeps it unless ``Connection`` says ``close``; HTTP/1.0 closes it unless
        ``Keep-Alive`` is there, or ``Connection`` or ``Proxy-Connection`` says
        ``keep-alive`` (http.client's rules)."""
        connection = self._field("connection")
        if self.version == 11:
            return bool(connection) and "close" in connection.lower()
        if self._field("keep-alive"):
            return False
        if connection and "keep-alive" in connection.lower():
            return False
        proxy = self._field("proxy-connection")
        return not (proxy and "keep-alive" in proxy.lower())


#: A header line the email parser reads as ``name: value`` and nothing else
_PLAIN_HEADER_LINE = re.compile(r"[\x21-\x39\x3b-\x7e]+:[^\r\n]*\r?\n")


def _plain_fields(lines: list) -> Optional[list]:
    """The ``(name, value)`` pairs of an answer's head lines (ISO-8859-1 text, each with its
    line end) when every line is a plain header line, as http.client's ``parse_headers``
    reads them; None when one is not (the email parser then reads the head)."""
    fields = []
    for line in lines:
        if not _PLAIN_HEADER_LINE.fullmatch(line):
            return None
        name, _, value = line.partition(":")
        fields.append((name, value.lstrip(" \t").rstrip("\r\n")))
    return fields


def _message_of(fields: list) -> http.client.HTTPMessage:
    """The ``HTTPMessage`` of a plain head's ``(name, value)`` pairs."""
    message = http.client.HTTPMessage()
    for name, value in fields:
        message[name] = value
    return message


def _read_head_lines(fp: Any) -> list:
    """The header lines of an answer's head, read up to its empty line (decoded as
    ISO-8859-1, as http.client does); ``LineTooLong`` or ``HTTPException`` past
    http.client's bounds."""
    lines = []
    while True:
        line = fp.readline(HEADER_LINE_LIMIT + 1)
        if len(line) > HEADER_LINE_LIMIT:
            raise http.client.LineTooLong("header line")
        if len(lines) >= HEADER_COUNT_LIMIT:  # the empty line counts, as http.client counts it
            raise http.client.HTTPException(f"got more than {HEADER_COUNT_LIMIT} headers")
        if line in (b"\r\n", b"\n", b""):
            return lines
        lines.append(line.decode("iso-8859-1"))


# What a request's head may not hold (http.client's rules, and ASCII only): in the method
# and the target (path, host), a control character or space; in a header's name, also ":";
# in its value, a line end or another control character but the tab
_REFUSED_IN_TOKEN = re.compile(r"[^\x21-\x7e]")
_REFUSED_IN_FIELD = re.compile(r"[^\x21-\x39\x3b-\x7e]")
_REFUSED_IN_VALUE = re.compile(r"[^\t\x20-\x7e]")


class HttpTransport:
    """Requests of the bulk insert protocol against one server (``url``: a
    :class:`~bulkwire.urls.ServerUrl`, or a ``str`` that
    :func:`~bulkwire.urls.parse_server_url` takes) and database. Every request raises only
    :mod:`bulkwire.errors` exceptions, naming the request."""

    def __init__(self, url: Union[str, ServerUrl], database: str, *,
                 timeout: Optional[float] = 300.0, tls: Optional[TlsSettings] = None) -> None:
        server = url if isinstance(url, ServerUrl) else parse_server_url(url, "url")
        if not isinstance(database, str):
            raise TypeError(f"database must be a str, not {type(database).__name__}")
        if not database or database.isspace():
            raise ValueError("database must be a non-empty name")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or timeout <= 0):
            raise ValueError(f"timeout must be a positive number of seconds or None, not {timeout!r}")
        if tls is not None and server.scheme != "https":
            raise ValueError(f"certificate, ca and ssl_context need an https:// URL, not {server}")
        self.server = server
        self.scheme = server.scheme
        # the https:// connections' TLS (bulkwire's own, with the system's CAs, by default)
        self.tls = tls if tls is not None or server.scheme != "https" else TlsSettings()
        self.host = server.host
        self.port = server.port
        # the Host header http.client writes: an IPv6 address in brackets, the port left out
        # when it is the scheme's own
        host = f"[{server.host}]" if ":" in server.host else server.host
        self._host_field = host if server.port == DEFAULT_PORTS[server.scheme] else f"{host}:{server.port}"
        self.timeout = timeout
        self.database = database
        self.root = server.root  # the server's own paths (topology) start here
        self.base = (self.root + "/databases/" + urllib.parse.quote(database, safe=""))
        self.origin = server.origin

    def url_of(self, path: str) -> str:
        """The full URL of the protocol path ``path`` (for messages)."""
        return self.origin + self.base + path

    def head(self, method: str, path: str, fields: Sequence[Tuple[str, str]]) -> bytes:
        """The request line and headers of a request to ``path`` (from the server's root):
        ``Host`` first, then ``fields``, as http.client writes a request's head (the one
        place bulkwire's requests are written; their answers are read by :class:`_Answer`).
        Every part is ASCII: the host and paths were judged by :mod:`bulkwire.urls`, the
        database name is percent-encoded. A part that would end its line or the head early
        or is not ASCII (a hand-built :class:`~bulkwire.urls.ServerUrl` is not judged) is
        refused here, as http.client refused it: ``ValueError`` naming the part, nothing
        written."""
        for part, text in (("method", method), ("path", path), ("host", self._host_field)):
            if _REFUSED_IN_TOKEN.search(text):
                raise ValueError(f"the request's {part} {text[:200]!r} holds a control "
                                 f"character, a space or a character outside ASCII: a request "
                                 f"to {self.origin!r} cannot be written with it")
        for name, value in fields:
            if _REFUSED_IN_FIELD.search(name) or not name or _REFUSED_IN_VALUE.search(value):
                raise ValueError(f"the request's header {name[:100]!r}: {value[:200]!r} holds "
                                 f"a line end, a control character or a character outside "
                                 f"ASCII: a request to {self.origin!r} cannot be written with it")
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self._host_field}"]
        lines += [f"{name}: {value}" for name, value in fields]
        lines.append("\r\n")
        return "\r\n".join(lines).encode("ascii")

    def short_timeout(self, limit: float) -> float:
        """The timeout of a request that only asks (state) or tells (kill): the transport's,
        but at most ``limit``."""
        return limit if self.timeout is None else min(self.timeout, limit)

    def connect(self, timeout: Optional[float] = None) -> http.client.HTTPConnection:
        """A connection object, not yet connected (see :meth:`open`)."""
        timeout = self.timeout if timeout is None else timeout
        if self.tls is not None:
            conn = self.tls.http_connection(self.host, self.port, timeout)
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        conn.response_class = _Answer
        return conn

    @staticmethod
    def open(conn: http.client.HTTPConnection, what: str) -> bool:
        """Connects ``conn`` unless it is still connected from an earlier request and the
        server has not spoken since (an idle connection that reads as ready was closed by the
        server, or holds bytes nobody asked for: it is closed, and a new one made);
        :class:`ConnectError` (or a timeout) when it cannot connect. True when it connected
        (a new connection), False when ``conn`` is kept as it was."""
        sock = conn.sock
        if sock is not None:
            if not _answered(sock) and not (isinstance(sock, ssl.SSLSocket) and sock.pending()):
                return False
            conn.close()
        try:
            conn.connect()
        except (OSError, http.client.HTTPException) as exc:
            raise transport_error(exc, what, conn.timeout, connecting=True) from exc
        return True

    def request(self, method: str, path: str, *, timeout: Optional[float] = None,
                server_wide: bool = False,
                conn: Optional[http.client.HTTPConnection] = None) -> Tuple[int, bytes]:
        """``(status, body)`` of one request without a body, to the database's ``path`` (the
        server's own with ``server_wide``); the transport's errors raise as
        :mod:`bulkwire.errors` exceptions.

        ``conn`` (from :meth:`connect`): the request goes on it, and it stays open for the
        caller's next request when the answer leaves it open (the caller closes it); closed
        when the request fails. Without it, a connection of its own, closed afterwards."""
        full_path = (self.root if server_wide else self.base) + path
        what = f"{method} {self.origin}{full_path}"
        own = conn is None
        if conn is None:
            conn = self.connect(timeout)
        failed = True
        try:
            self.open(conn, what)
            # the head http.client's request() writes for a request without a body (a
            # Content-Length of 0 where the method expects a body)
            fields = [("Accept-Encoding", "identity")]
            if method in ("POST", "PUT", "PATCH"):
                fields.append(("Content-Length", "0"))
            fields.append(("Accept", "application/json"))
            try:
                conn.sock.sendall(self.head(method, full_path, fields))
                response = _Answer(conn.sock, method=method)
                try:
                    response.begin()
                    body = response.read_at_most(MAX_ANSWER_BYTES + 1)
                finally:
                    response.close()
            except (OSError, http.client.HTTPException) as exc:
                raise transport_error(_pending_alert(conn, exc), what, conn.timeout) from exc
            # the rest unread (the stream is lost), or the server ends the connection here
            failed = len(body) > MAX_ANSWER_BYTES or response.will_close
        finally:
            if own or failed:
                conn.close()
        if len(body) > MAX_ANSWER_BYTES:
            raise _protocol_error(f"{what}: the answer is larger than {MAX_ANSWER_BYTES} bytes",
                                status=response.status, body=body[:1000])
        return response.status, body

    def next_operation_id(self, conn: Optional[http.client.HTTPConnection] = None
                          ) -> Tuple[int, Optional[str]]:
        """``(operation id, node tag)`` for a new bulk insert (on ``conn``, left open for the
        insert's body, when given: see :meth:`request`)."""
        path = "/operations/next-operation-id"
        what = f"GET {self.url_of(path)}"
        status, body = self.request("GET", path, conn=conn)
        try:
            data = _json_answer(status, body, what)
            op_id = data.get("Id") if isinstance(data, dict) else None
            if type(op_id) is not int or op_id < 0:
                raise _protocol_error(f"{what}: the answer has no operation id (a non-negative "
                                    f"integer \"Id\"): {body[:200]!r}", status=status,
                                    body=body[:1000])
        except BaseException:
            if conn is not None:  # no insert follows on it
                conn.close()
            raise
        tag = data.get("NodeTag")
        return op_id, tag if isinstance(tag, str) else None

    def operation_state(self, op_id: int, *, timeout: float = 5.0) -> dict:
        """The server's ``operations/state`` of the operation (a JSON object)."""
        path = f"/operations/state?id={op_id}"
        what = f"GET {self.url_of(path)}"
        status, body = self.request("GET", path, timeout=self.short_timeout(timeout))
        data = _json_answer(status, body, what)
        if not isinstance(data, dict):
            raise _protocol_error(f"{what}: the answer is not a JSON object: {body[:200]!r}",
                                status=status, body=body[:1000])
        return data

    def operation_error(self, op_id: int) -> Optional[str]:
        """The error the server recorded for the operation, when it reports it as faulted;
        None when it does not, or does not say (whatever it answers: this explains a failure
        that is already certain, and must not raise one of its own)."""
        try:
            state = self.operation_state(op_id)
        except BulkInsertError:
            return None  # the server is gone or does not say; the transport's error stands
        if state.get("Status") != "Faulted":
            return None
        return _message_member(state.get("Result")) or FAULTED_WITHOUT_MESSAGE

    def kill(self, op_id: int) -> None:
        """Kills the operation on the server (``operations/kill``)."""
        path = f"/operations/kill?id={op_id}"
        status, body = self.request("POST", path, timeout=self.short_timeout(10.0))
        if not 200 <= status < 300:
            raise status_error(status, body, f"POST {self.url_of(path)}")

    def bulk_insert_path(self, op_id: int, skip_overwrite_if_unchanged: bool) -> str:
        flag = "true" if skip_overwrite_if_unchanged else "false"
        return f"/bulk_insert?id={op_id}&skipOverwriteIfUnchanged={flag}"


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


def _read_answer(conn: http.client.HTTPConnection, method: str,
                 taken: bytes = b"") -> Tuple[int, bytes]:
    """The ``(status, body)`` of the answer to a request whose head :meth:`HttpTransport.head`
    wrote on ``conn`` (``taken``: its first bytes, already read from the socket); at most
    ``MAX_ANSWER_BYTES`` of the body are read."""
    response = _Answer(_PutBack(conn.sock, taken) if taken else conn.sock, method=method)
    try:
        response.begin()
        return response.status, response.read_at_most(MAX_ANSWER_BYTES)
    finally:
        response.close()


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


def _answered(sock: Any) -> bool:
    """True when the server already sent something (an answer, or the end of the
    connection): the socket reads as ready, now, without waiting. ``poll``, as the C pump
    asks, never ``select``, which refuses a descriptor of ``FD_SETSIZE`` (1024) or more:
    a process may hold any number of files."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)  # POLLHUP and POLLERR are reported anyway
    return bool(poller.poll(0))


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


class _Prefixed(io.RawIOBase):
    """A socket's reading side with the bytes already taken from it put back in front."""

    def __init__(self, taken: bytes, raw: Any) -> None:
        self._taken = taken
        self._raw = raw

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._taken:
            n = min(len(buffer), len(self._taken))
            buffer[:n] = self._taken[:n]
            self._taken = self._taken[n:]
            return n
        return self._raw.readinto(buffer)


class _PutBack:
    """The socket ``http.client`` reads the answer from, with its first bytes (already
    taken) put back."""

    def __init__(self, sock: socket.socket, taken: bytes) -> None:
        self._sock = sock
        self._taken = taken

    def makefile(self, mode: str = "rb", *args: Any, **kwargs: Any) -> io.BufferedReader:
        return io.BufferedReader(_Prefixed(self._taken, self._sock.makefile("rb", buffering=0)))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)
