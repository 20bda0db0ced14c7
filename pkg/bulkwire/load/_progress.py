"""A load's progress: the running totals of every worker's batches, drawn as a one-line bar
on stderr or handed to the caller's callable.
"""
from __future__ import annotations

import sys
import time
from typing import Callable


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
