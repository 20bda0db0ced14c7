"""Rate limits of a load (``max_rows_per_second``, ``max_bytes_per_second``): one schedule
shared by every sender of the load, whatever process or thread it runs in.

The schedule is the generic cell rate algorithm: for rows and for bytes, a *theoretical
arrival time* (``tat``), the moment from which the units granted so far have all had their
time at the limit. A sender reserving ``k`` units starts at ``max(tat, now - CATCH_UP)``
and moves ``tat`` on by ``k / rate``; it waits until its start (rows, known before a batch
is sent) or until the new ``tat`` (bytes, known once the batch is encoded and sent). Senders
that fell behind catch up on at most :data:`CATCH_UP` seconds of the limit: idle time earns
no more credit than that, so a load never bursts far past its limit after a pause.

The two times live in a small file in shared memory (``/dev/shm`` where there is one),
mapped by every process of the load: worker processes are spawned, and open it by its name.
A reservation takes an exclusive ``flock`` on that file (released by the kernel if its
process dies) and a lock of the process (its threads share one open file), reads and writes
the two doubles, and lets go; the wait itself holds nothing. Times are ``time.monotonic()``,
one clock for every process of the machine. A load without a limit makes no limiter at all:
its batches pass one ``is None`` test each.

>>> limit = RateLimit.create(rows=1_000_000, bytes_=None)
>>> limit.reserve_rows(10)  # far below the limit: no wait
>>> limit.close()
"""
from __future__ import annotations

import mmap
import os
import struct
import tempfile
import threading
import time
from typing import Any

#: The shared record: rows' tat, bytes' tat (seconds of time.monotonic()).
_LAYOUT = struct.Struct("=dd")

#: How far behind the schedule senders may fall and still catch up (seconds): a batch that
#: took longer than its turn (a slow answer, a busy machine) is made up for by the next ones
#: going at once, so that the rate over a few seconds stays at the limit. It bounds the
#: burst too: at most this much of the limit goes above it, in any window.
CATCH_UP = 0.25

#: The longest a waiting sender sleeps before looking at its stop request again (seconds).
WAIT_SLICE = 0.05


def _shared_dir() -> str:
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) \
        else tempfile.gettempdir()


class RateLimit:
    """The shared schedule of one load's limits (either may be None: no limit there).
    Picklable: a worker process receives the file's name and maps it on first use."""

    def __init__(self, path: str, rows: float | None, bytes_: float | None) -> None:
        self.path = path
        self.rows = rows
        self.bytes = bytes_
        self._map: Any = None
        self._fd = -1
        self._lock = threading.Lock()
        self._owner = False

    @classmethod
    def create(cls, rows: float | None, bytes_: float | None) -> "RateLimit":
        """A new schedule, starting now (no credit to catch up on: the load's first seconds
        are held too); :meth:`close` removes its file."""
        fd, path = tempfile.mkstemp(prefix="bulkwire-rate-", dir=_shared_dir())
        try:
            now = time.monotonic()
            os.write(fd, _LAYOUT.pack(now, now))
        finally:
            os.close(fd)
        made = cls(path, rows, bytes_)
        made._owner = True
        return made

    def __getstate__(self) -> dict:
        return {"path": self.path, "rows": self.rows, "bytes": self.bytes}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["path"], state["rows"], state["bytes"])  # type: ignore[misc]

    def _mapped(self) -> Any:
        if self._map is None:
            self._fd = os.open(self.path, os.O_RDWR)
            self._map = mmap.mmap(self._fd, _LAYOUT.size)
        return self._map

    def _advance(self, rows: int, nbytes: int) -> tuple[float, float]:
        """Reserves ``rows`` and ``nbytes``: (the rows' start, the bytes' new tat)."""
        import fcntl

        with self._lock:
            shared = self._mapped()
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                now = time.monotonic()
                tat_rows, tat_bytes = _LAYOUT.unpack_from(shared, 0)
                start_rows = max(tat_rows, now - CATCH_UP)
                if rows and self.rows:
                    tat_rows = start_rows + rows / self.rows
                if nbytes and self.bytes:
                    tat_bytes = max(tat_bytes, now - CATCH_UP) + nbytes / self.bytes
                _LAYOUT.pack_into(shared, 0, tat_rows, tat_bytes)
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        return start_rows, tat_bytes

    def reserve_rows(self, rows: int, stop: Any = None) -> None:
        """Before sending ``rows`` rows: waits for their turn (none without a row limit)."""
        if self.rows:
            _wait_until(self._advance(rows, 0)[0], stop)

    def spent_bytes(self, nbytes: int, stop: Any = None) -> None:
        """After sending ``nbytes`` bytes: waits until they have had their time at the
        limit (none without a byte limit)."""
        if self.bytes and nbytes:
            _wait_until(self._advance(0, nbytes)[1], stop)

    def close(self) -> None:
        """Unmaps the schedule; its creator removes the file too."""
        if self._map is not None:
            self._map.close()
            os.close(self._fd)
            self._map, self._fd = None, -1
        if self._owner:
            self._owner = False
            try:
                os.unlink(self.path)
            except OSError:
                pass


def _wait_until(when: float, stop: Any) -> None:
    """Sleeps until ``when`` (time.monotonic()) in slices: the GIL is free meanwhile, Ctrl-C
    raises at once in the main thread, and ``stop`` (an object with ``is_set()``) is looked
    at between slices; once set, the wait ends and the sender's next check stops it."""
    while True:
        left = when - time.monotonic()
        if left <= 0 or (stop is not None and stop.is_set()):
            return
        time.sleep(min(left, WAIT_SLICE))


def capped_batch_rows(batch_rows: int, default_rows: int, rows: float | None,
                      bytes_: float | None) -> int:
    """Rows per batch under the limits: a batch is at most about a tenth of a second of the
    limit, so that the rate over any few seconds follows the schedule closely (the default
    batch is about 4 MiB of the target's requests: ``default_rows`` rows)."""
    cap = batch_rows
    if rows:
        cap = min(cap, max(1, int(rows / 10)))
    if bytes_:
        cap = min(cap, max(1, int(default_rows * bytes_ / 10 / (4 << 20))))
    return cap
