"""Where a load's encoded batches go: the exact request body written to a file
(:class:`_FileTarget`), or a RavenDB bulk insert (:class:`_ServerTarget`); and the default
name of a body's file (its ``compress`` values are bulkwire.compression's)."""
from __future__ import annotations

import os
import threading
from typing import Any, Mapping, Sequence

from ..bulk import BulkInsert, BulkWriter
from ..compression import compress_encoding
from ..errors import BulkInsertAborted, BulkInsertError
from ..parquet import PathLike


class _FileTarget:
    """Without ``url``: the exact request body, written to ``path``. The commands go to a
    :class:`bulkwire.BulkWriter`, which frames the body; a thread writes its pieces (gzip:
    one stream at the fastest level, sync-flushed per piece, with the C core's own compressor:
    ISA-L when built in, else zlib; zstd: one frame, libzstd or the zstandard package).
    Written under a temporary name and renamed on success,
    so a failed load leaves no truncated body behind."""

    def __init__(self, path: str, compress: bool | str, chunk_size: int) -> None:
        self.path = path
        self.partial = path + ".partial"
        try:
            self._file = open(self.partial, "wb")
        except OSError as exc:  # named by the path the user gave, not the temporary one
            raise type(exc)(exc.errno, exc.strerror, path) from None
        try:
            self.writer = BulkWriter(compress=compress,
                                     buffer_size=chunk_size)
            self._error: BaseException | None = None  # the consumer's: the file's own error
            self._thread = threading.Thread(target=self._write_pieces, name="bulkwire-file",
                                            daemon=True)
            self._thread.start()
        except BaseException:  # no writer, or no thread: nothing was written, nothing stays
            self._file.close()
            _remove(self.partial)
            raise

    def _write_pieces(self) -> None:
        pieces = self.writer.chunks()
        try:
            for piece in pieces:
                self._file.write(piece)
                del piece
        except BaseException as exc:  # noqa: BLE001 - the producer raises it
            self._error = exc
            self.writer.fail(exc)  # before the generator's own cleanup: this is the failure
        finally:
            pieces.close()

    def _raise_file_error(self) -> None:
        """The file's own error (a full disk) as it was, not as a bulk insert's."""
        if self._error is not None and not isinstance(self._error, BulkInsertError):
            raise self._error

    def store(self, chunks: list, rows: int) -> int:
        """One batch's commands; returns the body bytes they add (the separator included)."""
        if not rows:
            return 0
        try:
            self.writer._store_batch(chunks, rows)
        except BulkInsertError:
            self._thread.join()
            self._raise_file_error()
            raise
        return 1 + sum(map(len, chunks))

    def close(self) -> None:
        try:
            self.writer.close()
        except BulkInsertError:
            self._thread.join()
            self._raise_file_error()
            raise
        self._thread.join()
        if self._error is not None:  # the last pieces could not be written
            raise self._error
        self._file.close()
        os.replace(self.partial, self.path)

    def abort(self) -> None:
        """Stops the writer and removes the partial output (again: a no-op)."""
        self.writer.fail(BulkInsertAborted("the load was stopped"))
        self._thread.join()
        self._file.close()
        _remove(self.partial)

    @property
    def wire_bytes(self) -> int:
        return self.writer.stats.wire_bytes

    @property
    def body_bytes(self) -> int:
        return self.writer.stats.body_bytes


class _ServerTarget:
    """``load_parquet(url=...)``: the batches' commands go to :class:`bulkwire.BulkInsert`
    (its bounded queue, compression on the sender thread, error messages, abort). The request
    starts with the first batch; no rows, no request."""

    def __init__(self, url: str | Sequence[str], database: str | None, compress: bool | str,
                 chunk_size: int, tls: Mapping[str, Any], skip_overwrite: bool = False):
        if database is None:
            raise ValueError("database is required with url")
        self.bulk = BulkInsert(url, database, compress=compress,
                               buffer_size=chunk_size, skip_overwrite_if_unchanged=skip_overwrite,
                               **tls)
        self.url = ", ".join(map(str, self.bulk._servers.urls))  # for messages

    def store(self, chunks: list, rows: int) -> int:
        """One batch's commands; returns the body bytes they add (the separator included)."""
        from ..transport import ServerError

        if not rows:
            return 0
        try:
            self.bulk._store_batch(chunks, rows)
        except OSError as exc:
            if self.bulk.operation_id is None:  # the first request of all failed
                raise ConnectionError(f"cannot reach the server at {self.url}: {exc}") from exc
            raise
        except ServerError as exc:  # the operation id was refused (no such database, ...)
            raise BulkInsertError(f"the server at {self.url} refused the bulk insert: {exc}") from exc
        return 1 + sum(map(len, chunks))

    def close(self) -> None:
        self.bulk.close()

    def abort(self) -> None:
        """Stop sending and kill the operation (errors while doing so are dropped: the load's
        own error is the one that matters)."""
        try:
            self.bulk.abort()
        except Exception:  # noqa: BLE001
            pass

    @property
    def wire_bytes(self) -> int:
        return self.bulk.stats.wire_bytes

    @property
    def body_bytes(self) -> int:
        return self.bulk.stats.body_bytes


def _remove(path: str) -> None:
    """Removes a file this load made (a partial output, a temporary state), if it is there."""
    try:
        os.unlink(path)
    except OSError:
        pass


def default_out(path: PathLike, compress: bool | str) -> str:
    """``<name>.bulk.json`` (``.bulk.json.gz`` with gzip, ``.bulk.json.zst`` with zstd) next
    to the source file.

    >>> default_out("data/points.parquet", "zstd")
    'data/points.bulk.json.zst'
    """
    root, _ = os.path.splitext(os.fspath(path))
    encoding = compress_encoding(compress)
    return root + {None: ".bulk.json", "gzip": ".bulk.json.gz", "zstd": ".bulk.json.zst"}[encoding]
