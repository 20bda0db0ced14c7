"""One partition (or write task) of a distributed engine -> one session into the target.

The Dask and Ray sinks share this module: a picklable :class:`SinkConfig` travels to the
workers, and :func:`load_arrow` turns the Arrow data a worker holds into one session of the
load pipeline (:func:`bulkwire.load_arrow`): one bulk insert request into a RavenDB database,
or one CQL session (its own connections) into a Cassandra/Scylla table, with the same encoder
and sender as :func:`bulkwire.load_parquet` / :func:`bulkwire.cql.load_parquet` (so a row's
bytes do not depend on which engine, or how many partitions, sent it).
"""
from __future__ import annotations

import dataclasses
import inspect
import itertools
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from . import load as _load
from .load import LoadResult, mapping
from .load.ravendb_target import ravendb
from .load.interface import TargetDescription
from .load_options import LoadOptions
from .errors import _add_note
from ._arrow import _pyarrow
from .urls import server_urls


@dataclass(frozen=True)
class SinkConfig:
    """Everything a worker needs to send its rows, and nothing else: it is what an engine
    pickles (no connection, thread or buffer lives here; each task opens its own session).
    ``options`` are the load's (:class:`bulkwire.LoadOptions`, checked when made).

    The target is either a RavenDB database (``url``, ``database``, and the TLS files
    ``certificate`` and ``ca``), or ``described``: a target another entry described, every
    argument of it judged (:class:`bulkwire.load.cql_target.CqlDescription`: a CQL table;
    its credentials are kept out of its repr). Either way each task opens its session from
    :meth:`description`."""

    url: str | tuple[str, ...] | None = None
    database: str | None = None
    options: LoadOptions = field(default_factory=LoadOptions)
    certificate: Any = None
    ca: Any = None
    described: TargetDescription | None = None

    def __post_init__(self) -> None:
        # the arguments that need no data are refused on the client, before any task runs
        if not isinstance(self.options, LoadOptions):
            raise TypeError(f"options must be a LoadOptions, not {type(self.options).__name__}")
        if self.options.dry_run:
            raise ValueError("dry_run is not an option of a sink: its tasks run on many "
                             "machines, each storing its own rows (load_parquet and "
                             "bulkwire load take it)")
        if self.options.report is not None:
            raise ValueError("report is a load's own (its processes share one report), not "
                             "a sink's: each task of an engine is a load of its own")
        if self.options.rejected is not None and os.path.exists(self.options.rejected) \
                and not os.path.isdir(self.options.rejected):
            raise ValueError(f"rejected must be a directory for a sink (each task writes its "
                             f"own part-<task>.parquet there), not the file "
                             f"{self.options.rejected!r}")
        if self.described is not None:
            given = [name for name in ("url", "database", "certificate", "ca")
                     if getattr(self, name) is not None]
            if given:
                raise ValueError(f"a described target excludes {', '.join(given)}")
            if not getattr(self.described, "units", False):
                raise ValueError(f"a sink's target must confirm each task's session on its "
                                 f"own, not {self.described.describe()}")
            # the target holds its own options: one given here would be lost
            from .targets import refuse_options

            refuse_options(self.described, self.options.document_options())
            return
        if self.url is None:
            raise ValueError("url is required (or a described target)")
        # the URLs through bulkwire.urls (normalized, as the tasks will use them)
        urls = [str(u) for u in server_urls(
            self.url if isinstance(self.url, (str, list, tuple)) else list(self.url))]
        object.__setattr__(self, "url", urls[0] if isinstance(self.url, str) else tuple(urls))
        if not isinstance(self.database, str) or not self.database:
            raise ValueError("database must be a non-empty str")

    def per_task(self, concurrent: int) -> "SinkConfig":
        """This configuration for one of ``concurrent`` tasks that run at once
        (:func:`rate_share` of its options)."""
        shared = rate_share(self.options, concurrent)
        return self if shared is self.options else dataclasses.replace(self, options=shared)

    def description(self) -> TargetDescription:
        """The target a task opens its session from (a new description each call: for
        RavenDB, as :func:`bulkwire.load_arrow` describes its ``url`` and ``database``)."""
        if self.described is not None:
            return self.described
        tls = {name: value for name, value in (("certificate", self.certificate),
                                               ("ca", self.ca)) if value is not None}
        return ravendb(self.url, self.database, **tls, **self.options.document_options())

    @property
    def compress(self) -> bool | str:
        """The compression of each session's body (the target's, or the options')."""
        if self.described is not None:
            return getattr(self.described, "compress", False)
        return self.options.compress

    @property
    def target(self) -> str:
        """The server(s) and database, or the table, for messages and results."""
        if self.described is not None:
            return self.described.describe()
        url = self.url if isinstance(self.url, str) else ", ".join(self.url)
        return f"{url} (database {self.database})"

    def check(self, source: str, names: Sequence[str], schema: Callable[[], Any]) -> None:
        """Judges the data (``names``, its columns, and ``schema``, which gives its Arrow
        schema: the engine's, known on the client before any task runs) as far as the
        target can without rows: a RavenDB database, the columns the options name
        (:meth:`check_columns`; their types are judged by each task); a described target,
        its whole plan (a CQL table: its columns read, the INSERT prepared and every
        column's type checked, :class:`bulkwire.errors.SchemaMismatchError` naming the
        column). ``source`` names the data in messages."""
        if self.described is None:
            self.check_columns(names, source)
        elif mapping.active(self.options):  # the plan of the columns in the target's names
            seen, given, _ = mapping.mapped(schema(), self.options, self.described, source)
            self.described.plan(seen, source, given)
        else:
            self.described.plan(schema(), source, self.options)

    def check_columns(self, names: Sequence[str], source: str) -> None:
        """Raises ``ValueError`` naming the argument and ``source`` when a column it names is
        not in ``names`` (the engine's schema on the client before any task runs; a task's
        own columns before its session opens): the id column (the options', or a described
        target's when it writes documents), the vector column and ``columns``."""
        options = self.options
        id_column = (options.id_column if self.described is None
                     else getattr(self.described, "id_column", None))
        wanted = [] if id_column is None else [("id column", id_column)]
        if options.vector_column is not None:
            wanted.append(("vector column", options.vector_column))
        wanted += [("column", name) for name in options.source_columns or ()]
        for what, name in wanted:
            if name not in names:
                raise ValueError(f"{what} {name!r} is not a column of {source} "
                                 f"(its columns: {', '.join(map(str, names))})")


def rate_share(options: LoadOptions, concurrent: int) -> LoadOptions:
    """The options of one of ``concurrent`` tasks that run at once: the rate limits
    (``max_rows_per_second``, ``max_bytes_per_second``) are the whole job's, each task
    taking the limit divided by ``concurrent`` (at least the smallest limit a load takes).
    Without a limit, or one task, ``options`` themselves.

    >>> rate_share(LoadOptions(max_rows_per_second=1000), 4).max_rows_per_second
    250.0
    """
    from .load_options import RATE_RANGES

    if concurrent <= 1 or not (options.max_rows_per_second or options.max_bytes_per_second):
        return options
    shares = {name: max(low, getattr(options, name) / concurrent)
              for name, low, _ in RATE_RANGES if getattr(options, name)}
    return dataclasses.replace(options, **shares)


def pandas_schema(names: Sequence[Any], dtypes: Sequence[Any]) -> Any:
    """The Arrow schema of pandas columns of these ``names`` and ``dtypes``, as
    ``pyarrow.Table.from_pandas(preserve_index=False)`` converts a partition of them (the
    engines' own conversion of a pandas block): Arrow-backed dtypes as they are."""
    import pandas as pd

    empty = pd.DataFrame({name: pd.Series([], dtype=t) for name, t in zip(names, dtypes)})
    return _pyarrow().Schema.from_pandas(empty, preserve_index=False)


def cql_config(hosts: Any, keyspace: str, table: str, columns: Sequence[str] | None,
               batch_rows: int | None, connection: Mapping[str, Any], entry: str) -> SinkConfig:
    """The configuration of a sink into the CQL table ``keyspace.table``: ``connection`` the
    keyword arguments of :func:`bulkwire.cql.load_parquet` that describe the table's cluster
    (``consistency``, ``username``, ``password``, ``tls``, ``certificate``, ``ca``, ``window``,
    ``retries``, ``timeout``, ``address_map``, ``local_dc``), judged now; another keyword
    raises ``TypeError`` naming it and ``entry``."""
    from .load.cql_target import cql

    known = inspect.signature(cql).parameters
    unknown = sorted(name for name in connection
                     if name not in known or known[name].kind is not inspect.Parameter.KEYWORD_ONLY)
    if unknown:
        raise TypeError(f"{entry}() got an unexpected keyword argument {unknown[0]!r} (a CQL "
                        f"sink takes columns, batch_rows and the connection's: "
                        f"{', '.join(n for n, p in known.items() if p.kind is p.KEYWORD_ONLY)})")
    described = cql(hosts, keyspace, table, **connection)
    return SinkConfig(options=LoadOptions(columns=columns, batch_rows=batch_rows),
                      described=described)


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


def load_arrow(data: Any, config: SinkConfig, source: str, task: Any = None) -> LoadResult:
    """Sends the rows of ``data`` (a pyarrow Table, RecordBatch, or an iterable of them) in
    ONE session of the target (a bulk insert request; a CQL session with its own
    connections), through :func:`bulkwire.load_arrow`; returns what it did. No rows, no
    session. It returns only when the target confirmed every row (the server answered 2xx
    to the whole body; every INSERT was acknowledged); any error (or Ctrl-C) aborts the
    session and propagates, with a note naming ``source``, where the rows came from (the
    rows an error names count from its first row).

    With ``max_errors``, the rows the target refuses (at most ``max_errors`` of this task's)
    go to ``part-<task>.parquet`` in the directory ``rejected``, written only when the task
    rejected rows (:func:`rejecting`); the result's ``rejected_rows`` counts them."""
    start = time.perf_counter()
    options = config.options
    batches = _non_empty_batches(data, options.batch_rows)
    first = next(batches, None)
    if first is None:
        return LoadResult(rows=0, body_bytes=0, wire_bytes=0, seconds=time.perf_counter() - start,
                          source=source, target=config.target, compress=config.compress)
    # named after the partition, not its data, whatever the kind of target
    config.check_columns(first.schema.names, source)
    rejects = rejecting(options, task)
    try:
        with rejects as task_options:
            result = _load.load_arrow(itertools.chain([first], batches),
                                      target=config.description(),
                                      options=task_options.pipeline_only(), threads=1)
    except Exception as exc:
        # the rows it names count from the partition's first row: say which partition (a
        # note, which travels with the pickled error back to the engine's client)
        _add_note(exc, f"in {source}")
        raise
    return dataclasses.replace(result, source=source, target=config.target,
                               rejected_path=rejects.final if result.rejected_rows else None)


class rejecting:
    """A context manager giving one task's options: with ``rejected`` (a directory), the
    task's rejected file in it, written under a temporary name and, on leaving, renamed
    ``part-<task>.parquet`` (:meth:`final_name`) when it holds rows, however the task ends
    (a task that rejected none leaves no file); a task run again replaces its file. Without
    ``rejected``, the options themselves. With ``attempt`` (a Spark task attempt's number),
    the file is left under its attempt's own temporary name (``kept``), which the driver's
    commit renames: a task never gives the final name itself."""

    def __init__(self, options: LoadOptions, task: Any, attempt: Any = None) -> None:
        self.options, self.final, self.pending, self.kept = options, None, None, None
        self.deferred = attempt is not None
        if options.rejected is not None:
            os.makedirs(options.rejected, exist_ok=True)
            self.final = self.final_name(options.rejected, task)
            if self.deferred:
                from ._spark_files import temporary_name

                self.pending = temporary_name(self.final, attempt)
            else:
                self.pending = os.path.join(options.rejected,
                                            f".part-{task}.{os.getpid()}.pending.parquet")

    @staticmethod
    def final_name(directory: str, task: Any) -> str:
        """The name of task ``task``'s rejected file in ``directory``.

        >>> rejecting.final_name("bad", 3)
        'bad/part-3.parquet'
        """
        return os.path.join(directory, f"part-{task}.parquet")

    def __enter__(self) -> LoadOptions:
        if self.pending is None:
            return self.options
        return dataclasses.replace(self.options, rejected=self.pending)

    def __exit__(self, *exc: Any) -> None:
        if self.pending is None or not os.path.exists(self.pending):
            return
        import pyarrow.parquet as pq

        # kept however the task ends (a failed task's rows rejected so far say why it failed)
        if not pq.ParquetFile(self.pending).metadata.num_rows:
            os.remove(self.pending)
        elif self.deferred:
            self.kept = self.pending
        else:
            os.replace(self.pending, self.final)


def summed(results: Iterable[LoadResult], seconds: float, source: str, config: SinkConfig) -> LoadResult:
    """The results of many requests as one: rows and bytes summed; ``seconds`` is the whole
    run's wall time (the requests overlap)."""
    rows = body = wire = rejected = 0
    for result in results:
        rows += result.rows
        body += result.body_bytes
        wire += result.wire_bytes
        rejected += result.rejected_rows
    summary = LoadResult(rows=rows, body_bytes=body, wire_bytes=wire, seconds=seconds,
                         source=source, target=config.target, compress=config.compress)
    summary.rejected_rows = rejected
    summary.rejected_path = config.options.rejected
    return summary
