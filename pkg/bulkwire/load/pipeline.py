"""The sending half of a load in one process: record batches encoded in file order (on
encoding threads), stored into a target as one request, closed or aborted whole
(:func:`_one_request`); units of work sent one request each or all in one (:func:`_send`);
and :class:`_Job`, everything a worker process needs for that."""
from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field as dataclass_field
from typing import Any, Callable, Iterable, Iterator, Sequence

from ..errors import RowError
from ..parquet import _check_batch, _pyarrow
from .plan import _Encoder, _Plan
from .datasets import _file_batches, _Unit
from .targets import _ServerTarget


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
