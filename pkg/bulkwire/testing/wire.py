"""The loopback server's wire readers: a chunked or Content-Length body read from any binary
stream, and the gzip and zstd inflaters, every read and every output piece bounded. They
raise :class:`RequestError`, and only it, for input the server refuses."""
from __future__ import annotations

import re
import zlib
from typing import BinaryIO, Iterator, Optional, Union

MAX_SIZE_LINE = 1024          # bytes in a chunk size line, extensions and CRLF included
MAX_CHUNK_SIZE = 64 << 20     # the largest chunk accepted (read whole, so it bounds memory)
MAX_BODY_BYTES = 1 << 36      # the largest body (on the wire, and decoded) accepted
_READ_PIECE = 1 << 20         # a Content-Length body is read in pieces of at most this
_INFLATE_STEP = 1 << 20       # a gzip chunk is inflated in steps of at most this (bombs)
# Without libzstd, the zstandard package decodes all it can per call: fed this many bytes at a
# time, one call gives at most ~(slice / 4 + 1) blocks of 128 KiB (an RLE block is 4 bytes).
_ZSTD_FEED_SLICE = 64
_ZSTD_WINDOW_MAX = 1 << 23    # the largest window a zstd frame may ask the decoder for

_BAD_REQUEST = "Raven.Client.Exceptions.BadRequestException"

# chunk-size [BWS ; chunk-ext] CRLF, with 1*HEXDIG for the size (no sign, no 0x, no spaces)
_SIZE_LINE = re.compile(rb"([0-9A-Fa-f]+)(?:[ \t]*;[^\r\n\x00]*)?\r\n\Z")


class RequestError(Exception):
    """A request the loopback server refuses: it answers ``status`` with ``message`` in its
    error body (``error_type`` is the body's ``Type``) and faults the request's operation.

    The body parsers (:func:`decode_body`, :func:`parse_commands`, :class:`ChunkedReader`,
    :class:`LengthReader`, :class:`GzipInflater`) raise it, and only it, for bad input.

    >>> from bulkwire.testing import parse_commands
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


class ChunkedReader:
    """Reads an HTTP/1.1 chunked body from a binary stream, one chunk per :meth:`read_chunk`.

    Strict: a size is hex digits only, every line ends with CRLF, a size line is at most
    ``max_size_line`` bytes, a chunk at most ``max_chunk_size`` bytes (413 beyond), and the
    last chunk is followed by CRLF alone (trailer fields are refused). A chunk's data is
    returned as soon as it has arrived; the CRLF that ends it is checked at the next call (a
    client may send it in front of the next chunk, as bulkwire's sender does, and a server
    that parses the body as it comes has the data before it).

    >>> import io
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

    >>> import io
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
        from .. import _core
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

