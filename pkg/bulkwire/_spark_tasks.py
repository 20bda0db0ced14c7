"""A write task of the Spark data source: its record batches loaded through
:func:`bulkwire.load_arrow` in one session, its commit message made.
"""
from __future__ import annotations

import dataclasses
import itertools
import os
import time
from typing import Any, Iterator, List

from ._spark_files import rejected_task, temporary_name
from ._spark_kept import _kept_target, _keeps
from ._spark_options import _Job
from ._spark_results import TaskWritten

#: The Spark task's local property that holds a streaming micro-batch's id.
_BATCH_ID_PROPERTY = "streaming.sql.batchId"

# ---------------------------------------------------------------------------- the tasks

class _Counted:
    """A target description that keeps the sessions it opens, so that a task can read what
    they counted (a CQL session's ``retries``); everything else is the description's own."""

    def __init__(self, described: Any) -> None:
        self._described = described
        self.sessions: List[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._described, name)

    def placed(self, path: Any, files: Any) -> "_Counted":
        placed = _Counted(self._described.placed(path, files))
        placed.sessions = self.sessions
        return placed

    def open(self) -> Any:
        session = self._described.open()
        self.sessions.append(session)
        return session

    @property
    def retries(self) -> int:
        return sum(int(getattr(s, "retries", 0) or 0) for s in self.sessions)


def _task_ids() -> tuple:
    """(partition, attempt, micro-batch id or None) of the running Spark task."""
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:  # called outside a task (a test calling write itself)
        return 0, 0, None
    batch = context.getLocalProperty(_BATCH_ID_PROPERTY)
    return (context.partitionId(), context.attemptNumber(),
            int(batch) if batch not in (None, "") else None)


def _write(job: _Job, iterator: Iterator[Any], keep: bool = False) -> TaskWritten:
    """One write task: its record batches in one session of the target. With ``keep`` (a
    streaming query's tasks), a CQL target's session is this process's kept one
    (:func:`_kept_target`), which outlives the task."""
    import pyarrow as pa

    from ._arrow_sink import rejecting
    from .errors import _add_note
    from .load.entry import load_arrow

    started, cpu = time.time(), time.process_time()
    partition, attempt, batch_id = _task_ids()
    ids = dict(partition=partition, attempt=attempt, batch_id=batch_id, started=started,
               pid=os.getpid())
    batches = (b for b in iterator if b.num_rows)
    first = next(batches, None)
    if first is None:  # no rows: no session, no file
        return TaskWritten(rows=0, body_bytes=0, wire_bytes=0, retries=0, ended=time.time(),
                           cpu_seconds=time.process_time() - cpu, **ids)
    target, output = job.task_target(partition, batch_id)
    described, temporary = target.describe(), None
    if output is not None:  # a file: written under the attempt's own name, which the
        # driver's commit renames (a task never gives the final name: _spark_files)
        folder = os.path.dirname(output)
        if folder and not os.path.isdir(folder):  # an executor on another machine
            os.makedirs(folder, exist_ok=True)
        temporary = temporary_name(output, attempt)
        target = dataclasses.replace(target, **{job.output_option: temporary})
    counted = _Counted(_kept_target(target) if keep and _keeps(target) else target)
    reader = pa.RecordBatchReader.from_batches(first.schema, itertools.chain([first], batches))
    rejects = rejecting(job.options, rejected_task(partition, batch_id), attempt)
    try:
        with rejects as options:
            result = load_arrow(reader, counted, options=options, threads=1)
    except Exception as exc:
        batch = f" of micro-batch {batch_id}" if batch_id is not None else ""
        _add_note(exc, f"in partition {partition}{batch} (attempt {attempt}) of the Spark "
                       f"write into {described}")
        raise
    files = {}
    if temporary is not None:
        stat = os.stat(temporary)
        files = dict(temporary=temporary, size=stat.st_size, mtime_ns=stat.st_mtime_ns)
    if rejects.kept is not None:
        stat = os.stat(rejects.kept)
        files.update(rejected_temporary=rejects.kept, rejected_output=rejects.final,
                     rejected_size=stat.st_size, rejected_mtime_ns=stat.st_mtime_ns)
    return TaskWritten(rows=result.rows, body_bytes=result.body_bytes,
                       wire_bytes=result.wire_bytes, retries=counted.retries,
                       ended=time.time(), output=output, rejected_rows=result.rejected_rows,
                       cpu_seconds=time.process_time() - cpu, **files, **ids)
