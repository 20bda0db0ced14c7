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
``request_file``, ``jsonl``) writes one file per write task, under a temporary name of the
task attempt's own that the driver's commit renames (its abort removes it): the option
naming its output
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
import json
import logging
import os
import shutil
import sys
import tempfile
import time
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

# the data source's rooms: its results, its options, its tasks, the sessions kept across
# micro-batches; their names kept here
from . import _spark_kept
from ._spark_files import abort_files, commit_files, rejected_task
from ._spark_kept import KEEP_IDLE_SECONDS
from ._spark_options import PIPELINE_OPTIONS, _Job, _job
from ._spark_results import SparkWriteResult, TaskWritten
from ._spark_tasks import _write

__all__ = ["KEEP_IDLE_SECONDS", "NAME", "PIPELINE_OPTIONS", "SparkWriteResult", "TaskWritten",
           "last_result", "register", "STREAMING"]

#: The data source's name, for ``format(...)``.
NAME = "bulkwire"
#: Whether this PySpark takes ``writeStream.format("bulkwire")``.
STREAMING = DataSourceStreamArrowWriter is not None
#: The Spark configuration key under which :func:`register` keeps its result folder.
RESULT_DIR_KEY = "spark.bulkwire.resultDir"
#: The PySpark module that makes a streaming writer again for each micro-batch's commit.
_COMMIT_RUNNER = "pyspark.sql.worker.python_streaming_sink_runner"


_log = logging.getLogger("bulkwire.spark")


def _describe(job: _Job) -> str:
    """The target, for the result and the log (a file target: its tasks' paths)."""
    return f"files {job.out}" if job.out is not None else job.target.describe()


def _finals(job: _Job, messages: List[Any], batch_id: Optional[int]) -> List[str]:
    """The final names of the files the job's tasks may write, one per partition (Spark
    gives the commit and the abort a message, or None, for each): a file target's outputs,
    and with ``rejected`` the rejected files; none for a server without rejected rows."""
    from ._arrow_sink import rejecting

    finals = []
    if job.out is not None:
        finals += [job.output_of(p, batch_id) for p in range(len(messages))]
    if job.options.rejected is not None:
        finals += [rejecting.final_name(job.options.rejected, rejected_task(p, batch_id))
                   for p in range(len(messages))]
    return finals


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
    to every write task (:meth:`write`); :meth:`commit` or :meth:`abort` run on the driver.
    A file target's task writes its file under its attempt's own temporary name, which
    :meth:`commit` renames to the final name and :meth:`abort` removes
    (:mod:`bulkwire._spark_files`)."""

    def __init__(self, job: _Job) -> None:
        self.job = job

    def write(self, iterator: Iterator[Any]) -> TaskWritten:
        return _write(self.job, iterator)

    def commit(self, messages: List[Optional[WriterCommitMessage]]) -> None:
        kept = commit_files(list(messages), _finals(self.job, messages, None))
        _report(self.job, SparkWriteResult.of(True, kept, _describe(self.job), None))

    def abort(self, messages: List[Optional[WriterCommitMessage]]) -> None:
        abort_files(list(messages), _finals(self.job, messages, None))
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
            kept = commit_files(list(messages), _finals(self.job, messages, batchId))
            _report(self.job, SparkWriteResult.of(True, kept, _describe(self.job), batchId))

        def abort(self, messages: List[Optional[WriterCommitMessage]], batchId: int) -> None:
            abort_files(list(messages), _finals(self.job, messages, batchId))
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
        with _spark_kept._kept_lock:  # the module's: a forked child makes its own
            judged = _spark_kept._judged.get(key)
        if judged is None or now - judged[1] > KEEP_IDLE_SECONDS:
            judged = (_job(self.options, schema, overwrite, True, self.result_dir,
                           parallelism=self.parallelism), now)
        with _spark_kept._kept_lock:
            for stale in [k for k, (_, used) in _spark_kept._judged.items()
                          if now - used > KEEP_IDLE_SECONDS]:
                del _spark_kept._judged[stale]  # queries that ended, or idle: judged again
            _spark_kept._judged[key] = (judged[0], now)
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
