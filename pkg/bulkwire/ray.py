"""Load a Ray Dataset, one session per write task, into a target of :mod:`bulkwire.targets`
(:class:`TargetDatasink`, :func:`write_target`): a RavenDB database (one bulk insert request
per task) or a Cassandra/Scylla table (one CQL session per task). The former doors
(:class:`BulkInsertDatasink`, :class:`CqlDatasink`, :func:`write_cql`) still work, with a
``DeprecationWarning``.

>>> import ray.data                                                  # doctest: +SKIP
>>> from bulkwire import targets
>>> from bulkwire.ray import TargetDatasink
>>> sink = TargetDatasink(targets.ravendb("http://raven:8080", "db"))
>>> ray.data.read_parquet("embeddings/").write_datasink(sink)        # doctest: +SKIP
>>> sink.result.rows                                                 # doctest: +SKIP

Needs the ``ray`` extra (``pip install 'bulkwire[ray]'``); ``import bulkwire`` does not import
Ray, and neither does this module until a datasink is first used.
"""
from __future__ import annotations

import time
from typing import Any, Iterable, Sequence

from ._deprecated import warn_deprecated
from ._arrow_sink import SinkConfig, cql_config, load_arrow, pandas_schema, summed
from ._extras import missing_extra
from .errors import BulkInsertError, LoadError, _add_note
from .load import LoadResult
from .load_options import LoadOptions

__all__ = ["TargetDatasink", "write_target", "BulkInsertDatasink", "CqlDatasink", "write_cql"]


def _ray_datasink_base() -> type:
    try:
        from ray.data import Datasink
    except ImportError as exc:
        raise missing_extra("Ray support", "ray", "ray") from exc
    return Datasink


def _define_datasinks() -> dict[str, type]:
    """The datasink classes, made once Ray is imported (they must subclass Ray's
    ``Datasink``): one write path, a configuration per target."""

    class _ArrowDatasink(_ray_datasink_base()):  # type: ignore[misc]
        """What every bulkwire datasink does with its :class:`SinkConfig` (only the
        configuration is pickled to the workers; each write task opens its own session)."""

        _config: SinkConfig
        _name = ""

        def __getstate__(self) -> dict:
            return {"_config": self._config}  # what a write task needs, and nothing else

        def __setstate__(self, state: dict) -> None:
            self._config = state["_config"]
            self.result = None
            self._started = 0.0

        def _begin(self, config: SinkConfig) -> None:
            self._config = config
            self.result: LoadResult | None = None
            self._started = 0.0

        @property
        def config(self) -> SinkConfig:
            """The sink's configuration (what the workers receive)."""
            return self._config

        def get_name(self) -> str:
            return self._name

        def on_write_start(self, schema: Any = None) -> None:
            """On the driver, before any write task. (The columns are checked by each write
            task, on its blocks, before its session opens: the schema Ray passes here is its
            first input bundle's, which after a fused read is the file listing's.)"""
            self.result = None
            self._started = time.perf_counter()

        def write(self, blocks: Iterable[Any], ctx: Any) -> LoadResult:
            """In a write task: its blocks in one session of the target."""
            from ray.data.block import BlockAccessor

            tables = (BlockAccessor.for_block(block).to_arrow() for block in blocks)
            index = getattr(ctx, "task_idx", "?")
            return load_arrow(tables, self._config, source=f"write task {index} of the Ray Dataset",
                              task=index)

        def on_write_complete(self, write_result: Any) -> None:
            """On the driver, after every write task succeeded: their stats summed. The rows
            the target confirmed must be the rows Ray gave the write tasks (its own count):
            anything else raises, and :attr:`result` stays None."""
            returns = [r for r in write_result.write_returns if r is not None]
            seconds = time.perf_counter() - self._started if self._started else \
                sum(r.seconds for r in returns)
            result = summed(returns, seconds,
                            f"a Ray Dataset ({len(returns)} write tasks)", self._config)
            given = getattr(write_result, "num_rows", None)
            # a row set aside in a task's rejected file (max_errors) was given, not stored
            if given is not None and int(given) != result.rows + result.rejected_rows:
                # a RavenDB database's bulk insert error; any other target's, a LoadError
                error = (BulkInsertError if self._config.described is None
                         else getattr(self._config.described, "load_error", LoadError))
                rejected = (f" ({result.rejected_rows:,} more rejected)"
                            if result.rejected_rows else "")
                raise error(f"the target confirmed {result.rows:,} rows of the Ray "
                            f"Dataset{rejected}, but its write tasks were given {int(given):,} "
                            f"({self._config.target})")
            self.result = result

        def on_write_failed(self, error: Exception) -> None:
            """On the driver, when the write failed (a task's error, a worker that died and
            was not retried): :attr:`result` stays None, and the error says that no row is
            confirmed by this write."""
            self.result = None
            _add_note(error, "not confirmed by the server: any row of the Ray Dataset (the "
                             "write did not complete, and Ray does not say which write tasks "
                             "did; those that did are stored, and writing the Dataset again "
                             "writes the same rows again)")

    class BulkInsertDatasink(_ArrowDatasink):
        """A Ray Data sink that bulk inserts every row: each write task sends its blocks as
        one bulk insert request; :meth:`on_write_complete` sums the requests' stats into
        :attr:`result` (a :class:`bulkwire.load.LoadResult`; ``seconds``: the whole write's
        wall time).

        Rows become documents exactly as :func:`bulkwire.load_parquet` writes them (the same
        options, the same bytes: ``options``, a :class:`bulkwire.LoadOptions`, and
        ``fields``, keyword arguments that replace its values): the id is ``<id_prefix><id column>``, so a task Ray runs
        again repeats the same PUTs. Blocks are read as Arrow tables (Ray's own
        ``BlockAccessor.to_arrow``), so Arrow columns are sent from their buffers.

        Only the configuration is pickled to the workers: no connection, thread or buffer
        lives in the sink; each write task opens its own request. A failing task makes
        ``write_datasink`` raise its error (the tasks that completed stay loaded;
        re-running is safe).

        >>> import ray.data                                          # doctest: +SKIP
        >>> sink = BulkInsertDatasink("http://127.0.0.1:8080", "db", collection="Points")
        >>> ray.data.from_arrow(table).write_datasink(sink)          # doctest: +SKIP
        >>> sink.result.rows                                         # doctest: +SKIP
        1000
        """

        _name = "BulkInsert"

        def __init__(self, url: str | Sequence[str], database: str, *,
                     options: LoadOptions | None = None, certificate: Any = None,
                     ca: Any = None, **fields: Any) -> None:
            warn_deprecated("bulkwire.ray.BulkInsertDatasink(url, database, ...)",
                            "bulkwire.ray.TargetDatasink(bulkwire.targets.ravendb(url, "
                            "database, ...))")
            self._begin(SinkConfig(
                url=url if isinstance(url, str) else tuple(url), database=database,
                options=LoadOptions.of(options, **fields), certificate=certificate, ca=ca))

    class TargetDatasink(_ArrowDatasink):
        """A Ray Data sink into ``target`` (a description of :mod:`bulkwire.targets` whose
        sessions are confirmed each on its own: a RavenDB database, a CQL table): each write
        task sends its blocks in one session of its own; :meth:`on_write_complete` sums the
        sessions' stats into :attr:`result`. ``options`` (a :class:`bulkwire.LoadOptions`)
        and ``fields`` are the load's own (``columns``, ``vector_column``, ``batch_rows``);
        the target holds its options. Only the judged description is pickled to the workers.

        >>> import ray.data                                          # doctest: +SKIP
        >>> from bulkwire import targets                             # doctest: +SKIP
        >>> sink = TargetDatasink(targets.cql("10.0.0.1", "ks", "vectors"))  # doctest: +SKIP
        >>> ray.data.from_arrow(table).write_datasink(sink)          # doctest: +SKIP
        >>> sink.result.rows                                         # doctest: +SKIP
        1000
        """

        _name = "Target"

        def __init__(self, target: Any, *, options: LoadOptions | None = None,
                     **fields: Any) -> None:
            self._begin(SinkConfig(options=LoadOptions.of(options, **fields), described=target))

    class CqlDatasink(_ArrowDatasink):
        """A Ray Data sink that loads every row into the CQL table ``keyspace.table``: each
        write task sends its blocks in one CQL session of its own (its own connections),
        each row one prepared INSERT routed to the node owning its partition, as
        :func:`bulkwire.cql.load_parquet` writes it; :meth:`on_write_complete` sums the
        sessions' stats into :attr:`result`.

        ``hosts``, ``keyspace``, ``table``, ``columns``, ``batch_rows`` and the keyword
        arguments of the connection (``consistency``, ``username``, ``password``, ``tls``,
        ``certificate``, ``ca``, ``window``, ``retries``, ``timeout``,
        ``address_map``, ``local_dc``) are as for
        :func:`bulkwire.cql.load_parquet`, judged when the sink is made. Only the judged
        description of the table is pickled to the workers (the password in it, never in
        its repr, a message or the result). Each write task checks its blocks' schema
        against the table before its first INSERT; :func:`write_cql` checks the Dataset's
        schema on the driver first. A failing task makes ``write_datasink`` raise its
        error, noted with the task and its rows not acknowledged.

        >>> import ray.data                                          # doctest: +SKIP
        >>> sink = CqlDatasink("10.0.0.1", "ks", "vectors")          # doctest: +SKIP
        >>> ray.data.from_arrow(table).write_datasink(sink)          # doctest: +SKIP
        >>> sink.result.rows                                         # doctest: +SKIP
        1000
        """

        _name = "CqlInsert"

        def __init__(self, hosts: str | Sequence[str], keyspace: str, table: str, *,
                     columns: Sequence[str] | None = None, batch_rows: int | None = None,
                     **connection: Any) -> None:
            warn_deprecated("bulkwire.ray.CqlDatasink(hosts, keyspace, table, ...)",
                            "bulkwire.ray.TargetDatasink(bulkwire.targets.cql(hosts, keyspace, "
                            "table, ...))")
            self._begin(cql_config(hosts, keyspace, table, columns, batch_rows, connection,
                                   "CqlDatasink"))

    classes = {"BulkInsertDatasink": BulkInsertDatasink, "CqlDatasink": CqlDatasink,
               "TargetDatasink": TargetDatasink}
    for name, cls in classes.items():
        cls.__module__ = __name__
        cls.__qualname__ = name  # pickled by reference, by name
    _ArrowDatasink.__module__ = __name__
    _ArrowDatasink.__qualname__ = "_ArrowDatasink"
    return {**classes, "_ArrowDatasink": _ArrowDatasink}


def write_target(ds: Any, target: Any, *, options: LoadOptions | None = None,
                 ray_remote_args: dict | None = None, **fields: Any) -> LoadResult:
    """Load every row of the Ray Dataset ``ds`` into ``target`` through a
    :class:`TargetDatasink` (its arguments), once the Dataset's schema (``ds.schema()``:
    what Ray knows of it without writing) passed the target's check on this process (a CQL
    table: its columns read, the INSERT prepared and every column's type checked,
    :class:`bulkwire.errors.SchemaMismatchError` naming the column) before any write task
    runs. Returns the sink's :attr:`~TargetDatasink.result`; raises a failed task's error.
    ``ray_remote_args`` go to ``write_datasink``.

    >>> import ray.data                                              # doctest: +SKIP
    >>> from bulkwire import targets                                 # doctest: +SKIP
    >>> write_target(ray.data.read_parquet("embeddings/"), targets.cql("10.0.0.1", "ks", "vectors")).rows  # doctest: +SKIP
    2200000
    """
    sink = __getattr__("TargetDatasink")(target, options=options, **fields)
    return _written(ds, sink, ray_remote_args)


def _written(ds: Any, sink: Any, ray_remote_args: dict | None) -> LoadResult:
    """``ds`` written into ``sink`` once its schema passed the sink's check."""
    schema = ds.schema()
    if schema is None:
        raise ValueError("the Ray Dataset has no schema (no blocks): nothing to check or load")
    sink.config.check("the Ray Dataset", list(schema.names), lambda: _arrow_schema(schema))
    options = sink.config.options
    if options.max_rows_per_second or options.max_bytes_per_second:
        sink._config = sink.config.per_task(_write_tasks(ds))
    ds.write_datasink(sink, ray_remote_args=ray_remote_args)
    return sink.result


def _write_tasks(ds: Any) -> int:
    """The write tasks of ``ds`` that can run at once, among which a rate limit is divided:
    the cluster's CPUs, or the Dataset's blocks if it is materialized and has fewer."""
    import ray

    tasks = max(1, int(ray.cluster_resources().get("CPU", 1)))
    from ray.data.dataset import MaterializedDataset

    if isinstance(ds, MaterializedDataset):
        tasks = min(tasks, max(1, ds.num_blocks()))
    return tasks


def write_cql(ds: Any, hosts: str | Sequence[str], keyspace: str, table: str, *,
              columns: Sequence[str] | None = None, batch_rows: int | None = None,
              ray_remote_args: dict | None = None, **connection: Any) -> LoadResult:
    """Deprecated: :func:`write_target` with ``bulkwire.targets.cql(hosts, keyspace, table,
    ...)``. Loads every row of the Ray Dataset ``ds`` into the CQL table
    ``keyspace.table``, once the Dataset's schema passed the table's check on this process.

    >>> import ray.data                                              # doctest: +SKIP
    >>> write_cql(ray.data.read_parquet("embeddings/"), "10.0.0.1", "ks", "vectors").rows  # doctest: +SKIP
    2200000
    """
    warn_deprecated("bulkwire.ray.write_cql(ds, hosts, keyspace, table, ...)",
                    "bulkwire.ray.write_target(ds, bulkwire.targets.cql(hosts, keyspace, "
                    "table, ...))")
    config = cql_config(hosts, keyspace, table, columns, batch_rows, connection, "write_cql")
    sink = __getattr__("TargetDatasink")(config.described, options=config.options)
    return _written(ds, sink, ray_remote_args)


def _arrow_schema(schema: Any) -> Any:
    """The Arrow schema of a Ray Dataset's ``schema()`` (pandas blocks: as Ray's own
    ``BlockAccessor.to_arrow`` would convert them)."""
    import pyarrow as pa

    import pandas as pd

    base = getattr(schema, "base_schema", schema)
    if isinstance(base, pa.Schema):
        return base
    empty = pd.DataFrame({name: pd.Series([], dtype=t) for name, t in zip(base.names, base.types)})
    return pa.Schema.from_pandas(empty, preserve_index=False)


def __getattr__(name: str) -> Any:
    # the classes are made on first use, so that importing this module does not import Ray
    if name in ("BulkInsertDatasink", "CqlDatasink", "TargetDatasink", "_ArrowDatasink"):
        classes = _define_datasinks()
        globals().update(classes)
        return classes[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
