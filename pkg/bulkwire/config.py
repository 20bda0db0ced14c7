"""What this build of bulkwire has: the optional C libraries setup.py found (with their
versions), and the backend each feature runs on because of them.

A build without a library still works: each feature falls back (zlib for ISA-L, Python's
``ssl`` for OpenSSL, the ``zstandard`` package for libzstd), and :func:`show_config` and
``bulkwire --version`` say which. Snappy needs no library: bulkwire decodes it itself, on
every build. Rebuilding
after installing a library (``pip install .`` again) links it: see docs/install.md.

>>> config = build_config()
>>> config.libraries["zlib"].found
True
>>> sorted(config.libraries)
['isal', 'openssl', 'snappy', 'zlib', 'zstd']
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Optional, TextIO

from . import _core
from ._fallbacks import BuildWarning, warn_missing
from ._version import __version__

__all__ = ["BuildConfig", "BuildWarning", "LibraryInfo", "build_config", "show_config",
           "warn_missing"]


@dataclass(frozen=True)
class LibraryInfo:
    """One C library as this build found it."""
    #: its short name: ``"zlib"``, ``"isal"``, ``"zstd"``, ``"snappy"``, ``"openssl"``
    name: str
    #: its name for people (``"ISA-L"``)
    title: str
    #: linked into this build (or, for snappy, built in)
    found: bool
    #: the version: what the library says at run time where it can, else the headers' at build
    #: time; ``""`` when not found or unknown
    version: str
    #: how setup.py found it (``"pkg-config"``, ``"compiler defaults"``, ``"built in: ..."``),
    #: or why not
    how: str
    #: the Debian package whose headers the build needs (``""`` for what is built in)
    package: str


@dataclass(frozen=True)
class BuildConfig:
    """What this build of bulkwire has (see :func:`build_config`)."""
    #: bulkwire's version
    version: str
    #: the C compiler and linker flags the extension was built with (beyond setuptools' own)
    flags: str
    #: every library by short name, zlib first
    libraries: dict = field(default_factory=dict)
    #: each feature's backend here: ``{"gzip bodies": "isal", ...}`` (see :func:`backends`)
    backends: dict = field(default_factory=dict)


def _zstd_pages() -> str:
    """How zstd Parquet pages are read: page by page through libzstd, or through a Python
    decompressor where libzstd is not linked, else a row group at a time through pyarrow."""
    # the C core's table says when it reads them itself: then bulkwire.parquet (and NumPy
    # with it) is not imported for the answer
    for name, covered, library in _core.PARQUET_CODECS.values():
        if name == "ZSTD" and covered:
            return library
    from .parquet import zstd_page_decoder

    decoder = zstd_page_decoder()
    if decoder == "libzstd":
        return decoder
    return f"page by page through {decoder} (libzstd not linked)" if decoder else \
        "row groups through pyarrow (libzstd not linked, no zstd codec in pyarrow or zstandard)"


def _backends() -> dict:
    """The backend of each feature that an optional library speeds up, in this build and
    this environment (Python packages that a fallback uses are looked for here)."""
    from .compression import compression_backends, zstd_backends

    zstd = zstd_backends()
    gzip = compression_backends()[0]
    return {
        "gzip bodies": gzip if gzip != "python-isal" else "python-isal (the isal package; "
                       "ISA-L not linked)",
        "zstd bodies": zstd[0] if zstd else "none (neither libzstd nor the zstandard package)",
        "snappy Parquet pages": "bulkwire's snappy decoder",
        "zstd Parquet pages": _zstd_pages(),
        "TLS sender": f"C ({_core.TLS_LIBRARY})" if _core.TLS_LIBRARY else
        "Python's ssl module (OpenSSL not linked)",
    }


def build_config() -> BuildConfig:
    """What this build has: :class:`BuildConfig` with each library's :class:`LibraryInfo`
    and each feature's backend."""
    raw = _core.build_config()
    libraries = {}
    for name, title, found, build_version, runtime_version, how, package in raw["libraries"]:
        libraries[name] = LibraryInfo(name, title, found, (runtime_version or build_version)
                                      if found else "", how, package)
    return BuildConfig(__version__, raw["flags"], libraries, _backends())


def config_lines(config: Optional[BuildConfig] = None) -> list:
    """The lines :func:`show_config` prints: the version, one line per library (found or
    not, its version, or the package that provides it), then each feature's backend."""
    config = config or build_config()
    lines = [f"bulkwire {config.version}"]
    width = max(len(info.title) for info in config.libraries.values())
    for info in config.libraries.values():
        state = f"{info.how} (no library needed)" if info.how.startswith("built in") else \
            f"found {info.version or '(version unknown)'}" if info.found else \
            f"not found (apt-get install {info.package}, then reinstall bulkwire)" \
            if info.how.startswith("not found") else f"not linked: {info.how}"
        lines.append(f"  {info.title + ':':{width + 1}} {state}")
    width = max(len(name) for name in config.backends)
    for name, backend in config.backends.items():
        lines.append(f"  {name + ':':{width + 1}} {backend}")
    return lines


def show_config(file: Optional[TextIO] = None) -> None:
    """Prints what this build has (the same as ``bulkwire --version``): bulkwire's version,
    each optional C library (found or not, and its version), and each feature's backend.

    >>> show_config()  # doctest: +ELLIPSIS
    bulkwire ...
      zlib: ...
    """
    print("\n".join(config_lines()), file=file or sys.stdout)
