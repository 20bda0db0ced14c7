"""The answers to bulkwire's HTTP requests, read by http.client's rules with a head parser of
its own (:class:`_Answer`; RFC 9110 and 9112 where http.client departs from them), and whether
the server has already sent something on a connection (:func:`_answered`). A module of
:mod:`bulkwire.transport`, which keeps every name of it importable as before."""
from __future__ import annotations

import email.parser
import http.client
import io
import re
import select
import socket
from typing import Any, Optional, Tuple

# The protocol's answers (an id, an operation's state, an error) are small: reading more than
# this is a server that does not speak it, and must not fill the client's memory.
MAX_ANSWER_BYTES = 1 << 20


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
    bulkwire._transport_answer._AnswerRefused: the answer's chunk size line b'-1\r\n' is not a hexadecimal chunk size (RFC 9112)
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


def _answered(sock: Any) -> bool:
    """True when the server already sent something (an answer, or the end of the
    connection): the socket reads as ready, now, without waiting. ``poll``, as the C pump
    asks, never ``select``, which refuses a descriptor of ``FD_SETSIZE`` (1024) or more:
    a process may hold any number of files."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)  # POLLHUP and POLLERR are reported anyway
    return bool(poller.poll(0))


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
