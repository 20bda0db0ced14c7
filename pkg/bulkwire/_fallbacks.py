"""The warning a build without an optional C library gives, once per library, when a feature
falls back to something much slower: kept apart from :mod:`bulkwire.config` (which reports
the build and reads the backends of :mod:`bulkwire.compression`), so that the modules that
warn do not depend on the one that reports."""
from __future__ import annotations

import threading
import warnings

from . import _core

class BuildWarning(RuntimeWarning):
    """A feature runs on a much slower fallback because this build of bulkwire lacks a C
    library (see :func:`warn_missing`); the message names the library and its package."""


_warned: set = set()
_warned_lock = threading.Lock()


def warn_missing(library: str, feature: str, fallback: str) -> None:
    """Warns (:class:`BuildWarning`), once per process and library, that ``feature`` runs on
    ``fallback`` because this build lacks ``library`` (a name of :func:`build_config`'s
    libraries), and how to get it: the Debian package, then a rebuild."""
    with _warned_lock:
        if library in _warned:
            return
        _warned.add(library)
    row = next(r for r in _core.build_config()["libraries"] if r[0] == library)
    title, package = row[1], row[6]
    warnings.warn(f"bulkwire was built without {title}: {feature} {fallback}. To build it "
                  f"in: apt-get install {package}, then reinstall bulkwire (pip install . "
                  f"again, no cleaning needed); bulkwire --version shows what a build has",
                  BuildWarning, stacklevel=3)
