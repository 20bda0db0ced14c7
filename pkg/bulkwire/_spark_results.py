"""The Spark data source's results: a write task's commit message (:class:`TaskWritten`) and
their sums, a job's or a micro-batch's (:class:`SparkWriteResult`). Needs PySpark, as
:mod:`bulkwire.spark` does.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional

from ._extras import missing_extra

try:
    from pyspark.sql.datasource import WriterCommitMessage
except ImportError as exc:  # pragma: no cover - the extra is not installed
    raise missing_extra("Spark support", "pyspark", "spark") from exc



@dataclass
class TaskWritten(WriterCommitMessage):
    """A write task's commit message: what the target confirmed of the task's rows.
    ``output`` is the final name of the task's file (a file target: ``request_file``,
    ``jsonl``; None for a server, or a task without rows, which opens no session and writes
    no file); the task wrote it under ``temporary``, a name of its attempt's own, which the
    driver's commit renames to ``output`` once it has checked that the file is still as the
    task left it (``size``, ``mtime_ns``); ``rejected_rows``: the rows set aside in the
    task's rejected file (with ``max_errors``; else 0: a row the target refuses fails its
    task)."""

    partition: int
    attempt: int
    rows: int
    body_bytes: int
    wire_bytes: int
    retries: int
    #: when the task began and ended (seconds since the epoch, the task's clock)
    started: float
    ended: float
    rejected_rows: int = 0
    output: Optional[str] = None
    batch_id: Optional[int] = None
    #: the CPU seconds the task's process spent (every thread) from the task's start to its
    #: end: reading its Arrow batches from Spark, encoding, sending
    cpu_seconds: float = 0.0
    #: the id of the Python worker process that ran the task
    pid: int = 0
    #: a file target's: the file the task wrote, under its attempt's own name, and its size
    #: and modification time (ns) when the task ended
    temporary: Optional[str] = None
    size: int = 0
    mtime_ns: int = 0
    #: with ``rejected``, when the task rejected rows: its rejected file, written under its
    #: attempt's own name (``rejected_temporary``) for the commit to rename to
    #: ``rejected_output``, and its size and modification time (ns) when the task ended
    rejected_temporary: Optional[str] = None
    rejected_output: Optional[str] = None
    rejected_size: int = 0
    rejected_mtime_ns: int = 0


@dataclass(frozen=True)
class SparkWriteResult:
    """What a Spark write (or one micro-batch of a streaming query) did, summed over its
    write tasks' commit messages. ``committed``: the job committed (every task confirmed);
    False after an abort, when the sums are those of the tasks that confirmed their rows
    (``partitions``), and ``unconfirmed_tasks`` counts the others. ``seconds``: from the
    first of those tasks' start to the last one's end. ``outputs``: the files the commit
    named (a file target such as ``request_file``; none after an abort, which removes the
    tasks' files). ``cpu_seconds``: the CPU time the Python workers spent in those tasks,
    summed (:attr:`TaskWritten.cpu_seconds`).

    >>> SparkWriteResult(committed=False, rows=20, body_bytes=900, wire_bytes=900, retries=0,
    ...                  rejected_rows=0, tasks=3, unconfirmed_tasks=1, partitions=[0, 1, 3],
    ...                  seconds=0.5, target="http://127.0.0.1:8080 (database db)").summary()
    'Spark write into http://127.0.0.1:8080 (database db): aborted: 3 tasks confirmed 20 rows (partitions 0-1, 3), 1 task not, 900 bytes (900 sent), 0 retries, 0 rejected rows, 0.50 s'
    """

    committed: bool
    rows: int
    body_bytes: int
    wire_bytes: int
    retries: int
    rejected_rows: int
    tasks: int
    unconfirmed_tasks: int
    partitions: List[int]
    seconds: float
    target: str
    outputs: List[str] = field(default_factory=list)
    batch_id: Optional[int] = None
    cpu_seconds: float = 0.0
    #: the ids of the Python worker processes that ran those tasks, each once
    pids: List[int] = field(default_factory=list)

    def summary(self) -> str:
        """One line for a log."""
        batch = f" (micro-batch {self.batch_id})" if self.batch_id is not None else ""
        head = (f"Spark write{batch} into {self.target}: " + (
            f"{self.rows:,} rows in {_count(self.tasks, 'task')}" if self.committed else
            f"aborted: {_count(self.tasks, 'task')} confirmed {self.rows:,} rows (partitions "
            f"{_ranges(self.partitions)}), {_count(self.unconfirmed_tasks, 'task')} not"))
        return (f"{head}, {self.body_bytes:,} bytes ({self.wire_bytes:,} sent), "
                f"{self.retries} retries, {self.rejected_rows} rejected rows, "
                f"{self.seconds:.2f} s")

    @classmethod
    def of(cls, committed: bool, messages: List[Any], target: str,
           batch_id: Optional[int]) -> "SparkWriteResult":
        """The sums of the commit messages (those of the tasks that failed: None)."""
        done = sorted((m for m in messages if isinstance(m, TaskWritten)),
                      key=lambda m: m.partition)
        return cls(committed=committed, rows=sum(m.rows for m in done),
                   body_bytes=sum(m.body_bytes for m in done),
                   wire_bytes=sum(m.wire_bytes for m in done),
                   retries=sum(m.retries for m in done),
                   rejected_rows=sum(m.rejected_rows for m in done), tasks=len(done),
                   unconfirmed_tasks=len(messages) - len(done),
                   partitions=[m.partition for m in done],
                   seconds=(max(m.ended for m in done) - min(m.started for m in done)
                            if done else 0.0), target=target,
                   outputs=[m.output for m in done if m.output is not None and committed],
                   batch_id=batch_id, cpu_seconds=sum(m.cpu_seconds for m in done),
                   pids=sorted({m.pid for m in done}))


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _ranges(numbers: List[int]) -> str:
    """``[0, 1, 2, 5]`` as ``0-2, 5`` (``none`` for no number)."""
    spans: List[List[int]] = []
    for n in numbers:
        if spans and spans[-1][1] == n - 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in spans) or "none"
