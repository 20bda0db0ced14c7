"""One partition (or write task) of a distributed engine -> one bulk insert request.

The Dask and Ray sinks share this module: a picklable :class:`SinkConfig` travels to the
workers, and :func:`load_arrow` turns the Arrow data a worker holds into one bulk insert
request, with the same encoder and sender as :func:`bulkwire.load_parquet` (so a document's
bytes do not depend on which engine, or how many partitions, sent it).
"""
from __future__ import annotations

import dataclasses
import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Sequence

from . import load as _load
from .compression import compress_value
from .load import DEFAULT_CHUNK_SIZE, LoadResult
from .errors import RowError, _add_note
from .parquet import _pyarrow
from .urls import server_urls


@dataclass(frozen=True)
class SinkConfig:
    """Everything a worker needs to send its rows, and nothing else: it is what an engine
    pickles (no connection, thread or buffer lives here; each task opens its own request)."""

    url: str | tuple[str, ...]
    database: str
    collection: str = "Embeddings"
    id_column: str = "id"
    id_prefix: str | None = None
    vector_column: str | None = None
    columns: tuple[str, ...] | None = None
    compress: bool | str = False
    float32: str = "widen"
    metadata: Mapping[str, Any] | None = field(default=None, hash=False)
    python_type: str | None = "builtins.dict"
    chunk_size: int = DEFAULT_CHUNK_SIZE
    batch_rows: int | None = None
    certificate: Any = None
    ca: Any = None

    def __post_init__(self) -> None:
        # the arguments that need no data are refused on the client, before any task runs
        # the URLs through bulkwire.urls (normalized, as the tasks will use them)
        urls = [str(u) for u in server_urls(
            self.url if isinstance(self.url, (str, list, tuple)) else list(self.url))]
        object.__setattr__(self, "url", urls[0] if isinstance(self.url, str) else tuple(urls))
        if not isinstance(self.database, str) or not self.database:
            raise ValueError("database must be a non-empty str")
        if not isinstance(self.collection, str) or not self.collection:
            raise ValueError("collection must be a non-empty str")
        if not isinstance(self.id_column, str) or not self.id_column:
            raise ValueError("id_column must be a non-empty str")
        if self.columns is not None:
            if isinstance(self.columns, str):
                raise TypeError("columns must be a sequence of column names, not a str")
            object.__setattr__(self, "columns", tuple(self.columns))
        object.__setattr__(self, "compress", compress_value(self.compress))
        if self.float32 not in ("widen", "shortest"):
            raise ValueError(f"float32 must be 'widen' or 'shortest', not {self.float32!r}")
        if isinstance(self.chunk_size, bool) or not isinstance(self.chunk_size, int) \
                or self.chunk_size <= 0:
            raise ValueError(f"chunk_size must be a positive int, got {self.chunk_size!r}")
        if self.batch_rows is not None and (isinstance(self.batch_rows, bool) or
                                            not isinstance(self.batch_rows, int) or
                                            self.batch_rows <= 0):
            raise ValueError(f"batch_rows must be a positive int, got {self.batch_rows!r}")

    @property
    def target(self) -> str:
        """The server(s) and database, for messages and results."""
        url = self.url if isinstance(self.url, str) else ", ".join(self.url)
        return f"{url} (database {self.database})"

    def check_columns(self, names: Sequence[str], source: str) -> None:
        """Raises ``ValueError`` naming the argument when a column it names is not in
        ``names`` (the engine's schema, known on the client before any task runs)."""
        wanted = [("id column", self.id_column)]
        if self.vector_column is not None:
            wanted.append(("vector column", self.vector_column))
        wanted += [("column", name) for name in self.columns or ()]
        for what, name in wanted:
            if name not in names:
                raise ValueError(f"{what} {name!r} is not a column of {source} "
                                 f"(its columns: {', '.join(map(str, names))})")


def _non_empty_batches(data: Any, batch_rows: int | None) -> Iterator[Any]:
    """The record batches of a table, a record batch, or an iterable of either; batches
    without rows are dropped (they would only add a request's worth of nothing)."""
    pa = _pyarrow()
    pieces = [data] if isinstance(data, (pa.Table, pa.RecordBatch)) else data
    for piece in pieces:
        if isinstance(piece, pa.Table):
            yield from (b for b in piece.to_batches(max_chunksize=batch_rows) if b.num_rows)
        elif isinstance(piece, pa.RecordBatch):
            if piece.num_rows:
                yield from ([piece] if batch_rows is None or piece.num_rows <= batch_rows else
                            pa.Table.from_batches([piece]).to_batches(max_chunksize=batch_rows))
        else:
            raise TypeError(f"expected pyarrow Tables or RecordBatches, not {type(piece).__name__}")


def load_arrow(data: Any, config: SinkConfig, source: str) -> LoadResult:
    """Sends the rows of ``data`` (a pyarrow Table, RecordBatch, or an iterable of them) as
    ONE bulk insert request, through :func:`bulkwire.load_arrow`; returns what it did. No
    rows, no request. It returns only when the server answered 2xx to the whole body; any
    error (or Ctrl-C) aborts the operation and propagates, with ``source`` naming where the
    rows came from."""
    start = time.perf_counter()
    batches = _non_empty_batches(data, config.batch_rows)
    first = next(batches, None)
    if first is None:
        return LoadResult(rows=0, body_bytes=0, wire_bytes=0, seconds=time.perf_counter() - start,
                          source=source, target=config.target, compress=config.compress)
    config.check_columns(first.schema.names, source)  # named after the partition, not its data
    try:
        result = _load.load_arrow(
            itertools.chain([first], batches), url=config.url, database=config.database,
            collection=config.collection, id_column=config.id_column, id_prefix=config.id_prefix,
            vector_column=config.vector_column,
            columns=None if config.columns is None else list(config.columns),
            compress=config.compress, batch_rows=config.batch_rows, float32=config.float32,
            metadata=config.metadata, python_type=config.python_type,
            chunk_size=config.chunk_size, threads=1, certificate=config.certificate,
            ca=config.ca)
    except RowError as exc:
        # its row counts from the partition's first row: say which partition (a note, which
        # travels with the pickled error back to the engine's client)
        _add_note(exc, f"in {source}")
        raise
    return dataclasses.replace(result, source=source, target=config.target)


def summed(results: Iterable[LoadResult], seconds: float, source: str, config: SinkConfig) -> LoadResult:
    """The results of many requests as one: rows and bytes summed; ``seconds`` is the whole
    run's wall time (the requests overlap)."""
    rows = body = wire = 0
    for result in results:
        rows += result.rows
        body += result.body_bytes
        wire += result.wire_bytes
    return LoadResult(rows=rows, body_bytes=body, wire_bytes=wire, seconds=seconds, source=source,
                      target=config.target, compress=config.compress)
