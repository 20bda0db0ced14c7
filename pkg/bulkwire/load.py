"""Parquet / Arrow IPC -> bulk insert: :func:`load_parquet` and the ``bulkwire load`` command.

The file is read batch by batch with pyarrow; each record batch goes to the C encoder
(``bulkwire._core.encode_batch``) through the Arrow PyCapsule interface, which writes one
bulk insert command per row straight from the Arrow buffers — no Python object per row or
per float. The commands go either to a file holding the exact request body (replayable to a
server later) or, with ``url``, to the server through :class:`bulkwire.BulkInsert`.
"""
from __future__ import annotations

import os
import re
import sys
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

from . import _core
from .conventions import BODY_EXCLUDED_KEYS, merge_metadata
from .encoding import dumps
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


# ------------------------------------------------------------------------------ sinks

class _FileSink:
    """The exact request body, written to ``path`` (gzip: one stream at the fastest level,
    sync-flushed per chunk, with the sender's own compressor: ISA-L when built in, else
    zlib). Written under a temporary name and renamed on success, so a failed load leaves no
    truncated body behind."""

    def __init__(self, path: str, compress: bool):
        self.path = path
        self.partial = path + ".partial"
        self._file = open(self.partial, "wb")
        self._gzip = _core.GzipStream(backend=_gzip_backend()) if compress else None
        self.wire_bytes = 0

    def write(self, chunk: bytes) -> None:
        if self._gzip is not None:
            chunk = self._gzip.compress(chunk)
            if chunk is None:
                return
        self._file.write(chunk)
        self.wire_bytes += len(chunk)

    def close(self) -> None:
        if self._gzip is not None:
            tail = self._gzip.finish()
            self._file.write(tail)
            self.wire_bytes += len(tail)
        self._file.close()
        os.replace(self.partial, self.path)

    def abort(self) -> None:
        self._file.close()
        try:
            os.unlink(self.partial)
        except OSError:
            pass


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

def _vector_type_ok(pa, t) -> bool:
    return ((pa.types.is_fixed_size_list(t) or pa.types.is_list(t) or pa.types.is_large_list(t))
            and (pa.types.is_float32(t.value_type) or pa.types.is_float64(t.value_type)))


def _field_type_ok(pa, t) -> bool:
    return (pa.types.is_integer(t) or pa.types.is_float32(t) or pa.types.is_float64(t)
            or pa.types.is_boolean(t) or pa.types.is_string(t) or pa.types.is_large_string(t)
            or pa.types.is_timestamp(t) or pa.types.is_null(t))


@dataclass
class _Plan:
    id_column: str
    vector_column: str | None
    fields: list[str]
    read_columns: list[str]


def _plan(schema, source: str, id_column: str, vector_column: str | None,
          columns: Sequence[str] | None) -> _Plan:
    """Checks the file's schema against the arguments, before any row is read."""
    pa = _pyarrow()
    names = schema.names

    def need(name: str, what: str) -> Any:
        if name not in names:
            raise ValueError(f"{what} {name!r} is not a column of {source} "
                             f"(its columns: {', '.join(names)})")
        return schema.field(name).type

    def excluded(name: str, what: str) -> None:
        if name == "@metadata":
            raise TypeError(f"{what} '@metadata' of {source} cannot be a document field: a "
                            f"document's @metadata is a mapping, written last from metadata= "
                            f"(with @collection and Raven-Python-Type); leave the column out "
                            f"with columns= (--columns)")
        raise ValueError(f"{what} 'Id' of {source} cannot be a document field: a document body "
                         f"never holds an Id member (its id is the command's Id); use it as the "
                         f"id with id_column='Id' (--id-column Id)")

    id_type = need(id_column, "id column")
    if not (pa.types.is_integer(id_type) or pa.types.is_string(id_type)
            or pa.types.is_large_string(id_type)):
        raise TypeError(f"id column {id_column!r} must hold integers or strings, not {id_type}")
    explicit_vector = vector_column is not None
    if vector_column is None:
        found = [n for n in names if n != id_column and n not in BODY_EXCLUDED_KEYS
                 and _vector_type_ok(pa, schema.field(n).type)]
        if len(found) > 1:
            raise ValueError(f"{source} has several vector columns ({', '.join(found)}): "
                             f"choose one with vector_column= (--vector-column)")
        vector_column = found[0] if found else None
    else:
        t = need(vector_column, "vector column")
        if vector_column in BODY_EXCLUDED_KEYS:
            excluded(vector_column, "vector column")
        if not _vector_type_ok(pa, t):
            raise TypeError(f"vector column {vector_column!r} must be a fixed_size_list or list of "
                            f"float32 or float64, not {t}")
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
    for name in fields:
        t = schema.field(name).type
        if name == vector_column:
            continue
        if not _field_type_ok(pa, t):
            raise TypeError(f"column {name!r} has type {t}, which cannot be a document field "
                            f"(supported: integers, float32/float64, booleans, strings, timestamps; "
                            f"lists only as the vector column): leave it out with columns= "
                            f"(--columns) or cast it")
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


# ------------------------------------------------------------------------------ load

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


_ROW_IN_MESSAGE = re.compile(r"^(column '.*?', )row (\d+):")


class _ServerTarget:
    """``load_parquet(url=...)``: the batches' commands go to :class:`bulkwire.BulkInsert`
    with ``store_encoded`` (its bounded queue, gzip on the sender thread, error messages,
    abort). The request starts with the first batch; no rows, no request."""

    def __init__(self, url: str, database: str | None, compress: bool, chunk_size: int):
        if database is None:
            raise ValueError("database is required with url")
        from .bulk import BulkInsert

        self.url = url
        self.bulk = BulkInsert(url, database, compress=_gzip_backend() if compress else False,
                               buffer_size=chunk_size)

    def store(self, chunks: list, rows: int) -> int:
        """One batch (``encode_batch(..., first=True)``: the chunks joined are its commands);
        returns the body bytes it adds (the writer's separator included)."""
        from .bulk import BulkInsertError
        from .transport import ServerError

        if not rows:
            return 0
        try:
            self.bulk.store_encoded(chunks, rows)
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


def _gzip_backend() -> str:
    """ISA-L's igzip when the C core was built with it (3-4x zlib level 1), else zlib."""
    return "isal" if getattr(_core, "HAVE_ISAL", False) else "zlib"


def default_out(path: PathLike, compress: bool) -> str:
    """``<name>.bulk.json`` (or ``.bulk.json.gz``) next to the source file."""
    root, _ = os.path.splitext(os.fspath(path))
    return root + (".bulk.json.gz" if compress else ".bulk.json")


def load_parquet(path: PathLike, *, url: str | None = None, database: str | None = None,
                 collection: str = "Embeddings", id_column: str = "id",
                 id_prefix: str | None = None, vector_column: str | None = None,
                 columns: Sequence[str] | None = None, compress: bool = False,
                 batch_rows: int | None = None, take: Any = None, out: PathLike | None = None,
                 float32: str = "widen", metadata: Mapping[str, Any] | None = None,
                 python_type: str | None = "builtins.dict", chunk_size: int = DEFAULT_CHUNK_SIZE,
                 progress: bool | Callable[[int, int], None] = False,
                 workers: int | None = None) -> LoadResult:
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

    Without ``url``, the exact request body (a JSON array of commands; gzip with ``compress``)
    is written to ``out`` (default ``<name>.bulk.json[.gz]`` next to the source). With ``url``
    (and ``database``), the rows are sent with :class:`bulkwire.BulkInsert` (each batch's
    encoded commands through ``BulkInsert.store_encoded``): the same body, streamed; with no
    rows, no request is made. An error (or Ctrl-C) aborts the operation on the server.

    ``workers``: threads encoding batches ahead (default: 2, or 1 on a single core); the
    output is the same whatever the number.

    ``take``: load only the rows at these indices, in that order (see :func:`bulkwire.take`).
    Every batch is checked before any of its bytes are written or sent: buffers that do not
    hold what the batch's offsets and lengths say (a crafted or corrupt file) raise
    ``ValueError`` naming the file and the column; a null or blank id, a null or ragged
    vector, a null vector element, invalid UTF-8 raise ``ValueError`` naming the column and
    the row (the file's row number; with ``take``, the index taken).

    >>> import tempfile, os
    >>> from bulkwire import sample_parquet
    >>> src = sample_parquet(os.path.join(tempfile.mkdtemp(), "s.parquet"), rows=3, dim=2)
    >>> load_parquet(src, metadata={"@collection": "Points"}).rows
    3
    """
    pa = _pyarrow()
    source = os.fspath(path)
    if not os.path.exists(source):
        raise FileNotFoundError(f"no such file: {source!r}")
    if float32 not in ("widen", "shortest"):
        raise ValueError(f"float32 must be 'widen' or 'shortest', not {float32!r}")
    if not isinstance(collection, str) or not collection:
        raise ValueError("collection must be a non-empty str")
    if chunk_size <= 0:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    fmt = _file_format(source)
    schema = (pa.parquet.ParquetFile(source).schema_arrow if fmt == "parquet"
              else TableFile(source).schema)
    plan = _plan(schema, source, id_column, vector_column, columns)
    if id_prefix is None:
        id_prefix = f"{collection.lower()}/" if pa.types.is_integer(schema.field(id_column).type) else ""
    if batch_rows is None:
        per_row = 64
        if plan.vector_column is not None:
            t = schema.field(plan.vector_column).type
            per_row += 20 * (t.list_size if pa.types.is_fixed_size_list(t) else 1024)
        batch_rows = max(64, min(65536, (4 << 20) // per_row))
    if batch_rows <= 0:
        raise ValueError(f"batch_rows must be positive, got {batch_rows}")
    meta = _metadata_json(collection, python_type, metadata)

    server: _ServerTarget | None = None
    if url is not None:
        sink: Any = _ServerTarget(url, database, compress, chunk_size)
        server = sink
        target = f"{url} (database {database})"
    else:
        target = os.fspath(out) if out is not None else default_out(source, compress)
        sink = _FileSink(target, compress)
    if workers is None:
        workers = min(2, os.cpu_count() or 1)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive int, got {workers!r}")

    def encode(batch, dim: int, first: bool, row_base: int) -> list:
        return _core.encode_batch(
            batch, plan.id_column, plan.fields, vector_column=plan.vector_column,
            id_prefix=id_prefix, metadata=meta, float32=float32, dim=dim, first=first,
            row_base=row_base, chunk_size=chunk_size)

    start = time.perf_counter()
    rows = body = 0
    bar = None
    pool = ThreadPoolExecutor(workers, thread_name_prefix="bulkwire-encode") if workers > 1 else None
    pending: deque = deque()  # (future or chunk list, rows) in file order
    held = b"["  # file target: written one chunk behind, so '[' and ']' ride with real chunks

    def emit(job) -> None:
        nonlocal rows, body, held
        result, n = job
        try:
            chunks = result.result() if pool is not None else result
        except (ValueError, TypeError) as exc:
            m = _ROW_IN_MESSAGE.match(str(exc))
            if m and idx is not None:
                pos = int(m.group(2))
                raise type(exc)(_ROW_IN_MESSAGE.sub(
                    f"{m.group(1)}row {int(idx[pos])} (take[{pos}]):", str(exc))) from None
            raise
        if server is not None:
            body += server.store(chunks, n)  # the writer frames the batches
        else:
            for chunk in chunks:
                sink.write(held)
                body += len(held)
                held = chunk
        rows += n
        if bar is not None:
            if rows < total:  # the final line is drawn once, after the close
                bar.update(rows, body)
        elif callable(progress):
            progress(rows, body)

    try:
        batches, total, idx = _batches(source, plan, batch_rows, take)
        if progress is True:
            bar = _Progress(total)
        dim = None
        submitted = 0
        for batch in batches:
            _check_batch(batch, source)  # buffer sizes: what the C reader cannot know
            if dim is None or dim < 0:
                dim = _vector_dim(pa, batch, plan)
            n = batch.num_rows
            # Encoding runs in C without the GIL: with a pool, the next batches are encoded
            # (each validated whole before any of its bytes are returned) while this thread
            # reads Parquet and hands chunks to the sink.
            # first: no leading ',' in the batch's commands. The server target's writer puts
            # the separators between batches; the file target's batches carry their own.
            args = (batch, dim, server is not None or submitted == 0, submitted)
            pending.append((pool.submit(encode, *args) if pool is not None else encode(*args), n))
            submitted += n
            while len(pending) > (workers if pool is not None else 0):
                emit(pending.popleft())
        while pending:
            emit(pending.popleft())
        if server is not None:
            sink.close()
            body = server.body_bytes
        else:
            held += b"]"
            sink.write(held)
            body += len(held)
            sink.close()
    except BaseException:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
            pool = None
        sink.abort()
        if bar is not None and bar.drawn:
            bar.stream.write("\n")
        raise
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
    seconds = time.perf_counter() - start
    if bar is not None:
        bar.update(rows, body, final=True)
    return LoadResult(rows=rows, body_bytes=body, wire_bytes=sink.wire_bytes, seconds=seconds,
                      source=source, target=target, compress=compress)
