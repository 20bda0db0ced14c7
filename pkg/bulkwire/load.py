"""Parquet / Arrow IPC -> bulk insert: :func:`load_parquet` and the ``bulkwire load`` command.

The file is read batch by batch with pyarrow; each record batch goes to the C encoder
(``bulkwire._core.encode_batch``) through the Arrow PyCapsule interface, which writes one
bulk insert command per row straight from the Arrow buffers — no Python object per row or
per float. The commands go, as C wrote them, into a :class:`bulkwire.BulkWriter`, which
frames the body; its pieces go either to a file holding the exact request body (replayable
to a server later) or, with ``url``, to the server through :class:`bulkwire.BulkInsert`.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

from . import _core
from .bulk import BulkInsert, BulkWriter
from .compression import native_backend
from .conventions import BODY_EXCLUDED_KEYS, merge_metadata
from .encoding import dumps
from .errors import BulkInsertAborted, BulkInsertError, RowError
from .parquet import PathLike, TableFile, _check_batch, _file_format, _pyarrow

#: Bytes of commands handed over at a time (the bulk insert's buffer threshold).
DEFAULT_CHUNK_SIZE = 1 << 20


@dataclass
class LoadResult:
    """What a load did. ``body_bytes`` is the JSON request body; ``wire_bytes`` what went out
    (the gzip stream's size when compressing, else the same)."""

    rows: int
    body_bytes: int
    wire_bytes: int
    seconds: float
    source: str
    target: str
    compress: bool

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else float("inf")

    @property
    def mb_per_second(self) -> float:
        return self.body_bytes / self.seconds / 1e6 if self.seconds > 0 else float("inf")

    def summary(self) -> str:
        wire = f" ({self.wire_bytes:,} gzip)" if self.compress else ""
        return (f"loaded {self.rows:,} rows from {self.source} into {self.target}: "
                f"{self.body_bytes:,} bytes{wire} in {self.seconds:.2f} s, "
                f"{self.rows_per_second:,.0f} rows/s, {self.mb_per_second:,.1f} MB/s")


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


def _empty_batch(schema) -> Any:
    """A record batch of ``schema`` without rows: what the C encoder judges the columns on.
    (Made from arrays of nulls: pyarrow's from_pylist and empty_table import pandas, which
    cost 0.3 s and 45 MB of memory.)"""
    pa = _pyarrow()
    return pa.RecordBatch.from_arrays([pa.nulls(0, f.type) for f in schema], schema=schema)


def _check_vector(empty, id_column: str, name: str) -> None:
    """Raises the C encoder's ``TypeError`` when column ``name`` cannot be the vector column
    (or the id column cannot be an id)."""
    _core.encode_batch(empty, id_column, [name], vector_column=name)


def _can_be_vector(empty, id_column: str, name: str) -> bool:
    try:
        _check_vector(empty, id_column, name)
    except TypeError:
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
    empty = _empty_batch(schema)
    if vector_column is None:
        found = [n for n in names if n != id_column and n not in BODY_EXCLUDED_KEYS
                 and _can_be_vector(empty, id_column, n)]
        if len(found) > 1:
            raise ValueError(f"{source} has several vector columns ({', '.join(found)}): "
                             f"choose one with vector_column= (--vector-column)")
        vector_column = found[0] if found else None
    else:
        need(vector_column, "vector column")
        if vector_column in BODY_EXCLUDED_KEYS:
            excluded(vector_column, "vector column")
        _check_vector(empty, id_column, vector_column)
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
        pf = pa.parquet.ParquetFile(path, pre_buffer=False)
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
                      idx: Any) -> Iterator[tuple[list, int]]:
    """``(commands, rows)`` of each batch, in file order. Encoding runs in C without the GIL:
    with a pool, up to ``ahead`` batches are encoded (each validated whole before any of its
    bytes are returned) while the caller reads Parquet and hands the commands on. A bad row
    raises :class:`~bulkwire.errors.RowError` naming the file's row (with ``take``, the
    index taken)."""
    pa = _pyarrow()
    pending: deque = deque()  # (future or commands, rows), in file order
    dim = None
    submitted = 0

    def result(job: tuple) -> tuple[list, int]:
        done, rows = job
        try:
            return (done.result() if pool is not None else done), rows
        except RowError as exc:
            if idx is None:
                raise
            raise RowError(exc.column, int(idx[exc.row]), exc.reason, take_index=exc.row) from None

    for batch in batches:
        _check_batch(batch, source)  # buffer sizes: what the C reader cannot know
        if dim is None or dim < 0:
            dim = _vector_dim(pa, batch, plan)
        args = (batch, dim, submitted)
        pending.append((pool.submit(encode, *args) if pool is not None else encode(*args),
                        batch.num_rows))
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
    ISA-L when built in, else zlib). Written under a temporary name and renamed on success,
    so a failed load leaves no truncated body behind."""

    def __init__(self, path: str, compress: bool, chunk_size: int) -> None:
        self.path = path
        self.partial = path + ".partial"
        self.writer = BulkWriter(compress=native_backend() if compress else False,
                                 buffer_size=chunk_size)
        self._file = open(self.partial, "wb")
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
    (its bounded queue, gzip on the sender thread, error messages, abort). The request
    starts with the first batch; no rows, no request."""

    def __init__(self, url: str | Sequence[str], database: str | None, compress: bool,
                 chunk_size: int, tls: Mapping[str, Any]):
        if database is None:
            raise ValueError("database is required with url")
        self.bulk = BulkInsert(url, database, compress=native_backend() if compress else False,
                               buffer_size=chunk_size, **tls)
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


def default_out(path: PathLike, compress: bool) -> str:
    """``<name>.bulk.json`` (or ``.bulk.json.gz``) next to the source file."""
    root, _ = os.path.splitext(os.fspath(path))
    return root + (".bulk.json.gz" if compress else ".bulk.json")


# ------------------------------------------------------------------------------ load

def _check_arguments(source: str, float32: str, collection: str, chunk_size: int,
                     workers: int | None) -> int:
    """The arguments that need no file; returns the number of encoding threads."""
    if not os.path.exists(source):
        raise FileNotFoundError(f"no such file: {source!r}")
    if float32 not in ("widen", "shortest"):
        raise ValueError(f"float32 must be 'widen' or 'shortest', not {float32!r}")
    if not isinstance(collection, str) or not collection:
        raise ValueError("collection must be a non-empty str")
    if chunk_size <= 0:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    if workers is None:
        workers = min(2, os.cpu_count() or 1)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive int, got {workers!r}")
    return workers


def _schema(source: str) -> Any:
    pa = _pyarrow()
    if _file_format(source) == "parquet":
        return pa.parquet.ParquetFile(source).schema_arrow
    return TableFile(source).schema


def _default_batch_rows(schema, plan: _Plan) -> int:
    """About 4 MiB of commands per batch."""
    pa = _pyarrow()
    per_row = 64
    if plan.vector_column is not None:
        t = schema.field(plan.vector_column).type
        per_row += 20 * (t.list_size if pa.types.is_fixed_size_list(t) else 1024)
    return max(64, min(65536, (4 << 20) // per_row))


def _progress_reporter(progress: bool | Callable[[int, int], None],
                       total: int) -> tuple[Callable[[int, int], None], _Progress | None]:
    """(report(rows, body_bytes) after each batch, the progress bar or None)."""
    if progress is True:
        bar = _Progress(total)

        def report(rows: int, body: int) -> None:
            if rows < total:  # the final line is drawn once, after the close
                bar.update(rows, body)
        return report, bar
    if callable(progress):
        return progress, None
    return (lambda rows, body: None), None


def _run(source: str, target: Any, plan: _Plan, encode: _Encoder, batch_rows: int, take: Any,
         workers: int, progress: bool | Callable[[int, int], None]) -> tuple[int, int, float]:
    """Reads, encodes and hands every batch to the target; (rows, body bytes, seconds). Any
    error (or Ctrl-C) aborts the target and propagates."""
    start = time.perf_counter()
    rows = body = 0
    bar = None
    pool = ThreadPoolExecutor(workers, thread_name_prefix="bulkwire-encode") if workers > 1 else None
    try:
        batches, total, idx = _batches(source, plan, batch_rows, take)
        report, bar = _progress_reporter(progress, total)
        for commands, n in _encoded_in_order(batches, encode, source, plan, pool, workers, idx):
            body += target.store(commands, n)
            del commands
            rows += n
            report(rows, body)
        target.close()
    except BaseException:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
            pool = None
        target.abort()
        if bar is not None and bar.drawn:
            bar.stream.write("\n")
        raise
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
    body = target.body_bytes
    if bar is not None:
        bar.update(rows, body, final=True)
    return rows, body, time.perf_counter() - start


def load_parquet(path: PathLike, *, url: str | Sequence[str] | None = None,
                 database: str | None = None,
                 collection: str = "Embeddings", id_column: str = "id",
                 id_prefix: str | None = None, vector_column: str | None = None,
                 columns: Sequence[str] | None = None, compress: bool = False,
                 batch_rows: int | None = None, take: Any = None, out: PathLike | None = None,
                 float32: str = "widen", metadata: Mapping[str, Any] | None = None,
                 python_type: str | None = "builtins.dict", chunk_size: int = DEFAULT_CHUNK_SIZE,
                 progress: bool | Callable[[int, int], None] = False,
                 workers: int | None = None, certificate: Any = None, ca: Any = None,
                 ssl_context: Any = None) -> LoadResult:
    """Load a Parquet (or Arrow IPC) file of documents/embeddings with bulk insert.


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
    ``collection.lower() + "/"`` for integer ids and to ``""`` for string ids.

    The columns' types are checked (by the C encoder) before any row is read. Each batch's
    encoded commands go, as they are, into a :class:`bulkwire.BulkWriter`, which frames the
    body. Without ``url``, its pieces are written to ``out`` (default
    ``<name>.bulk.json[.gz]`` next to the source): the exact request body (a JSON array of
    commands; gzip with ``compress``). With ``url`` (and ``database``), the writer is a
    :class:`bulkwire.BulkInsert`'s: the same body, streamed; with no rows, no request is
    made. An error (or Ctrl-C) aborts the operation on the server. ``url`` is one server's
    URL or a list of a cluster's node URLs, as :class:`bulkwire.BulkInsert` takes it.

    ``certificate``, ``ca``, ``ssl_context`` (with an ``https://`` ``url``): TLS, as for
    :class:`bulkwire.BulkInsert`.

    ``workers``: threads encoding batches ahead (default: 2, or 1 on a single core); the
    output is the same whatever the number.

    ``take``: load only the rows at these indices, in that order (see :func:`bulkwire.take`).
    Every batch is checked before any of its bytes are written or sent: buffers that do not
    hold what the batch's offsets and lengths say (a crafted or corrupt file) raise
    ``ValueError`` naming the file and the column; a null or blank id, a null or ragged
    vector, a null vector element, invalid UTF-8 raise :class:`bulkwire.errors.RowError` (a
    ``ValueError``) naming the column and the row (the file's row number; with ``take``, also
    the position in ``take``), also as its attributes ``column``, ``row``, ``take_index``.

    >>> import tempfile, os
    >>> from bulkwire import sample_parquet
    >>> src = sample_parquet(os.path.join(tempfile.mkdtemp(), "s.parquet"), rows=3, dim=2)
    >>> load_parquet(src, metadata={"@collection": "Points"}).rows
    3
    """
    source = os.fspath(path)
    workers = _check_arguments(source, float32, collection, chunk_size, workers)
    schema = _schema(source)
    plan = _plan(schema, source, id_column, vector_column, columns)
    if id_prefix is None:
        is_integer = _pyarrow().types.is_integer(schema.field(id_column).type)
        id_prefix = f"{collection.lower()}/" if is_integer else ""
    if batch_rows is None:
        batch_rows = _default_batch_rows(schema, plan)
    if batch_rows <= 0:
        raise ValueError(f"batch_rows must be positive, got {batch_rows}")
    encode = _Encoder(plan, id_prefix, _metadata_json(collection, python_type, metadata), float32,
                      chunk_size)
    encode(_empty_batch(schema))  # the columns' types, judged before any file or request

    tls = {name: value for name, value in
           (("certificate", certificate), ("ca", ca), ("ssl_context", ssl_context)) if value is not None}
    if tls and url is None:
        raise ValueError(f"{', '.join(tls)} need url (an https:// server)")
    if url is not None:
        target: Any = _ServerTarget(url, database, compress, chunk_size, tls)
        where = f"{target.url} (database {database})"
    else:
        where = os.fspath(out) if out is not None else default_out(source, compress)
        target = _FileTarget(where, compress, chunk_size)
    rows, body, seconds = _run(source, target, plan, encode, batch_rows, take, workers, progress)
    return LoadResult(rows=rows, body_bytes=body, wire_bytes=target.wire_bytes, seconds=seconds,
                      source=source, target=where, compress=compress)
