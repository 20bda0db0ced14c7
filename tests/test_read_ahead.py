"""A load reads its file on a thread of its own, a bounded number of batches ahead of the
thread that sends them: the order, the errors, the bound, the stop (a failure of the sender,
Ctrl-C) and, end to end, that a target whose ``store`` waits on the server overlaps with
the reading of the next batch."""
from __future__ import annotations

import _thread
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from bulkwire.load import pipeline  # noqa: E402
from bulkwire.load.datasets import _Unit  # noqa: E402
from bulkwire.load.pipeline import READ_AHEAD, _Job, _read_ahead, _send  # noqa: E402


class Source:
    """A generator of items, recording how far it was read, whether it was closed, and on
    which thread it ran."""

    def __init__(self, items: list, *, fail_after: int | None = None,
                 pause: float = 0.0) -> None:
        self.items, self.fail_after, self.pause = items, fail_after, pause
        self.read = 0
        self.closed = threading.Event()
        self.threads: set[int] = set()

    def __iter__(self):
        return self.run()

    def run(self):
        try:
            for i, item in enumerate(self.items):
                self.threads.add(threading.get_ident())
                if self.fail_after is not None and i == self.fail_after:
                    raise OSError(f"the disk failed at item {i}")
                if self.pause:
                    time.sleep(self.pause)
                self.read += 1
                yield item
        finally:
            self.closed.set()


def reader_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "bulkwire-read"]


@settings(max_examples=40, deadline=None)
@given(items=st.lists(st.integers(), max_size=30), depth=st.integers(1, 4))
def test_every_batch_comes_in_order_on_another_thread(items, depth):
    source = Source(items)
    got = list(_read_ahead(iter(source), depth))
    assert got == items
    assert source.closed.is_set()
    assert threading.get_ident() not in source.threads
    assert not reader_threads()


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 20), data=st.data())
def test_a_read_error_comes_after_the_batches_read_before_it(n, data):
    fail_at = data.draw(st.integers(0, n - 1))
    source = Source(list(range(n)), fail_after=fail_at)
    got = []
    with pytest.raises(OSError, match=f"the disk failed at item {fail_at}"):
        for item in _read_ahead(iter(source), 2):
            got.append(item)
    assert got == list(range(fail_at))
    assert source.closed.is_set()
    assert not reader_threads()


def test_reading_ahead_is_bounded_and_stops_when_the_sender_stops():
    source = Source(list(range(1000)))
    generator = iter(source)  # still referred to here: closing it is the reader's doing
    batches = _read_ahead(generator, 2)
    assert next(batches) == 0
    time.sleep(0.3)  # time enough to read everything, were it not bounded
    # one handed over, two waiting, one read and waiting for room
    assert source.read <= 1 + 2 + 1
    batches.close()  # the sender failed: the reading stops, the source is closed
    assert source.closed.is_set()
    assert not reader_threads()
    assert source.read <= 1 + 2 + 1


def test_the_next_batch_is_read_while_the_sender_waits():
    source = Source(list(range(5)))
    batches = _read_ahead(iter(source), 2)
    assert next(batches) == 0
    deadline = time.monotonic() + 5
    while source.read < 3 and time.monotonic() < deadline:
        time.sleep(0.01)  # the sender busy with batch 0
    assert source.read == 3
    assert list(batches) == [1, 2, 3, 4]


def test_ctrl_c_while_waiting_for_a_batch_stops_the_reader():
    source = Source(list(range(50)), pause=0.2)
    started = time.monotonic()
    timer = threading.Timer(0.5, _thread.interrupt_main)
    timer.start()
    got = []
    try:
        with pytest.raises(KeyboardInterrupt):
            for item in _read_ahead(iter(source), 2):
                got.append(item)
    finally:
        timer.cancel()
    assert source.closed.is_set()
    assert not reader_threads()
    assert time.monotonic() - started < 5
    assert 0 < len(got) < 50


# ---- end to end: the pipeline's sending half with a target whose store waits ----

@dataclass
class Plan:
    read_columns: list = field(default_factory=lambda: ["id"])
    vector_column: Any = None


@dataclass
class Encoder:
    plan: Plan = field(default_factory=Plan)

    def __call__(self, batch: Any, dim: int = -1, row_base: int = 0) -> Any:
        return batch


class WaitingSession:
    """A session whose store of batch k returns only once batch k + 1 was read (or the
    last batch is stored): a load that read its file only between stores would never let
    it, and the store fails after a timeout."""

    def __init__(self, log: list, read: threading.Condition) -> None:
        self.log, self.read = log, read
        self.body_bytes = self.wire_bytes = 0
        self.closed = False

    def store(self, encoded: Any, rows: int) -> int:
        first = encoded.column("id")[0].as_py()
        with self.read:
            self.log.append(("store", first))
            if first + rows < TOTAL_ROWS and not self.read.wait_for(
                    lambda: ("read", first + rows) in self.log, timeout=5):
                raise AssertionError(f"the batch after row {first} was not read while "
                                     f"the batch of row {first} was being stored")
        return rows

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        raise AssertionError("aborted")


@dataclass
class WaitingTarget:
    log: list
    read: threading.Condition
    sessions: list = field(default_factory=list)

    def open(self) -> WaitingSession:
        session = WaitingSession(self.log, self.read)
        self.sessions.append(session)
        return session


TOTAL_ROWS = 40
BATCH_ROWS = 8


def ids_file(tmp_path: Any) -> str:
    """A Parquet file of TOTAL_ROWS ids, a row group per batch."""
    path = os.path.join(tmp_path, "ids.parquet")
    pq.write_table(pa.table({"id": pa.array(range(TOTAL_ROWS), pa.int64())}), path,
                   row_group_size=BATCH_ROWS)
    return path


def send_ids(path: str, target: Any, threads: int) -> int:
    """The pipeline's sending half, the whole file one unit into ``target``: rows sent."""
    job = _Job(target=target, encode=Encoder(), batch_rows=BATCH_ROWS, threads=threads,
               request_per_unit=False)
    unit = _Unit(path, 0, TOTAL_ROWS // BATCH_ROWS, 0, TOTAL_ROWS)
    rows, _, _ = _send(job, [unit], lambda n, added: None, lambda u: None)
    return rows


def logging_reads(monkeypatch: Any) -> tuple[list, threading.Condition]:
    """A log where each batch read is entered (``("read", first id)``), and the condition
    notified then."""
    log: list = []
    read = threading.Condition()
    real = pipeline._file_batches

    def logged(*args: Any, **kwargs: Any):
        for batch in real(*args, **kwargs):
            with read:
                log.append(("read", batch.column("id")[0].as_py()))
                read.notify_all()
            yield batch

    monkeypatch.setattr(pipeline, "_file_batches", logged)
    return log, read


def test_the_load_reads_the_next_batch_while_a_batch_is_stored(tmp_path, monkeypatch):
    log, read = logging_reads(monkeypatch)
    target = WaitingTarget(log, read)
    assert send_ids(ids_file(tmp_path), target, threads=1) == TOTAL_ROWS
    assert target.sessions[0].closed
    stored = [first for kind, first in log if kind == "store"]
    assert stored == list(range(0, TOTAL_ROWS, BATCH_ROWS))
    assert READ_AHEAD >= 1
    assert not reader_threads()



def test_items_made_ahead_and_not_taken_are_dropped_when_the_sender_stops():
    source = Source(list(range(100)))
    dropped: list = []
    batches = _read_ahead(iter(source), 2, drop=dropped.append)
    taken = [next(batches)]
    deadline = time.monotonic() + 5
    while source.read < 4 and time.monotonic() < deadline:
        time.sleep(0.01)  # the queue full, the reader waiting for room
    batches.close()
    assert not reader_threads()
    # every item made was either taken or dropped, none twice
    assert sorted(taken + dropped) == list(range(source.read))
    assert len(dropped) >= 2


def test_a_reader_never_taken_from_is_stopped_when_dropped():
    source = Source(list(range(100)))
    batches = _read_ahead(iter(source), 2)
    deadline = time.monotonic() + 5
    while source.read < 3 and time.monotonic() < deadline:
        time.sleep(0.01)  # it reads before anything asks
    assert source.read >= 1
    del batches  # never iterated: dropping it still stops and joins the reader
    assert source.closed.wait(5)
    assert not reader_threads()


class OpenWaitsForReading(WaitingTarget):
    """A target whose session opens only once the load's first batch was read (a load that
    read its file only after opening would time out here)."""

    def open(self) -> WaitingSession:
        with self.read:
            if not self.read.wait_for(lambda: ("read", 0) in self.log, timeout=5):
                raise AssertionError("the first batch was not read while the session opened")
        return super().open()


def test_the_first_batch_is_read_while_the_session_opens(tmp_path, monkeypatch):
    log, read = logging_reads(monkeypatch)
    target = OpenWaitsForReading(log, read)
    assert send_ids(ids_file(tmp_path), target, threads=2) == TOTAL_ROWS
    assert target.sessions[0].closed
    assert not reader_threads()


def test_a_session_that_fails_to_open_stops_the_reading(tmp_path):
    class Refusing:
        def open(self) -> Any:
            time.sleep(0.1)  # the reader under way meanwhile
            raise ConnectionRefusedError("the node refused the connection")

    with pytest.raises(ConnectionRefusedError, match="refused the connection"):
        send_ids(ids_file(tmp_path), Refusing(), threads=2)
    assert not reader_threads()


def test_the_first_batch_is_stored_without_waiting_for_batches_encoded_ahead(tmp_path,
                                                                          monkeypatch):
    """With encoding threads, the first batch goes to the session once it is encoded, not
    once ``threads`` more batches were read after it (each read here takes 0.3 s)."""
    reads: list = []
    real = pipeline._file_batches

    def slow(*args: Any, **kwargs: Any):
        for batch in real(*args, **kwargs):
            time.sleep(0.3)
            reads.append(batch.column("id")[0].as_py())
            yield batch

    monkeypatch.setattr(pipeline, "_file_batches", slow)
    read_at_store: list = []

    class Counting:
        body_bytes = wire_bytes = 0

        def store(self, encoded: Any, rows: int) -> int:
            read_at_store.append(len(reads))
            return rows

        def close(self) -> None:
            pass

        def abort(self) -> None:
            pass

    class Target:
        def open(self) -> Counting:
            return Counting()

    assert send_ids(ids_file(tmp_path), Target(), threads=2) == TOTAL_ROWS
    # batch 0 stored once it was encoded: while batch 1 was read at the latest (waiting
    # for two more batches to be encoded ahead would have read three)
    assert read_at_store[0] <= 2


# ---- the default batch: about 4 MiB of the target's requests ----

@pytest.mark.parametrize("value_bytes, dim, rows", [
    (None, 768, (4 << 20) // (64 + 20 * 768)),  # JSON text: 20 bytes a float at most
    (4, 768, (4 << 20) // (64 + 4 * 768)),      # a CQL float vector
    (8, 1536, (4 << 20) // (64 + 8 * 1536)),    # a CQL double vector
])
def test_the_default_batch_holds_about_4_mib_of_the_targets_requests(value_bytes, dim, rows):
    from bulkwire.load.pipeline import _default_batch_rows

    schema = pa.schema([("id", pa.int64()), ("emb", pa.list_(pa.float32(), dim))])
    plan = Plan(["id", "emb"], "emb")
    if value_bytes is not None:
        plan.value_bytes = value_bytes  # type: ignore[attr-defined]
    assert _default_batch_rows(schema, plan) == rows
