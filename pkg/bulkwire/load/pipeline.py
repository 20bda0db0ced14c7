"""The sending half of a load in one process: record batches encoded in file order (on
encoding threads), stored into a target's session as one request, closed or aborted whole
(:func:`_one_request`); units of work sent one request each or all in one (:func:`_send`);
and :class:`_Job`, everything a worker process needs for that. A target is known only
through :class:`~bulkwire.load.interface.TargetDescription` and its sessions."""
from __future__ import annotations

import queue
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field as dataclass_field
from typing import Any, Callable, Iterable, Iterator, Sequence

from ..errors import RowError
from .._arrow import _pyarrow
from ..parquet import _check_batch
from .datasets import _file_batches, _Unit
from .interface import BatchEncoder, ColumnPlan, TargetDescription, TargetSession


def _vector_dim(pa, batch, plan: ColumnPlan, common: bool = False) -> int:
    """The dimension the vectors of the load must have: the first row's (``common``: the
    length most of the batch's vectors have, so that a bad first row is refused, not the
    good ones after it); -1 when it is not known yet."""
    if plan.vector_column is None:
        return -1
    t = batch.schema.field(plan.vector_column).type
    if pa.types.is_fixed_size_list(t):
        return t.list_size
    column = batch.column(plan.vector_column)
    import pyarrow.compute as pc

    if common:
        modes = pc.mode(pc.list_value_length(column)).to_pylist()
        return int(modes[0]["mode"]) if modes else -1
    if len(column) == 0 or not column[0].is_valid:
        return -1  # the encoder reports the null first row

    return int(pc.list_value_length(column.slice(0, 1))[0].as_py())


def _encoded_in_order(batches: Iterator[Any], encode: BatchEncoder, source: str,
                      plan: ColumnPlan,
                      pool: ThreadPoolExecutor | None, ahead: int,
                      idx: Any, first_row: int = 0,
                      rejects: Any = None) -> Iterator[tuple[Any, int]]:
    """``(encoded, rows)`` of each batch, in file order: what the encoder gave (for the bulk
    insert kinds a batch validated in C without the GIL, which the writer encodes in one
    call). With a pool, up to ``ahead`` batches are encoded, their text written too, while
    this generator reads Parquet and hands the encoded batches on, each as soon as it and
    those before it are done. A bad row
    raises :class:`~bulkwire.errors.RowError` naming the file's row (with ``take``, the
    index taken); with ``rejects`` (a :class:`~bulkwire.load.rejects._Rejects`), it is
    written there instead and the batch goes on without it (a batch left without rows is
    not handed on)."""
    pa = _pyarrow()
    pending: deque = deque()  # (future or encoded batch, rows), in file order
    dim = None
    submitted = first_row  # row numbers in errors are the file's, whatever the unit
    # on an encoding thread, the encoder writes the batch's text too when it can
    encode_ahead = getattr(encode, "ahead", encode)

    def named(exc: RowError) -> RowError:
        if idx is None:
            return RowError(exc.column, exc.row, exc.reason, source=source)
        return RowError(exc.column, int(idx[exc.row]), exc.reason, take_index=exc.row,
                        source=source)

    def result(job: tuple) -> tuple[Any, int]:
        done, rows = job
        del job
        if pool is None:
            return done, rows
        try:
            if rows is None:  # checked by rejects: (encoded, rows kept)
                return done.result()
            return done.result(), rows
        except RowError as exc:
            raise named(exc) from None
        finally:  # the future holds the error, whose traceback holds this frame: no cycle
            del done

    try:
        for batch in batches:
            _check_batch(batch, source)  # buffer sizes: what the C reader cannot know
            if dim is None or dim < 0:
                known = rejects.spec.vector_dim if rejects is not None else None
                dim = known if known is not None else _vector_dim(pa, batch, plan,
                                                                  rejects is not None)
            args = (batch, dim, submitted)
            if rejects is not None:
                checked = (encode_ahead if pool is not None else encode, encode, batch, dim,
                           submitted, source, idx)
                if pool is not None:
                    pending.append((pool.submit(rejects.checked, *checked), None))
                else:
                    try:
                        pending.append(rejects.checked(*checked))
                    except RowError as exc:
                        raise named(exc) from None
            elif pool is not None:
                pending.append((pool.submit(encode_ahead, *args), batch.num_rows))
            else:
                try:
                    pending.append((encode(*args), batch.num_rows))
                except RowError as exc:
                    raise named(exc) from None
            submitted += batch.num_rows
            del batch
            # the head goes on as soon as it is encoded (the load's first batch is sent
            # without waiting for the next ones to be read), and at the latest once
            # ``ahead`` more are under way
            while pending and (len(pending) > ahead or pool is None or pending[0][0].done()):
                done = result(pending.popleft())
                if rejects is None or done[1]:
                    yield done
        while pending:
            done = result(pending.popleft())
            if rejects is None or done[1]:
                yield done
    finally:  # an error, or the consumer's (close()): what was encoded ahead is dropped
        _drop_pending(pending, pool is not None)


#: Record batches read ahead of the sending thread, at most (see :func:`_read_ahead`).
READ_AHEAD = 2


def _read_ahead(batches: Iterator[Any], depth: int = READ_AHEAD,
                drop: Callable[[Any], None] | None = None) -> Iterator[Any]:
    """The items of ``batches``, made on a thread of their own, started at once, up to
    ``depth`` ahead of the caller: reading a file (decompressing its pages, decoding them)
    and encoding its batches go on while the caller opens its session and sends, for a
    target whose ``store`` waits on the server. The reading thread alone advances and closes
    ``batches`` (a generator runs on one thread at a time); an error there is raised here,
    in order, after the items made before it. Closing this iterator (the caller failed, or
    stopped), or dropping it, stops the reader after the item it is making, and waits for
    it: nothing reads the file once this is closed. Items made but not taken are given to
    ``drop`` then (their memory given back at once)."""
    handoff: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: tuple) -> bool:
        while not stop.is_set():
            try:
                handoff.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def read() -> None:
        try:
            for batch in batches:
                if not put((batch, None)):
                    if drop is not None:  # stopped while waiting for room
                        drop(batch)
                    return
                if stop.is_set():
                    return
                del batch
            put((_END, None))
        except BaseException as exc:  # noqa: BLE001 - raised on the caller's thread
            put((None, exc))
        finally:
            close = getattr(batches, "close", None)
            if close is not None:
                close()

    reader = threading.Thread(target=read, name="bulkwire-read", daemon=True)
    reader.start()
    taken = _taken(handoff, stop, reader, drop)
    next(taken)  # started: from here on, closing it (or dropping it) stops the reader
    return taken


def _taken(handoff: queue.Queue, stop: threading.Event, reader: threading.Thread,
           drop: Callable[[Any], None] | None) -> Iterator[Any]:
    """:func:`_read_ahead`'s consumer half. Its first ``next`` returns None at once (the
    generator started, so that its ``finally`` runs however it ends); then the items."""
    try:
        yield None
        while True:
            batch, error = handoff.get()
            if error is not None:
                try:
                    raise error
                finally:  # the traceback holds this frame: no cycle through it
                    del error
            if batch is _END:
                return
            yield batch
            del batch
    finally:
        stop.set()  # a reader waiting for room sees it within its put's timeout
        reader.join()
        while True:  # what was made ahead and will not be taken
            try:
                batch, _ = handoff.get_nowait()
            except queue.Empty:
                break
            if drop is not None and batch is not None and batch is not _END:
                drop(batch)


_END = object()


def _discard(encoded: Any) -> None:
    """Gives back at once what an encoded batch that will not be stored holds (the text an
    encoding thread wrote ahead), whoever still refers to it (a traceback's frame)."""
    discard = getattr(encoded, "discard", None)
    if discard is not None:
        discard()


def _drop_pending(pending: deque, futures: bool) -> None:
    """The batches encoded ahead that will not be stored: those not started are cancelled,
    those under way waited for, and each one's memory given back."""
    jobs = [job for job, _ in pending]
    pending.clear()
    if futures:
        for future in jobs:
            future.cancel()
        wait(jobs)
        jobs = [f.result() for f in jobs
                if not f.cancelled() and f.exception() is None]
        # a batch checked for rejected rows gives (encoded, rows)
        jobs = [job[0] if isinstance(job, tuple) else job for job in jobs]
    for encoded in jobs:
        _discard(encoded)


#: Bytes a vector's element takes in a target's request, when its plan does not say
#: (``value_bytes``): a float written as JSON text, at most.
TEXT_VALUE_BYTES = 20


def _default_batch_rows(schema, plan: ColumnPlan) -> int:
    """About 4 MiB of the target's requests per batch (a plan's ``value_bytes``, when it
    has one, is what a vector element takes there: 4 for a CQL float)."""
    pa = _pyarrow()
    per_row = 64
    if plan.vector_column is not None:
        t = schema.field(plan.vector_column).type
        value_bytes = getattr(plan, "value_bytes", TEXT_VALUE_BYTES)
        per_row += value_bytes * (t.list_size if pa.types.is_fixed_size_list(t) else 1024)
    return max(64, min(65536, (4 << 20) // per_row))


@dataclass
class _Job:
    """Everything a worker needs to send its units: picklable, for a spawned process."""

    #: where the units go: the worker opens its sessions from it
    target: TargetDescription
    encode: BatchEncoder
    batch_rows: int
    threads: int
    request_per_unit: bool
    #: each file's identity (size, modification time) when its footer was read
    identities: dict = dataclass_field(default_factory=dict)
    #: where refused rows go, with ``max_errors`` (a ``rejects._RejectSpec``); None: the
    #: first refused row fails the load
    rejects: Any = None
    #: a dry run: every batch encoded (checked), none stored
    dry_run: bool = False

    def open(self) -> Any:
        """A session of the target (a dry run's stores nothing)."""
        if self.dry_run:
            from .rejects import _DrySession

            return _DrySession()
        return self.target.open()
    #: the load's rate limits, shared by every process (None: no limit)
    limit: Any = None


#: What a session may count besides its rows and bytes (attributes of its own, read once it
#: ends): answers sent again, and "overloaded" answers among them.
SESSION_COUNTERS = ("retries", "overloaded")


def _count_session(counters: dict | None, session: Any) -> None:
    """Adds what ``session`` counted (:data:`SESSION_COUNTERS`) into ``counters``."""
    if counters is not None:
        for name in SESSION_COUNTERS:
            counters[name] = counters.get(name, 0) + getattr(session, name, 0)


class _Stopped(Exception):
    """The parent asked a worker to stop (another worker failed, or Ctrl-C)."""


def _one_request(target: TargetSession, encoded: Iterable[tuple[Any, int]], pool: Any,
                 on_batch: Callable[[int, int], None], stop: Any = None,
                 rejects: Any = None, limit: Any = None) -> int:
    """Stores every encoded batch ``(encoded, rows)`` into ``target`` and closes it: one
    request, complete, or aborted (the encoders stopped first) and the error raised, so that
    the server never sees a request end normally with batches missing. The rows sent.
    With ``rejects``, a batch that lost refused rows comes as a ``rejects._Kept``. With
    ``limit`` (a :class:`~bulkwire.load.rates.RateLimit`), each batch waits for its rows'
    turn before it is stored, and for its bytes' after."""
    rows = 0
    batch = None
    if rejects is not None:
        from .rejects import _Kept
    try:
        for batch, n in encoded:
            if stop is not None and stop.is_set():
                raise _Stopped
            if limit is not None:
                limit.reserve_rows(n, stop)
                if stop is not None and stop.is_set():
                    raise _Stopped
            if rejects is not None and isinstance(batch, _Kept):
                n, added = _store_kept(target, batch, n, rejects)
            else:
                added = target.store(batch, n)
            batch = None
            rows += n
            on_batch(n, added)
            if limit is not None:
                limit.spent_bytes(added, stop)
        target.close()
    except BaseException:
        _discard(batch)
        close = getattr(encoded, "close", None)
        if close is not None:  # the batches encoded ahead: their memory back at once
            close()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        target.abort()
        raise
    return rows


def _store_kept(target: TargetSession, kept: Any, n: int, rejects: Any) -> tuple[int, int]:
    """Stores a batch checked for rejected rows (a ``rejects._Kept``): a session that can
    set aside a row its server refuses (``on_refused``) writes it to ``rejects``. (Rows
    stored, body bytes added.)"""
    refused: list[int] = []
    if hasattr(target, "on_refused"):
        def on_refused(row: int, reason: str) -> None:
            refused.append(row)
            kept.refused(rejects, row, reason)

        target.on_refused = on_refused  # type: ignore[attr-defined]
    encoded = kept.encoded
    added = target.store(encoded, n)
    return n - len(refused), added


def _encoded_units(job: _Job, group: Sequence[_Unit], pool: Any,
                   rejects: Any = None) -> Iterator[tuple[Any, int]]:
    """``(encoded, rows)`` of every batch of ``group``'s units, in file order (see
    :func:`_encoded_in_order`)."""
    for unit in group:
        yield from _encoded_in_order(
            _file_batches(unit.path, job.encode.plan, job.batch_rows, unit.first, unit.stop,
                          job.identities.get(unit.path)),
            job.encode, unit.path, job.encode.plan, pool, job.threads, None, unit.first_row,
            rejects)


def _discard_encoded(item: tuple[Any, int]) -> None:
    _discard(item[0])


def _send(job: _Job, units: Sequence[_Unit], on_batch: Callable[[int, int], None],
          on_confirmed: Callable[[_Unit], None], stop: Any = None,
          rejects: Any = None, counters: dict | None = None) -> tuple[int, int, int]:
    """Sends ``units`` (one request each with ``request_per_unit``, else one for all), each
    request a session of ``job.target``; ``on_confirmed`` after each request the target
    confirmed. Refused rows go to ``rejects`` (a ``rejects._Rejects``), when given.
    (rows, body, wire bytes); what each session counted is added to ``counters``
    (:data:`SESSION_COUNTERS`), whether it succeeded or not."""
    rows = body = wire = 0
    pool = (ThreadPoolExecutor(job.threads, thread_name_prefix="bulkwire-encode")
            if job.threads > 1 else None)
    groups = [[u] for u in units] if job.request_per_unit else [list(units)]
    try:
        for group in groups:
            # the group's batches read and encoded on a thread of their own from now on,
            # while the session is opened (connections made, the server asked)
            encoded = _read_ahead(_encoded_units(job, group, pool, rejects),
                                  drop=_discard_encoded)
            try:
                target = job.open()
            except BaseException:
                encoded.close()
                raise
            try:
                rows += _one_request(target, encoded, pool, on_batch, stop, rejects, job.limit)
            finally:
                _count_session(counters, target)
            body += target.body_bytes
            wire += target.wire_bytes
            for unit in group:
                on_confirmed(unit)
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
    return rows, body, wire
