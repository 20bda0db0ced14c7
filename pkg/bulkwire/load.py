"""Parquet / Arrow IPC -> bulk insert: :func:`load_parquet` and the ``bulkwire load`` command.

The file is read batch by batch with pyarrow; each record batch goes to the C encoder
(``bulkwire._core.encode_batch``) through the Arrow PyCapsule interface, which writes one
bulk insert command per row straight from the Arrow buffers — no Python object per row or
per float. The commands go, as C wrote them, into a :class:`bulkwire.BulkWriter`, which
frames the body; its pieces go either to a file holding the exact request body (replayable
to a server later) or, with ``url``, to the server through :class:`bulkwire.BulkInsert`.
"""
from __future__ import annotations

import fnmatch
import glob
import json
import os
import sys
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field as dataclass_field
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from . import _core
from .bulk import BulkInsert, BulkWriter
from .compression import compress_encoding
from .load_options import DEFAULT_CHUNK_SIZE, LoadOptions
from .conventions import BODY_EXCLUDED_KEYS, merge_metadata
from .encoding import dumps
from .errors import (BulkInsertAborted, BulkInsertError, RowError, _add_note,
                     _mark_unconfirmed)
from ._source import SourceFile
from .parquet import (PathLike, TableFile, _check_batch, _open_parquet, _pyarrow,
                      _pyarrow_error, _source_format)
from .topology import open_servers
from .urls import normalize_url


@dataclass
class LoadResult:
    """What a load did. ``body_bytes`` is the JSON request body; ``wire_bytes`` what went out
    (the gzip or zstd stream's size when compressing, else the same)."""

    rows: int
    body_bytes: int
    wire_bytes: int
    seconds: float
    source: str
    target: str
    compress: bool | str
    #: rows a resumed load found confirmed by an earlier run, and did not send again
    skipped_rows: int = 0
    #: worker processes that sent the rows
    workers: int = 1

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else float("inf")

    @property
    def mb_per_second(self) -> float:
        return self.body_bytes / self.seconds / 1e6 if self.seconds > 0 else float("inf")

    def summary(self) -> str:
        wire = f" ({self.wire_bytes:,} {compress_encoding(self.compress)})" if self.compress else ""
        workers = f" by {self.workers} worker processes" if self.workers > 1 else ""
        skipped = (f"; {self.skipped_rows:,} rows confirmed by an earlier run were not sent again"
                   if self.skipped_rows else "")
        return (f"loaded {self.rows:,} rows from {self.source} into {self.target}{workers}: "
                f"{self.body_bytes:,} bytes{wire} in {self.seconds:.2f} s, "
                f"{self.rows_per_second:,.0f} rows/s, {self.mb_per_second:,.1f} MB/s{skipped}")


# ------------------------------------------------------------------------------ progress

class _Progress:
    """A one-line progress bar on a stream (stderr), redrawn at most every 0.2 s."""

    def __init__(self, total: int | None, stream=None, width: int = 24):
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.start = time.perf_counter()
        self.last = 0.0
        self.drawn = False

    def update(self, rows: int, body_bytes: int, final: bool = False) -> None:
        now = time.perf_counter()
        if not final and now - self.last < 0.2:
            return
        self.last = now
        elapsed = max(now - self.start, 1e-9)
        if self.total:
            frac = min(rows / self.total, 1.0)
            filled = int(frac * self.width)
            bar = f"[{'#' * filled}{'.' * (self.width - filled)}] {frac * 100:3.0f}% "
            count = f"{rows:,}/{self.total:,} rows"
        else:
            bar, count = "", f"{rows:,} rows"
        self.stream.write(f"\r{bar}{count}  {rows / elapsed:,.0f} rows/s  "
                          f"{body_bytes / elapsed / 1e6:,.1f} MB/s ")
        self.drawn = True
        if final:
            self.stream.write("\n")
        self.stream.flush()


# ------------------------------------------------------------------------------ columns

@dataclass
class _Plan:
    id_column: str
    vector_column: str | None
    fields: list[str]
    read_columns: list[str]


def _empty_batch(schema, names: Sequence[str]) -> Any:
    """A record batch without rows of the columns ``names`` of ``schema``: what the C encoder
    judges them on. Only the columns a load reads: the encoder imports every column of the
    batch it is given, and one it does not read (nested deeper than the import allows, say)
    must not stop a load that leaves it out. (Made from arrays of nulls: pyarrow's
    from_pylist and empty_table import pandas, which cost 0.3 s and 45 MB of memory.)"""
    pa = _pyarrow()
    fields = [schema.field(name) for name in dict.fromkeys(names)]
    return pa.RecordBatch.from_arrays([pa.nulls(0, f.type) for f in fields],
                                      schema=pa.schema(fields))


def _check_vector(schema, id_column: str, name: str) -> None:
    """Raises the C encoder's ``TypeError`` when column ``name`` cannot be the vector column
    (or the id column cannot be an id)."""
    _core.encode_batch(_empty_batch(schema, [id_column, name]), id_column, [name],
                       vector_column=name)


def _can_be_vector(schema, id_column: str, name: str) -> bool:
    try:
        _check_vector(schema, id_column, name)
    except (TypeError, ValueError):  # ValueError: a type the Arrow import refuses
        return False
    return True


def _plan(schema, source: str, id_column: str, vector_column: str | None,
          columns: Sequence[str] | None) -> _Plan:
    """Checks the arguments against the file's schema, before any row is read. The columns'
    types are the C encoder's to judge (see :class:`_Encoder`)."""
    names = schema.names

    def need(name: str, what: str) -> None:
        if name not in names:
            raise ValueError(f"{what} {name!r} is not a column of {source} "
                             f"(its columns: {', '.join(names)})")

    def excluded(name: str, what: str) -> None:
        if name == "@metadata":
            raise TypeError(f"{what} '@metadata' of {source} cannot be a document field: a "
                            f"document's @metadata is a mapping, written last from metadata= "
                            f"(with @collection and Raven-Python-Type); leave the column out "
                            f"with columns= (--columns)")
        raise ValueError(f"{what} 'Id' of {source} cannot be a document field: a document body "
                         f"never holds an Id member (its id is the command's Id); use it as the "
                         f"id with id_column='Id' (--id-column Id)")

    need(id_column, "id column")
    explicit_vector = vector_column is not None
    if vector_column is None:
        found = [n for n in names if n != id_column and n not in BODY_EXCLUDED_KEYS
                 and _can_be_vector(schema, id_column, n)]
        if len(found) > 1:
            raise ValueError(f"{source} has several vector columns ({', '.join(found)}): "
                             f"choose one with vector_column= (--vector-column)")
        vector_column = found[0] if found else None
    else:
        need(vector_column, "vector column")
        if vector_column in BODY_EXCLUDED_KEYS:
            excluded(vector_column, "vector column")
        _check_vector(schema, id_column, vector_column)
    if columns is None:
        # every column but the id; an "Id" column is left out, as BulkWriter.store leaves a
        # dict's "Id" member out of its document
        fields = [n for n in names if n != id_column and n != "Id"]
        if "@metadata" in fields:
            excluded("@metadata", "column")
    else:
        fields = list(dict.fromkeys(columns))  # names checked by LoadOptions
        for name in fields:
            need(name, "column")
            if name in BODY_EXCLUDED_KEYS:
                excluded(name, "column")
        if explicit_vector and vector_column not in fields:
            fields.append(vector_column)
    if vector_column not in fields:
        vector_column = None  # found, but not asked for
    read = list(dict.fromkeys([id_column, *fields]))
    return _Plan(id_column, vector_column, fields, read)


def _metadata_json(collection: str, python_type: str | None, metadata: Mapping[str, Any] | None) -> bytes:
    """The ``@metadata`` object, merged as ``BulkWriter.store`` merges it: ``metadata``, then
    ``@collection`` and ``Raven-Python-Type`` where ``metadata`` does not give them."""
    defaults = {"@collection": collection}
    if python_type:
        defaults["Raven-Python-Type"] = python_type
    return dumps(merge_metadata(None, metadata, defaults))


@dataclass
class _Encoder:
    """``_core.encode_batch`` with the load's arguments. It is also the one judge of the
    columns' types: called on a batch without rows, it raises what it would raise on the
    first batch, before any file is written or request made."""

    plan: _Plan
    id_prefix: str
    metadata: bytes
    float32: str
    chunk_size: int

    def __call__(self, batch: Any, dim: int = -1, row_base: int = 0) -> list:
        """The batch's commands, joined by ',' (no leading one: the writer frames the body)."""
        plan = self.plan
        return _core.encode_batch(
            batch, plan.id_column, plan.fields, vector_column=plan.vector_column,
            id_prefix=self.id_prefix, metadata=self.metadata, float32=self.float32, dim=dim,
            first=True, row_base=row_base, chunk_size=self.chunk_size)


# ------------------------------------------------------------------------------ batches

def _taken_batches(path: str, plan: _Plan, batch_rows: int,
                   take: Any) -> tuple[Iterator[Any], int, Any]:
    """The rows of a file at ``take``: (record batches, total rows, index array)."""
    from .parquet import _check_indices

    with TableFile(path, columns=plan.read_columns) as f:
        idx = _check_indices(take, f.num_rows, name="take")
        table = f.take(idx)
    return iter(table.to_batches(max_chunksize=batch_rows)), table.num_rows, idx


def _file_batches(path: str, plan: _Plan, batch_rows: int, first: int = 0,
                  stop: int | None = None, identity: tuple | None = None) -> Iterator[Any]:
    """Record batches of row groups (Arrow IPC: record batches) [first, stop) of a file, of
    at most ``batch_rows`` rows, read through one open descriptor. The file must still be
    what it was when the load read its footer (``identity``: size and modification time),
    and stay so: checked when it is opened and after every batch, so a file rewritten, cut
    short or grown under the load raises :class:`~bulkwire.errors.MalformedFileError` naming
    it rather than sending rows of another file (one renamed over it is not read: the open
    file is)."""
    pa = _pyarrow()
    with SourceFile(path) as source:
        source.check_unchanged(identity)
        if _source_format(source) == "parquet":
            with source.python_file() as pyfile:
                try:
                    # pre_buffer=False: pyarrow would otherwise buffer ahead up to the whole
                    # file (RSS grew with the file size: 540 MB for 470 MB of Parquet);
                    # without it, one row group.
                    pf = _open_parquet(source, pyfile, pre_buffer=False)
                    groups = range(first, pf.metadata.num_row_groups if stop is None else stop)
                    batches = pf.iter_batches(batch_size=batch_rows, row_groups=groups,
                                              columns=plan.read_columns)
                    while True:
                        try:
                            batch = next(batches)
                        except StopIteration:
                            return
                        source.check_unchanged()
                        yield batch
                except (pa.ArrowException, OSError) as exc:
                    raise _pyarrow_error(source, exc) from exc
        from ._ipc import IpcFile

        ipc = IpcFile(source, pa)
        try:
            for batch in ipc.batches(plan.read_columns, first, stop):
                for offset in range(0, batch.num_rows, batch_rows):
                    yield batch.slice(offset, batch_rows)
        finally:
            ipc.close()


def _vector_dim(pa, batch, plan: _Plan) -> int:
    if plan.vector_column is None:
        return -1
    t = batch.schema.field(plan.vector_column).type
    if pa.types.is_fixed_size_list(t):
        return t.list_size
    column = batch.column(plan.vector_column)
    if len(column) == 0 or not column[0].is_valid:
        return -1  # the encoder reports the null first row
    import pyarrow.compute as pc

    return int(pc.list_value_length(column.slice(0, 1))[0].as_py())


def _encoded_in_order(batches: Iterator[Any], encode: _Encoder, source: str, plan: _Plan,
                      pool: ThreadPoolExecutor | None, ahead: int,
                      idx: Any, first_row: int = 0) -> Iterator[tuple[list, int]]:
    """``(commands, rows)`` of each batch, in file order. Encoding runs in C without the GIL:
    with a pool, up to ``ahead`` batches are encoded (each validated whole before any of its
    bytes are returned) while the caller reads Parquet and hands the commands on. A bad row
    raises :class:`~bulkwire.errors.RowError` naming the file's row (with ``take``, the
    index taken)."""
    pa = _pyarrow()
    pending: deque = deque()  # (future or commands, rows), in file order
    dim = None
    submitted = first_row  # row numbers in errors are the file's, whatever the unit

    def named(exc: RowError) -> RowError:
        if idx is None:
            return RowError(exc.column, exc.row, exc.reason, source=source)
        return RowError(exc.column, int(idx[exc.row]), exc.reason, take_index=exc.row,
                        source=source)

    def result(job: tuple) -> tuple[list, int]:
        done, rows = job
        try:
            return (done.result() if pool is not None else done), rows
        except RowError as exc:
            raise named(exc) from None

    for batch in batches:
        _check_batch(batch, source)  # buffer sizes: what the C reader cannot know
        if dim is None or dim < 0:
            dim = _vector_dim(pa, batch, plan)
        args = (batch, dim, submitted)
        if pool is not None:
            pending.append((pool.submit(encode, *args), batch.num_rows))
        else:
            try:
                pending.append((encode(*args), batch.num_rows))
            except RowError as exc:
                raise named(exc) from None
        submitted += batch.num_rows
        del batch
        while len(pending) > (ahead if pool is not None else 0):
            yield result(pending.popleft())
    while pending:
        yield result(pending.popleft())


# ------------------------------------------------------------------------------ targets

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
        from .transport import ServerError

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


# ------------------------------------------------------------------------------ datasets

#: The file names a directory contributes (others, like ``_SUCCESS`` markers, are left out).
DATA_SUFFIXES = (".parquet", ".pq", ".arrow", ".ipc", ".feather")

#: Rows per unit of work at most: with ``resume``, one request each, so a run that dies
#: repeats at most this many rows per worker.
RESUME_UNIT_ROWS = 65536


@dataclass(frozen=True)
class _Unit:
    """Row groups ``[first, stop)`` of one file (record batches, for Arrow IPC): one unit of
    work, owned by one worker; with ``resume``, one request."""

    path: str
    first: int
    stop: int
    first_row: int
    rows: int


def _dataset_files(source: Any) -> list[str]:
    """The files of a path (a file, a directory: its data files, recursively, in name order;
    a glob), or of a list of them. Raises ``FileNotFoundError`` naming what matched nothing.

    Only regular files (or symbolic links to them) are data files. A FIFO, a socket, a
    device file or a symbolic link loop where a data file would be (given as the path, named
    with a data suffix in a directory, matched by a glob) raises ``ValueError`` naming it,
    before any file is read: a FIFO is never opened (that would wait for a writer). A
    directory reached twice (a symbolic link back to a folder above it, or a second link to
    one) raises ``ValueError`` naming both paths, rather than walking in circles or reading
    its files twice."""
    if isinstance(source, (list, tuple)):
        if not source:
            raise ValueError("path is an empty list of files")
        files: list[str] = []
        for item in source:
            files.extend(_dataset_files(os.fspath(item)))
        return files
    path = os.fspath(source)
    if os.path.isdir(path):
        found = [os.path.join(folder, name) for folder, names in _walk(path, _dataset_name)
                 for name in names if name.endswith(DATA_SUFFIXES)]
        if not found:
            raise FileNotFoundError(f"no Parquet or Arrow IPC files ({', '.join(DATA_SUFFIXES)}) "
                                    f"in the directory {path!r}")
        return [_data_file(f) for f in found]
    if os.path.lexists(path):
        return [_data_file(path)]
    if glob.has_magic(path):
        found = sorted(p for p in _glob(path) if not os.path.isdir(p))
        if not found:
            raise FileNotFoundError(f"no file matches {path!r}")
        return [_data_file(f) for f in found]
    raise FileNotFoundError(f"no such file: {path!r}")


def _dataset_name(name: str) -> bool:
    """Whether a directory's entry belongs to its dataset: not ``_SUCCESS``, ``.crc``..."""
    return not name.startswith((".", "_"))


def _glob_name(name: str) -> bool:
    """Whether ``*`` and ``**`` match a name, as in :mod:`glob`: not a hidden one."""
    return not name.startswith(".")


def _data_file(path: str) -> str:
    """``path``, a regular file; ``ValueError`` naming it when it is anything else."""
    from ._source import not_a_data_file, refuse

    kind = not_a_data_file(path)
    if kind is not None:
        raise refuse(path, kind)
    return path


def _walk(root: str, keep: Callable[[str], bool]) -> Iterator[tuple[str, list[str]]]:
    """(folder, its other entries' names, sorted) for ``root`` and every folder below it
    whose name ``keep`` keeps, depth first in name order; symbolic links to folders are
    followed. A folder reached a second time (a link back to a folder above, or a second
    link to one) raises ``ValueError`` naming both paths."""
    seen: dict = {}

    def visit(folder: str) -> Iterator[tuple[str, list[str]]]:
        info = os.stat(folder)
        key = (info.st_dev, info.st_ino)
        if key in seen:
            raise ValueError(f"{folder!r} is the folder {seen[key]!r} again (a symbolic link "
                             f"loop, or a second link to it): a dataset's folders are read "
                             f"once")
        seen[key] = folder
        names, folders = [], []
        for name in sorted(os.listdir(folder)):
            if not keep(name):
                continue
            full = os.path.join(folder, name)
            (folders if os.path.isdir(full) else names).append(name)
        yield folder, names
        for name in folders:
            yield from visit(os.path.join(folder, name))

    yield from visit(root)


def _glob(pattern: str) -> list[str]:
    """The paths ``pattern`` matches, as :func:`glob.glob` (``recursive=True``) matches them,
    but with ``**`` walked by :func:`_walk`: a symbolic link loop raises ``ValueError``
    instead of being followed again and again."""
    parts = pattern.split(os.sep)
    base = 0
    while base < len(parts) - 1 and not glob.has_magic(parts[base]):
        base += 1
    root = os.sep.join(parts[:base]) or ("" if not pattern.startswith(os.sep) else os.sep)
    found: list[str] = []

    def match(folder: str, rest: list[str]) -> None:
        head, tail = rest[0], rest[1:]
        where = folder or os.curdir
        if head == "**":
            for below, _ in _walk(where, _glob_name):
                relative = os.path.relpath(below, where)
                match(folder if relative == os.curdir else os.path.join(folder, relative),
                      tail or ["*"])
            return
        if not glob.has_magic(head):
            names = [head] if os.path.lexists(os.path.join(where, head)) else []
        else:
            try:
                names = os.listdir(where)
            except OSError:
                return
            hidden = head.startswith(".")
            names = [n for n in names if (hidden or _glob_name(n)) and fnmatch.fnmatchcase(n, head)]
        for name in names:
            full = os.path.join(folder, name)
            if not tail:
                found.append(full)
            elif os.path.isdir(full):
                match(full, tail)

    if base and not os.path.isdir(root or os.curdir):
        return []
    match(root, parts[base:])
    return list(dict.fromkeys(found))


def _file_schema(path: str) -> Any:
    return _file_footer(path)[0]


def _row_groups(path: str) -> list[int]:
    """Rows of each row group (Parquet) or record batch (Arrow IPC), from the footer."""
    return _file_footer(path)[1]


def _file_footer(path: str) -> tuple:
    """(schema, rows of each row group (Arrow IPC: record batch), identity: the file's size
    and modification time), from the footer (and an IPC file's batch metadata)."""
    pa = _pyarrow()
    with SourceFile(path) as source:
        if _source_format(source) == "parquet":
            with source.python_file() as pyfile:
                try:
                    pf = _open_parquet(source, pyfile)
                    meta = pf.metadata
                    groups = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
                    return pf.schema_arrow, groups, source.identity
                except (pa.ArrowException, OSError) as exc:
                    raise _pyarrow_error(source, exc) from exc
        from ._ipc import IpcFile

        ipc = IpcFile(source, pa)
        ipc.close()
        return ipc.schema, list(ipc.batch_rows), source.identity


def _check_schemas(files: list[str], schemas: list[Any]) -> None:
    """Every file's columns must be the first file's (names and types; order and metadata
    aside): a file that differs is refused before any document is sent, naming the file and
    the column."""
    first, reference = files[0], schemas[0]
    for path, schema in zip(files[1:], schemas[1:]):
        for field in reference:
            index = schema.get_field_index(field.name)
            if index < 0:
                raise ValueError(f"{path!r} has no column {field.name!r} (as {first!r} has): "
                                 f"the files of a dataset need the same columns")
            other = schema.field(index).type
            if other != field.type:
                raise ValueError(f"{path!r}: column {field.name!r} is {other}, but {field.type} "
                                 f"in {first!r}: the files of a dataset need the same columns")
        extra = [n for n in schema.names if reference.get_field_index(n) < 0]
        if extra:
            raise ValueError(f"{path!r} has a column {extra[0]!r} that {first!r} has not: the "
                             f"files of a dataset need the same columns")




def _units(files: list[str], groups: list[list[int]], done: Callable[[str], Any] | None,
           unit_rows: int) -> list[_Unit]:
    """Runs of row groups not in ``done(path)`` (the groups confirmed earlier, or none
    without ``done``), cut to about ``unit_rows`` rows (whole groups)."""
    units = []
    for path, sizes in zip(files, groups):
        skip = done(path) if done is not None else ()
        row = 0
        run: list[int] = []
        run_first_row = run_rows = 0

        def close_run() -> None:
            if run:
                units.append(_Unit(path, run[0], run[-1] + 1, run_first_row, run_rows))

        for index, size in enumerate(sizes):
            if index in skip or (run and run_rows + size > unit_rows):
                close_run()
                run, run_rows = [], 0
            if index not in skip:
                if not run:
                    run_first_row = row
                run.append(index)
                run_rows += size
            row += size
        close_run()
    return units




def _as_reader(data: Any, columns: list[str] | None = None) -> Any | None:
    """A ``pyarrow.RecordBatchReader`` over in-memory or streamed Arrow data (a Table, a
    RecordBatch, a RecordBatchReader, a ``pyarrow.dataset``, any object with
    ``__arrow_c_stream__``, an iterable of RecordBatches), or None for paths."""
    if isinstance(data, (str, bytes, os.PathLike, list, tuple)):
        return None
    pa = _pyarrow()
    if isinstance(data, pa.RecordBatch):
        return pa.RecordBatchReader.from_batches(data.schema, [data])
    if isinstance(data, pa.RecordBatchReader):
        return data
    try:
        import pyarrow.dataset as pads
    except ImportError:  # pragma: no cover - pyarrow builds without datasets
        pads = None
    if pads is not None and isinstance(data, pads.Dataset):
        return data.scanner(columns=columns).to_reader()
    if hasattr(data, "__arrow_c_stream__"):
        return pa.RecordBatchReader.from_stream(data)
    if hasattr(data, "__iter__"):
        batches = iter(data)
        try:
            head = next(batches)
        except StopIteration:
            raise ValueError("path is an empty iterable: no record batch gives the schema") from None
        if not isinstance(head, pa.RecordBatch):
            raise TypeError(f"path: an iterable of pyarrow.RecordBatch, not of {type(head).__name__}")

        def chained() -> Iterator[Any]:
            yield head
            yield from batches
        return pa.RecordBatchReader.from_batches(head.schema, chained())
    raise TypeError(f"path must be a file, directory or glob (str or os.PathLike), a list of "
                    f"files, or Arrow data (an object with __arrow_c_stream__, a "
                    f"pyarrow.dataset, RecordBatches), not {type(data).__name__}")


def _reader_batches(reader: Any, plan: _Plan, batch_rows: int) -> Iterator[Any]:
    """The reader's batches, cut to ``batch_rows`` and to the plan's columns (a stream's
    batches can be of any size: memory stays bounded by ``batch_rows``)."""
    for batch in reader:
        batch = batch.select(plan.read_columns)
        for offset in range(0, batch.num_rows, batch_rows):
            yield batch.slice(offset, batch_rows)


# ------------------------------------------------------------------------------ resume

#: The resume state's format. Version 2 records the target (database and servers) and keeps
#: each file's confirmed row groups with the file; a state of version 1 is refused.
RESUME_VERSION = 2



def _resume_target(url: Any, database: str) -> dict:
    """The target a resume state belongs to: the database, and the set of its servers'
    normalized URLs (:func:`bulkwire.urls.normalize_url`: one spelling per server, never
    credentials), sorted: a cluster given with its nodes in another order is the same target."""
    from .urls import server_urls

    return {"database": database, "servers": sorted({str(u) for u in server_urls(url)})}


def _describe_target(target: Mapping[str, Any]) -> str:
    return f"database {target['database']!r} at {', '.join(target['servers'])}"


def _cut(text: str, limit: int) -> str:
    """``text``, cut to ``limit`` characters."""
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _short(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters (a hand-edited state can hold anything,
    nested as deep as JSON goes: reprlib does not descend far)."""
    import reprlib

    shortened = reprlib.Repr()
    shortened.maxstring = shortened.maxother = limit
    return _cut(shortened.repr(value), limit)


class _Ranges:
    """Row groups as sorted, disjoint ranges ``[first, stop)`` (adjacent ones merged): the
    groups of one file that the server confirmed. Kept as ranges, never expanded, so its
    size follows the number of confirmations, not of row groups."""

    def __init__(self) -> None:
        self.firsts: list[int] = []
        self.stops: list[int] = []

    def add(self, first: int, stop: int) -> None:
        """Adds ``[first, stop)``, merged with the ranges it overlaps or touches."""
        import bisect

        low = bisect.bisect_left(self.stops, first)  # the first range ending at first or later
        high = bisect.bisect_right(self.firsts, stop)  # past the last starting at stop or before
        if low < high:
            first, stop = min(first, self.firsts[low]), max(stop, self.stops[high - 1])
        self.firsts[low:high] = [first]
        self.stops[low:high] = [stop]

    def __contains__(self, index: int) -> bool:
        import bisect

        at = bisect.bisect_right(self.firsts, index) - 1
        return at >= 0 and index < self.stops[at]

    def rows(self, sizes: Sequence[int]) -> int:
        """The rows of these groups, given every group's rows."""
        return sum(sum(sizes[first:stop]) for first, stop in zip(self.firsts, self.stops))

    def pairs(self) -> list[list[int]]:
        return [[first, stop] for first, stop in zip(self.firsts, self.stops)]


def _identity(path: str) -> dict:
    info = os.stat(path)
    return {"path": os.path.abspath(path), "size": info.st_size, "mtime_ns": info.st_mtime_ns}


def _is_int(value: Any) -> bool:
    return type(value) is int  # a JSON integer: not a bool, not a float


def _checked_state(path: str, state: Any, target: Mapping[str, Any], options: Mapping[str, Any],
                   sources: Mapping[str, tuple[str, dict, list[int]]]) -> dict[str, _Ranges]:
    """The one judge of a resume state read from ``path``: its whole shape (the type of
    every member, every range well formed and within its file's row groups), then whether
    it belongs to this load (target, options, files unchanged). Returns each file's
    confirmed ranges (by absolute path); anything else raises :class:`ResumeStateError`
    naming the state file and what is wrong. Work and memory follow the state's size."""
    from .errors import ResumeStateError

    def refuse(what: str) -> ResumeStateError:
        return ResumeStateError(f"resume state {path!r} {what}", path)

    members = ("version", "target", "options", "sources")
    if not isinstance(state, dict):
        raise refuse(f"is not a bulkwire resume state (a JSON object with "
                     f"{', '.join(members)}), but a JSON {type(state).__name__}")
    version = state.get("version")
    if version == 1 and _is_int(version):
        raise refuse("was written by an earlier bulkwire (version 1, which does not record the "
                     "database and servers it loaded into): start over with a new state file")
    if not (_is_int(version) and version == RESUME_VERSION):
        raise refuse(f"is not a bulkwire resume state of version {RESUME_VERSION} "
                     f"(its version: {_short(version)})")
    for name in members:
        if name not in state:
            raise refuse(f"has no {name!r}")
    for name in state:
        if name not in members:
            raise refuse(f"has an unknown member {_short(name)}")

    recorded = state["target"]
    if not (isinstance(recorded, dict) and set(recorded) == {"database", "servers"}
            and isinstance(recorded["database"], str) and recorded["database"]
            and isinstance(recorded["servers"], list) and recorded["servers"]):
        raise refuse(f"target is {_short(recorded)}, not an object of a database name and a "
                     f"list of server URLs")
    try:
        servers = sorted({normalize_url(url, f"target.servers[{i}]")
                          for i, url in enumerate(recorded["servers"])})
    except (TypeError, ValueError) as exc:
        raise refuse(str(exc)) from None
    recorded = {"database": recorded["database"], "servers": servers}
    if recorded != target:
        raise refuse(f"was written by a load into {_cut(_describe_target(recorded), 300)}; "
                     f"this load is into {_describe_target(target)}: a state file belongs to "
                     f"one database on one server or cluster (give this load its own state file)")

    if not isinstance(state["options"], dict):
        raise refuse(f"options are {_short(state['options'])}, not an object")
    if state["options"] != options:
        differ = [name for name in sorted(set(options) | set(state["options"]))
                  if state["options"].get(name, ...) != options.get(name, ...)]
        said = "; ".join(f"{name}: {_short(state['options'].get(name, '(none)'))} then, "
                         f"{_short(options.get(name, '(none)'))} now" for name in differ[:3])
        more = f"; and {len(differ) - 3} more" if len(differ) > 3 else ""
        raise refuse(f"was written by a load with other options ({said}{more}): start over "
                     f"with a new state file")

    if not isinstance(state["sources"], list):
        raise refuse(f"sources are {_short(state['sources'])}, not a list")
    found: dict[str, _Ranges] = {}
    for at, source in enumerate(state["sources"]):
        where = f"sources[{at}]"
        if not (isinstance(source, dict) and set(source) == {"path", "size", "mtime_ns", "done"}):
            raise refuse(f"{where} is {_short(source)}, not an object of path, size, mtime_ns "
                         f"and done")
        name, size, mtime, done = (source[k] for k in ("path", "size", "mtime_ns", "done"))
        if not isinstance(name, str) or not _is_int(size) or size < 0 or not _is_int(mtime) \
                or not isinstance(done, list):
            raise refuse(f"{where} is {_short(source)}: path must be a str, size and mtime_ns "
                         f"integers, done a list")
        if name in found:
            raise refuse(f"records {_short(name)} twice")
        if name not in sources:
            raise refuse(f"records {_short(name)}, which is not part of this load's dataset")
        given, identity, groups = sources[name]
        if {"path": name, "size": size, "mtime_ns": mtime} != identity:
            raise ResumeStateError(f"{given!r} changed since resume state {path!r} recorded it "
                                   f"(size or modification time): start over with a new state "
                                   f"file", path)
        ranges = found[name] = _Ranges()
        previous = 0
        for number, pair in enumerate(done):
            if not (isinstance(pair, list) and len(pair) == 2 and all(map(_is_int, pair))
                    and previous <= pair[0] < pair[1] <= len(groups)):
                raise refuse(f"{where}.done[{number}] is {_short(pair)}, not a range "
                             f"[first, stop) of the {len(groups)} row groups of {given!r} "
                             f"(0 <= first < stop <= {len(groups)}, after the range before it)")
            ranges.add(pair[0], pair[1])
            previous = pair[1]
    missing = [given for name, (given, _, _) in sources.items() if name not in found]
    if missing:
        raise refuse(f"does not record {missing[0]!r} of this load's dataset (it was written "
                     f"for a dataset of {len(found)} files, this one has {len(sources)})")
    return found


def _state_size_limit(sources: Mapping[str, tuple[str, dict, list[int]]],
                      options: Mapping[str, Any]) -> int:
    """More bytes than any state of this dataset takes, however it is indented: a file that
    is larger is refused without being read whole."""
    per_source = sum(256 + 12 * len(name) + 64 * len(groups)
                     for name, (_, _, groups) in sources.items())
    return (1 << 20) + 8 * len(json.dumps(options)) + 4 * per_source


def _lock_state(path: str) -> int:
    """An exclusive ``flock`` on ``<path>.lock``, held (by the descriptor returned) for the
    whole load: a second load given the same state file is refused, naming it, instead of
    interleaving its writes with the first one's. (The lock file stays: removing it could
    let a third load lock a file the second one no longer sees.)"""
    import fcntl

    from .errors import ResumeStateError

    lock = path + ".lock"
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as exc:
        raise OSError(exc.errno, f"cannot lock resume state {path!r}: {exc.strerror}",
                      lock) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ResumeStateError(f"resume state {path!r} is in use by another load (it holds "
                               f"{lock!r}): wait for that load to end, or give this one its "
                               f"own state file", path) from None
    except OSError as exc:
        os.close(fd)
        raise OSError(exc.errno, f"cannot lock resume state {path!r}: {exc.strerror}",
                      lock) from None
    return fd


class _ResumeState:
    """The units of work the server confirmed, in a JSON file rewritten atomically (a
    temporary file, fsync, rename, fsync of the folder) after each confirmation, so a run
    killed at any moment leaves either the old or the new state, never a torn one. The
    state belongs to one target (database and servers), one set of options and one set of
    files; it is locked for the load's whole life (:meth:`close` unlocks it)."""

    def __init__(self, path: str, files: list[str], groups: list[list[int]],
                 options: dict, target: dict) -> None:
        self.path = path
        self.options = options
        self.target = target
        # absolute path -> (the user's path, identity, rows of each row group), in file order
        self.sources: dict[str, tuple[str, dict, list[int]]] = {}
        for name, sizes in zip(files, groups):
            identity = _identity(name)
            self.sources.setdefault(identity["path"], (name, identity, sizes))
        self.done: dict[str, _Ranges] = {name: _Ranges() for name in self.sources}
        self._lock: int | None = _lock_state(path)
        try:
            self.resumed = os.path.exists(path)
            if self.resumed:
                self.done = _checked_state(path, self._load(), target, options, self.sources)
            self._write()  # a run that dies before its first confirmation is a re-run too
        except BaseException:
            self.close()
            raise

    def _load(self) -> Any:
        from .errors import ResumeStateError

        limit = _state_size_limit(self.sources, self.options)
        try:
            with open(self.path, "rb") as f:
                data = f.read(limit + 1)
        except OSError as exc:
            raise ResumeStateError(f"resume state {self.path!r} cannot be read: "
                                   f"{exc.strerror or exc}", self.path) from None
        if len(data) > limit:
            raise ResumeStateError(f"resume state {self.path!r} is larger than any state of "
                                   f"this dataset ({limit:,} bytes at most)", self.path)
        try:
            return json.loads(data.decode("utf-8"))
        except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, too deep, too long
            raise ResumeStateError(f"resume state {self.path!r} cannot be read: it is not "
                                   f"JSON ({_short(str(exc), 200)})", self.path) from None

    def ranges(self, path: str) -> _Ranges:
        """The confirmed row groups of ``path`` (a file of the load)."""
        return self.done[os.path.abspath(path)]

    def skipped_rows(self) -> int:
        return sum(self.done[name].rows(sizes) for name, (_, _, sizes) in self.sources.items())

    def confirm(self, unit: _Unit) -> None:
        """Records ``unit`` (its request was answered 2xx). Raises OSError, naming the state
        file, when it cannot be written: the load then fails (the state on disk stays the
        previous one, and a re-run sends the unit again)."""
        self.ranges(unit.path).add(unit.first, unit.stop)
        self._write()

    def _write(self) -> None:
        state = {"version": RESUME_VERSION, "target": self.target, "options": self.options,
                 "sources": [{**identity, "done": self.done[name].pairs()}
                             for name, (_, identity, _) in self.sources.items()]}
        text = json.dumps(state, indent=1)
        temporary = f"{self.path}.{os.getpid()}.tmp"
        try:
            try:
                with open(temporary, "w", encoding="utf-8") as f:
                    f.write(text)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(temporary, self.path)
            except BaseException:  # every failure leaves the previous state, and no temporary
                _remove(temporary)
                raise
            folder = os.open(os.path.dirname(os.path.abspath(self.path)), os.O_RDONLY)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)
        except OSError as exc:
            message = (f"cannot write resume state {self.path!r} ({exc.strerror or exc}): the "
                       f"load stops; a run with this state again sends what it does not record")
            raise (OSError(exc.errno, message) if exc.errno is not None
                   else OSError(message)) from None

    def close(self) -> None:
        """Unlocks the state file (once)."""
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def __enter__(self) -> "_ResumeState":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ------------------------------------------------------------------------------ sending

@dataclass
class _Job:
    """Everything a worker needs to send its units: picklable, for a spawned process."""

    url: Any
    database: str | None
    compress: bool | str
    chunk_size: int
    tls: dict
    encode: _Encoder
    batch_rows: int
    threads: int
    skip_overwrite: bool
    request_per_unit: bool
    #: each file's identity (size, modification time) when its footer was read
    identities: dict = dataclass_field(default_factory=dict)


class _Stopped(Exception):
    """The parent asked a worker to stop (another worker failed, or Ctrl-C)."""


def _one_request(target: Any, encoded: Iterable[tuple[Any, int]], pool: Any,
                 on_batch: Callable[[int, int], None], stop: Any = None) -> int:
    """Stores every encoded batch ``(commands, rows)`` into ``target`` and closes it: one
    request, complete, or aborted (the encoders stopped first) and the error raised, so that
    the server never sees a request end normally with batches missing. The rows sent."""
    rows = 0
    try:
        for commands, n in encoded:
            if stop is not None and stop.is_set():
                raise _Stopped
            added = target.store(commands, n)
            del commands
            rows += n
            on_batch(n, added)
        target.close()
    except BaseException:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        target.abort()
        raise
    return rows


def _send(job: _Job, units: Sequence[_Unit], make_target: Callable[[], Any],
          on_batch: Callable[[int, int], None], on_confirmed: Callable[[_Unit], None],
          stop: Any = None) -> tuple[int, int, int]:
    """Sends ``units`` (one request each with ``request_per_unit``, else one for all);
    ``on_confirmed`` after each request the server answered. (rows, body, wire bytes)."""
    rows = body = wire = 0
    pool = (ThreadPoolExecutor(job.threads, thread_name_prefix="bulkwire-encode")
            if job.threads > 1 else None)
    groups = [[u] for u in units] if job.request_per_unit else [list(units)]
    try:
        for group in groups:
            target = make_target()
            encoded = (batch for unit in group
                       for batch in _encoded_in_order(
                           _file_batches(unit.path, job.encode.plan, job.batch_rows, unit.first,
                                         unit.stop, job.identities.get(unit.path)), job.encode,
                           unit.path, job.encode.plan, pool, job.threads, None,
                           unit.first_row))
            rows += _one_request(target, encoded, pool, on_batch, stop)
            body += target.body_bytes
            wire += target.wire_bytes
            for unit in group:
                on_confirmed(unit)
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
    return rows, body, wire


def _server_target(job: _Job) -> "_ServerTarget":
    return _ServerTarget(job.url, job.database, job.compress, job.chunk_size, job.tls,
                         skip_overwrite=job.skip_overwrite)


class _StopOrOrphaned:
    """Set when the parent asks to stop, or has died (killed: no one would ever ask)."""

    def __init__(self, stop: Any, parent: int) -> None:
        self.stop = stop
        self.parent = parent

    def is_set(self) -> bool:
        return self.stop.is_set() or os.getppid() != self.parent


def _worker_main(job: _Job, units: list[_Unit], worker: int, messages: Any, stop: Any,
                 parent: int) -> None:
    """A worker process: sends its units and reports to the parent through ``messages``, the
    write end of a pipe of its own: ("batch", worker, rows, body), ("confirmed", worker,
    unit), then ("done", worker, rows, body, wire) or ("error", worker, pickled error or
    None, text). A parent that is gone ends the worker at its next message (a broken pipe)
    or batch (:class:`_StopOrOrphaned`)."""
    import pickle
    import signal

    # Ctrl-C reaches the whole process group: the parent alone decides, and stops the workers
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        try:
            rows, body, wire = _send(job, units, lambda: _server_target(job),
                                     lambda n, added: messages.send(("batch", worker, n, added)),
                                     lambda unit: messages.send(("confirmed", worker, unit)),
                                     _StopOrOrphaned(stop, parent))
        except _Stopped:
            messages.send(("stopped", worker))
        except BaseException as exc:  # noqa: BLE001 - the parent raises it
            try:
                pickled = pickle.dumps(exc)
                pickle.loads(pickled)
            except Exception:  # noqa: BLE001 - sent as text
                pickled = None
            messages.send(("error", worker, pickled, f"{type(exc).__name__}: {exc}"))
        else:
            messages.send(("done", worker, rows, body, wire))
    except OSError:  # the parent is gone: no one to tell
        pass
    finally:
        messages.close()


def _share(units: list[_Unit], workers: int) -> list[list[_Unit]]:
    """Disjoint sets of units, about the same rows each (each unit to the least loaded)."""
    shares: list[list[_Unit]] = [[] for _ in range(workers)]
    loads = [0] * workers
    for unit in sorted(units, key=lambda u: -u.rows):
        least = loads.index(min(loads))
        shares[least].append(unit)
        loads[least] += unit.rows
    order = {unit: position for position, unit in enumerate(units)}
    return [sorted(share, key=order.__getitem__) for share in shares if share]


def _run_workers(job: _Job, shares: list[list[_Unit]], on_batch: Callable[[int, int], None],
                 on_confirmed: Callable[[_Unit], None]) -> tuple[int, int, int]:
    """Runs one spawned process per share; (rows, body, wire) once all succeeded. The first
    failure (or Ctrl-C, or a worker that dies) stops the others and raises.

    Each worker writes to a pipe of its own, and the parent waits on all of them at once: a
    worker that dies (killed, crashed) closes its pipe, which the parent sees at once, even
    while the other workers keep it busy with their messages. No lock is shared between
    workers (one killed while holding it could not block the others), and a message cut
    short by a kill is an end of file, not a wait."""
    import multiprocessing
    import multiprocessing.connection
    import pickle

    context = multiprocessing.get_context("spawn")  # no fork after threads
    stop = context.Event()
    pipes = [context.Pipe(duplex=False) for _ in shares]  # (parent's end, worker's end)
    processes = [context.Process(target=_worker_main,
                                 args=(job, share, i, pipes[i][1], stop, os.getpid()),
                                 name=f"bulkwire-load-{i}", daemon=True)
                 for i, share in enumerate(shares)]
    readers = {reader: i for i, (reader, _) in enumerate(pipes)}
    finished: dict[int, tuple[int, int, int]] = {}
    try:
        for process, (_, writer) in zip(processes, pipes):
            process.start()
            writer.close()  # the worker holds its end now: its pipe ends when it does
        while len(finished) < len(processes):
            for reader in multiprocessing.connection.wait(list(readers)):
                worker = readers[reader]
                try:
                    message = reader.recv()
                except (EOFError, OSError):  # the worker is gone (a message cut short too)
                    del readers[reader]
                    if worker in finished:
                        continue
                    processes[worker].join(timeout=1)
                    raise BulkInsertError(
                        f"load worker {worker} (files {_files_of(shares[worker])}) died with "
                        f"exit code {processes[worker].exitcode}") from None
                kind = message[0]
                if kind == "batch":
                    on_batch(message[2], message[3])
                elif kind == "confirmed":
                    on_confirmed(message[2])
                elif kind == "done":
                    finished[worker] = message[2:]
                elif kind == "error":
                    pickled, text = message[2], message[3]
                    error = pickle.loads(pickled) if pickled is not None else None
                    if not isinstance(error, BaseException):
                        error = BulkInsertError(f"load worker {worker} "
                                                f"(files {_files_of(shares[worker])}): {text}")
                    else:
                        _add_note(error, f"in load worker {worker}, sending "
                                        f"{_files_of(shares[worker])}")
                    raise error
                elif kind == "stopped":  # only after the parent asked: a failure is on its way
                    finished.setdefault(worker, (0, 0, 0))
    except BaseException:
        _stop_workers(processes, stop)
        raise
    finally:
        for process in processes:
            process.join(timeout=1)
        for reader, writer in pipes:
            reader.close()
            writer.close()
    return tuple(sum(values) for values in zip(*finished.values()))  # type: ignore[return-value]


def _files_of(units: list[_Unit]) -> str:
    return ", ".join(dict.fromkeys(repr(u.path) for u in units))


def _stop_workers(processes: list, stop: Any) -> None:
    """Asks the workers to stop (each aborts its operation on the server at its next batch),
    and ends those still running after 0.3 s (one blocked on a slow server's full queue):
    all are gone well within a second."""
    stop.set()
    deadline = time.monotonic() + 0.3
    for process in processes:
        process.join(timeout=max(0.0, deadline - time.monotonic()))
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=0.3)
        if process.is_alive():
            process.kill()
            process.join()


# ------------------------------------------------------------------------------ load

def _count(value: Any, name: str, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def _default_batch_rows(schema, plan: _Plan) -> int:
    """About 4 MiB of commands per batch."""
    pa = _pyarrow()
    per_row = 64
    if plan.vector_column is not None:
        t = schema.field(plan.vector_column).type
        per_row += 20 * (t.list_size if pa.types.is_fixed_size_list(t) else 1024)
    return max(64, min(65536, (4 << 20) // per_row))


def _schema(source: str) -> Any:
    return _file_schema(source)


class _Report:
    """Adds up the batches of every worker for ``progress`` (the bar, or the caller's
    callable, called with the running totals)."""

    def __init__(self, progress: bool | Callable[[int, int], None], total: int | None) -> None:
        self.rows = self.body = 0
        self.total = total
        self.bar = _Progress(total) if progress is True else None
        self.callback = progress if callable(progress) else None

    def __call__(self, rows: int, body: int) -> None:
        self.rows += rows
        self.body += body
        if self.bar is not None and (self.total is None or self.rows < self.total):
            self.bar.update(self.rows, self.body)  # the final line is drawn once, at the end
        if self.callback is not None:
            self.callback(self.rows, self.body)

    def end(self, body: int, ok: bool) -> None:
        if self.bar is None:
            return
        if ok:
            self.bar.update(self.rows, body, final=True)
        elif self.bar.drawn:
            self.bar.stream.write("\n")


def _default_out(path: Any, files: list[str] | None, compress: bool | str) -> str:
    if files is not None and not isinstance(path, (list, tuple)) and os.path.isdir(path):
        return default_out(os.path.normpath(os.fspath(path)), compress)
    if files is not None and len(files) == 1:
        return default_out(files[0], compress)
    raise ValueError("out is needed to write the request body of a dataset of several files "
                     "or of Arrow data (or give url to load into a server)")


def load_parquet(path: Any, *, url: str | Sequence[str] | None = None,
                 database: str | None = None, options: LoadOptions | None = None,
                 take: Any = None, out: PathLike | None = None,
                 progress: bool | Callable[[int, int], None] = False,
                 workers: int = 1, threads: int | None = None, resume: PathLike | None = None,
                 certificate: Any = None, ca: Any = None, ssl_context: Any = None,
                 **fields: Any) -> LoadResult:
    """Load Parquet / Arrow IPC files (or any Arrow data) of documents/embeddings with bulk
    insert.

    ``options`` (a :class:`bulkwire.LoadOptions`) say how rows become documents and how they
    are sent; ``fields`` are keyword arguments that replace its values (``collection=``,
    ``id_column=``, ``compress=``, ...: the names of its fields, with the same defaults). Every
    option is checked when the object is made, before anything is read.

    ``path``: a file; a directory (its ``.parquet``, ``.pq``, ``.arrow``, ``.ipc`` and
    ``.feather`` files, recursively, in name order); a glob (``"data/*.parquet"``); a list of
    these; or Arrow data: a ``pyarrow.Table``, ``RecordBatch``, ``RecordBatchReader``, a
    ``pyarrow.dataset``, any object with ``__arrow_c_stream__`` (a polars DataFrame, a DuckDB
    result) or an iterable of RecordBatches. Every file's schema is read, and compared with
    the first file's, before any document is sent: a file whose columns differ raises
    ``ValueError`` naming the file and the column.

    Each row becomes a document ``<id_prefix><id>`` holding the ``columns`` (default: every
    column but the id and a column named ``Id``) and ``@metadata``, as
    :meth:`bulkwire.BulkWriter.store` writes the equivalent dict (:mod:`bulkwire.conventions`):
    the ``metadata`` entries, then ``@collection`` (``collection``) and ``Raven-Python-Type``
    (``python_type``) where ``metadata`` does not give them. A column named ``Id`` or
    ``@metadata`` cannot be a field, and a string id must pass
    :func:`bulkwire.conventions.check_id` (prefix included). The vector column
    (``fixed_size_list`` or ``list`` of float32/float64; found automatically when there is
    exactly one) is written as a JSON array, float32 elements widened (the repr of the double,
    as ``bulkwire.dumps`` writes a float32 ndarray) or, with ``float32="shortest"``, with the
    shortest text that round-trips as float32. ``id_prefix`` defaults to
    ``collection.lower() + "/"`` for integer ids and to ``""`` for string ids. Ids come from
    the id column alone, so a load that is repeated writes the same documents.

    The columns' types are checked (by the C encoder) before any row is read. Each batch's
    encoded commands go, as they are, into a :class:`bulkwire.BulkWriter`, which frames the
    body. Without ``url``, its pieces are written to ``out`` (default
    ``<name>.bulk.json[.gz|.zst]`` next to the source file or directory): the exact request
    body (a JSON array of commands; ``compress``: as for :class:`bulkwire.BulkWriter`, e.g.
    True or "gzip" for one gzip stream, "zstd" for one zstd frame, as the server would
    receive it). With ``url`` (and
    ``database``), the writer is a :class:`bulkwire.BulkInsert`'s: the same body, streamed;
    with no rows, no request is made. An error (or Ctrl-C) aborts the operation on the
    server. ``url`` is one server's URL or a list of a cluster's node URLs, as
    :class:`bulkwire.BulkInsert` takes it; the URLs, ``database`` and the TLS files are
    judged before anything is read, and ``LoadResult.target`` names the normalized URLs.

    ``certificate``, ``ca``, ``ssl_context`` (with an ``https://`` ``url``): TLS, as for
    :class:`bulkwire.BulkInsert`.

    ``workers`` (with ``url`` and files): processes, each sending a disjoint share of the row
    groups in its own bulk insert request (default 1: this process). The first failure
    stops the others and raises that worker's error; Ctrl-C stops them all.
    ``threads``: threads encoding batches ahead, in each process (default: 2 on a single
    worker, fewer when the workers would outnumber the cores); the output is the same
    whatever the number.

    ``resume`` (with ``url`` and files): a state file. Each unit of work (a file's run of row
    groups, one request each) is recorded there once the server confirmed its request; a
    load given the same state file again skips those, and sends the rest with
    ``skip_overwrite_if_unchanged``. A file that changed since (size or modification time)
    is refused, naming it.

    ``take``: load only the rows at these indices of a single file, in that order (see
    :func:`bulkwire.take`). Every batch is checked before any of its bytes are written or
    sent: buffers that do not hold what the batch's offsets and lengths say (a crafted or
    corrupt file) raise ``ValueError`` naming the file and the column; a null or blank id, a
    null or ragged vector, a null vector element, invalid UTF-8 raise
    :class:`bulkwire.errors.RowError` (a ``ValueError``) naming the file, the column and the
    row (the file's row number; with ``take``, also the position in ``take``), also as its
    attributes ``source``, ``column``, ``row``, ``take_index``.

    >>> import tempfile, os
    >>> from bulkwire import sample_parquet
    >>> src = sample_parquet(os.path.join(tempfile.mkdtemp(), "s.parquet"), rows=3, dim=2)
    >>> load_parquet(src, metadata={"@collection": "Points"}).rows
    3
    """
    start = time.perf_counter()
    # every option checked (LoadOptions) before anything is read
    options = LoadOptions.of(options, **fields)
    collection, id_column, id_prefix = options.collection, options.id_column, options.id_prefix
    vector_column, compress, float32 = options.vector_column, options.compress, options.float32
    columns = None if options.columns is None else list(options.columns)
    metadata, python_type = options.metadata, options.python_type
    chunk_size, batch_rows = options.chunk_size, options.batch_rows
    tls = {name: value for name, value in
           (("certificate", certificate), ("ca", ca), ("ssl_context", ssl_context)) if value is not None}
    servers = None
    if url is not None:  # the URLs, the database and the TLS files, before anything is read
        if database is None:
            raise ValueError("database is required with url")
        servers = open_servers(url, database, **tls)
    workers = _count(workers, "workers", 1)
    threads = _count(threads, "threads", max(1, min(2, (os.cpu_count() or 1) // workers)))
    pa = _pyarrow()
    reader = _as_reader(path)
    files: list[str] | None = None
    if reader is None:
        files = _dataset_files(path)
        footers = [_file_footer(f) for f in files]
        schemas = [footer[0] for footer in footers]
        _check_schemas(files, schemas)
        schema = schemas[0]
        source = files[0] if len(files) == 1 else f"{len(files)} files ({files[0]}, ...)"
    else:
        schema = reader.schema
        source = f"a {type(path).__module__.split('.')[0]}.{type(path).__name__}"
    plan = _plan(schema, files[0] if files else source, id_column, vector_column, columns)
    if id_prefix is None:
        is_integer = pa.types.is_integer(schema.field(id_column).type)
        id_prefix = f"{collection.lower()}/" if is_integer else ""
    if batch_rows is None:
        batch_rows = _default_batch_rows(schema, plan)
    metadata_json = _metadata_json(collection, python_type, metadata)
    encode = _Encoder(plan, id_prefix, metadata_json, float32, chunk_size)
    # the columns' types, judged before any file is written or request made
    encode(_empty_batch(schema, plan.read_columns))

    if tls and url is None:
        raise ValueError(f"{', '.join(tls)} need url (an https:// server)")
    if url is not None and database is None:
        raise ValueError("database is required with url")
    for name, value in (("workers", workers > 1), ("resume", resume is not None)):
        if not value:
            continue
        if url is None:
            raise ValueError(f"{name} needs url: worker processes and resumed runs load into a "
                             f"server, each unit in its own request")
        if files is None:
            raise ValueError(f"{name} needs files (a path, directory, glob or list of them): "
                             f"Arrow data given as a stream is read once, by one process")
        if take is not None:
            raise ValueError(f"{name} and take exclude each other")
    if workers > 1 and ssl_context is not None:
        raise ValueError("ssl_context cannot be sent to worker processes: give certificate= "
                         "and ca= instead")
    if take is not None:
        if files is None or len(files) != 1:
            raise ValueError("take needs a single file")
        from .parquet import _check_indices

        # every index checked against the file's rows before any output is opened
        take = _check_indices(take, sum(footers[0][1]), name="take")
    if servers is not None:
        where = f"{', '.join(map(str, servers.urls))} (database {database})"
    else:
        where = os.fspath(out) if out is not None else _default_out(path, files, compress)
    # the files' row groups, from their footers (a resume state is checked against them)
    groups = [footer[1] for footer in footers] if files is not None and take is None else None
    stream_rows = (path.num_rows if take is None and isinstance(path, (pa.Table, pa.RecordBatch))
                   else None)

    state = None
    if resume is not None:
        options = {"collection": collection, "id_column": id_column, "id_prefix": id_prefix,
                   "fields": plan.fields, "vector_column": plan.vector_column,
                   "float32": float32, "metadata": metadata_json.decode()}
        state = _ResumeState(os.fspath(resume), files, groups, options,
                             _resume_target(url, database))
    try:
        job = _Job(url, database, compress, chunk_size, tls, encode, batch_rows, threads,
                   skip_overwrite=state is not None and state.resumed,
                   request_per_unit=state is not None)
        if files is not None:
            # each unit's file must be read as it was planned from: its size and mtime
            job.identities = {f: footer[2] for f, footer in zip(files, footers)}
        if url is not None:
            return _load_units(job, files, groups, state, workers, progress, source, where,
                               start, lambda: _server_target(job), reader, take, stream_rows)
        # the output is opened last, once every argument was checked; any failure from here
        # on removes it (the file target's abort)
        file_target = _FileTarget(where, compress, chunk_size)
        try:
            return _load_units(job, files, groups, state, workers, progress, source, where,
                               start, lambda: file_target, reader, take, stream_rows)
        except BaseException:
            file_target.abort()
            raise
    finally:
        if state is not None:
            state.close()


def _load_units(job: _Job, files: list[str] | None, groups: list[list[int]] | None,
                state: _ResumeState | None, workers: int, progress: Any, source: str,
                where: str, start: float, make_target: Callable[[], Any], reader: Any,
                take: Any, stream_rows: int | None) -> LoadResult:
    """The sending half of :func:`load_parquet`, once its arguments are checked: Arrow data
    or ``take`` in one request from this process; files as units of work, by this process
    or by ``workers`` processes. An exception that escapes a load into a server carries, in
    a note and in its ``unconfirmed`` attribute, the rows of the files that no request
    confirmed."""
    compress = job.compress
    ok = False
    if groups is None:
        report = _Report(progress, stream_rows)
        try:
            rows, body, wire = _send_stream(job, reader, files, take, make_target, report)
            ok = True
        finally:
            report.end(report.body, ok)
        return LoadResult(rows=rows, body_bytes=body, wire_bytes=wire,
                          seconds=time.perf_counter() - start, source=source, target=where,
                          compress=compress)

    total = sum(map(sum, groups))
    skipped = state.skipped_rows() if state is not None else 0
    if state is not None:  # one request per unit: what a dead run repeats at most
        unit_rows = min(-(-max(total, 1) // (workers * 4)), RESUME_UNIT_ROWS)
    elif workers > 1:  # enough units to share out evenly
        unit_rows = -(-max(total, 1) // (workers * 4))
    else:  # a unit per file: encoding ahead never drains in the middle of a file
        unit_rows = max(total, 1)
    units = _units(files, groups, state.ranges if state is not None else None,
                   max(1, unit_rows))
    report = _Report(progress, total - skipped)
    unconfirmed = dict.fromkeys(units)  # in file order; a unit leaves once its request is answered

    def confirm(unit: _Unit) -> None:
        unconfirmed.pop(unit, None)
        if state is not None:
            state.confirm(unit)

    shares = _share(units, workers) if workers > 1 else [units]
    try:
        if len(shares) > 1:
            rows, body, wire = _run_workers(job, shares, report, confirm)
        else:
            rows, body, wire = _send(job, units, make_target, report, confirm)
        ok = True
    except BaseException as exc:
        if job.url is not None:  # a file's body is written whole or removed: nothing to say
            _note_unconfirmed(exc, list(unconfirmed), total - skipped)
        raise
    finally:
        report.end(report.body if not ok else body, ok)
    return LoadResult(rows=rows, body_bytes=body, wire_bytes=wire,
                      seconds=time.perf_counter() - start, source=source, target=where,
                      compress=compress, skipped_rows=skipped, workers=len(shares))


def _note_unconfirmed(exc: BaseException, units: list[_Unit], rows: int) -> None:
    """Says on ``exc`` which rows no request confirmed: ``exc.unconfirmed``, a list of
    ``(file, first row, stop row)`` (adjacent units merged), and a note listing them."""
    ranges: list[tuple[str, int, int]] = []
    for unit in units:
        if ranges and ranges[-1][0] == unit.path and ranges[-1][2] == unit.first_row:
            ranges[-1] = (unit.path, ranges[-1][1], unit.first_row + unit.rows)
        else:
            ranges.append((unit.path, unit.first_row, unit.first_row + unit.rows))
    missing = sum(stop - first for _, first, stop in ranges)
    listed = ", ".join(f"{name!r} rows {first}-{stop - 1}" for name, first, stop in ranges[:5])
    more = f", and {len(ranges) - 5} more ranges" if len(ranges) > 5 else ""
    _mark_unconfirmed(exc, ranges, f"not confirmed by the server: {missing:,} of the {rows:,} "
                                  f"rows this load was to send" +
                     (f" ({listed}{more})" if ranges else ""))


def _send_stream(job: _Job, reader: Any, files: list[str] | None, take: Any,
                 make_target: Callable[[], Any], report: _Report) -> tuple[int, int, int]:
    """Arrow data, or a file's rows at ``take``: one request, in this process."""
    plan = job.encode.plan
    if take is not None:
        batches, total, idx = _taken_batches(files[0], plan, job.batch_rows, take)
        report.total = total
        if report.bar is not None:
            report.bar.total = total
        source = files[0]
    else:
        batches, idx, source = _reader_batches(reader, plan, job.batch_rows), None, "Arrow data"
    pool = (ThreadPoolExecutor(job.threads, thread_name_prefix="bulkwire-encode")
            if job.threads > 1 else None)
    target = make_target()
    try:
        rows = _one_request(target, _encoded_in_order(batches, job.encode, source, plan, pool,
                                                      job.threads, idx), pool, report)
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
    return rows, target.body_bytes, target.wire_bytes


def load_arrow(data: Any, *, url: str | Sequence[str] | None = None, database: str | None = None,
               **options: Any) -> LoadResult:
    """Load Arrow data (a ``pyarrow.Table``, a ``RecordBatch``, a ``RecordBatchReader``, an
    iterable of RecordBatches, a ``pyarrow.dataset`` or any object with
    ``__arrow_c_stream__``) with ONE bulk insert request from this process, and return what
    it did. The ids come from the id column, so a task that is retried repeats the same
    PUTs. ``options`` are :func:`load_parquet`'s (``collection``, ``id_column``, ``compress``,
    ``metadata``, ``threads``, ...). This is the sink for one partition of a distributed
    engine.

    >>> import pyarrow as pa
    >>> from bulkwire.testing import LoopbackServer
    >>> table = pa.table({"id": [1, 2], "v": pa.array([[0.5], [1.0]], pa.list_(pa.float32()))})
    >>> with LoopbackServer() as server:
    ...     load_arrow(table, url=server.url, database=server.database).rows
    2
    """
    if _as_reader_kind(data) == "path":
        raise TypeError(f"data must be Arrow data, not a path ({type(data).__name__}): use "
                        f"load_parquet for files")
    for name in ("workers", "resume", "take"):
        if options.get(name) not in (None, 1):
            raise ValueError(f"{name} is load_parquet's: load_arrow sends one request")
    return load_parquet(data, url=url, database=database, **options)


def _as_reader_kind(data: Any) -> str:
    return "path" if isinstance(data, (str, bytes, os.PathLike, list, tuple)) else "data"
