"""A Spark data source named ``bulkwire`` that writes a DataFrame into any target of
:mod:`bulkwire.targets` (PySpark's Python Data Source API, PySpark >= 4.0).

>>> import bulkwire.spark                                           # doctest: +SKIP
>>> bulkwire.spark.register(spark)                                  # doctest: +SKIP
>>> (df.write.format("bulkwire").option("target", "cql")            # doctest: +SKIP
...    .option("hosts", "10.0.0.1").option("keyspace", "ks").option("table", "vectors")
...    .mode("append").save())
>>> bulkwire.spark.last_result(spark).rows                          # doctest: +SKIP
1000

The option ``target`` names the kind (:data:`bulkwire.targets.KINDS`); every other option is
either one of the kind's own (:func:`bulkwire.targets.options`; the same checks and messages
as :func:`bulkwire.targets.make`) or one of the pipeline's: ``batch_rows``, ``columns``
(comma separated), ``vector_column``, the rate limits ``max_rows_per_second`` and
``max_bytes_per_second`` (the whole write's: each task takes the limit divided by the
tasks that can run at once, the session's ``defaultParallelism`` when :func:`register` ran),
and ``max_errors`` with ``rejected``, a directory where each task that rejected rows writes
them to ``part-<partition>.parquet`` (a streaming query's, ``part-<batch>-<partition>``;
``max_errors`` applies to each task's rows). The target is built and the DataFrame's schema judged
by the target (its plan and its encoder, on a batch without rows) on the driver, before any
task runs. Each write task then sends its rows through :func:`bulkwire.load_arrow`, in one
session of its own; its commit message (:class:`TaskWritten`) says what the target
confirmed; the job's commit sums them into a :class:`SparkWriteResult`, logged on the logger
``bulkwire.spark`` (on stderr where that logger has no handler) and returned by
:func:`last_result`.

Only ``mode("append")`` is taken. A file target (a kind that writes one output whole:
``request_file``, ``jsonl``) writes one file per write task: the option naming its output
(``out``, ``path``; or the path given to ``save``) is a folder (an existing one, or a path
ending in ``/``), into which each task writes ``part-<partition>`` named as the kind names
its files (``.bulk.json[.gz|.zst]``, ``.jsonl[.gz|.zst]``), or a path holding
``{partition}``, which each task replaces by its partition number (5 digits).
A streaming query (``writeStream.format("bulkwire")``) is taken where PySpark has
``DataSourceStreamArrowWriter`` (4.1 and later); its file names hold the micro-batch too
(``part-<batch>-<partition>``, or ``{batch}`` in the path, which it then needs). Its
options and schema are judged once per query, and its tasks into a CQL table write through
one session per Python worker process, kept from one micro-batch to the next.

Needs the ``spark`` extra (``pip install 'bulkwire[spark]'``); ``import bulkwire`` does not
import PySpark, this module does.
"""
from __future__ import annotations

import atexit
import dataclasses
import itertools
import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterator, List, Optional

from ._extras import missing_extra

try:
    from pyspark.sql.datasource import (DataSource, DataSourceArrowWriter,
                                        WriterCommitMessage)
except ImportError as exc:  # pragma: no cover - the extra is not installed
    raise missing_extra("Spark support", "pyspark", "spark") from exc
try:
    from pyspark.sql.datasource import DataSourceStreamArrowWriter
except ImportError:  # PySpark 4.0: no Arrow stream writer, no streaming
    DataSourceStreamArrowWriter = None  # type: ignore[assignment,misc]

__all__ = ["KEEP_IDLE_SECONDS", "NAME", "PIPELINE_OPTIONS", "SparkWriteResult", "TaskWritten",
           "last_result", "register", "STREAMING"]

#: The data source's name, for ``format(...)``.
NAME = "bulkwire"
#: The options the data source reads itself (the load pipeline's), besides ``target``.
PIPELINE_OPTIONS = ("batch_rows", "columns", "vector_column", "max_rows_per_second",
                    "max_bytes_per_second", "max_errors", "rejected")
#: A load's options a write's tasks cannot share, refused with why.
_REFUSED_OPTIONS = {
    "dry_run": "dry_run is not an option of the bulkwire data source: its tasks run on many "
               "machines, each storing its own rows (load_parquet and bulkwire load take it)",
    "report": "report is a load's own (its processes share one report), not the data "
              "source's: each write task is a load of its own"}
#: Whether this PySpark takes ``writeStream.format("bulkwire")``.
STREAMING = DataSourceStreamArrowWriter is not None
#: The Spark configuration key under which :func:`register` keeps its result folder.
RESULT_DIR_KEY = "spark.bulkwire.resultDir"
#: Options Spark itself gives a streaming sink, which are the query's (lower case).
_SPARK_OPTIONS = ("checkpointlocation",)
#: The PySpark module that makes a streaming writer again for each micro-batch's commit.
_COMMIT_RUNNER = "pyspark.sql.worker.python_streaming_sink_runner"
#: The Spark task's local property that holds a streaming micro-batch's id.
_BATCH_ID_PROPERTY = "streaming.sql.batchId"

_log = logging.getLogger("bulkwire.spark")


@dataclass
class TaskWritten(WriterCommitMessage):
    """A write task's commit message: what the target confirmed of the task's rows.
    ``output`` is the task's file (``request_file``; None for a server, or a task without
    rows, which opens no session and writes no file); ``rejected_rows``: the rows set aside
    in the task's rejected file (with ``max_errors``; else 0: a row the target refuses
    fails its task)."""

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


@dataclass(frozen=True)
class SparkWriteResult:
    """What a Spark write (or one micro-batch of a streaming query) did, summed over its
    write tasks' commit messages. ``committed``: the job committed (every task confirmed);
    False after an abort, when the sums are those of the tasks that confirmed their rows
    (``partitions``), and ``unconfirmed_tasks`` counts the others. ``seconds``: from the
    first of those tasks' start to the last one's end. ``outputs``: the files written (a
    file target such as ``request_file``). ``cpu_seconds``: the CPU time the Python workers
    spent in those tasks, summed (:attr:`TaskWritten.cpu_seconds`).

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
                   outputs=[m.output for m in done if m.output is not None],
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


# ---------------------------------------------------------------------------- the options

#: The options that name a file target's output (``request_file``'s ``out``, ``jsonl``'s
#: ``path``): Spark's ``save(path)`` gives the one its kind has.
_OUTPUT_OPTIONS = ("out", "path")
#: The suffix of a task's file in a folder, for a file kind whose output has no default name
#: of its own (a kind with one, ``request_file``, names it itself, from ``part-<partition>``).
_FOLDER_SUFFIXES = {"jsonl": ".jsonl"}


@dataclass(frozen=True)
class _Job:
    """What the driver judged from the options, pickled to every task: the target's
    description, the load's options, and where the driver's commit leaves its result (None:
    the log alone). For a file target also its kind, its options as given (each task makes
    its own description of its own file) with the option that names the file, and the path
    of each task's file with ``{partition}`` (and ``{batch}``, streaming) still in it."""

    target: Any
    options: Any  # a LoadOptions
    result_dir: Optional[str]
    kind: str = ""
    given: Optional[dict] = None
    output_option: Optional[str] = None
    out: Optional[str] = None

    def task_target(self, partition: int, batch_id: Optional[int]) -> tuple:
        """(the description a task writes into, the task's file or None)."""
        if self.out is None:
            return self.target, None
        from . import targets

        output = (self.out.replace("{partition}", f"{partition:05d}")
                  .replace("{batch}", f"{batch_id if batch_id is not None else 0:05d}"))
        return targets.make(self.kind, **{**(self.given or {}), self.output_option: output}), \
            output


def _job(options: Any, schema: Any, overwrite: bool, streaming: bool,
         result_dir: Optional[str], judge: bool = True,
         parallelism: Optional[int] = None) -> _Job:
    """Judges the data source's ``options`` (strings) and the DataFrame's Spark ``schema`` on
    the driver: the target described by :func:`bulkwire.targets.make`, the pipeline's
    options by :class:`bulkwire.LoadOptions`, the schema by the target's plan and encoder
    (without ``judge``: not the schema, which reads the table, a CQL one through a
    connection). Raises naming the option, the mode or the column. ``parallelism``: the
    tasks that run at once (the session's ``defaultParallelism``, read by :func:`register`),
    among which a rate limit is divided."""
    from . import targets
    from .load_options import LoadOptions

    if overwrite:
        raise ValueError("the bulkwire data source takes mode('append') only, not mode "
                         "'overwrite' (a load adds rows to its target; it never empties it)")
    given = {str(k).lower(): v for k, v in dict(options).items()}
    kind = given.pop("target", None)
    if kind is None:
        raise ValueError(f"the bulkwire data source needs option 'target', one of: "
                         f"{', '.join(sorted(targets.KINDS))}")
    kind = str(kind).strip()
    kind_options = targets.options(kind)  # ValueError naming the kinds
    own = [o.name for o in kind_options]
    for name, why in _REFUSED_OPTIONS.items():
        if name in given:
            raise ValueError(why)
    pipeline = {name: given.pop(name) for name in PIPELINE_OPTIONS if name in given}
    for name in _SPARK_OPTIONS:  # the query's, not the target's
        given.pop(name, None)
    output_option = next((name for name in _OUTPUT_OPTIONS if name in own), None)
    if output_option != "path" and "path" in given:  # save(path)
        path = given.pop("path")
        if output_option is None:
            raise ValueError(f"save(path) names a file target's output; the {kind} target "
                             f"has none (its options: {', '.join(own)})")
        if output_option in given:
            raise ValueError(f"save(path) and option {output_option!r} both name the output: "
                             f"give one")
        given[output_option] = path
    unknown = [name for name in given if name not in own]
    if unknown:
        raise TypeError(f"{unknown[0]} is not an option of the bulkwire data source for the "
                        f"{kind} target (its options: {', '.join(own)}; the data source's "
                        f"own: target, {', '.join(PIPELINE_OPTIONS)})")
    load = LoadOptions(
        batch_rows=_int(pipeline["batch_rows"], "batch_rows") if "batch_rows" in pipeline
        else None,
        columns=(tuple(c.strip() for c in pipeline["columns"].split(","))
                 if pipeline.get("columns") else None),
        vector_column=pipeline.get("vector_column") or None,
        max_rows_per_second=_number(pipeline.get("max_rows_per_second"), "max_rows_per_second"),
        max_bytes_per_second=_number(pipeline.get("max_bytes_per_second"),
                                     "max_bytes_per_second"),
        max_errors=_max_errors(pipeline.get("max_errors")),
        rejected=pipeline.get("rejected") or None)
    if load.max_rows_per_second or load.max_bytes_per_second:
        if parallelism is None:
            raise ValueError("a rate limit of the bulkwire data source is the whole write's, "
                             "divided among the tasks that run at once: register it with "
                             "bulkwire.spark.register(spark), which reads the session's "
                             "defaultParallelism")
        from ._arrow_sink import rate_share

        load = rate_share(load, parallelism)
    if load.rejected is not None:
        if os.path.exists(load.rejected) and not os.path.isdir(load.rejected):
            raise ValueError(f"rejected must be a directory (each task writes its own "
                             f"part-<partition>.parquet there), not the file {load.rejected!r}")
        os.makedirs(load.rejected, exist_ok=True)  # here, so that one that cannot be fails now
    if output_option is None:  # a server: one description for every task
        target = targets.make(kind, **given)
        if not target.units:
            raise ValueError(f"the {kind} target writes one output whole, which the tasks of "
                             f"a Spark job cannot share")
        if judge:
            _judge(target, schema, load)
        return _Job(target=target, options=load, result_dir=result_dir)
    # a file: one per task, each task's described by the kind from its own path
    default = next(o.default for o in kind_options if o.name == output_option)
    out = _per_task_out(kind, given, output_option, default, streaming)
    job = _Job(target=None, options=load, result_dir=result_dir, kind=kind,
               given={k: v for k, v in given.items() if k != output_option},
               output_option=output_option, out=out)
    target, _ = job.task_target(0, 0)
    if judge:
        _judge(target, schema, load)
    return dataclasses.replace(job, target=target)


def _number(text: Optional[str], name: str) -> Optional[float]:
    if text is None or str(text).strip() == "":
        return None
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{name} must be a number, not {text!r}") from None


def _max_errors(text: Optional[str]) -> Any:
    """``max_errors`` as given: a count, or a percentage (``"0.1%"``), judged by LoadOptions."""
    if text is None or str(text).strip() == "":
        return None
    text = str(text).strip()
    return text if text.endswith("%") else _int(text, "max_errors")


def _int(text: str, name: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name} must be an int, not {text!r}") from None


def _per_task_out(kind: str, given: dict, output_option: str, default: Any,
                  streaming: bool) -> str:
    """The path of each task's file of the file kind ``kind`` (its options ``given``, the
    option ``output_option`` naming its output), with ``{partition}`` (and, streaming,
    ``{batch}``) in it: the path given, or, for a folder, a file ``part-<partition>`` in it
    named as the kind names its output."""
    from . import targets

    out = given.get(output_option)
    if not out:
        raise ValueError(f"the {kind} target writes one file per Spark task: give "
                         f"{output_option} (or save(path)) a folder, or a path holding "
                         f"{{partition}}")
    if "{partition}" in out:
        if streaming and "{batch}" not in out:
            raise ValueError(f"a streaming query writes one file per micro-batch and task: "
                             f"{output_option} needs {{batch}} as well as {{partition}}, not "
                             f"{out!r}")
        return out
    if not (out.endswith(("/", os.sep)) or os.path.isdir(out)):
        raise ValueError(f"the {kind} target writes one file per Spark task: {output_option} "
                         f"must be a folder or hold {{partition}}, not {out!r} (one file "
                         f"would be written by every task)")
    stem = os.path.join(out, "part-{batch}-{partition}" if streaming else "part-{partition}")
    rest = {k: v for k, v in given.items() if k != output_option}
    if default is None:  # the kind names its output after its source
        source = stem + ".parquet"
        name = targets.make(kind, **rest).placed(source, [source]).out
    elif kind in _FOLDER_SUFFIXES:  # the name whose suffix says the compression given
        name = _first_taken(kind, rest, output_option, [
            stem + _FOLDER_SUFFIXES[kind] + suffix for suffix in ("", ".gz", ".zst")])
    else:
        raise ValueError(f"the {kind} target writes one file per Spark task: {output_option} "
                         f"must hold {{partition}}, not {out!r}")
    os.makedirs(out, exist_ok=True)  # here, so that a folder that cannot be fails now
    return name


def _first_taken(kind: str, given: dict, output_option: str, names: List[str]) -> str:
    """The first of ``names`` the kind's constructor takes as its output with the options
    ``given`` (the last one's error when none is)."""
    from . import targets

    for name in names[:-1]:
        try:
            targets.make(kind, **given, **{output_option: name})
            return name
        except (TypeError, ValueError):
            continue
    targets.make(kind, **given, **{output_option: names[-1]})
    return names[-1]


def _judge(target: Any, spark_schema: Any, options: Any) -> None:
    """The target's plan and encoder on the DataFrame's Arrow schema, and the encoder on a
    batch without rows: every column the target cannot take is refused here, on the driver."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(spark_schema, timezone="UTC")
    source = "the Spark DataFrame"
    plan = target.plan(schema, source, options)
    encode = target.encoder(schema, plan, options)
    empty = pa.RecordBatch.from_arrays(
        [pa.array([], type=schema.field(name).type) for name in plan.read_columns],
        names=list(plan.read_columns))
    encode(empty)


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
    if output is not None:
        folder = os.path.dirname(output)
        if folder and not os.path.isdir(folder):  # an executor on another machine
            os.makedirs(folder, exist_ok=True)
    counted = _Counted(_kept_target(target) if keep and _keeps(target) else target)
    reader = pa.RecordBatchReader.from_batches(first.schema, itertools.chain([first], batches))
    rejects = rejecting(job.options, partition if batch_id is None
                        else f"{batch_id}-{partition}")
    try:
        with rejects as options:
            result = load_arrow(reader, counted, options=options, threads=1)
    except Exception as exc:
        batch = f" of micro-batch {batch_id}" if batch_id is not None else ""
        _add_note(exc, f"in partition {partition}{batch} (attempt {attempt}) of the Spark "
                       f"write into {target.describe()}")
        raise
    return TaskWritten(rows=result.rows, body_bytes=result.body_bytes,
                       wire_bytes=result.wire_bytes, retries=counted.retries,
                       ended=time.time(), output=output, rejected_rows=result.rejected_rows,
                       cpu_seconds=time.process_time() - cpu, **ids)


# ------------------------------------------------------- sessions kept across micro-batches

#: A kept session idle this long (seconds) is closed and a new one opened for the next
#: micro-batch, rather than trusting connections that a server or a firewall may have
#: dropped meanwhile.
KEEP_IDLE_SECONDS = 60.0


class _KeptSession:
    """This process's session into one target, kept from one micro-batch's task to the next
    (with the table's plan, read once): one task at a time leases it (:meth:`lease`)."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self.session: Any = None
        self.plans: dict = {}
        self.busy = False
        self.used = 0.0

    def lease(self) -> Any:
        """The kept session for one task (opened now when there is none, or the last one
        idled too long), or, while another thread holds it, a session of the task's own."""
        with _kept_lock:
            if self.busy:
                return self.target.open()
            self.busy = True
            stale, self.session = (
                (self.session, None) if self.session is not None
                and time.monotonic() - self.used > KEEP_IDLE_SECONDS else (None, self.session))
        try:
            if stale is not None:
                _close_quietly(stale)
            if self.session is None:
                self.session = self.target.open()
        except BaseException:
            self.release(None)
            raise
        return _Lease(self, self.session)

    def release(self, session: Any) -> None:
        """The lease ended: ``session`` stays kept (None: the session went, with the plans)."""
        with _kept_lock:
            self.session = session
            if session is None:
                self.plans.clear()
            self.used = time.monotonic()
            self.busy = False


class _Lease:
    """A task's use of a kept session: its own byte and retry counts; :meth:`close` keeps
    the session (every row stored was acknowledged), :meth:`abort` ends it."""

    def __init__(self, kept: _KeptSession, session: Any) -> None:
        self._kept, self._session = kept, session
        self._start = (session.body_bytes, session.wire_bytes, _retries(session))

    def store(self, encoded: Any, rows: int) -> int:
        return self._session.store(encoded, rows)

    @property
    def body_bytes(self) -> int:
        return self._session.body_bytes - self._start[0]

    @property
    def wire_bytes(self) -> int:
        return self._session.wire_bytes - self._start[1]

    @property
    def retries(self) -> int:
        return _retries(self._session) - self._start[2]

    def close(self) -> None:
        if getattr(self._session, "dead", None):  # a node left out: the next opens anew
            _close_quietly(self._session)
            self._kept.release(None)
        else:
            self._kept.release(self._session)

    def abort(self) -> None:
        try:
            self._session.abort()
        finally:
            self._kept.release(None)


class _Kept:
    """A target description whose sessions are the process's kept one for that target, and
    whose plan (the table read, the statement prepared) is read once per schema."""

    def __init__(self, described: Any, kept: _KeptSession) -> None:
        self._described, self._kept = described, kept

    def __getattr__(self, name: str) -> Any:
        return getattr(self._described, name)

    def plan(self, schema: Any, source: str, options: Any) -> Any:
        key = (schema.serialize().to_pybytes(), repr(options))
        plan = self._kept.plans.get(key)
        if plan is None:
            plan = self._kept.plans[key] = self._described.plan(schema, source, options)
        return plan

    def placed(self, path: Any, files: Any) -> "_Kept":
        return self

    def open(self) -> Any:
        return self._kept.lease()


_kept_lock = threading.Lock()
#: this process's kept sessions, by the pickled target description
_kept: dict = {}
#: the streaming queries' judged options, by query (:meth:`BulkwireDataSource._query_job`):
#: (the job, when last asked for)
_judged: dict = {}
#: those a forked child inherited: its parent's connections, never used nor closed here
_inherited: list = []


def _keeps(target: Any) -> bool:
    """Whether a streaming task keeps its session into ``target``: a CQL table's (a RavenDB
    bulk insert or a file is one request, or one file, per task)."""
    return getattr(target, "kind", None) == "cql"


def _kept_target(target: Any) -> _Kept:
    """``target`` with this process's kept session for it."""
    import pickle

    key = pickle.dumps(target)
    with _kept_lock:
        kept = _kept.get(key)
        if kept is None:
            kept = _kept[key] = _KeptSession(target)
    return _Kept(target, kept)


def _retries(session: Any) -> int:
    return int(getattr(session, "retries", 0) or 0)


def _close_quietly(session: Any) -> None:
    try:
        session.close()
    except Exception:  # noqa: BLE001 - a session being let go: nothing more to say
        pass


def _close_kept() -> None:
    """At the process's exit: every kept session closed."""
    with _kept_lock:
        kept = list(_kept.values())
        _kept.clear()
    for entry in kept:
        if entry.session is not None and not entry.busy:
            _close_quietly(entry.session)
            entry.session = None


def _forget_kept_after_fork() -> None:
    """In a forked child: the parent's kept sessions are the parent's (their sockets, their
    threads); the child keeps its own."""
    global _kept_lock, _kept
    _inherited.append(_kept)
    _kept, _kept_lock = {}, threading.Lock()


atexit.register(_close_kept)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_kept_after_fork)


# ---------------------------------------------------------------------------- the driver

def _describe(job: _Job) -> str:
    """The target, for the result and the log (a file target: its tasks' paths)."""
    return f"files {job.out}" if job.out is not None else job.target.describe()


def _report(job: _Job, result: SparkWriteResult) -> None:
    """Logs ``result`` and, for a data source :func:`register` made, keeps it for
    :func:`last_result`."""
    line = result.summary()
    level = logging.INFO if result.committed else logging.WARNING
    if _log.hasHandlers() and _log.isEnabledFor(level):
        _log.log(level, line)
    else:  # a Python worker of the driver: its stderr reaches the driver's
        print(f"bulkwire.spark: {line}", file=sys.stderr, flush=True)
    if job.result_dir is not None and os.path.isdir(job.result_dir):
        temporary = os.path.join(job.result_dir, f".last.{os.getpid()}.json")
        with open(temporary, "w", encoding="utf-8") as f:
            json.dump(dataclasses.asdict(result), f)
        os.replace(temporary, os.path.join(job.result_dir, "last.json"))


class BulkwireWriter(DataSourceArrowWriter):
    """The batch writer: made on the driver (the options and schema judged there), pickled
    to every write task (:meth:`write`); :meth:`commit` or :meth:`abort` run on the driver."""

    def __init__(self, job: _Job) -> None:
        self.job = job

    def write(self, iterator: Iterator[Any]) -> TaskWritten:
        return _write(self.job, iterator)

    def commit(self, messages: List[Optional[WriterCommitMessage]]) -> None:
        _report(self.job, SparkWriteResult.of(True, list(messages),
                                              _describe(self.job), None))

    def abort(self, messages: List[Optional[WriterCommitMessage]]) -> None:
        _report(self.job, SparkWriteResult.of(False, list(messages),
                                              _describe(self.job), None))


if DataSourceStreamArrowWriter is not None:
    class BulkwireStreamWriter(DataSourceStreamArrowWriter):  # type: ignore[misc,valid-type]
        """The streaming writer: each micro-batch as a job of its own (:class:`BulkwireWriter`),
        its commit messages summed per micro-batch. The options and the schema are judged
        once per query, when Spark makes the writer its tasks get; a task into a CQL table
        writes through its process's kept session (one per worker process and target,
        from one micro-batch to the next)."""

        def __init__(self, job: _Job) -> None:
            self.job = job

        def write(self, iterator: Iterator[Any]) -> TaskWritten:
            return _write(self.job, iterator, keep=True)

        def commit(self, messages: List[Optional[WriterCommitMessage]], batchId: int) -> None:
            _report(self.job, SparkWriteResult.of(True, list(messages),
                                                  _describe(self.job), batchId))

        def abort(self, messages: List[Optional[WriterCommitMessage]], batchId: int) -> None:
            _report(self.job, SparkWriteResult.of(False, list(messages),
                                                  _describe(self.job), batchId))


class BulkwireDataSource(DataSource):
    """The data source ``bulkwire`` (write only): see the module's documentation. A source
    that :func:`register` made keeps each job's result for :func:`last_result`."""

    #: where the driver's commit writes the job's result (set by :func:`register`)
    result_dir: Optional[str] = None
    #: the tasks that run at once, among which a rate limit is divided (set by
    #: :func:`register`: the session's ``defaultParallelism``)
    parallelism: Optional[int] = None

    @classmethod
    def name(cls) -> str:
        return NAME

    def writer(self, schema: Any, overwrite: bool) -> BulkwireWriter:
        self._forget()
        return BulkwireWriter(_job(self.options, schema, overwrite, False, self.result_dir,
                                   parallelism=self.parallelism))

    def streamWriter(self, schema: Any, overwrite: bool) -> Any:
        if DataSourceStreamArrowWriter is None:
            raise NotImplementedError("streaming into bulkwire needs PySpark >= 4.1 "
                                      "(DataSourceStreamArrowWriter)")
        if _module_of(sys._getframe(1)) == _COMMIT_RUNNER:
            # made again for one micro-batch's commit or abort, which reads the options
            # alone: they and the schema were judged when the query's writer was made
            return BulkwireStreamWriter(_job(self.options, schema, overwrite, True,
                                             self.result_dir, judge=False,
                                             parallelism=self.parallelism))
        self._forget()
        return BulkwireStreamWriter(self._query_job(schema, overwrite))

    def _query_job(self, schema: Any, overwrite: bool) -> _Job:
        """The streaming query's options and schema judged: Spark plans each micro-batch's
        write anew, asking for the writer again (in the same Python process, where it keeps
        one for the planning): the judgement made for the query's first micro-batch is
        taken again for the others (a query is known by its options, its checkpoint
        location among them, and its schema) while it is used at least every
        :data:`KEEP_IDLE_SECONDS`."""
        key = (self.result_dir, schema.json(), overwrite,
               tuple(sorted((str(k).lower(), str(v)) for k, v in dict(self.options).items())))
        now = time.monotonic()
        with _kept_lock:
            judged = _judged.get(key)
        if judged is None or now - judged[1] > KEEP_IDLE_SECONDS:
            judged = (_job(self.options, schema, overwrite, True, self.result_dir,
                           parallelism=self.parallelism), now)
        with _kept_lock:
            for stale in [k for k, (_, used) in _judged.items()
                          if now - used > KEEP_IDLE_SECONDS]:
                del _judged[stale]  # queries that ended, or idle: judged again if they come
            _judged[key] = (judged[0], now)
        return judged[0]

    def _forget(self) -> None:
        """A new write (or micro-batch) begins: the last one's result goes, so that a write
        refused before its tasks leaves :func:`last_result` None, not an earlier result."""
        if self.result_dir is not None:
            try:
                os.unlink(os.path.join(self.result_dir, "last.json"))
            except FileNotFoundError:
                pass


def _module_of(frame: Any) -> str:
    """The name of the module whose code runs in ``frame`` (run as ``python -m``: the name
    it was run by, not ``__main__``)."""
    spec = frame.f_globals.get("__spec__")
    return getattr(spec, "name", None) or frame.f_globals.get("__name__", "")


def register(spark: Any) -> None:
    """Registers the data source ``bulkwire`` with the SparkSession ``spark``: then
    ``df.write.format("bulkwire")`` writes into a target, and :func:`last_result` returns
    what the last write (or micro-batch) of this session did. Registering the source again
    keeps the session's folder of results. The session's ``defaultParallelism`` is read
    here: a rate limit is divided by it (register again after the cluster grew)."""
    directory = spark.conf.get(RESULT_DIR_KEY, None)
    if not directory or not os.path.isdir(directory):
        directory = tempfile.mkdtemp(prefix="bulkwire-spark-")
        atexit.register(shutil.rmtree, directory, True)
        spark.conf.set(RESULT_DIR_KEY, directory)
    try:  # read here, on the driver: the data source's writer runs in a Python worker
        parallelism = int(spark.sparkContext.defaultParallelism)
    except Exception:  # noqa: BLE001 - a session without a SparkContext (Spark Connect)
        parallelism = None
    # a class of its own, pickled by value with the session's folder in it
    source = type("BulkwireDataSource", (BulkwireDataSource,),
                  {"result_dir": directory, "parallelism": parallelism})
    source.__qualname__ = "BulkwireDataSource.registered"
    spark.dataSource.register(source)


def last_result(spark: Any) -> Optional[SparkWriteResult]:
    """What the last write into the data source :func:`register` registered with ``spark``
    did (the last micro-batch, for a streaming query): its commit's sums, or, after an abort,
    what the tasks that finished had confirmed (``committed`` False). None before the first,
    and when the last write was refused before its tasks ran (an option, the mode, a
    column). ``ValueError`` when ``register(spark)`` was not called."""
    directory = spark.conf.get(RESULT_DIR_KEY, None)
    if not directory:
        raise ValueError("no bulkwire data source is registered with this SparkSession: "
                         "call bulkwire.spark.register(spark) first")
    try:
        with open(os.path.join(directory, "last.json"), encoding="utf-8") as f:
            return SparkWriteResult(**json.load(f))
    except FileNotFoundError:
        return None
