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
from .load import LoadResult
from .load_options import LoadOptions
from .errors import RowError, _add_note
from .parquet import _pyarrow
from .urls import server_urls


@dataclass(frozen=True)
class SinkConfig:
    """Everything a worker needs to send its rows, and nothing else: it is what an engine
    pickles (no connection, thread or buffer lives here; each task opens its own request).
    ``options`` are the load's (:class:`bulkwire.LoadOptions`, checked when made)."""

    url: str | tuple[str, ...]
    database: str
    options: LoadOptions = field(default_factory=LoadOptions)
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
        if not isinstance(self.options, LoadOptions):
            raise TypeError(f"options must be a LoadOptions, not {type(self.options).__name__}")

    @property
    def target(self) -> str:
        """The server(s) and database, for messages and results."""
        url = self.url if isinstance(self.url, str) else ", ".join(self.url)
        return f"{url} (database {self.database})"

    def check_columns(self, names: Sequence[str], source: str) -> None:
        """Raises ``ValueError`` naming the argument when a column it names is not in
        ``names`` (the engine's schema, known on the client before any task runs)."""
        options = self.options
        wanted = [("id column", options.id_column)]
        if options.vector_column is not None:
            wanted.append(("vector column", options.vector_column))
        wanted += [("column", name) for name in options.columns or ()]
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
    options = config.options
    batches = _non_empty_batches(data, options.batch_rows)
    first = next(batches, None)
    if first is None:
        return LoadResult(rows=0, body_bytes=0, wire_bytes=0, seconds=time.perf_counter() - start,
                          source=source, target=config.target, compress=options.compress)
    config.check_columns(first.schema.names, source)  # named after the partition, not its data
    try:
        result = _load.load_arrow(
            itertools.chain([first], batches), url=config.url, database=config.database,
            options=options, threads=1, certificate=config.certificate, ca=config.ca)
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
                      target=config.target, compress=config.options.compress)
