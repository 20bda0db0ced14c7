"""The entry points :func:`load_parquet` and :func:`load_arrow`: the arguments judged before
anything is read or sent, the target they are given (or, from the former spellings, the one
their arguments name: :func:`_target_of`, through the registry :mod:`bulkwire.targets`), the
parts composed (plan, sources, target, resume state, workers), progress reported, and the
:class:`LoadResult`. A load knows its target only through
:class:`~bulkwire.load.interface.TargetDescription`."""
from __future__ import annotations

import os
import pickle
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence, cast

from ..errors import _mark_unconfirmed, _name_source_rows
from .._arrow import PathLike, _pyarrow
from .datasets import (_as_reader, _empty_batch, _check_schemas, _dataset_files, _file_footer, _reader_batches,
                       RESUME_UNIT_ROWS, _taken_batches, _Unit, _units)
from . import mapping
from .interface import ResumableTarget, TargetDescription
from .resume import _ResumeState
from .pipeline import (_count_session, _default_batch_rows, _encoded_in_order, _Job,
                       _one_request, _send)
from .workers import _run_workers, _share
from .rates import RateLimit, capped_batch_rows
from .report import (build_facts, check_writable, options_facts, result_facts, summary_line,
                     target_facts, write_report)
from .._deprecated import renamed_keywords, warn_deprecated
from ..load_options import RENAMED_OPTIONS, LoadOptions


@dataclass
class LoadResult:
    """What a load did. ``body_bytes`` is the JSON request body; ``wire_bytes`` what went out
    (the gzip or zstd stream's size when compressing, else the same)."""

    rows: int
    body_bytes: int
    wire_bytes: int
    seconds: float
    source: str
    target: str
    compress: bool | str
    #: rows a resumed load found confirmed by an earlier run, and did not send again
    skipped_rows: int = 0
    #: worker processes that sent the rows
    workers: int = 1
    #: rows refused (by the client or the server) and set aside, with ``max_errors``
    rejected_rows: int = 0
    #: the rejected file they were written to (None: no rejected file)
    rejected_path: str | None = None
    #: a dry run: the rows were read and checked, nothing was sent or written
    dry_run: bool = False
    #: requests sent again after a passing refusal (CQL: overloaded, write timeout,
    #: unavailable), and of them those after an "overloaded" answer
    retries: int = 0
    overloaded: int = 0
    #: the source rows the target confirmed and those it did not, as ``(file, first row,
    #: stop row)`` ranges (a load of files; adjacent ranges merged)
    confirmed: list = field(default_factory=list)
    unconfirmed: list = field(default_factory=list)

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else float("inf")

    @property
    def mb_per_second(self) -> float:
        return self.body_bytes / self.seconds / 1e6 if self.seconds > 0 else float("inf")

    def summary(self) -> str:
        """One line, made from the data of the run report (:mod:`bulkwire.load.report`)."""
        return summary_line(result_facts(self))


class _Progress:
    """A one-line progress bar on a stream (stderr), redrawn at most every 0.2 s."""

    def __init__(self, total: int | None, stream=None, width: int = 24):
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.start = time.perf_counter()
        self.last = 0.0
        self.drawn = False

    def update(self, rows: int, body_bytes: int, final: bool = False, rejected: int = 0) -> None:
        """Redraws the line: rows (of the total, with the time left, when it is known), rate,
        MB/s, and the rows rejected once there are some."""
        now = time.perf_counter()
        if not final and now - self.last < 0.2:
            return
        self.last = now
        elapsed = max(now - self.start, 1e-9)
        if self.total:
            frac = min(rows / self.total, 1.0)
            filled = int(frac * self.width)
            bar = f"[{'#' * filled}{'.' * (self.width - filled)}] {frac * 100:3.0f}% "
            count = f"{rows:,}/{self.total:,} rows"
        else:
            bar, count = "", f"{rows:,} rows"
        left = ""
        if self.total and not final and rows:
            left = f"  {_duration((self.total - min(rows, self.total)) * elapsed / rows)} left"
        refused = f"  {rejected:,} rejected" if rejected else ""
        self.stream.write(f"\r{bar}{count}  {rows / elapsed:,.0f} rows/s  "
                          f"{body_bytes / elapsed / 1e6:,.1f} MB/s{left}{refused} ")
        self.drawn = True
        if final:
            self.stream.write("\n")
        self.stream.flush()


def _duration(seconds: float) -> str:
    """``seconds`` for people: ``42s``, ``3m05s``, ``2h07m``."""
    seconds = int(seconds + 0.5)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _count(value: Any, name: str, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


class _Report:
    """Adds up the batches of every worker for ``progress`` (the bar, or the caller's
    callable, called with the running totals)."""

    def __init__(self, progress: bool | Callable[[int, int], None], total: int | None,
                 rejected: Callable[[], int] | None = None) -> None:
        self.rows = self.body = 0
        #: counts the rows the load rejected so far (shown once there are some)
        self._rejected = rejected
        self.total = total
        self.bar = _Progress(total) if progress is True else None
        self.callback = progress if callable(progress) else None

    @property
    def rejected(self) -> int:
        return self._rejected() if self._rejected is not None else 0

    def __call__(self, rows: int, body: int) -> None:
        self.rows += rows
        self.body += body
        if self.bar is not None and (self.total is None or self.rows < self.total):
            # the final line is drawn once, at the end
            self.bar.update(self.rows, self.body, rejected=self.rejected)
        if self.callback is not None:
            self.callback(self.rows, self.body)

    def end(self, body: int, ok: bool) -> None:
        if self.bar is None:
            return
        if ok:
            self.bar.update(self.rows, body, final=True, rejected=self.rejected)
        elif self.bar.drawn:
            self.bar.stream.write("\n")


#: The arguments of :func:`load_parquet` that named its target before ``target=`` did.
OLD_TARGET_ARGUMENTS = ("url", "database", "out", "certificate", "ca", "ssl_context")


def _target_of(target: TargetDescription | None, options: LoadOptions | None,
               fields: dict, entry: str, stacklevel: int) -> tuple[TargetDescription, LoadOptions]:
    """The target and the :class:`~bulkwire.LoadOptions` of an entry's arguments (``entry``
    names it in messages; ``stacklevel`` counts the frames to its caller, as
    :func:`~bulkwire._deprecated.warn_deprecated`'s). Without ``target``, the arguments of
    the former spelling (``url=``, ``database=``, ``out=``, the TLS arguments, the document
    options: each warned about) describe it, through the registry: a RavenDB database with
    ``url``, else the request body written to ``out`` (by default next to the source). With
    ``target``, those arguments are refused, naming the first."""
    from ..targets import KINDS, refuse_options

    old = {name: fields.pop(name) for name in OLD_TARGET_ARGUMENTS if name in fields}
    old = {name: value for name, value in old.items() if value is not None}
    options = LoadOptions.of(options, **fields)
    document = options.document_options()
    if target is not None:
        if old:
            raise ValueError("target excludes url, out and the TLS arguments (they name a target)")
        refuse_options(target, document)
        return target, options
    url = old.pop("url", None)
    if url is not None:
        warn_deprecated(f"{entry}(url=..., database=...)", f"{entry}(..., target="
                        f"bulkwire.targets.ravendb(url, database, ...))", stacklevel)
    elif old:
        warn_deprecated(f"{entry}({next(iter(old))}=...)", f"{entry}(..., target="
                        f"bulkwire.targets.request_file(out, ...))", stacklevel)
    for name in document:
        where = "ravendb" if url is not None else "request_file"
        warn_deprecated(f"{entry}({name}=...) (a load option)",
                        f"target=bulkwire.targets.{where}(..., {name}=...)", stacklevel)
    tls = {name: old.pop(name) for name in ("certificate", "ca", "ssl_context") if name in old}
    if url is None:
        if tls:
            raise ValueError(f"{', '.join(tls)} need url (an https:// server)")
        if "database" in old:
            raise ValueError("database needs url (a RavenDB server)")
        return KINDS["request_file"](old.get("out"), **document), options
    if "database" not in old:
        raise ValueError("database is required with url")
    return KINDS["ravendb"](url, old["database"], **tls, **document), options


def load_parquet(path: Any, target: TargetDescription | None = None, *,
                 options: LoadOptions | None = None, take: Any = None,
                 progress: bool | Callable[[int, int], None] = False,
                 workers: int = 1, threads: int | None = None, resume: PathLike | None = None,
                 **fields: Any) -> LoadResult:
    """Load Parquet / Arrow IPC files (or any Arrow data) into ``target``, a description of
    :mod:`bulkwire.targets`: a RavenDB database (:func:`~bulkwire.targets.ravendb`, with bulk
    insert), the exact request body in a file (:func:`~bulkwire.targets.request_file`; the
    default, None: ``<name>.bulk.json`` next to the source file or directory), a JSON Lines
    file (``targets.jsonl``), a CQL table (:func:`~bulkwire.targets.cql`). The target holds
    its own options (for the document targets: ``collection``, ``id_column``, ``compress``,
    ...), judged when it was made.

    ``options`` (a :class:`bulkwire.LoadOptions`) are what the load itself reads:
    ``columns``, ``vector_column``, ``batch_rows``; ``fields`` are keyword arguments that
    replace its values. An option of a target given here is a ``TypeError`` naming it.

    ``path``: a file; a directory (its ``.parquet``, ``.pq``, ``.arrow``, ``.ipc`` and
    ``.feather`` files, recursively, in name order); a glob (``"data/*.parquet"``); a list of
    these; or Arrow data: a ``pyarrow.Table``, ``RecordBatch``, ``RecordBatchReader``, a
    ``pyarrow.dataset``, any object with ``__arrow_c_stream__`` (a polars DataFrame, a DuckDB
    result) or an iterable of RecordBatches. Every file's schema is read, and compared with
    the first file's, before anything is written or sent: a file whose columns differ raises
    ``ValueError`` naming the file and the column.

    Into a document target, each row becomes a document ``<id_prefix><id>`` holding the
    ``columns`` (default: every column but the id and a column named ``Id``) and
    ``@metadata``, as :meth:`bulkwire.BulkWriter.store` writes the equivalent dict
    (:mod:`bulkwire.conventions`): the ``metadata`` entries, then ``@collection``
    (``collection``) and ``Raven-Python-Type`` (``python_type``) where ``metadata`` does not
    give them. A column named ``Id`` or ``@metadata`` cannot be a field, and a string id
    must pass :func:`bulkwire.conventions.check_id` (prefix included). The vector column
    (``fixed_size_list`` or ``list`` of float32/float64; found automatically when there is
    exactly one) is written as a JSON array, float32 elements widened (the repr of the
    double, as ``bulkwire.dumps`` writes a float32 ndarray) or, with ``float32="shortest"``,
    with the shortest text that round-trips as float32. Ids come from the id column alone,
    so a load that is repeated writes the same documents. Into a RavenDB database the body
    is streamed with :class:`bulkwire.BulkInsert` (no rows, no request; an error or Ctrl-C
    aborts the operation on the server); into the request file, the same body is written
    whole or not at all.

    The columns' types are checked (by the target's encoder) before any row is read.

    ``workers`` (with files, into a target whose sessions are confirmed each on its own: a
    database): processes, each sending a disjoint share of the row groups in its own
    session (default 1: this process). The first failure stops the others and raises that
    worker's error; Ctrl-C stops them all. ``threads``: threads validating batches and
    writing their text ahead of the writer, in each process (default 2; with 1, none
    ahead); the output is the same whatever the number.

    ``resume`` (the same targets, with files): a state file. Each unit of work (a file's run
    of row groups, one session each) is recorded there once the target confirmed it; a
    load given the same state file again skips those (RavenDB: and sends the rest with
    ``skip_overwrite_if_unchanged``). A file that changed since (size or modification time)
    is refused, naming it.

    ``take``: load only the rows at these indices of a single file, in that order (see
    :func:`bulkwire.take`). Every batch is checked before any of its bytes are written or
    sent: buffers that do not hold what the batch's offsets and lengths say (a crafted or
    corrupt file) raise ``ValueError`` naming the file and the column; a null or blank id, a
    null or ragged vector, a null vector element, invalid UTF-8 raise
    :class:`bulkwire.errors.RowError` (a ``ValueError``) naming the file, the column and the
    row (the file's row number; with ``take``, also the position in ``take``), also as its
    attributes ``source``, ``column``, ``row``, ``take_index``. A load that does not
    complete raises a :class:`bulkwire.errors.LoadError` (RavenDB's:
    :class:`~bulkwire.errors.BulkInsertError`).

    The former spellings still work, each with a ``DeprecationWarning`` naming the new one:
    ``url=``, ``database=``, ``certificate=``, ``ca=``, ``ssl_context=`` (a RavenDB
    database), ``out=`` (the request file) and the document options given here (or in
    ``options``) without ``target``.

    >>> import tempfile, os
    >>> from bulkwire import sample_parquet, targets
    >>> src = sample_parquet(os.path.join(tempfile.mkdtemp(), "s.parquet"), rows=3, dim=2)
    >>> load_parquet(src, targets.request_file(metadata={"@collection": "Points"})).rows
    3
    """
    # old option names renamed here, so that their warning points at this call's caller
    fields = renamed_keywords(RENAMED_OPTIONS, "", fields)
    return _load(path, target, options, take, progress, workers, threads, resume, fields,
                 "load_parquet", 4)


def _load(path: Any, target: TargetDescription | None, options: LoadOptions | None, take: Any,
          progress: bool | Callable[[int, int], None], workers: int, threads: int | None,
          resume: PathLike | None, fields: dict, entry: str, stacklevel: int) -> LoadResult:
    """:func:`load_parquet`, called by ``entry`` (``stacklevel`` frames from its caller)."""
    start = time.perf_counter()
    # every option checked (LoadOptions, the target's constructor) before anything is read
    target, options = _target_of(target, options, fields, entry, stacklevel)
    if options.report is not None:
        check_writable(options.report)
    workers = _count(workers, "workers", 1)
    # Two by default: an encoding thread validates a batch and writes its text into buffers
    # of the writers' pool, which the writer takes over without a copy, while this thread
    # reads the file and hands the batches on (docs/performance.md)
    threads = _count(threads, "threads", 2)
    pa = _pyarrow()
    reader = _as_reader(path)
    files: list[str] | None = None
    if reader is None:
        files = _dataset_files(path)
        footers = [_file_footer(f) for f in files]
        schemas = [footer[0] for footer in footers]
        _check_schemas(files, schemas)
        schema = schemas[0]
        source = files[0] if len(files) == 1 else f"{len(files)} files ({files[0]}, ...)"
    else:
        schema = reader.schema
        source = f"a {type(path).__module__.split('.')[0]}.{type(path).__name__}"
    # a rejected file's own columns are not read: fixed, it loads as the source did
    from .rejects import source_schema

    schema = source_schema(schema)
    # the target judges the schema with the load's options (and makes its encoder of them);
    # with a mapping or constants, the schema and options in the target's names
    named = files[0] if files else source
    if mapping.active(options):
        seen, given, constants = mapping.mapped(schema, options, target, named)
        try:
            plan = target.plan(seen, named, given)
        except (ValueError, TypeError) as exc:
            raise mapping.explained(exc, options)
        encode = mapping.wrapped(target.encoder(seen, plan, given), options, constants)
        plan = encode.plan
    else:
        plan = target.plan(schema, named, options)
        encode = target.encoder(schema, plan, options)
    batch_rows = (options.batch_rows if options.batch_rows is not None
                  else _default_batch_rows(schema, plan))
    limited = options.max_rows_per_second or options.max_bytes_per_second
    if limited:  # batches small enough for the schedule to follow the limit closely
        batch_rows = capped_batch_rows(batch_rows, _default_batch_rows(schema, plan),
                                       options.max_rows_per_second,
                                       options.max_bytes_per_second)
    # the columns' types, judged before any file is written or request made
    encode(_empty_batch(schema, plan.read_columns))

    if options.dry_run and resume is not None:
        raise ValueError("dry_run and resume exclude each other: a dry run confirms nothing")
    for name, value in (("workers", workers > 1), ("resume", resume is not None)):
        if not value:
            continue
        if not target.units:
            raise ValueError(f"{name} needs a target that confirms each unit of work on its "
                             f"own (a database: bulkwire.targets.ravendb or cql), not "
                             f"{target.describe()}: worker processes and resumed runs load "
                             f"each unit in its own session")
        if files is None:
            raise ValueError(f"{name} needs files (a path, directory, glob or list of them): "
                             f"Arrow data given as a stream is read once, by one process")
        if take is not None:
            raise ValueError(f"{name} and take exclude each other")
    if workers > 1:  # each worker process receives the target
        try:
            pickle.dumps(target)
        except Exception as exc:  # noqa: BLE001 - any reason it cannot be sent
            raise ValueError(str(exc)) from None
    if take is not None:
        if files is None or len(files) != 1:
            raise ValueError("take needs a single file")
        from ..parquet import _check_indices

        # every index checked against the file's rows before any output is opened
        take = _check_indices(take, sum(footers[0][1]), name="take")
    target = target.placed(path, files)
    where = target.describe()
    # the files' row groups, from their footers (a resume state is checked against them)
    groups = [footer[1] for footer in footers] if files is not None and take is None else None
    stream_rows = (path.num_rows if take is None and isinstance(path, (pa.Table, pa.RecordBatch))
                   else None)

    spec = None
    if options.rejecting():
        total = (len(take) if take is not None else sum(map(sum, groups))
                 if groups is not None else stream_rows)
        spec = _reject_spec(options, schema, plan, total,
                            _first_vector_dim(files, schema, plan, options, batch_rows))

    state = None
    if resume is not None:  # a target with units (checked above): a ResumableTarget
        resumable = cast(ResumableTarget, target)
        recorded = resumable.resume_options(encode, options)
        if mapping.active(options):  # the rows written from other columns are other rows
            recorded = {**recorded, "mapping": [list(pair) for pair in options.columns or ()],
                        "constants": [list(pair) for pair in options.constants or ()]}
        state = _ResumeState(os.fspath(resume), files, groups, recorded, resumable)
    run: dict = {"counters": {}, "confirmed": []}
    limit = (RateLimit.create(options.max_rows_per_second, options.max_bytes_per_second)
             if limited else None)
    try:
        if state is not None and state.resumed:
            target = resumable.resuming()
        # the target's sessions are opened by the pipeline, once every argument was checked;
        # a session that fails is aborted (a file's output removed)
        job = _Job(target, encode, batch_rows, threads,
                   request_per_unit=target.request_per_unit(state is not None),
                   rejects=spec, dry_run=options.dry_run, limit=limit)
        if files is not None:
            # each unit's file must be read as it was planned from: its size and mtime
            job.identities = {f: footer[2] for f, footer in zip(files, footers)}
        compress = getattr(target, "compress", False)
        if spec is None:
            result = _load_units(job, files, groups, state, workers, progress, source, where,
                                 start, reader, take, stream_rows, compress, run=run)
        else:
            result = _load_rejecting(job, files, groups, state, workers, progress, source,
                                     where, start, reader, take, stream_rows, compress,
                                     options, run)
    except BaseException as exc:
        if options.report is not None:
            failed = _partial_result(run, start, source, where, getattr(target, "compress", False),
                                     workers, exc)
            _write_report(options.report, failed, options, target, workers, threads, resume,
                          take, exc)
        raise
    finally:
        if state is not None:
            state.close()
        if limit is not None:
            limit.close()
    if options.report is not None:
        _write_report(options.report, result, options, target, workers, threads, resume, take,
                      None)
    return result


def _partial_result(run: dict, start: float, source: str, where: str, compress: bool | str,
                    workers: int, exc: BaseException) -> LoadResult:
    """What a load that failed did, as a :class:`LoadResult` (for its report): the rows and
    bytes sent, what was confirmed, and what the error says was not."""
    report = run.get("report")
    counters = run["counters"]
    return LoadResult(rows=report.rows if report is not None else 0,
                      body_bytes=report.body if report is not None else 0,
                      wire_bytes=report.body if report is not None else 0,
                      seconds=time.perf_counter() - start, source=source, target=where,
                      compress=compress, skipped_rows=run.get("skipped", 0), workers=workers,
                      retries=counters.get("retries", 0),
                      overloaded=counters.get("overloaded", 0),
                      confirmed=_merged(run["confirmed"]),
                      unconfirmed=list(getattr(exc, "unconfirmed", None) or []))


def _write_report(path: str, result: LoadResult, options: LoadOptions, target: Any,
                  workers: int, threads: int, resume: Any, take: Any,
                  error: BaseException | None) -> None:
    """Writes the run report of a load (:mod:`bulkwire.load.report`) to ``path``."""
    from .report import _scrubbed

    status = ("completed" if error is None else
              "interrupted" if isinstance(error, KeyboardInterrupt) else "failed")
    data = {"status": status,
            "error": None if error is None else _scrubbed(f"{type(error).__name__}: {error}"),
            "notes": [_scrubbed(note) for note in getattr(error, "__notes__", None) or ()],
            "summary": result.summary(),
            "result": result_facts(result),
            "options": options_facts(options, workers=workers, threads=threads,
                                     resume=None if resume is None else os.fspath(resume),
                                     take=None if take is None else len(take)),
            "target": target_facts(target),
            "bulkwire": build_facts()}
    write_report(path, data)


def _first_vector_dim(files: list[str] | None, schema: Any, plan: Any, options: LoadOptions,
                      batch_rows: int) -> int | None:
    """The most common length of the vectors in the first ``batch_rows`` rows of the first
    file, for a list column of variable length (None: a fixed size list, no vector column,
    data that is not files, or no rows)."""
    if files is None or plan.vector_column is None:
        return None
    source = {target: name for name, target in options.renames.items()}.get(
        plan.vector_column, plan.vector_column)
    if source not in schema.names:
        return None
    pa = _pyarrow()
    if not pa.types.is_list(schema.field(source).type) and \
            not pa.types.is_large_list(schema.field(source).type):
        return None
    import pyarrow.compute as pc

    path = files[0]
    if _source_format_of(path) == "ipc":
        with pa.OSFile(path, "rb") as handle:
            reader = pa.ipc.open_file(handle)
            column = (reader.get_batch(0).column(source).slice(0, batch_rows)
                      if reader.num_record_batches else None)
    else:
        import pyarrow.parquet as pq

        with pq.ParquetFile(path) as parquet:
            first = next(parquet.iter_batches(batch_size=batch_rows, columns=[source]), None)
            column = first.column(0) if first is not None else None
    if column is None or len(column) == 0:
        return None
    modes = pc.mode(pc.list_value_length(column)).to_pylist()
    return int(modes[0]["mode"]) if modes else None


def _reject_spec(options: LoadOptions, schema: Any, plan: Any, total: int | None,
                 vector_dim: int | None = None) -> Any:
    """The :class:`~bulkwire.load.rejects._RejectSpec` of a load that sets refused rows
    aside: the logs' schema (the columns read, then the source file, row and reason)."""
    from .rejects import _RejectSpec, REJECT_COLUMNS, max_errors_limit

    pa = _pyarrow()
    read = _empty_batch(schema, plan.read_columns).schema
    fields = list(read) + [pa.field(REJECT_COLUMNS[0], pa.string()),
                           pa.field(REJECT_COLUMNS[1], pa.int64()),
                           pa.field(REJECT_COLUMNS[2], pa.string())]
    rule = (f"max_errors={options.max_errors!r}" if options.max_errors is not None
            else "a dry run sets every refused row aside")
    return _RejectSpec(options.rejected, pa.schema(fields),
                       max_errors_limit(options.max_errors, total), rule, vector_dim)


def _load_rejecting(job: _Job, files: list[str] | None, groups: Any, state: Any,
                    workers: int, progress: Any, source: str, where: str, start: float,
                    reader: Any, take: Any, stream_rows: int | None, compress: bool | str,
                    options: LoadOptions, run: dict | None = None) -> LoadResult:
    """:func:`_load_units` for a load that sets refused rows aside (``max_errors``, a dry
    run): this process's rows rejected go to its log, each worker's to its own, and the
    logs are joined into the rejected file however the load ends (with ``resume``, a failed
    load keeps its logs for the next run)."""
    from .rejects import (_finish, _prepare, _Rejects, TooManyRejected, max_errors_limit)

    spec = job.rejects
    if spec.path is not None:
        _prepare(spec, state)
    rejects = _Rejects(spec, "main")
    counted = [0]  # the workers' rejected rows
    if run is not None:  # the progress line's count
        run["rejected"] = lambda: rejects.count + counted[0]

    def on_rejected(n: int) -> None:
        counted[0] += n
        if spec.limit is not None and counted[0] > spec.limit:
            raise TooManyRejected(f"{counted[0]:,} rows rejected, more than max_errors "
                                  f"allows ({spec.rule}): the load stops")

    ok = False
    try:
        result = _load_units(job, files, groups, state, workers, progress, source, where,
                             start, reader, take, stream_rows, compress, rejects, on_rejected,
                             run)
        rejected = rejects.count + counted[0]
        if spec.limit is None and options.max_errors is not None:  # a fraction of a stream
            limit = max_errors_limit(options.max_errors, result.rows + rejected)
            if limit is not None and rejected > limit:
                raise TooManyRejected(f"{rejected:,} of {result.rows + rejected:,} rows "
                                      f"rejected, more than max_errors allows ({spec.rule})")
        ok = True
    finally:
        rejects.close()
        if spec.path is not None:
            written = _finish(spec, "ipc" if files is not None and
                              _source_format_of(files[0]) == "ipc" else "parquet",
                              keep_logs=not ok and state is not None)
    result.rejected_rows = written if spec.path is not None else rejected
    result.rejected_path = spec.path
    result.dry_run = options.dry_run
    return result


def _source_format_of(path: str) -> str:
    from ..parquet import _file_format

    return _file_format(path)


def _load_units(job: _Job, files: list[str] | None, groups: list[list[int]] | None,
                state: _ResumeState | None, workers: int, progress: Any, source: str,
                where: str, start: float, reader: Any, take: Any, stream_rows: int | None,
                compress: bool | str, rejects: Any = None,
                on_rejected: Any = None, run: dict | None = None) -> LoadResult:
    """The sending half of :func:`load_parquet`, once its arguments are checked: Arrow data
    or ``take`` in one request from this process; files as units of work, by this process
    or by ``workers`` processes. An exception that escapes a load into a target whose
    sessions are confirmed each on its own (a server) carries, in a note and in its
    ``unconfirmed`` attribute, the rows of the files that no request confirmed. ``run``
    collects, for a report of a load that fails too, the progress, what the sessions counted
    and the units confirmed."""
    ok = False
    run = run if run is not None else {"counters": {}, "confirmed": []}
    counters = run["counters"]
    if groups is None:
        report = _Report(progress, stream_rows, run.get("rejected"))
        run["report"] = report
        try:
            rows, body, wire = _send_stream(job, reader, files, take, report, rejects, counters)
            ok = True
        finally:
            report.end(report.body, ok)
        return LoadResult(rows=rows, body_bytes=body, wire_bytes=wire,
                          seconds=time.perf_counter() - start, source=source, target=where,
                          compress=compress, retries=counters.get("retries", 0),
                          overloaded=counters.get("overloaded", 0))

    total = sum(map(sum, groups))
    skipped = state.skipped_rows() if state is not None else 0
    if state is not None:  # one request per unit: what a dead run repeats at most
        unit_rows = min(-(-max(total, 1) // (workers * 4)), RESUME_UNIT_ROWS)
    elif workers > 1:  # enough units to share out evenly
        unit_rows = -(-max(total, 1) // (workers * 4))
    else:  # a unit per file: encoding ahead never drains in the middle of a file
        unit_rows = max(total, 1)
    units = _units(files, groups, state.ranges if state is not None else None,
                   max(1, unit_rows))
    report = _Report(progress, total - skipped, run.get("rejected"))
    run["report"], run["skipped"] = report, skipped
    unconfirmed = dict.fromkeys(units)  # in file order; a unit leaves once its request is answered

    def confirm(unit: _Unit) -> None:
        unconfirmed.pop(unit, None)
        run["confirmed"].append(unit)
        if state is not None:
            state.confirm(unit)

    shares = _share(units, workers) if workers > 1 else [units]
    try:
        if len(shares) > 1:
            rows, body, wire = _run_workers(job, shares, report, confirm, on_rejected, counters)
        else:
            rows, body, wire = _send(job, units, report, confirm, None, rejects, counters)
        ok = True
    except BaseException as exc:
        if job.target.units:  # else one output, written whole or removed: nothing to say
            _note_unconfirmed(exc, list(unconfirmed), total - skipped)
        raise
    finally:
        report.end(report.body if not ok else body, ok)
    return LoadResult(rows=rows, body_bytes=body, wire_bytes=wire,
                      seconds=time.perf_counter() - start, source=source, target=where,
                      compress=compress, skipped_rows=skipped, workers=len(shares),
                      retries=counters.get("retries", 0), overloaded=counters.get("overloaded", 0),
                      confirmed=_merged(run["confirmed"]))


def _merged(units: list[_Unit]) -> list[tuple[str, int, int]]:
    """``units`` as ``(file, first row, stop row)`` ranges, in file order, adjacent ones
    merged."""
    ranges: list[tuple[str, int, int]] = []
    order = {path: i for i, path in enumerate(dict.fromkeys(u.path for u in units))}
    for unit in sorted(units, key=lambda u: (order[u.path], u.first_row)):
        if ranges and ranges[-1][0] == unit.path and ranges[-1][2] == unit.first_row:
            ranges[-1] = (unit.path, ranges[-1][1], unit.first_row + unit.rows)
        else:
            ranges.append((unit.path, unit.first_row, unit.first_row + unit.rows))
    return ranges


def _note_unconfirmed(exc: BaseException, units: list[_Unit], rows: int) -> None:
    """Says on ``exc`` which rows no request confirmed: ``exc.unconfirmed``, a list of
    ``(file, first row, stop row)`` (adjacent units merged), and a note listing them."""
    ranges = _merged(units)
    missing = sum(stop - first for _, first, stop in ranges)
    listed = ", ".join(f"{name!r} rows {first}-{stop - 1}" for name, first, stop in ranges[:5])
    more = f", and {len(ranges) - 5} more ranges" if len(ranges) > 5 else ""
    _mark_unconfirmed(exc, ranges, f"not confirmed by the server: {missing:,} of the {rows:,} "
                                  f"rows this load was to send" +
                     (f" ({listed}{more})" if ranges else ""))


def _send_stream(job: _Job, reader: Any, files: list[str] | None, take: Any,
                 report: _Report, rejects: Any = None,
                 counters: dict | None = None) -> tuple[int, int, int]:
    """Arrow data, or a file's rows at ``take``: one request, in this process."""
    plan = job.encode.plan
    if take is not None:
        batches, total, idx = _taken_batches(files[0], plan, job.batch_rows, take)
        report.total = total
        if report.bar is not None:
            report.bar.total = total
        source = files[0]
    else:
        batches, idx, source = _reader_batches(reader, plan, job.batch_rows), None, "Arrow data"
    pool = (ThreadPoolExecutor(job.threads, thread_name_prefix="bulkwire-encode")
            if job.threads > 1 else None)
    stored = 0  # rows of the batches the target confirmed

    def on_batch(rows: int, added: int) -> None:
        nonlocal stored
        stored += rows
        report(rows, added)

    try:
        target = job.open()
        try:
            rows = _one_request(target, _encoded_in_order(batches, job.encode, source, plan,
                                                          pool, job.threads, idx, 0, rejects),
                                pool, on_batch, None, rejects, job.limit)
        finally:
            _count_session(counters, target)
    except Exception as exc:
        if idx is not None and job.target.units:
            _note_take_unconfirmed(exc, source, idx, stored)
        raise
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
    return rows, target.body_bytes, target.wire_bytes


def _note_take_unconfirmed(exc: BaseException, source: str, idx: Any, stored: int) -> None:
    """Says on ``exc`` (a failed load of ``take``'s rows of ``source``) which rows were
    confirmed and which were not, as the file's rows with their places in ``take``: those of
    the batches confirmed (the first ``stored``) and those of the failed batch the server
    acknowledged, then the rest; ``exc.unconfirmed`` lists the rows not confirmed as
    ``(file, first row, stop row)``. A run's error names its rows as the file's
    (``errors._name_source_rows``)."""
    positions = getattr(exc, "_source_positions", None)
    missing = set(range(stored, len(idx)))
    if positions is not None:
        _name_source_rows(exc, positions[0], positions[1], take=idx)
        # the failed batch's rows not named were acknowledged; those after it never sent
        batch_stop = getattr(exc, "_batch_stop", stored)
        missing = set(positions[1]) | set(range(batch_stop, len(idx)))
    confirmed = [p for p in range(len(idx)) if p not in missing]
    ranges: list[tuple[str, int, int]] = []
    for p in sorted(missing):
        row = int(idx[p])
        if ranges and ranges[-1][2] == row:
            ranges[-1] = (source, ranges[-1][1], row + 1)
        else:
            ranges.append((source, row, row + 1))

    def rows_of(places: list[int]) -> str:
        listed = ", ".join(f"{int(idx[p])} (take[{p}])" for p in places[:8])
        return f"{len(places):,}" + (f": {listed}{', ...' if len(places) > 8 else ''}"
                                     if places else "")

    _mark_unconfirmed(exc, ranges, f"of the {len(idx):,} rows taken from {source!r}, confirmed "
                                   f"by the server {rows_of(confirmed)}; not confirmed "
                                   f"{rows_of(sorted(missing))}")


def load_arrow(data: Any, target: TargetDescription | None = None, *,
               options: LoadOptions | None = None, progress: Any = False,
               threads: int | None = None, **fields: Any) -> LoadResult:
    """Load Arrow data (a ``pyarrow.Table``, a ``RecordBatch``, a ``RecordBatchReader``, an
    iterable of RecordBatches, a ``pyarrow.dataset`` or any object with
    ``__arrow_c_stream__``) into ``target`` (a description of :mod:`bulkwire.targets`) with
    ONE session (for RavenDB, one bulk insert request) from this process, and return what it
    did. The ids come from the id column, so a task that is retried repeats the same PUTs.
    ``options``, ``progress``, ``threads`` and the pipeline's options (``columns``,
    ``vector_column``, ``batch_rows``) are :func:`load_parquet`'s. This is the sink for one
    partition of a distributed engine.

    >>> import pyarrow as pa
    >>> from bulkwire import targets
    >>> from bulkwire.testing import LoopbackServer
    >>> table = pa.table({"id": [1, 2], "v": pa.array([[0.5], [1.0]], pa.list_(pa.float32()))})
    >>> with LoopbackServer() as server:
    ...     load_arrow(table, targets.ravendb(server.url, server.database)).rows
    2
    """
    # old option names renamed here, so that their warning points at this call's caller
    fields = renamed_keywords(RENAMED_OPTIONS, "", fields)
    _check_arrow_data(data, fields)
    for name in ("workers", "resume", "take"):
        fields.pop(name, None)
    return _load(data, target, options, None, progress, 1, threads, None, fields,
                 "load_arrow", 4)


def _check_arrow_data(data: Any, options: Mapping[str, Any]) -> None:
    """A load_arrow's arguments: Arrow data (not a path), without the options of files
    (``workers``, ``resume``, ``take``): the data is read once, by this process."""
    if _as_reader_kind(data) == "path":
        raise TypeError(f"data must be Arrow data, not a path ({type(data).__name__}): use "
                        f"load_parquet for files")
    for name in ("workers", "resume", "take"):
        if options.get(name) not in (None, 1):
            raise ValueError(f"{name} is load_parquet's: load_arrow sends one request")


def _as_reader_kind(data: Any) -> str:
    return "path" if isinstance(data, (str, bytes, os.PathLike, list, tuple)) else "data"
