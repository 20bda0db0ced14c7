"""The entry points :func:`load_parquet` and :func:`load_arrow`: the arguments judged before
anything is read or sent, the target they are given (or, from the former spellings, the one
their arguments name: :func:`_target_of`, through the registry :mod:`bulkwire.targets`), the
parts composed (plan, sources, target, resume state, workers), progress reported, and the
:class:`LoadResult`. A load knows its target only through
:class:`~bulkwire.load.interface.TargetDescription`."""
from __future__ import annotations

import os
import pickle
import time
from typing import Any, Callable, Mapping, cast

from .._arrow import PathLike, _pyarrow
from .datasets import _as_reader, _empty_batch, _check_schemas, _dataset_files, _file_footer
from . import mapping
from .interface import ResumableTarget, TargetDescription
from .resume import _ResumeState
from .pipeline import _default_batch_rows, _Job
from .rates import RateLimit, capped_batch_rows
from .report import check_writable
from .._deprecated import renamed_keywords, warn_deprecated
from ..load_options import RENAMED_OPTIONS, LoadOptions

# the load's rooms: its result, its progress, its sending half; their names kept here
from ._result import LoadResult, _partial_result, _write_report
from ._sending import _load_rejecting, _load_units, _source_format_of

__all__ = ["LoadResult", "OLD_TARGET_ARGUMENTS", "load_arrow", "load_parquet"]

def _count(value: Any, name: str, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


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
