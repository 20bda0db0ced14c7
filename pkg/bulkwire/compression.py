"""The gzip backends of a bulk insert body, chosen in one place for every consumer.

``"isal"``: ISA-L's igzip, linked into the C core at build time (3-4x zlib's level 1);
``"python-isal"``: the ``isal`` package's igzip, driven from Python (when ISA-L is not linked
in); ``"zlib"``: always there. Every backend writes one gzip member at the fastest level,
sync-flushed after each buffer, so each piece is decodable on arrival.

>>> "zlib" in compression_backends()
True
>>> resolve_compress(False) is None
True
"""
from __future__ import annotations

from typing import Any, Optional, Union

from . import _core

__all__ = ["Compress", "compression_backends", "resolve_compress", "native_backend", "gzip_stream"]

#: What ``compress=`` accepts: False, True/"auto" (the fastest available), or a backend name.
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
    """
    if compress is False or compress is None:
        return None
    if compress is True or compress == "auto":
        return compression_backends()[0]
    if compress in ("zlib", "isal", "python-isal"):
        if compress not in compression_backends():
            raise ValueError(f"compress={compress!r}: that backend is not available here "
                             f"(available: {', '.join(compression_backends())})")
        return compress
    raise ValueError(f"compress must be False, True, 'auto', 'zlib', 'isal' or 'python-isal', "
                     f"not {compress!r}")


class _PythonIsal:
    """The ``isal`` package's igzip, driven like GzipStream (used when ISA-L is not linked)."""

    backend = "python-isal"

    def __init__(self) -> None:
        from isal import isal_zlib
        self._zlib = isal_zlib
        self._c = isal_zlib.compressobj(1, isal_zlib.DEFLATED, 31)
        self.total_in = self.total_out = 0
        self.finished = False

    def compress(self, data: Any) -> Optional[bytes]:
        if not len(data):
            return None
        out = self._c.compress(data) + self._c.flush(self._zlib.Z_SYNC_FLUSH)
        self.total_in += len(data)
        self.total_out += len(out)
        return out or None

    def finish(self, data: Any = None) -> bytes:
        out = (self._c.compress(data) if data is not None else b"") + self._c.flush()
        self.finished = True
        self.total_in += len(data) if data is not None else 0
        self.total_out += len(out)
        return out


def gzip_stream(backend: str) -> Any:
    """A new gzip member writer of ``backend`` (a name from :func:`compression_backends`): a
    ``_core.GzipStream``, or for ``"python-isal"`` an object with the same ``compress``,
    ``finish``, ``finished``, ``backend``, ``total_in`` and ``total_out``.

    >>> gzip_stream("zlib").backend
    'zlib'
    """
    return _PythonIsal() if backend == "python-isal" else _core.GzipStream(backend=backend)
