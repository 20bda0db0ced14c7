"""A loopback server speaking the RavenDB bulk insert protocol, for tests and benchmarks.

>>> with LoopbackServer() as server:                       # doctest: +SKIP
...     with bulkwire.BulkInsert(server.url, server.database) as bulk:
...         bulk.store({"Name": "a"}, id="things/1")
...     server.documents["things/1"]["Name"]
'a'

It listens on 127.0.0.1 (an ephemeral port), reads the chunked (and gzip or zstd) body as it
arrives, chunk by chunk, parses the command stream and keeps the documents. On request it
stalls (stops reading the body until :meth:`resume`), fails mid-stream (HTTP 500 with an
error body that ``operations/state`` then reports), finishes the request early, or answers
as soon as the array's closing ``]`` has arrived, before the rest of the body
(``answer_at_array_end``, as RavenDB does).

Every request it cannot accept (bad framing, a corrupt or truncated gzip or zstd stream, a body that
is not an array of PUT commands, a bad ``id`` parameter, an unknown database or path, a
client that goes silent) is answered with a 4xx status and an error body
``{"Type": ..., "Message": ..., "Error": ...}``, and the bulk insert's operation, when there
is one, becomes ``Faulted`` with the same message. The parsers behind it work without a
socket: :func:`decode_body` turns the bytes of a request body into its commands or raises
:class:`RequestError`.

It also answers the few requests the official Python client makes before a bulk insert
(``topology``, ``cluster/topology``, ``build/version``), so that client can be benchmarked
against it. :class:`LoopbackCluster` runs several of them as the nodes of one cluster.
"""
from __future__ import annotations

import io
import json
import re
import socket
import ssl
import threading
import time
import traceback
import urllib.parse
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, BinaryIO, Dict, Iterator, List, Optional, Tuple, Union

__all__ = ["LoopbackServer", "LoopbackCluster", "ReceivedRequest", "RequestError",
           "ChunkedReader", "LengthReader", "GzipInflater", "ZstdInflater", "parse_commands",
           "decode_body", "holds_whole_array"]

MAX_SIZE_LINE = 1024          # bytes in a chunk size line, extensions and CRLF included
MAX_CHUNK_SIZE = 64 << 20     # the largest chunk accepted (read whole, so it bounds memory)
MAX_BODY_BYTES = 1 << 36      # the largest body (on the wire, and decoded) accepted
_READ_PIECE = 1 << 20         # a Content-Length body is read in pieces of at most this
_INFLATE_STEP = 1 << 20       # a gzip chunk is inflated in pieces of at most this (bombs)
# Without libzstd, the zstandard package decodes all it can per call: fed this many bytes at a
# time, one call gives at most ~(slice / 4 + 1) blocks of 128 KiB (an RLE block is 4 bytes).
_ZSTD_FEED_SLICE = 64
_ZSTD_WINDOW_MAX = 1 << 23    # the largest window a zstd frame may ask the decoder for
_LINGER_SECONDS = 2.0         # after an early error answer: how long to swallow the rest ...
_LINGER_BYTES = 64 << 20      # ... and how much, so the client reads the answer, not a reset

_PUT_MARKER = b'"Type":"PUT"'
_FAULT_TYPE = "Raven.Client.Documents.Operations.OperationExceptionResult, Raven.Client"
_BAD_REQUEST = "Raven.Client.Exceptions.BadRequestException"
_NO_DATABASE = "Raven.Client.Exceptions.Database.DatabaseDoesNotExistException"
_TIMEOUT = "System.TimeoutException"
_INTERNAL = "System.InvalidOperationException"

# chunk-size [BWS ; chunk-ext] CRLF, with 1*HEXDIG for the size (no sign, no 0x, no spaces)
_SIZE_LINE = re.compile(rb"([0-9A-Fa-f]+)(?:[ \t]*;[^\r\n\x00]*)?\r\n\Z")
_OPERATION_ID = re.compile(r"[0-9]{1,18}\Z")  # fits a signed 64-bit operation id
_JSON_SPACE = " \t\n\r"
_DECODER = json.JSONDecoder()


class RequestError(Exception):
    """A request the loopback server refuses: it answers ``status`` with ``message`` in its
    error body (``error_type`` is the body's ``Type``) and faults the request's operation.

    The body parsers (:func:`decode_body`, :func:`parse_commands`, :class:`ChunkedReader`,
    :class:`LengthReader`, :class:`GzipInflater`) raise it, and only it, for bad input.

    >>> try:
    ...     parse_commands(b'{"Id": "a"}')
    ... except RequestError as error:
    ...     print(error.status, error)
    400 the body must be a JSON array of commands, not an object
    """

    def __init__(self, message: str, status: int = 400, error_type: str = _BAD_REQUEST) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.error_type = error_type


# ---- the body parsers (no sockets: any binary stream) ----

class ChunkedReader:
    """Reads an HTTP/1.1 chunked body from a binary stream, one chunk per :meth:`read_chunk`.

    Strict: a size is hex digits only, every line ends with CRLF, a size line is at most
    ``max_size_line`` bytes, a chunk at most ``max_chunk_size`` bytes (413 beyond), and the
    last chunk is followed by CRLF alone (trailer fields are refused). A chunk's data is
    returned as soon as it has arrived; the CRLF that ends it is checked at the next call (a
    client may send it in front of the next chunk, as bulkwire's sender does, and a server
    that parses the body as it comes has the data before it).

    >>> reader = ChunkedReader(io.BytesIO(b"3\\r\\n[1]\\r\\n0\\r\\n\\r\\n"))
    >>> reader.read_chunk(), reader.read_chunk()
    (b'[1]', None)
    """

    def __init__(self, stream: BinaryIO, *, max_size_line: int = MAX_SIZE_LINE,
                 max_chunk_size: int = MAX_CHUNK_SIZE, reuse_buffer: bool = False) -> None:
        self._stream = stream
        self._max_size_line = max_size_line
        self._max_chunk_size = max_chunk_size
        self._scratch: Optional[bytearray] = bytearray(0) if reuse_buffer else None
        self._data_end: Optional[int] = None  # the size of the chunk whose CRLF is unread
        self.done = False

    def read_chunk(self) -> Optional[Union[bytes, memoryview]]:
        """The next chunk's data, or ``None`` after the last chunk. With ``reuse_buffer`` it is
        a view of a buffer the next call overwrites (counting mode: no allocation per chunk)."""
        if self.done:
            return None
        if self._data_end is not None:
            self._end_of_data(self._data_end)
            self._data_end = None
        line = self._stream.readline(self._max_size_line + 1)
        if not line:
            raise RequestError("the body ends before its last chunk (the connection was closed)")
        if len(line) > self._max_size_line:
            raise RequestError(f"a chunk size line is longer than {self._max_size_line} bytes")
        if not line.endswith(b"\n"):
            raise RequestError("the body ends in the middle of a chunk size line")
        match = _SIZE_LINE.match(line)
        if match is None:
            raise RequestError(f"bad chunk size line {bytes(line[:40])!r}: expected hex digits "
                               f"(and optional extensions) ending with CRLF")
        size = int(match.group(1), 16)
        if size > self._max_chunk_size:
            raise RequestError(f"a chunk of {size} bytes is larger than the server accepts "
                               f"({self._max_chunk_size} bytes)", 413)
        if size == 0:
            self._end_of_body()
            return None
        data = self._read_exactly(size)
        self._data_end = size
        return data

    def _end_of_data(self, size: int) -> None:
        after = self._stream.read(2)
        if after != b"\r\n":
            if len(after) < 2 and b"\r\n".startswith(after):
                raise RequestError("the body ends after a chunk's data, before its CRLF")
            raise RequestError(f"a chunk of {size} bytes is not followed by CRLF (the chunk is "
                               f"longer than its size line says)")

    def _read_exactly(self, size: int) -> Union[bytes, memoryview]:
        if self._scratch is None:
            data = self._stream.read(size)
            got = len(data)
        else:
            if len(self._scratch) < size:
                self._scratch = bytearray(size)  # a new one: views of the old may still exist
            view = memoryview(self._scratch)
            got = 0
            while got < size:
                count = self._stream.readinto(view[got:size])
                if not count:
                    break
                got += count
            data = view[:got]
        if got < size:
            raise RequestError(f"the body ends in the middle of a chunk ({got} of its {size} bytes)")
        return data

    def _end_of_body(self) -> None:
        line = self._stream.readline(self._max_size_line + 1)
        if line == b"\r\n":
            self.done = True
            return
        if not line or line == b"\r":
            raise RequestError("the body ends after its last chunk, before the final CRLF")
        if line.endswith(b"\r\n") and b":" in line:
            raise RequestError("trailer fields after the last chunk are not accepted by the "
                               "loopback server")
        raise RequestError(f"expected CRLF after the last chunk, got {bytes(line[:40])!r}")


class LengthReader:
    """Reads a body of a known ``Content-Length`` in pieces (same interface as
    :class:`ChunkedReader`).

    >>> reader = LengthReader(io.BytesIO(b"[1]"), 3)
    >>> reader.read_chunk(), reader.read_chunk()
    (b'[1]', None)
    """

    def __init__(self, stream: BinaryIO, length: int, *, piece: int = _READ_PIECE) -> None:
        self._stream = stream
        self._length = length
        self._remaining = length
        self._piece = piece
        self.done = length == 0

    def read_chunk(self) -> Optional[bytes]:
        """The next piece of the body, or ``None`` once all of it was read."""
        if self._remaining == 0:
            self.done = True
            return None
        data = self._stream.read(min(self._remaining, self._piece))
        if not data:
            raise RequestError(f"the body ends after {self._length - self._remaining} of its "
                               f"{self._length} bytes (Content-Length)")
        self._remaining -= len(data)
        return data


class GzipInflater:
    """Inflates one gzip member fed in pieces; output comes in pieces of at most
    ``step`` bytes, so a small chunk that inflates to gigabytes is never held whole.

    >>> import gzip
    >>> inflater = GzipInflater()
    >>> b"".join(inflater.feed(gzip.compress(b"[]"))), inflater.finish()
    (b'[]', None)
    """

    def __init__(self, step: int = _INFLATE_STEP) -> None:
        self._inflater = zlib.decompressobj(31)
        self._step = step

    def feed(self, data: Union[bytes, bytearray, memoryview]) -> Iterator[bytes]:
        """The decompressed pieces of ``data``. Raises :class:`RequestError` for a corrupt
        stream or bytes after its end."""
        inflater = self._inflater
        if inflater.eof:
            if data:
                raise RequestError("bytes after the end of the gzip stream")
            return
        try:
            out = inflater.decompress(data, self._step)
            while True:
                if out:
                    yield out
                if inflater.eof:
                    if inflater.unused_data:
                        raise RequestError("bytes after the end of the gzip stream")
                    return
                # a full step may leave output inside zlib even when all input was consumed
                if not inflater.unconsumed_tail and len(out) < self._step:
                    return
                out = inflater.decompress(inflater.unconsumed_tail, self._step)
        except zlib.error as exc:
            raise RequestError(f"the gzip stream is corrupt: {exc}") from None

    def finish(self) -> None:
        """Check that the stream ended (raises :class:`RequestError` when truncated)."""
        if not self._inflater.eof:
            raise RequestError("the gzip stream is truncated: the body ended before the end of "
                               "the stream")


class ZstdInflater:
    """Decodes one zstd frame fed in pieces; output comes in pieces of at most ``step``
    bytes (libzstd through ``_core.ZstdDecoder``), so a small chunk that decodes to gigabytes
    is never held whole. ``backend``: ``"zstd"`` (libzstd, when linked) or ``"python-zstd"``
    (the ``zstandard`` package, fed in small slices to bound each call's output); the
    default is the first available.

    >>> from bulkwire import _core
    >>> encoder = _core.ZstdStream() if _core.HAVE_ZSTD else None
    >>> encoder is None or (b"".join(ZstdInflater().feed(encoder.finish(b"[]"))) == b"[]")
    True
    """

    def __init__(self, step: int = _INFLATE_STEP, backend: Optional[str] = None) -> None:
        from . import _core
        self._step = step
        self._ended = False
        self.backend = backend or ("zstd" if _core.HAVE_ZSTD else "python-zstd")
        if self.backend == "zstd":
            self._decoder = _core.ZstdDecoder()
        elif self.backend == "python-zstd":
            import zstandard
            self._error = zstandard.ZstdError
            self._dobj = zstandard.ZstdDecompressor(max_window_size=_ZSTD_WINDOW_MAX).decompressobj()
        else:
            raise ValueError(f"backend must be 'zstd' or 'python-zstd', not {backend!r}")

    def feed(self, data: Union[bytes, bytearray, memoryview]) -> Iterator[bytes]:
        """The decoded pieces of ``data``. Raises :class:`RequestError` for a corrupt stream
        or bytes after its end."""
        if self._ended:
            if len(data):
                raise RequestError("bytes after the end of the zstd stream")
            return
        if self.backend == "zstd":
            yield from self._feed_native(memoryview(data))
        else:
            yield from self._feed_python(memoryview(data))

    def _feed_native(self, view: memoryview) -> Iterator[bytes]:
        read, step = self._decoder.read, self._step
        while True:
            try:
                out, used, ended = read(view, step)
            except ValueError as exc:
                raise RequestError(f"the zstd stream is corrupt: {exc}") from None
            view = view[used:]
            if out:
                yield out
            if ended:
                self._ended = True
                if len(view):
                    raise RequestError("bytes after the end of the zstd stream")
                return
            # a full step may leave output inside the decoder; otherwise all input was taken
            if len(out) < step:
                if not len(view):
                    return
                if not used:  # the decoder neither took input nor gave output
                    raise RequestError("the zstd stream is corrupt: the decoder stopped")

    def _feed_python(self, view: memoryview) -> Iterator[bytes]:
        dobj, step = self._dobj, self._step
        for start in range(0, len(view), _ZSTD_FEED_SLICE):
            try:
                out = dobj.decompress(view[start:start + _ZSTD_FEED_SLICE])
            except self._error as exc:
                raise RequestError(f"the zstd stream is corrupt: {exc}") from None
            for at in range(0, len(out), step):
                yield out[at:at + step]
            if dobj.eof:
                self._ended = True
                if dobj.unused_data or start + _ZSTD_FEED_SLICE < len(view):
                    raise RequestError("bytes after the end of the zstd stream")
                return

    def finish(self) -> None:
        """Check that the stream ended (raises :class:`RequestError` when truncated)."""
        if not self._ended:
            raise RequestError("the zstd stream is truncated: the body ended before the end of "
                               "the frame")


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "a number"


def _show(value: Any) -> str:
    if isinstance(value, str):
        return repr(value[:60] + ("..." if len(value) > 60 else ""))
    return _kind(value)


_MISSING = object()
_COMMAND_TYPES = ("PUT", "Counters", "TimeSeriesBulkInsert", "AttachmentPUT")


def _member(index: int, what: str, obj: dict, key: str, check: Any, expected: str) -> Any:
    """obj[key] when check(obj[key]); RequestError naming the command otherwise."""
    value = obj.get(key, _MISSING)
    if value is _MISSING:
        raise RequestError(f"command {index} ({what}) has no {key}")
    _need(index, what, value, check(value), f"{key} {expected}")
    return value


def _need(index: int, what: str, value: Any, ok: bool, expected: str) -> None:
    if not ok:
        raise RequestError(f"command {index} ({what}) needs {expected}, not {_show(value)}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_name(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _is_increment(op: Any) -> bool:
    return (isinstance(op, dict) and op.get("Type") == "Increment"
            and isinstance(op.get("CounterName"), str) and _is_int(op.get("Delta")))


def _is_entry(entry: Any) -> bool:
    """[<unix ms>, <n>, <n numbers or nulls>(, <tag>)]"""
    if not (isinstance(entry, list) and len(entry) >= 2 and _is_int(entry[0])
            and _is_int(entry[1]) and entry[1] >= 0):
        return False
    n = entry[1]
    return (len(entry) in (2 + n, 3 + n)
            and all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))
                    for v in entry[2:2 + n])
            and (len(entry) == 2 + n or isinstance(entry[-1], str)))


def _check_counters(index: int, command: dict) -> None:
    what = f"Counters {_show(command['Id'])}"
    counters = _member(index, what, command, "Counters", lambda v: isinstance(v, dict),
                       "that is a JSON object")
    _member(index, what, counters, "DocumentId", _is_name, "that is a non-empty string")
    operations = _member(index, what, counters, "Operations", lambda v: isinstance(v, list),
                         "that is a JSON array")
    for op in operations:
        _need(index, what, op, _is_increment(op),
              'operations {"Type":"Increment","CounterName":<string>,"Delta":<integer>}')


def _check_time_series(index: int, command: dict) -> None:
    what = f"TimeSeriesBulkInsert {_show(command['Id'])}"
    series = _member(index, what, command, "TimeSeries", lambda v: isinstance(v, dict),
                     "that is a JSON object")
    _member(index, what, series, "Name", _is_name, "that is a non-empty string")
    _member(index, what, series, "TimeFormat", lambda v: v == "UnixTimeInMs", "'UnixTimeInMs'")
    appends = _member(index, what, series, "Appends", lambda v: isinstance(v, list),
                      "that is a JSON array")
    for entry in appends:
        _need(index, what, entry, _is_entry(entry), "entries [<unix ms>,<n>,<n numbers>(,<tag>)]")


def _check_attachment(index: int, command: dict) -> None:
    what = f"AttachmentPUT {_show(command['Id'])}"
    _member(index, what, command, "Name", _is_name, "that is a non-empty string")
    if "ContentType" in command:
        _member(index, what, command, "ContentType", lambda v: isinstance(v, str), "that is a string")
    _member(index, what, command, "ContentLength", lambda v: _is_int(v) and v >= 0,
            "that is a non-negative integer")


def _check_command(index: int, command: Any) -> None:
    if not isinstance(command, dict):
        raise RequestError(f"command {index} must be a JSON object, not {_kind(command)}")
    kind = command.get("Type")
    if kind not in _COMMAND_TYPES:
        if "Type" not in command:
            raise RequestError(f"command {index} has no Type")
        raise RequestError(f"command {index} has Type {_show(kind)}: the loopback server "
                           f"implements {', '.join(_COMMAND_TYPES)}")
    doc_id = command.get("Id")
    if not isinstance(doc_id, str) or not doc_id:
        if "Id" not in command:
            raise RequestError(f"command {index} ({kind}) has no Id")
        raise RequestError(f"command {index} ({kind}) needs an Id that is a non-empty string, "
                           f"not {_show(doc_id)}")
    if kind == "Counters":
        return _check_counters(index, command)
    if kind == "TimeSeriesBulkInsert":
        return _check_time_series(index, command)
    if kind == "AttachmentPUT":
        return _check_attachment(index, command)
    if not isinstance(command.get("Document"), dict):
        if "Document" not in command:
            raise RequestError(f"command {index} (PUT {_show(doc_id)}) has no Document")
        raise RequestError(f"command {index} (PUT {_show(doc_id)}) needs a Document that is a "
                           f"JSON object, not {_kind(command['Document'])}")


def parse_commands(body: Union[bytes, bytearray, memoryview]) -> List[dict]:
    """The commands of a decoded bulk insert body: a JSON array (UTF-8) of commands, each
    ``{"Id": str, "Type": "PUT", "Document": {...}}``, a ``Counters``, a
    ``TimeSeriesBulkInsert`` or an ``AttachmentPUT`` command; the latter is followed by its
    ``ContentLength`` raw bytes, which the parser puts into the command as ``"Bytes"``
    (``bytes``). Raises :class:`RequestError` naming the first problem (the first bad
    command, the byte that is not UTF-8, the JSON error).

    >>> parse_commands(b'[{"Id":"a/1","Type":"PUT","Document":{"x":1}}]')
    [{'Id': 'a/1', 'Type': 'PUT', 'Document': {'x': 1}}]
    >>> parse_commands(b'[{"Id":"a/1","Type":"AttachmentPUT","Name":"f","ContentLength":2}\\xff\\x00]')
    [{'Id': 'a/1', 'Type': 'AttachmentPUT', 'Name': 'f', 'ContentLength': 2, 'Bytes': b'\\xff\\x00'}]
    """
    try:
        commands = json.loads(str(body, "utf-8"))
    except (ValueError, RecursionError):
        # not UTF-8 JSON as a whole: raw attachment bytes, or an error to find and name
        return _walk_commands(bytes(body))
    if not isinstance(commands, list):
        raise RequestError(f"the body must be a JSON array of commands, not {_kind(commands)}")
    for index, command in enumerate(commands):
        _check_command(index, command)
        if command.get("Type") == "AttachmentPUT":
            if command["ContentLength"]:  # its bytes were read as JSON (e.g. b" "): read again
                return _walk_commands(bytes(body))
            command["Bytes"] = b""
    return commands


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _JSON_SPACE:
        pos += 1
    return pos


_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")


def _walk_commands(body: bytes) -> List[dict]:
    """Parses the array one command at a time, taking each attachment's raw bytes by its
    declared length. The body is read as UTF-8 with undecodable bytes escaped (as lone
    surrogates, which valid UTF-8 never gives), so that the JSON between attachments must
    still be UTF-8 and an attachment's bytes may be anything."""
    text = body.decode("utf-8", "surrogateescape")
    char_mark = byte_mark = 0  # a character position and its byte offset
    checked = 0  # text before this was checked to be UTF-8 (attachments' bytes excepted)

    def byte_offset(pos: int) -> int:
        nonlocal char_mark, byte_mark
        byte_mark += len(text[char_mark:pos].encode("utf-8", "surrogateescape"))
        char_mark = pos
        return byte_mark

    def not_utf8(start: int, end: int) -> Optional[RequestError]:
        bad = _ESCAPED_BYTE.search(text, start, end)
        if bad is None:
            return None
        return RequestError(f"the body is not UTF-8 (an invalid byte sequence at byte "
                            f"{byte_offset(bad.start())})")

    def syntax(message: str, pos: int) -> RequestError:
        # a syntax error at an undecodable byte is that byte's error
        return not_utf8(checked, min(pos + 1, len(text))) or RequestError(message)

    pos = _skip_space(text, 0)
    if pos == len(text):
        raise syntax("the body is empty: expected a JSON array of commands", pos)
    if text[pos] != "[":
        try:
            value, _ = _DECODER.raw_decode(text, pos)
        except (ValueError, RecursionError):
            raise syntax(f"the body is not JSON (at character {pos})", pos) from None
        raise RequestError(f"the body must be a JSON array of commands, not {_kind(value)}")
    commands: List[dict] = []
    pos = _skip_space(text, pos + 1)
    if pos < len(text) and text[pos] == "]":
        pos += 1
    else:
        while True:
            index = len(commands)
            try:
                command, end = _DECODER.raw_decode(text, pos)
            except RecursionError:
                raise RequestError(f"command {index} is nested too deeply") from None
            except json.JSONDecodeError as exc:
                raise syntax(f"command {index} is not valid JSON: {exc.msg} (at character "
                             f"{exc.pos})", exc.pos) from None
            error = not_utf8(checked, end)
            if error is not None:
                raise error
            _check_command(index, command)
            commands.append(command)
            pos = end
            if command["Type"] == "AttachmentPUT":
                start = byte_offset(pos)
                length = command["ContentLength"]
                data = body[start:start + length]
                if len(data) < length:
                    raise RequestError(f"the body ends inside the bytes of attachment command "
                                       f"{index} ({len(data)} of {length})")
                command["Bytes"] = data
                pos += len(data.decode("utf-8", "surrogateescape"))
                char_mark, byte_mark = pos, start + length
            checked = pos
            pos = _skip_space(text, pos)
            if pos == len(text):
                raise syntax("the body ends inside the array of commands", pos)
            if text[pos] == "]":
                pos += 1
                break
            if text[pos] != ",":
                raise syntax(f"expected ',' or ']' after command {index} (at character {pos})", pos)
            pos = _skip_space(text, pos + 1)
    pos = _skip_space(text, pos)
    if pos < len(text):
        raise syntax(f"data after the end of the array of commands (at character {pos})", pos)
    error = not_utf8(checked, len(text))
    if error is not None:
        raise error
    return commands


def holds_whole_array(body: Union[bytes, bytearray]) -> bool:
    """Whether ``body``, a decoded bulk insert body so far, is one whole JSON array: its
    closing ``]`` has arrived, so a server that parses the stream as it comes can answer.

    >>> holds_whole_array(b'[{"a": [1]}'), holds_whole_array(b'[{"a": [1]}]')
    (False, True)
    """
    if not bytes(body[-64:]).rstrip(_JSON_SPACE.encode()).endswith(b"]"):
        return False  # cheap: only a body that ends in "]" is parsed
    try:
        return isinstance(json.loads(body), list)
    except (ValueError, RecursionError):
        return False


def decode_body(wire: Union[bytes, bytearray], *, gzip: bool = False, chunked: bool = True,
                max_size_line: int = MAX_SIZE_LINE,
                max_chunk_size: int = MAX_CHUNK_SIZE, zstd: bool = False) -> List[dict]:
    """The commands of one bulk insert request body exactly as it came off the wire: chunked
    (or, ``chunked=False``, the whole body), gzip when ``gzip``, zstd when ``zstd``. The same
    readers, inflaters and command parser as the server's; :class:`RequestError` for anything
    it refuses, including bytes after the last chunk.

    >>> decode_body(b'2\\r\\n[]\\r\\n0\\r\\n\\r\\n')
    []
    """
    stream = io.BytesIO(wire)
    reader: Union[ChunkedReader, LengthReader] = (
        ChunkedReader(stream, max_size_line=max_size_line, max_chunk_size=max_chunk_size)
        if chunked else LengthReader(stream, len(wire)))
    if gzip and zstd:
        raise ValueError("a body is gzip or zstd, not both")
    inflater: Union[GzipInflater, ZstdInflater, None] = (
        GzipInflater() if gzip else ZstdInflater() if zstd else None)
    body = bytearray()
    while True:
        data = reader.read_chunk()
        if data is None:
            break
        for piece in (inflater.feed(data) if inflater is not None else (data,)):
            body += piece
    if stream.read(1):
        raise RequestError("bytes after the last chunk")
    if inflater is not None:
        inflater.finish()
    return parse_commands(body)


class _MarkerCounter:
    """Counts PUT markers in a body seen in pieces, also those split between pieces."""

    def __init__(self) -> None:
        self.count = 0
        self._tail = b""  # the last len(marker) - 1 bytes seen

    def feed(self, piece: Union[bytes, memoryview]) -> None:
        edge = len(_PUT_MARKER) - 1
        size = len(piece)
        # a view from ChunkedReader(reuse_buffer=True) starts at its buffer's first byte
        buffer = piece.obj if isinstance(piece, memoryview) else piece
        self.count += buffer.count(_PUT_MARKER, 0, size)  # type: ignore[union-attr]
        self.count += (self._tail + bytes(piece[:edge])).count(_PUT_MARKER)
        self._tail = (self._tail + bytes(piece[-edge:]))[-edge:]


# ---- the server ----

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


class LoopbackCluster:
    """Several :class:`LoopbackServer` nodes of one cluster (tags ``A``, ``B``, ...), each
    holding ``database`` and answering ``GET /topology?name=<database>`` with every node, in
    order, and ``next-operation-id`` with its own tag, as RavenDB's nodes do.

    A node can be killed (:meth:`kill`: its port refuses connections from then on, its URL
    stays in the topology) or made to fail (:meth:`fail`: it answers every request with an
    error status). ``roles`` holds each node's ``ServerRole`` in the topology; :meth:`sequence`
    lists the requests all nodes received, in order.

    >>> with LoopbackCluster(2) as cluster:                 # doctest: +SKIP
    ...     cluster.kill(0)
    ...     with bulkwire.BulkInsert(cluster.urls, cluster.database) as bulk:
    ...         bulk.store({"Name": "a"}, id="things/1")
    ...     cluster.servers[1].documents["things/1"]["Name"]
    'a'
    """

    def __init__(self, nodes: int = 3, database: str = "db", **options: Any) -> None:
        if isinstance(nodes, bool) or not isinstance(nodes, int) or not 1 <= nodes <= 26:
            raise ValueError(f"nodes must be an int from 1 to 26, not {nodes!r}")
        self.database = database
        self.journal: List[Tuple[str, str]] = []  # (node URL, "METHOD path")
        self.roles: List[str] = ["Member"] * nodes
        self.etag = 1
        self.servers: List[LoopbackServer] = []
        self._tombstones: Dict[int, socket.socket] = {}
        try:
            for index in range(nodes):
                server = LoopbackServer(database, **options)
                server.node_tag = chr(ord("A") + index)
                server.topology = self.topology
                server.journal = self.journal
                self.servers.append(server)
        except BaseException:
            self.close()
            raise
        self.urls: List[str] = [server.url for server in self.servers]
        self.tags: List[str] = [server.node_tag for server in self.servers]

    def topology(self) -> dict:
        """The database topology every node answers."""
        return {"Nodes": [{"Url": url, "ClusterTag": tag, "Database": self.database,
                           "ServerRole": role}
                          for url, tag, role in zip(self.urls, self.tags, self.roles)],
                "Etag": self.etag}

    def kill(self, index: int) -> None:
        """Node ``index`` dies: its server stops, and its port stays bound without listening,
        so a connection to its URL is refused (and no other server can take the port)."""
        server = self.servers[index]
        port = int(self.urls[index].rpartition(":")[2])
        server.close()
        tombstone = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            tombstone.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            tombstone.bind(("127.0.0.1", port))
        except BaseException:
            tombstone.close()
            raise
        self._tombstones[index] = tombstone

    def fail(self, index: int, status: Optional[int] = 503) -> None:
        """Node ``index`` answers every request with ``status`` (None: serves again)."""
        self.servers[index].down_status = status

    def answer_topology(self, index: int, answer: Any) -> None:
        """What node ``index`` answers to ``GET /topology``: a JSON value, or bytes sent as
        they are (None: the cluster's topology again)."""
        self.servers[index].topology = self.topology if answer is None else (lambda: answer)

    def sequence(self) -> List[Tuple[int, str]]:
        """``(node index, "METHOD path")`` of every request any node received, in order."""
        index = {url: i for i, url in enumerate(self.urls)}
        return [(index[url], line) for url, line in self.journal]

    @property
    def requests(self) -> List[Tuple[str, ReceivedRequest]]:
        """``(tag, request)`` of every bulk insert request, node by node."""
        return [(server.node_tag, request) for server in self.servers
                for request in server.requests]

    @property
    def unexpected_errors(self) -> List[str]:
        return [trace for server in self.servers for trace in server.unexpected_errors]

    def close(self) -> None:
        for index, server in enumerate(self.servers):
            if index not in self._tombstones:
                server.close()
        for tombstone in self._tombstones.values():
            tombstone.close()
        self._tombstones.clear()

    def __enter__(self) -> "LoopbackCluster":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def serve(port: int = 0, database: str = "db", **options: Any) -> None:
    """Run a server until interrupted, printing its URL first (benchmarks run it in its own
    process so that it does not share the client's GIL)."""
    with LoopbackServer(database, port=port, **options) as server:
        print(server.url, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="bulkwire's loopback bulk insert server")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--database", default="db")
    parser.add_argument("--count-only", action="store_true", help="count bytes and commands, keep nothing")
    args = parser.parse_args()
    serve(args.port, args.database, keep_body=not args.count_only)
