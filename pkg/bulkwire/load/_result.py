"""What a load did: :class:`LoadResult` (:func:`~bulkwire.load_parquet`'s and
:func:`~bulkwire.load_arrow`'s answer), that of a load that failed, the source rows
confirmed as ranges, and the run report written from it (:mod:`bulkwire.load.report`).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from ..load_options import LoadOptions
from .datasets import _Unit
from .report import (build_facts, options_facts, result_facts, summary_line, target_facts,
                     write_report)


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
