"""The compression backends of a bulk insert body, chosen in one place for every consumer.

gzip: ``"isal"``: ISA-L's igzip, linked into the C core at build time (3-4x zlib's level 1);
``"python-isal"``: the ``isal`` package's igzip, driven from Python (when ISA-L is not linked
in); ``"zlib"``: always there. Every gzip backend writes one gzip member at the fastest
level, sync-flushed after each buffer, so each piece is decodable on arrival.

zstd (``Content-Encoding: zstd``): ``"zstd"``: libzstd, linked into the C core at build time
(compresses with the GIL released, also in the C body pump); ``"python-zstd"``: the
``zstandard`` package (when libzstd is not linked in). Both write one zstd frame at level
``ZSTD_LEVEL`` with a checksum, flushed (``ZSTD_e_flush``) after each buffer.

>>> "zlib" in compression_backends()
True
>>> resolve_compress(False) is None
True
"""
from __future__ import annotations

from typing import Any, Optional, Union

from . import _core

__all__ = ["Compress", "compression_backends", "resolve_compress", "native_backend", "gzip_stream",
           "zstd_backends", "content_encoding", "body_compressor", "ZSTD_LEVEL"]

#: The zstd level of every backend: the fastest positive level (see docs/performance.md).
ZSTD_LEVEL: int = _core.ZSTD_LEVEL

#: What ``compress=`` accepts: False, True/"auto" (the fastest gzip available), "zstd" (the
#: fastest zstd available), or a backend name.
Compress = Union[bool, str]


def compression_backends() -> list:
    """The gzip backends available here, fastest first: ``"isal"`` (ISA-L linked into the C
    core at build time), ``"python-isal"`` (the ``isal`` package), ``"zlib"`` (always).

    >>> compression_backends()[-1]
    'zlib'
    """
    found = []
    if _core.HAVE_ISAL:
        found.append("isal")
    try:
        import isal.isal_zlib  # noqa: F401
        found.append("python-isal")
    except ImportError:
        pass
    found.append("zlib")
    return found


def zstd_backends() -> list:
    """The zstd backends available here, fastest first: ``"zstd"`` (libzstd linked into the C
    core at build time), ``"python-zstd"`` (the ``zstandard`` package).

    >>> set(zstd_backends()) <= {"zstd", "python-zstd"}
    True
    """
    found = []
    if _core.HAVE_ZSTD:
        found.append("zstd")
    try:
        import zstandard  # noqa: F401
        found.append("python-zstd")
    except ImportError:
        pass
    return found


def content_encoding(backend: str) -> str:
    """The ``Content-Encoding`` of a body compressed by ``backend``.

    >>> content_encoding("isal"), content_encoding("python-zstd")
    ('gzip', 'zstd')
    """
    return "zstd" if backend in ("zstd", "python-zstd") else "gzip"


def native_backend() -> str:
    """The fastest backend of the C core itself (ISA-L when linked in, else zlib): the one the
    C body pump can drive without the GIL.

    >>> native_backend() in ("isal", "zlib")
    True
    """
    return "isal" if _core.HAVE_ISAL else "zlib"


def resolve_compress(compress: Compress) -> Optional[str]:
    """The backend ``compress`` names, or None for no compression; ``ValueError`` for a value
    that is not one, or a backend that is not available here.

    >>> resolve_compress("zlib")
    'zlib'
    >>> resolve_compress("zstd") in zstd_backends()
    True
    """
    if compress is False or compress is None:
        return None
    if compress is True or compress == "auto":
        return compression_backends()[0]
    if compress == "zstd":
        found = zstd_backends()
        if not found:
            raise ValueError("compress='zstd': bulkwire was built without libzstd and the "
                             "zstandard package is not installed (pip install zstandard)")
        return found[0]
    if compress == "python-zstd":
        if compress not in zstd_backends():
            raise ValueError("compress='python-zstd': the zstandard package is not installed "
                             "(pip install zstandard)")
        return compress
    if compress in ("zlib", "isal", "python-isal"):
        if compress not in compression_backends():
            raise ValueError(f"compress={compress!r}: that backend is not available here "
                             f"(available: {', '.join(compression_backends())})")
        return compress
    raise ValueError(f"compress must be False, True, 'auto', 'zlib', 'isal', 'python-isal', "
                     f"'zstd' or 'python-zstd', not {compress!r}")


class _PythonStream:
    """A compressor from a Python package, driven like the core's streams: each piece is
    compressed and flushed with ``flush_mode``; ``finish`` ends the stream."""

    backend = ""

    def __init__(self, compressor: Any, flush_mode: int) -> None:
        self._c = compressor
        self._flush_mode = flush_mode
        self.total_in = self.total_out = 0
        self.finished = False

    def compress(self, data: Any) -> Optional[bytes]:
        if not len(data):
            return None
        out = self._c.compress(data) + self._c.flush(self._flush_mode)
        self.total_in += len(data)
        self.total_out += len(out)
        return out or None

    def finish(self, data: Any = None) -> bytes:
        out = (self._c.compress(data) if data is not None else b"") + self._c.flush()
        self.finished = True
        self.total_in += len(data) if data is not None else 0
        self.total_out += len(out)
        return out


class _PythonIsal(_PythonStream):
    """The ``isal`` package's igzip, driven like GzipStream (used when ISA-L is not linked)."""

    backend = "python-isal"

    def __init__(self) -> None:
        from isal import isal_zlib
        super().__init__(isal_zlib.compressobj(1, isal_zlib.DEFLATED, 31), isal_zlib.Z_SYNC_FLUSH)


def gzip_stream(backend: str) -> Any:
    """A new gzip member writer of ``backend`` (a name from :func:`compression_backends`): a
    ``_core.GzipStream``, or for ``"python-isal"`` an object with the same ``compress``,
    ``finish``, ``finished``, ``backend``, ``total_in`` and ``total_out``.

    >>> gzip_stream("zlib").backend
    'zlib'
    """
    return _PythonIsal() if backend == "python-isal" else _core.GzipStream(backend=backend)


class _PythonZstd(_PythonStream):
    """The ``zstandard`` package's compressor, driven like ZstdStream (used when libzstd is
    not linked): the same level and checksum, flushed per buffer."""

    backend = "python-zstd"

    def __init__(self) -> None:
        import zstandard
        super().__init__(zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=True).compressobj(),
                         zstandard.COMPRESSOBJ_FLUSH_BLOCK)


def body_compressor(backend: str) -> Any:
    """A new compressor of one body for ``backend`` (a name from :func:`compression_backends`
    or :func:`zstd_backends`): a ``_core.GzipStream`` or ``_core.ZstdStream``, or for the
    Python backends an object with the same ``compress``, ``finish``, ``finished``,
    ``backend``, ``total_in`` and ``total_out``.

    >>> body_compressor("zlib").backend
    'zlib'
    """
    if backend == "zstd":
        return _core.ZstdStream()
    if backend == "python-zstd":
        return _PythonZstd()
    return gzip_stream(backend)
