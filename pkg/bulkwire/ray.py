"""Bulk insert from a Ray Dataset: ``Dataset.write_datasink(BulkInsertDatasink(url, database))``,
one request per write task.

>>> import ray.data                                                  # doctest: +SKIP
>>> from bulkwire.ray import BulkInsertDatasink
>>> sink = BulkInsertDatasink("http://raven:8080", "db")
>>> ray.data.read_parquet("embeddings/").write_datasink(sink)        # doctest: +SKIP
>>> sink.result.rows                                                 # doctest: +SKIP

Needs the ``ray`` extra (``pip install 'bulkwire[ray]'``); ``import bulkwire`` does not import
Ray, and neither does this module until :class:`BulkInsertDatasink` is first used.
"""
from __future__ import annotations

import time
from typing import Any, Iterable, Sequence

from ._arrow_sink import SinkConfig, load_arrow, summed
from ._extras import missing_extra
from .errors import BulkInsertError, _add_note
from .load import LoadResult
from .load_options import LoadOptions

__all__ = ["BulkInsertDatasink"]


def _ray_datasink_base() -> type:
    try:
        from ray.data import Datasink
    except ImportError as exc:
        raise missing_extra("Ray support", "ray", "ray") from exc
    return Datasink


def _define_datasink() -> type:
    """The datasink class, made once Ray is imported (it must subclass Ray's ``Datasink``)."""

    class BulkInsertDatasink(_ray_datasink_base()):  # type: ignore[misc]
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

        def __init__(self, url: str | Sequence[str], database: str, *,
                     options: LoadOptions | None = None, certificate: Any = None,
                     ca: Any = None, **fields: Any) -> None:
            self._config = SinkConfig(
                url=url if isinstance(url, str) else tuple(url), database=database,
                options=LoadOptions.of(options, **fields), certificate=certificate, ca=ca)
            self.result: LoadResult | None = None
            self._started = 0.0

        def __getstate__(self) -> dict:
            return {"_config": self._config}  # what a write task needs, and nothing else

        def __setstate__(self, state: dict) -> None:
            self._config = state["_config"]
            self.result = None
            self._started = 0.0

        @property
        def config(self) -> SinkConfig:
            """The sink's configuration (what the workers receive)."""
            return self._config

        def get_name(self) -> str:
            return "BulkInsert"

        def on_write_start(self, schema: Any = None) -> None:
            """On the driver, before any write task. (The columns are checked by each write
            task, on its blocks, before its request opens: the schema Ray passes here is its
            first input bundle's, which after a fused read is the file listing's.)"""
            self.result = None
            self._started = time.perf_counter()

        def write(self, blocks: Iterable[Any], ctx: Any) -> LoadResult:
            """In a write task: its blocks as one bulk insert request."""
            from ray.data.block import BlockAccessor

            tables = (BlockAccessor.for_block(block).to_arrow() for block in blocks)
            index = getattr(ctx, "task_idx", "?")
            return load_arrow(tables, self._config, source=f"write task {index} of the Ray Dataset")

        def on_write_complete(self, write_result: Any) -> None:
            """On the driver, after every write task succeeded: their stats summed. The rows
            the server confirmed must be the rows Ray gave the write tasks (its own count):
            anything else raises, and :attr:`result` stays None."""
            returns = [r for r in write_result.write_returns if r is not None]
            seconds = time.perf_counter() - self._started if self._started else \
                sum(r.seconds for r in returns)
            result = summed(returns, seconds,
                            f"a Ray Dataset ({len(returns)} write tasks)", self._config)
            given = getattr(write_result, "num_rows", None)
            if given is not None and int(given) != result.rows:
                raise BulkInsertError(f"the server confirmed {result.rows:,} rows of the Ray "
                                      f"Dataset, but its write tasks were given {int(given):,}")
            self.result = result

        def on_write_failed(self, error: Exception) -> None:
            """On the driver, when the write failed (a task's error, a worker that died and
            was not retried): :attr:`result` stays None, and the error says that no row is
            confirmed by this write."""
            self.result = None
            _add_note(error, "not confirmed by the server: any row of the Ray Dataset (the "
                             "write did not complete, and Ray does not say which write tasks "
                             "did; those that did are stored, and writing the Dataset again "
                             "repeats the same PUTs)")

    BulkInsertDatasink.__module__ = __name__
    BulkInsertDatasink.__qualname__ = "BulkInsertDatasink"  # pickled by reference, by name
    return BulkInsertDatasink


def __getattr__(name: str) -> Any:
    # the class is made on first use, so that importing this module does not import Ray
    if name == "BulkInsertDatasink":
        cls = _define_datasink()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
