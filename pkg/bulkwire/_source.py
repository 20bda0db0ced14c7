"""Data files opened for reading: only regular files, each read through its own descriptor
with positioned reads, and checked against what it was when it was opened.

A file that changes under a reader must give an error naming it, never a crash and never
another file's bytes: nothing here maps a file into memory (the first access past the end of
a file cut short under a memory map kills the process with SIGBUS); a read that finds the
file shorter than it was raises :class:`~bulkwire.errors.MalformedFileError` saying it
changed. A FIFO, a socket or a device file is refused before it is opened: opening a FIFO
for reading waits for a writer, forever if none comes.
"""
from __future__ import annotations

import errno
import os
import stat
from typing import Any, Optional

from .errors import MalformedFileError

#: What a path is, by its mode's file type, for messages.
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"))


def not_a_data_file(path: str) -> Optional[str]:
    """None when ``path`` is (or links to) a regular file, else what it is instead: "a FIFO
    (named pipe)", "a symbolic link loop", ... Raises ``FileNotFoundError`` when nothing is
    there (a symbolic link to nothing included) and ``OSError`` when it cannot be looked at.
    Nothing is opened."""
    try:
        info = os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symbolic link loop"
        if exc.errno == errno.ENOENT and os.path.islink(path):
            raise FileNotFoundError(errno.ENOENT, "a symbolic link to nothing "
                                    f"({os.readlink(path)!r})", path) from None
        raise
    if stat.S_ISREG(info.st_mode):
        return None
    for test, kind in _KINDS:
        if test(info.st_mode):
            return kind
    return "not a regular file"


def refuse(path: str, kind: str) -> ValueError:
    """The error for a path that is not a data file."""
    return ValueError(f"{path!r} is {kind}: only regular files (or symbolic links to them) "
                      f"are read as data files")


def open_data_file(path: str) -> int:
    """A descriptor of the regular file at ``path``, opened for reading. Anything else
    raises ``ValueError`` naming it (a FIFO is never opened, and the file opened is checked
    again, so one swapped in meanwhile is refused without waiting)."""
    kind = not_a_data_file(path)
    if kind is not None:
        raise refuse(path, kind)
    # O_NONBLOCK: opening a FIFO put there since the check returns at once instead of waiting
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise refuse(path, next((k for t, k in _KINDS if t(info.st_mode)),
                                    "not a regular file"))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


class SourceFile:
    """One data file, open: ``fd`` (read with positioned reads, so any number of readers may
    share it), ``size`` and ``mtime_ns`` as they were when it was opened. ``changed()``
    compares them with the file's now."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd = open_data_file(path)
        info = os.fstat(self.fd)
        self.size, self.mtime_ns = info.st_size, info.st_mtime_ns

    @property
    def identity(self) -> tuple:
        """(size, modification time in ns) when it was opened."""
        return (self.size, self.mtime_ns)

    def read(self, length: int, offset: int) -> bytes:
        """Exactly ``length`` bytes at ``offset``; a file that ends sooner raises
        :class:`~bulkwire.errors.MalformedFileError` saying it changed."""
        parts = []
        done = 0
        while done < length:
            part = os.pread(self.fd, length - done, offset + done)
            if not part:
                raise self.changed_error(f"it ends before byte {offset + length:,} "
                                         f"of its {self.size:,}")
            parts.append(part)
            done += len(part)
        return b"".join(parts)

    def changed(self) -> Optional[str]:
        """What changed since the file was opened (its size, its modification time), or
        None."""
        info = os.fstat(self.fd)
        if info.st_size != self.size:
            return f"{self.size:,} bytes when opened, {info.st_size:,} now"
        if info.st_mtime_ns != self.mtime_ns:
            return "modified since"
        return None

    def changed_error(self, what: str) -> MalformedFileError:
        return MalformedFileError(f"{self.path!r} changed since it was opened: {what}",
                                  self.path)

    def read_error(self, exc: Any, column: Optional[str] = None) -> Exception:
        """The error to raise for a read of this file that failed (``exc``: what the reader
        raised, or a message), naming the file and, when given, the column: the file changed
        since it was opened, when it did (a file cut short or rewritten is not malformed, it
        is another file now); ``OSError`` when the reader's was; else the file is malformed."""
        where = f" column {column!r}:" if column is not None else ""
        changed = self.changed() if self.fd >= 0 else None
        if changed is not None:
            return self.changed_error(f"{changed};{where} {exc}")
        if isinstance(exc, OSError):
            message = f"{self.path!r}:{where} {exc.strerror or exc}"
            return OSError(exc.errno, message) if exc.errno else OSError(message)
        return MalformedFileError(f"{self.path!r} is malformed:{where} {exc}", self.path)

    def check_unchanged(self, expected: Optional[tuple] = None) -> None:
        """Raises :class:`~bulkwire.errors.MalformedFileError` when the file changed since it
        was opened, or (``expected``) is not the one planned from: another size or
        modification time."""
        if expected is not None and tuple(expected) != self.identity:
            raise MalformedFileError(f"{self.path!r} changed since the load read its footer "
                                     f"(size or modification time)", self.path)
        what = self.changed()
        if what is not None:
            raise self.changed_error(what)

    def python_file(self) -> Any:
        """An unbuffered binary file object on the same open file (its own descriptor, a
        duplicate), for pyarrow's readers."""
        return os.fdopen(os.dup(self.fd), "rb", buffering=0)

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)

    def __enter__(self) -> "SourceFile":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - an interpreter shutting down
            pass
