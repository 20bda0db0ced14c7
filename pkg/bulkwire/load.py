"""Parquet / Arrow IPC -> bulk insert: :func:`load_parquet` and the ``bulkwire load`` command.

The file is read batch by batch with pyarrow; each record batch goes to the C encoder
(``bulkwire._core.encode_batch``) through the Arrow PyCapsule interface, which writes one
bulk insert command per row straight from the Arrow buffers — no Python object per row or
per float. The commands go, as C wrote them, into a :class:`bulkwire.BulkWriter`, which
frames the body; its pieces go either to a file holding the exact request body (replayable
to a server later) or, with ``url``, to the server through :class:`bulkwire.BulkInsert`.
"""
from __future__ import annotations

import glob
import json
import os
import sys
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from . import _core
from .bulk import BulkInsert, BulkWriter
from .compression import native_backend
from .conventions import BODY_EXCLUDED_KEYS, merge_metadata
from .encoding import dumps
from .errors import BulkInsertAborted, BulkInsertError, RowError
from .parquet import PathLike, TableFile, _check_batch, _file_format, _open_parquet, _pyarrow

#: Bytes of commands handed over at a time (the bulk insert's buffer threshold).
DEFAULT_CHUNK_SIZE = 1 << 20


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
        wire = f" ({self.wire_bytes:,} {_encoding(self.compress)})" if self.compress else ""
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
        if isinstance(columns, str):
            raise TypeError("columns must be a sequence of column names, not a str")
        columns = list(columns)
        for pos, name in enumerate(columns):
            if not isinstance(name, str):
                raise TypeError(f"columns[{pos}] must be a str, not {type(name).__name__}")
            if not name:
                raise ValueError(f"columns[{pos}] is an empty column name")
        fields = list(dict.fromkeys(columns))
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

def _batches(path: str, plan: _Plan, batch_rows: int, take: Any) -> tuple[Iterator[Any], int, Any]:
    """(record batches, total rows, index array or None)."""
    pa = _pyarrow()
    if take is not None:
        f = TableFile(path, columns=plan.read_columns)
        from .parquet import _check_indices

        idx = _check_indices(take, f.num_rows, name="take")
        table = f.take(idx)
        f.close()
        return iter(table.to_batches(max_chunksize=batch_rows)), table.num_rows, idx
    if _file_format(path) == "parquet":
        # pre_buffer=False: pyarrow would otherwise buffer ahead up to the whole file (RSS
        # grew with the file size: 540 MB for 470 MB of Parquet); without it, one row group.
        pf = _open_parquet(path, pre_buffer=False)
        return (pf.iter_batches(batch_size=batch_rows, columns=plan.read_columns),
                pf.metadata.num_rows, None)
    f = TableFile(path, columns=plan.read_columns)
    table = f._table.select(plan.read_columns)
    return iter(table.to_batches(max_chunksize=batch_rows)), f.num_rows, None


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
        self.writer = BulkWriter(compress=_backend(compress),
                                 buffer_size=chunk_size)
        self._error: BaseException | None = None  # the consumer's: the file's own error
        self._thread = threading.Thread(target=self._write_pieces, name="bulkwire-file",
                                        daemon=True)
        self._thread.start()

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
        self.writer.fail(BulkInsertAborted("the load was stopped"))
        self._thread.join()
        self._file.close()
        try:
            os.unlink(self.partial)
        except OSError:
            pass

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
        self.bulk = BulkInsert(url, database, compress=_backend(compress),
                               buffer_size=chunk_size, skip_overwrite_if_unchanged=skip_overwrite,
                               **tls)
        self.url = url if isinstance(url, str) else ", ".join(url)  # for messages

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


def _encoding(compress: bool | str) -> str | None:
    """The body's encoding for load's ``compress``: None, "gzip" or "zstd"."""
    if compress is False or compress is None:
        return None
    if compress is True or compress == "gzip":
        return "gzip"
    if compress == "zstd":
        return "zstd"
    raise ValueError(f"compress must be False, True, 'gzip' or 'zstd', not {compress!r}")


def _backend(compress: bool | str) -> str | bool:
    """The writer's ``compress=`` for load's ``compress``: gzip by the C core's own
    compressor, zstd by the fastest backend available."""
    encoding = _encoding(compress)
    if encoding is None:
        return False
    return native_backend() if encoding == "gzip" else "zstd"


def default_out(path: PathLike, compress: bool | str) -> str:
    """``<name>.bulk.json`` (``.bulk.json.gz`` with gzip, ``.bulk.json.zst`` with zstd) next
    to the source file.

    >>> default_out("data/points.parquet", "zstd")
    'data/points.bulk.json.zst'
    """
    root, _ = os.path.splitext(os.fspath(path))
    encoding = _encoding(compress)
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
    a glob), or of a list of them. Raises ``FileNotFoundError`` naming what matched nothing."""
    if isinstance(source, (list, tuple)):
        if not source:
            raise ValueError("path is an empty list of files")
        files: list[str] = []
        for item in source:
            files.extend(_dataset_files(os.fspath(item)))
        return files
    path = os.fspath(source)
    if os.path.isdir(path):
        found = []
        for folder, subfolders, names in os.walk(path):
            subfolders[:] = sorted(d for d in subfolders if not d.startswith((".", "_")))
            found.extend(os.path.join(folder, n) for n in sorted(names)
                         if n.endswith(DATA_SUFFIXES) and not n.startswith((".", "_")))
        if not found:
            raise FileNotFoundError(f"no Parquet or Arrow IPC files ({', '.join(DATA_SUFFIXES)}) "
                                    f"in the directory {path!r}")
        return found
    if os.path.exists(path):
        return [path]
    if glob.has_magic(path):
        found = sorted(p for p in glob.glob(path, recursive=True) if os.path.isfile(p))
        if not found:
            raise FileNotFoundError(f"no file matches {path!r}")
        return found
    raise FileNotFoundError(f"no such file: {path!r}")


def _file_schema(path: str) -> Any:
    pa = _pyarrow()
    if _file_format(path) == "parquet":
        return _open_parquet(path).schema_arrow
    return pa.ipc.open_file(pa.memory_map(path, "r")).schema


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


def _row_groups(path: str) -> list[int]:
    """Rows of each row group (Parquet) or record batch (Arrow IPC), from the footer."""
    pa = _pyarrow()
    if _file_format(path) == "parquet":
        meta = _open_parquet(path).metadata
        return [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    reader = pa.ipc.open_file(pa.memory_map(path, "r"))
    return [reader.get_batch(i).num_rows for i in range(reader.num_record_batches)]


def _units(files: list[str], groups: list[list[int]], done: Mapping[str, set],
           unit_rows: int) -> list[_Unit]:
    """Runs of row groups not in ``done``, cut to about ``unit_rows`` rows (whole groups)."""
    units = []
    for path, sizes in zip(files, groups):
        skip = done.get(path, set())
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


def _unit_batches(unit: _Unit, plan: _Plan, batch_rows: int) -> Iterator[Any]:
    pa = _pyarrow()
    if _file_format(unit.path) == "parquet":
        pf = _open_parquet(unit.path, pre_buffer=False)  # see _batches
        yield from pf.iter_batches(batch_size=batch_rows, row_groups=range(unit.first, unit.stop),
                                   columns=plan.read_columns)
        return
    reader = pa.ipc.open_file(pa.memory_map(unit.path, "r"))
    for index in range(unit.first, unit.stop):
        batch = reader.get_batch(index).select(plan.read_columns)
        for offset in range(0, batch.num_rows, batch_rows):
            yield batch.slice(offset, batch_rows)


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

RESUME_VERSION = 1


def _identity(path: str) -> dict:
    info = os.stat(path)
    return {"path": os.path.abspath(path), "size": info.st_size, "mtime_ns": info.st_mtime_ns}


class _ResumeState:
    """The units of work the server confirmed, in a JSON file rewritten atomically (a
    temporary file, fsync, rename, fsync of the folder) after each confirmation, so a run
    killed at any moment leaves either the old or the new state, never a torn one."""

    def __init__(self, path: str, files: list[str], options: dict) -> None:
        self.path = path
        self.files = {os.path.abspath(f): f for f in files}
        self.identities = [_identity(f) for f in files]
        self.options = options
        self.done: dict[str, set] = {}  # the user's path -> confirmed row groups
        self.resumed = os.path.exists(path)
        if self.resumed:
            self._read()
        self._write()  # a run that dies before its first confirmation is a re-run too

    def _read(self) -> None:
        try:
            with open(self.path, encoding="utf-8") as f:
                state = json.load(f)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"resume state {self.path!r} cannot be read: {exc}") from None
        if not isinstance(state, dict) or state.get("version") != RESUME_VERSION:
            raise ValueError(f"resume state {self.path!r} is not a bulkwire resume state of "
                             f"version {RESUME_VERSION}")
        if state.get("options") != self.options:
            raise ValueError(f"resume state {self.path!r} was written by a load with other "
                             f"options ({state.get('options')}); start over with a new state file")
        now = {i["path"]: i for i in self.identities}
        for recorded in state.get("sources", []):
            current = now.get(recorded.get("path"))
            if current is None:
                raise ValueError(f"resume state {self.path!r} records {recorded.get('path')!r}, "
                                 f"which is not part of this load's dataset")
            if current != recorded:
                raise ValueError(f"{self.files[current['path']]!r} changed since resume state "
                                 f"{self.path!r} recorded it (size or modification time): "
                                 f"start over with a new state file")
        if len(state.get("sources", [])) != len(self.identities):
            raise ValueError(f"resume state {self.path!r} was written for a dataset of "
                             f"{len(state.get('sources', []))} files, this one has "
                             f"{len(self.identities)}")
        for entry in state.get("done", []):
            name = self.files.get(entry["path"])
            if name is not None:
                self.done.setdefault(name, set()).update(range(entry["first"], entry["stop"]))

    def confirm(self, unit: _Unit) -> None:
        self.done.setdefault(unit.path, set()).update(range(unit.first, unit.stop))
        self._write()

    def _write(self) -> None:
        done = []
        for name, groups in self.done.items():
            ordered = sorted(groups)
            start = prev = None
            for g in ordered + [None]:
                if start is not None and g != prev + 1:
                    done.append({"path": os.path.abspath(name), "first": start, "stop": prev + 1})
                    start = None
                if start is None:
                    start = g
                prev = g
        state = {"version": RESUME_VERSION, "sources": self.identities, "options": self.options,
                 "done": done}
        temporary = f"{self.path}.{os.getpid()}.tmp"
        try:
            with open(temporary, "w", encoding="utf-8") as f:
                json.dump(state, f, indent=1)
                f.flush()
                os.fsync(f.fileno())
            os.replace(temporary, self.path)
            folder = os.open(os.path.dirname(os.path.abspath(self.path)), os.O_RDONLY)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)
        except OSError as exc:
            raise type(exc)(exc.errno, exc.strerror, self.path) from None


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
                           _unit_batches(unit, job.encode.plan, job.batch_rows), job.encode,
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
    """A worker process: sends its units and reports to the parent through ``messages``:
    ("batch", worker, rows, body), ("confirmed", worker, unit), then ("done", worker, rows,
    body, wire) or ("error", worker, pickled error or None, text)."""
    import pickle
    import signal

    # Ctrl-C reaches the whole process group: the parent alone decides, and stops the workers
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        rows, body, wire = _send(job, units, lambda: _server_target(job),
                                 lambda n, added: messages.put(("batch", worker, n, added)),
                                 lambda unit: messages.put(("confirmed", worker, unit)),
                                 _StopOrOrphaned(stop, parent))
    except _Stopped:
        messages.put(("stopped", worker))
    except BaseException as exc:  # noqa: BLE001 - the parent raises it
        try:
            pickled = pickle.dumps(exc)
            pickle.loads(pickled)
        except Exception:  # noqa: BLE001 - sent as text
            pickled = None
        messages.put(("error", worker, pickled, f"{type(exc).__name__}: {exc}"))
    else:
        messages.put(("done", worker, rows, body, wire))


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
    failure (or Ctrl-C, or a worker that dies) stops the others and raises."""
    import multiprocessing
    import pickle
    import queue

    context = multiprocessing.get_context("spawn")  # no fork after threads
    messages = context.Queue()
    stop = context.Event()
    processes = [context.Process(target=_worker_main,
                                 args=(job, share, i, messages, stop, os.getpid()),
                                 name=f"bulkwire-load-{i}", daemon=True)
                 for i, share in enumerate(shares)]
    finished: dict[int, tuple[int, int, int]] = {}
    try:
        for process in processes:
            process.start()
        while len(finished) < len(processes):
            try:
                message = messages.get(timeout=0.1)
            except queue.Empty:
                for i, process in enumerate(processes):
                    if i not in finished and not process.is_alive():
                        try:  # its last messages may still be on their way
                            message = messages.get(timeout=0.5)
                            break
                        except queue.Empty:
                            raise BulkInsertError(
                                f"load worker {i} (files {_files_of(shares[i])}) died with "
                                f"exit code {process.exitcode}") from None
                else:
                    continue
            kind, worker = message[0], message[1]
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
                elif hasattr(error, "add_note"):  # Python 3.11+: shown with the traceback
                    error.add_note(f"in load worker {worker}, sending {_files_of(shares[worker])}")
                raise error
            elif kind == "stopped":  # only after the parent asked: a failure is on its way
                finished.setdefault(worker, (0, 0, 0))
    except BaseException:
        _stop_workers(processes, stop)
        raise
    finally:
        for process in processes:
            process.join(timeout=1)
        messages.close()
        messages.join_thread()
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
                 database: str | None = None,
                 collection: str = "Embeddings", id_column: str = "id",
                 id_prefix: str | None = None, vector_column: str | None = None,
                 columns: Sequence[str] | None = None, compress: bool | str = False,
                 batch_rows: int | None = None, take: Any = None, out: PathLike | None = None,
                 float32: str = "widen", metadata: Mapping[str, Any] | None = None,
                 python_type: str | None = "builtins.dict", chunk_size: int = DEFAULT_CHUNK_SIZE,
                 progress: bool | Callable[[int, int], None] = False,
                 workers: int = 1, threads: int | None = None, resume: PathLike | None = None,
                 certificate: Any = None, ca: Any = None, ssl_context: Any = None) -> LoadResult:
    """Load Parquet / Arrow IPC files (or any Arrow data) of documents/embeddings with bulk
    insert.

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
    body (a JSON array of commands; ``compress``: False, True or "gzip" for one gzip stream,
    "zstd" for one zstd frame, as the server would receive it). With ``url`` (and
    ``database``), the writer is a :class:`bulkwire.BulkInsert`'s: the same body, streamed;
    with no rows, no request is made. An error (or Ctrl-C) aborts the operation on the
    server. ``url`` is one server's URL or a list of a cluster's node URLs, as
    :class:`bulkwire.BulkInsert` takes it.

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
    _encoding(compress)  # a bad value is refused before anything is read
    if not isinstance(collection, str) or not collection:
        raise ValueError("collection must be a non-empty str")
    if chunk_size <= 0:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    workers = _count(workers, "workers", 1)
    threads = _count(threads, "threads", max(1, min(2, (os.cpu_count() or 1) // workers)))
    pa = _pyarrow()
    reader = _as_reader(path)
    files: list[str] | None = None
    if reader is None:
        files = _dataset_files(path)
        schemas = [_file_schema(f) for f in files]
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
    if batch_rows <= 0:
        raise ValueError(f"batch_rows must be positive, got {batch_rows}")
    metadata_json = _metadata_json(collection, python_type, metadata)
    encode = _Encoder(plan, id_prefix, metadata_json, float32, chunk_size)
    # the columns' types, judged before any file is written or request made
    encode(_empty_batch(schema, plan.read_columns))

    tls = {name: value for name, value in
           (("certificate", certificate), ("ca", ca), ("ssl_context", ssl_context)) if value is not None}
    if tls and url is None:
        raise ValueError(f"{', '.join(tls)} need url (an https:// server)")
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
    if take is not None and (files is None or len(files) != 1):
        raise ValueError("take needs a single file")
    state = None
    if resume is not None:
        options = {"collection": collection, "id_column": id_column, "id_prefix": id_prefix,
                   "fields": plan.fields, "vector_column": plan.vector_column,
                   "float32": float32, "metadata": metadata_json.decode()}
        state = _ResumeState(os.fspath(resume), files, options)
    job = _Job(url, database, compress, chunk_size, tls, encode, batch_rows, threads,
               skip_overwrite=state is not None and state.resumed,
               request_per_unit=state is not None)

    if url is not None:
        target_name = url if isinstance(url, str) else ", ".join(url)
        where = f"{target_name} (database {database})"
        if database is None:
            raise ValueError("database is required with url")
        make_target: Callable[[], Any] = lambda: _server_target(job)  # noqa: E731
    else:
        where = os.fspath(out) if out is not None else _default_out(path, files, compress)
        file_target = _FileTarget(where, compress, chunk_size)
        make_target = lambda: file_target  # noqa: E731

    skipped = 0
    ok = False
    if reader is not None or take is not None:
        reader_total = None
        if take is None and isinstance(path, (pa.Table, pa.RecordBatch)):
            reader_total = path.num_rows
        report = _Report(progress, reader_total)
        try:
            rows, body, wire = _send_stream(job, reader, files, take, make_target, report)
            ok = True
        finally:
            report.end(report.body, ok)
        return LoadResult(rows=rows, body_bytes=body, wire_bytes=wire,
                          seconds=time.perf_counter() - start, source=source, target=where,
                          compress=compress)

    groups = [_row_groups(f) for f in files]
    total = sum(map(sum, groups))
    done = state.done if state is not None else {}
    skipped = sum(size for f, sizes in zip(files, groups)
                  for i, size in enumerate(sizes) if i in done.get(f, ()))
    if state is not None:  # one request per unit: what a dead run repeats at most
        unit_rows = min(-(-max(total, 1) // (workers * 4)), RESUME_UNIT_ROWS)
    elif workers > 1:  # enough units to share out evenly
        unit_rows = -(-max(total, 1) // (workers * 4))
    else:  # a unit per file: encoding ahead never drains in the middle of a file
        unit_rows = max(total, 1)
    units = _units(files, groups, done, max(1, unit_rows))
    report = _Report(progress, total - skipped)
    confirm = state.confirm if state is not None else (lambda unit: None)
    shares = _share(units, workers) if workers > 1 else [units]
    try:
        if len(shares) > 1:
            rows, body, wire = _run_workers(job, shares, report, confirm)
        else:
            rows, body, wire = _send(job, units, make_target, report, confirm)
        ok = True
    finally:
        report.end(report.body if not ok else body, ok)
    return LoadResult(rows=rows, body_bytes=body, wire_bytes=wire,
                      seconds=time.perf_counter() - start, source=source, target=where,
                      compress=compress, skipped_rows=skipped, workers=len(shares))


def _send_stream(job: _Job, reader: Any, files: list[str] | None, take: Any,
                 make_target: Callable[[], Any], report: _Report) -> tuple[int, int, int]:
    """Arrow data, or a file's rows at ``take``: one request, in this process."""
    plan = job.encode.plan
    if take is not None:
        batches, total, idx = _batches(files[0], plan, job.batch_rows, take)
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
