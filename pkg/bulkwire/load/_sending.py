"""The sending half of a load, once its arguments are judged: files as units of work (by this
process or by worker processes, each confirmed unit recorded for resume), Arrow data or
``take``'s rows in one request, refused rows set aside; what no request confirmed named on
the error.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..errors import _mark_unconfirmed, _name_source_rows
from ..load_options import LoadOptions
from ._progress import _Report
from ._result import LoadResult, _merged
from .datasets import RESUME_UNIT_ROWS, _reader_batches, _taken_batches, _Unit, _units
from .pipeline import _count_session, _encoded_in_order, _Job, _one_request, _send
from .resume import _ResumeState
from .workers import _run_workers, _share


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
