"""Load a Dask DataFrame: one session per partition, sent by the workers, into a target of
:mod:`bulkwire.targets` (:func:`to_target`): a RavenDB database (one bulk insert request per
partition) or a Cassandra/Scylla table (one CQL session per partition). The former doors
:func:`to_bulk_insert` and :func:`to_cql` still work, with a ``DeprecationWarning``.

>>> import bulkwire.dask
>>> from bulkwire import targets
>>> result = bulkwire.dask.to_target(ddf, targets.ravendb("http://raven:8080", "db"))  # doctest: +SKIP
>>> result = bulkwire.dask.to_target(ddf, targets.cql("10.0.0.1", "ks", "vectors"))  # doctest: +SKIP
>>> result.rows                                                     # doctest: +SKIP

Needs the ``dask`` extra (``pip install 'bulkwire[dask]'``); ``import bulkwire`` does not
import Dask, and this module imports it only when called.
"""
from __future__ import annotations

import os
import time
from typing import Any, Mapping, Sequence

from ._deprecated import warn_deprecated
from ._arrow_sink import SinkConfig, cql_config, load_arrow, pandas_schema, summed
from ._extras import missing_extra
from .errors import _mark_unconfirmed
from .load import LoadResult
from .load_options import LoadOptions

__all__ = ["to_target", "to_bulk_insert", "to_cql"]

_STATS_COLUMNS = ("rows", "body_bytes", "wire_bytes", "seconds", "rejected_rows")


def _dask_dataframe() -> Any:
    try:
        import dask.dataframe
    except ImportError as exc:
        raise missing_extra("Dask support", "dask", "dask") from exc
    return dask.dataframe


def _stats_frame(result: LoadResult | None) -> Any:
    """A one-row pandas frame of a partition's result (None: the empty frame that tells Dask
    the output's columns); a new frame each call."""
    import pandas as pd

    values = ([result.rows], [result.body_bytes], [result.wire_bytes], [result.seconds],
              [result.rejected_rows]) if result is not None else ([], [], [], [], [])
    dtypes = ("int64", "int64", "int64", "float64", "int64")
    return pd.DataFrame({name: pd.Series(v, dtype=t)
                         for name, v, t in zip(_STATS_COLUMNS, values, dtypes)})


def _load_partition(frame: Any, config: SinkConfig, partition_info: dict | None = None) -> Any:
    """Runs on a worker: the partition's rows as one session of the target; returns its
    stats as a one-row frame (a new reference to a new frame)."""
    import pyarrow as pa

    number = partition_info["number"] if partition_info else "?"
    # preserve_index=False: the index is Dask's partitioning, not a document field. Arrow-backed
    # columns (dtype_backend="pyarrow") keep their Arrow arrays: a fixed_size_list stays one.
    table = pa.Table.from_pandas(frame, preserve_index=False)
    return _stats_frame(load_arrow(table, config, source=f"partition {number} of the Dask DataFrame",
                                   task=number))


def to_target(ddf: Any, target: Any, *, options: LoadOptions | None = None,
              compute_kwargs: Mapping[str, Any] | None = None, **fields: Any) -> LoadResult:
    """Load every row of the Dask DataFrame ``ddf`` into ``target`` (a description of
    :mod:`bulkwire.targets` whose sessions are confirmed each on its own: a RavenDB
    database, a CQL table): each partition is sent by the worker that holds it, in one
    session of its own (through ``map_partitions``); returns the sessions' stats summed
    (``seconds``: the whole run's wall time). Only the judged description is sent to the
    workers.

    ``options`` (a :class:`bulkwire.LoadOptions`) and ``fields`` are the load's own
    (``columns``, ``vector_column``, ``batch_rows``); the target holds its options. Each
    partition is converted with ``pyarrow.Table.from_pandas(preserve_index=False)``. The
    frame's schema is checked against the target before any task runs (for a CQL table:
    its columns read and the INSERT prepared). A partition that fails makes this call raise
    its error, noted with the partitions not confirmed; those that completed stay loaded.

    ``max_rows_per_second`` and ``max_bytes_per_second`` limit the whole write: each
    partition's session takes the limit divided by the partitions that can run at once (the
    partitions, or the workers' threads if fewer). With ``max_errors``, ``rejected`` is a
    directory: each partition that rejected rows writes them to ``part-<partition>.parquet``
    there, and ``max_errors`` applies to each partition's rows; the result's
    ``rejected_rows`` sums them. ``dry_run`` and ``report`` are a load's own, refused here.

    >>> import dask.dataframe as dd                                  # doctest: +SKIP
    >>> from bulkwire import targets                                 # doctest: +SKIP
    >>> to_target(ddf, targets.ravendb("http://127.0.0.1:8080", "db")).rows  # doctest: +SKIP
    2200000
    """
    config = SinkConfig(options=LoadOptions.of(options, **fields), described=target)
    return _write(ddf, config, compute_kwargs)


def to_bulk_insert(ddf: Any, url: str | Sequence[str], database: str, *,
                   options: LoadOptions | None = None, certificate: Any = None, ca: Any = None,
                   compute_kwargs: Mapping[str, Any] | None = None, **fields: Any) -> LoadResult:
    """Deprecated: :func:`to_target` with ``bulkwire.targets.ravendb(url, database, ...)``.

    Bulk insert every row of the Dask DataFrame ``ddf``: each partition is sent by the
    worker that holds it, as one bulk insert request (through ``map_partitions``); returns
    the requests' stats summed (``seconds``: the whole run's wall time).

    Rows become documents exactly as :func:`bulkwire.load_parquet` writes them (the same
    options, the same bytes: ``options``, a :class:`bulkwire.LoadOptions`, and ``fields``,
    keyword arguments that replace its values, e.g. ``collection=``): the id is ``<id_prefix><id column>``, so the same row always
    has the same id, and an engine that runs a partition again repeats the same PUTs.
    Each partition is converted with ``pyarrow.Table.from_pandas(preserve_index=False)``:
    Arrow-backed columns (``dtype_backend="pyarrow"``, e.g. a ``fixed_size_list`` vector)
    are sent from their Arrow buffers as they are. A partition without rows makes no request.

    The columns named by the arguments are checked against ``ddf.columns`` before any task
    runs. A partition that fails (a bad row, a server error) makes this call raise its
    error; the partitions that completed stay loaded (re-running is safe: same ids). It
    returns normally only when every partition's request was answered 2xx by the server.

    ``certificate`` and ``ca`` (files, with an ``https://`` url) are as for
    :class:`bulkwire.BulkInsert`; ``compute_kwargs`` go to ``compute`` (e.g. a scheduler).

    >>> import dask.dataframe as dd                                  # doctest: +SKIP
    >>> ddf = dd.read_parquet("embeddings/", dtype_backend="pyarrow")  # doctest: +SKIP
    >>> to_bulk_insert(ddf, "http://127.0.0.1:8080", "db").rows       # doctest: +SKIP
    2200000
    """
    warn_deprecated("bulkwire.dask.to_bulk_insert(ddf, url, database, ...)",
                    "bulkwire.dask.to_target(ddf, bulkwire.targets.ravendb(url, database, ...))")
    config = SinkConfig(url=url if isinstance(url, str) else tuple(url), database=database,
                        options=LoadOptions.of(options, **fields), certificate=certificate,
                        ca=ca)
    return _write(ddf, config, compute_kwargs)


def to_cql(ddf: Any, hosts: str | Sequence[str], keyspace: str, table: str, *,
           columns: Sequence[str] | None = None, batch_rows: int | None = None,
           compute_kwargs: Mapping[str, Any] | None = None, **connection: Any) -> LoadResult:
    """Deprecated: :func:`to_target` with ``bulkwire.targets.cql(hosts, keyspace, table,
    ...)``.

    Load every row of the Dask DataFrame ``ddf`` into the CQL table ``keyspace.table``:
    each partition is sent by the worker that holds it, in one CQL session of its own (its
    own connections, through ``map_partitions``), each row one prepared INSERT of the
    frame's columns (``columns``: these only) routed to the node owning its partition, as
    :func:`bulkwire.cql.load_parquet` writes it; returns the sessions' stats summed
    (``seconds``: the whole run's wall time).

    ``hosts``, ``keyspace`` and ``table`` are as for :func:`bulkwire.cql.load_parquet`, and
    so are the keyword arguments of the connection (``connection``: ``consistency``,
    ``username``, ``password``, ``tls``, ``certificate``, ``ca``, ``window``, ``retries``,
    ``timeout``, ``address_map``, ``local_dc``) and ``batch_rows``; ``compute_kwargs`` go to
    ``compute``. Only the judged
    description of the table (no connection) is sent to the workers; the password is in it,
    never in its repr, a message or the result.

    Before any task runs, the table's columns are read, the INSERT prepared and the
    frame's Arrow schema (of its columns' dtypes, as each partition is converted) checked
    against it: :class:`bulkwire.errors.SchemaMismatchError` names a column whose type cannot be
    bound (give vectors as Arrow-backed columns, ``dtype_backend="pyarrow"``: an object
    column of lists is not one), ``ValueError`` a column the table lacks or a primary key
    column the frame lacks. A partition whose session fails (a bad row, a node's refusal)
    makes this call raise its error, noted with the partition and the partition's rows not
    acknowledged; the partitions that completed stay loaded (running it again writes the
    same rows again). It returns normally only when every row of every partition was
    acknowledged.

    >>> import dask.dataframe as dd                                  # doctest: +SKIP
    >>> ddf = dd.read_parquet("embeddings/", dtype_backend="pyarrow")  # doctest: +SKIP
    >>> to_cql(ddf, "10.0.0.1", "ks", "vectors").rows                # doctest: +SKIP
    2200000
    """
    warn_deprecated("bulkwire.dask.to_cql(ddf, hosts, keyspace, table, ...)",
                    "bulkwire.dask.to_target(ddf, bulkwire.targets.cql(hosts, keyspace, table, "
                    "...))")
    config = cql_config(hosts, keyspace, table, columns, batch_rows, connection, "to_cql")
    return _write(ddf, config, compute_kwargs)


def _write(ddf: Any, config: SinkConfig, compute_kwargs: Mapping[str, Any] | None) -> LoadResult:
    """Each partition of ``ddf`` in one session of ``config``'s target, once the frame's
    schema passed :meth:`SinkConfig.check`; the sessions' stats summed."""
    dd = _dask_dataframe()
    if not isinstance(ddf, dd.DataFrame):
        raise TypeError(f"ddf must be a dask.dataframe.DataFrame, not {type(ddf).__name__}")
    config.check("the Dask DataFrame", list(ddf.columns),
                 lambda: pandas_schema(list(ddf.dtypes.index), list(ddf.dtypes)))
    start = time.perf_counter()
    compute_kwargs = dict(compute_kwargs or {})
    shared = config
    if config.options.max_rows_per_second or config.options.max_bytes_per_second:
        shared = config.per_task(min(ddf.npartitions, _threads(ddf, compute_kwargs)))
    tasks = ddf.map_partitions(_load_partition, shared, meta=_stats_frame(None),
                               enforce_metadata=False)
    frames = _partition_stats(tasks, compute_kwargs)
    parts = []
    for frame in frames:
        for r in frame.itertuples(index=False):
            part = LoadResult(rows=int(r.rows), body_bytes=int(r.body_bytes),
                              wire_bytes=int(r.wire_bytes), seconds=float(r.seconds),
                              source="", target=config.target, compress=config.compress)
            part.rejected_rows = int(r.rejected_rows)
            parts.append(part)
    if len(parts) != ddf.npartitions:  # every partition reports once: anything else is a bug
        raise RuntimeError(f"{len(parts)} partition results for {ddf.npartitions} partitions")
    return summed(parts, time.perf_counter() - start,
                  f"a Dask DataFrame ({ddf.npartitions} partitions)", config)


def _threads(ddf: Any, compute_kwargs: dict) -> int:
    """The partitions of ``ddf`` that can be written at once: the threads of the
    ``distributed`` cluster's workers, else the local scheduler's (``num_workers``, or a
    thread per core; one for the synchronous scheduler)."""
    client = _distributed_client(ddf, compute_kwargs.get("scheduler"))
    if client is not None:
        return max(1, sum(client.nthreads().values()))
    scheduler = compute_kwargs.get("scheduler")
    if scheduler in ("sync", "synchronous", "single-threaded"):
        return 1
    import dask

    return max(1, int(compute_kwargs.get("num_workers") or dask.config.get("num_workers", None)
                      or os.cpu_count() or 1))


def _distributed_client(tasks: Any, scheduler: Any) -> Any:
    """The ``distributed.Client`` that would run ``tasks`` (the scheduler Dask picks for
    them, given ``compute_kwargs``' ``scheduler``), or None for a local scheduler."""
    import dask.base

    get = dask.base.get_scheduler(scheduler=scheduler, collections=[tasks])
    client = getattr(get, "__self__", None)
    try:
        from distributed import Client
    except ImportError:  # dask without distributed: only local schedulers
        return None
    return client if isinstance(client, Client) else None


def _partition_stats(tasks: Any, compute_kwargs: dict) -> list:
    """Each partition's stats frame, once every partition's request was answered 2xx.

    On a ``distributed`` cluster each partition is its own future: the first that fails
    (its error, a worker that died running it too often, Ctrl-C) cancels those not done
    yet, and its exception is raised saying which partitions the server confirmed and which
    it did not (``unconfirmed``: their numbers; a cancelled partition that was already
    running may still complete, and is counted as not confirmed). A local scheduler gives
    no partition's result once one fails, so then none is said to be confirmed."""
    client = _distributed_client(tasks, compute_kwargs.get("scheduler"))
    partitions = tasks.npartitions
    if client is None:
        try:
            return [tasks.compute(**compute_kwargs)]
        except BaseException as exc:
            _note_unconfirmed(exc, list(range(partitions)), partitions,
                              "a local scheduler reports no partition once one fails")
            raise
    from distributed import as_completed

    compute_kwargs = {k: v for k, v in compute_kwargs.items() if k != "scheduler"}
    futures = client.compute(tasks.to_delayed(), **compute_kwargs)
    try:
        for future in as_completed(futures):
            if future.status != "finished":
                raise future.exception()
    except BaseException as exc:
        for future in futures:
            if not future.done():
                future.cancel()
        _note_unconfirmed(exc, [i for i, f in enumerate(futures) if f.status != "finished"],
                          partitions, None)
        raise
    return client.gather(futures)


def _note_unconfirmed(exc: BaseException, unconfirmed: list[int], partitions: int,
                      why: str | None) -> None:
    """Says on ``exc`` which partitions no 2xx answer confirmed (``exc.unconfirmed``: their
    numbers, and a note)."""
    listed = ", ".join(map(str, unconfirmed[:20])) + (", ..." if len(unconfirmed) > 20 else "")
    _mark_unconfirmed(exc, unconfirmed,
                     f"not confirmed by the server: {len(unconfirmed)} of the Dask DataFrame's "
                     f"{partitions} partitions ({listed})" + (f": {why}" if why else "") +
                     "; the partitions not listed are stored, and running the load again "
                     "writes the same rows again")
