"""The compression backends of a bulk insert body, chosen in one place for every consumer.

gzip: ``"isal"``: ISA-L's igzip, linked into the C core at build time (3-4x zlib's level 1);
``"python-isal"``: the ``isal`` package's igzip, driven from Python (when ISA-L is not linked
in); ``"zlib"``: always there. Every gzip backend writes one gzip member at the fastest
level, sync-flushed after each buffer, so each piece is decodable on arrival.

zstd (``Content-Encoding: zstd``): ``"zstd"``: libzstd, linked into the C core at build time
(compresses with the GIL released, also in the C body pump); ``"python-zstd"``: the
``zstandard`` package (when libzstd is not linked in). Both write one zstd frame with a
checksum, flushed (``ZSTD_e_flush``) after each buffer: libzstd at ``ZSTD_LEVEL`` (a negative,
fast level with the literals still Huffman-coded), the package at ``PYTHON_ZSTD_LEVEL`` (1:
it cannot keep the literals coded at negative levels, and without them the body grows).

Threads: the C core's gzip and zstd streams compress each buffer on ``compress_threads``
threads at once (default :func:`default_compress_threads`), still as one gzip member or one
zstd frame.

>>> "zlib" in compression_backends()
True
>>> resolve_compress(False) is None
True
"""
from __future__ import annotations

import os
from typing import Any, Optional, Union

from . import _core

__all__ = ["Compress", "COMPRESS_NAMES", "DEPRECATED_COMPRESS_NAMES", "parse_compress",
           "compress_encoding", "compress_value", "default_gzip_backend",
           "compression_backends", "resolve_compress", "native_backend", "gzip_stream",
           "zstd_backends", "content_encoding", "body_compressor", "ZSTD_LEVEL",
           "PYTHON_ZSTD_LEVEL", "default_compress_threads", "check_compress_threads"]

#: libzstd's level (the ``"zstd"`` backend): the fastest level no larger than ISA-L's level 1
#: on the benchmark bodies, with Huffman-coded literals forced on (see docs/performance.md).
ZSTD_LEVEL: int = _core.ZSTD_LEVEL
#: The ``zstandard`` package's level (``"python-zstd"``): it exposes no way to keep literals
#: coded at negative levels, so it stays at the fastest positive level.
PYTHON_ZSTD_LEVEL: int = 1

#: The most threads :func:`default_compress_threads` picks: compression stops scaling with
#: threads once the encoder, on its own core, is the slower side.
DEFAULT_THREADS_MAX = 4


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity, so ``taskset`` counts.

    >>> usable_cpus() >= 1
    True
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, cpus)


def default_compress_threads() -> int:
    """The threads a body's compressor runs when ``compress_threads`` is None: the CPUs this
    process may run on (:func:`usable_cpus`), at most ``DEFAULT_THREADS_MAX``.

    >>> 1 <= default_compress_threads() <= DEFAULT_THREADS_MAX
    True
    """
    return min(usable_cpus(), DEFAULT_THREADS_MAX)


def check_compress_threads(threads: Optional[int]) -> int:
    """``threads`` checked (an int from 1 to ``_core.GZIP_THREADS_MAX``), or the default for None.

    >>> check_compress_threads(2)
    2
    """
    if threads is None:
        return default_compress_threads()
    if isinstance(threads, bool) or not isinstance(threads, int):
        raise TypeError(f"compress_threads must be an int or None, not {type(threads).__name__}")
    if not 1 <= threads <= _core.GZIP_THREADS_MAX:
        raise ValueError(f"compress_threads must be 1 to {_core.GZIP_THREADS_MAX}, not {threads}")
    return threads

#: What ``compress=`` accepts: False/None, True, or a name (see :func:`parse_compress`).
Compress = Union[bool, str, None]


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
    """The ``Content-Encoding`` of a body compressed by ``backend`` (or by the backend of a
    name of :data:`COMPRESS_NAMES`).

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


#: The names ``compress=`` takes (and ``bulkwire load --compress``), besides False/None (no
#: compression) and True (the same as ``"gzip"``): ``"gzip"`` and ``"zstd"`` name an
#: encoding, compressed by its default backend; the others name a backend.
COMPRESS_NAMES: tuple = ("gzip", "zstd", "isal", "python-isal", "zlib", "python-zstd")

#: Names that still work, with a ``DeprecationWarning``, and the value they stand for.
DEPRECATED_COMPRESS_NAMES: dict = {"auto": "gzip"}


def default_gzip_backend() -> str:
    """The backend of ``compress=True`` / ``"gzip"`` everywhere: the C core's own gzip
    (:func:`native_backend`: ISA-L when linked in, else zlib), which compresses on
    ``compress_threads`` threads with the GIL released and which the C body pump drives.
    ``"python-isal"`` is used only when asked for by name.

    >>> default_gzip_backend() == native_backend()
    True
    """
    return native_backend()


def parse_compress(value: Compress, name: str = "compress") -> Optional[str]:
    """The one reading of a ``compress`` value, for every entry point (``BulkWriter``,
    ``BulkInsert``, ``load_parquet``, ``load_arrow``, the Dask and Ray sinks, the CLI, the
    drop-in): the backend it names, or None for no compression.

    False or None: no compression. True or ``"gzip"``: gzip by :func:`default_gzip_backend`.
    ``"zstd"``: zstd by the fastest zstd backend here (libzstd linked in, else the
    ``zstandard`` package). ``"isal"``, ``"python-isal"``, ``"zlib"``, ``"python-zstd"``: that
    backend. ``"auto"`` (deprecated): ``"gzip"``, with a ``DeprecationWarning``.
    ``TypeError`` for a value of another type, ``ValueError`` for another name or a backend
    that is not available here; both name ``name``.

    >>> parse_compress("zlib")
    'zlib'
    >>> parse_compress(True) == parse_compress("gzip") == default_gzip_backend()
    True
    >>> parse_compress("zstd") in zstd_backends()
    True
    >>> parse_compress("lz4")
    Traceback (most recent call last):
    ...
    ValueError: compress must be False, True or one of 'gzip', 'zstd', 'isal', 'python-isal', 'zlib', 'python-zstd', not 'lz4'
    """
    value = _compress_name(value, name)
    if value is None:
        return None
    if value == "gzip":
        backend = default_gzip_backend()
        if backend == "zlib":
            from ._fallbacks import warn_missing

            warn_missing("isal", "gzip bodies are compressed with zlib,",
                         "several times slower than ISA-L (or pip install isal)")
        return backend
    if value == "zstd":
        found = zstd_backends()
        if not found:
            raise ValueError(f"{name}='zstd': bulkwire was built without libzstd "
                             "(apt-get install libzstd-dev, then reinstall bulkwire) and the "
                             "zstandard package is not installed (pip install zstandard)")
        return found[0]
    if value == "python-zstd":
        if value not in zstd_backends():
            raise ValueError(f"{name}='python-zstd': the zstandard package is not installed "
                             "(pip install zstandard)")
        return value
    if value not in compression_backends():  # "zlib", "isal", "python-isal"
        raise ValueError(f"{name}={value!r}: that backend is not available here "
                         f"(available: {', '.join(compression_backends())})")
    return value


def _compress_name(value: Compress, name: str) -> Optional[str]:
    """The name of :data:`COMPRESS_NAMES` a ``compress`` value stands for, or None for no
    compression, whether its backend is here or not (:func:`parse_compress` then asks);
    ``TypeError`` and ``ValueError`` as it raises them, and its ``DeprecationWarning``
    pointing at its caller's caller."""
    if value is None or value is False:
        return None
    if value is True:
        value = "gzip"
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a bool, None or a str, not {type(value).__name__}")
    if value in DEPRECATED_COMPRESS_NAMES:
        from ._deprecated import warn_deprecated

        replacement = DEPRECATED_COMPRESS_NAMES[value]
        warn_deprecated(f"{name}={value!r}", f"{name}={replacement!r} (or True)", stacklevel=4)
        value = replacement
    if value not in COMPRESS_NAMES:
        raise ValueError(f"{name} must be False, True or one of "
                         f"{', '.join(map(repr, COMPRESS_NAMES))}, not {value!r}")
    return value


def compress_value(value: Compress, name: str = "compress") -> Union[bool, str]:
    """``value`` judged by :func:`parse_compress` (which warns of a deprecated name), in its
    canonical form: False, or a name of :data:`COMPRESS_NAMES` (True and deprecated names
    replaced by what they stand for). This is what travels to worker processes and
    engines: the backend is picked where the body is compressed.

    >>> compress_value(True), compress_value(None), compress_value("zlib")
    ('gzip', False, 'zlib')
    """
    parse_compress(value, name)
    if value is None or value is False:
        return False
    if value is True:
        return "gzip"
    return DEPRECATED_COMPRESS_NAMES.get(value, value)


#: :func:`parse_compress`, by the name this module had for it first (the same function, so
#: that its warnings point at the caller's line as they do when it is called by that name).
resolve_compress = parse_compress


def compress_encoding(value: Compress, name: str = "compress") -> Optional[str]:
    """The ``Content-Encoding`` a ``compress`` value gives the body: None, ``"gzip"`` or
    ``"zstd"``. The value is judged as :func:`parse_compress` judges it (the same errors and
    warning), but naming the encoding does not need its backend: ``"python-zstd"`` is
    ``"zstd"`` without the ``zstandard`` package.

    >>> compress_encoding("zlib"), compress_encoding(False), compress_encoding("python-zstd")
    ('gzip', None, 'zstd')
    """
    named = _compress_name(value, name)
    return None if named is None else content_encoding(named)


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


def gzip_stream(backend: str, threads: int = 1) -> Any:
    """A new gzip member writer of ``backend`` (a name from :func:`compression_backends`): a
    ``_core.GzipStream`` deflating on ``threads`` threads, or for ``"python-isal"`` (one
    thread) an object with the same ``compress``, ``finish``, ``finished``, ``backend``,
    ``total_in`` and ``total_out``.

    >>> gzip_stream("zlib", threads=2).threads
    2
    """
    if backend == "python-isal":
        return _PythonIsal()
    return _core.GzipStream(backend=backend, threads=threads)


class _PythonZstd(_PythonStream):
    """The ``zstandard`` package's compressor, driven like ZstdStream (used when libzstd is
    not linked): the same level and checksum, flushed per buffer."""

    backend = "python-zstd"

    def __init__(self) -> None:
        import zstandard
        super().__init__(zstandard.ZstdCompressor(level=PYTHON_ZSTD_LEVEL,
                                                  write_checksum=True).compressobj(),
                         zstandard.COMPRESSOBJ_FLUSH_BLOCK)


def body_compressor(backend: str, threads: Optional[int] = 1) -> Any:
    """A new compressor of one body for ``backend`` (a name from :func:`compression_backends`
    or :func:`zstd_backends`): a ``_core.GzipStream`` or ``_core.ZstdStream`` on ``threads``
    threads, or for the Python backends (one thread) an object with the same ``compress``,
    ``finish``, ``finished``, ``backend``, ``total_in`` and ``total_out``. None: gzip on
    :func:`default_compress_threads`, zstd on one (at ``ZSTD_LEVEL`` it outruns the encoder
    alone; its workers start only when asked for).

    >>> body_compressor("zlib").backend
    'zlib'
    """
    if backend == "zstd":
        return _core.ZstdStream(threads=1 if threads is None else check_compress_threads(threads))
    threads = check_compress_threads(threads)
    if backend == "python-zstd":
        return _PythonZstd()
    return gzip_stream(backend, threads)
