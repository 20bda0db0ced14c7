"""Threads kept for the next job: :class:`KeptThreads` runs each job on a thread that waits,
a while, for another one once it is done, instead of a thread started for the job and ended
after it.

A bulk insert sends its body on a thread of its own. Starting a thread and joining it costs
about 60-100 µs of CPU here (the kernel's clone and exit, the thread's stack mapped and
unmapped, ``threading.Thread``'s own objects), a tenth of what a small insert costs in all;
handing a job to a waiting thread costs about a tenth of that. The threads are daemon threads
(a process never waits for an idle one to exit), and one idle for :attr:`KeptThreads.idle_seconds`
ends. A forked child starts with none: its parent's threads do not exist in it.
"""
from __future__ import annotations

import os
import threading
from typing import Callable, List, Optional


class KeptThreads:
    """Threads named ``name`` that run jobs one at a time each and are kept, idle, for the
    next job, for ``idle_seconds`` at most.

    >>> threads = KeptThreads("example")
    >>> done = threading.Event()
    >>> threads.run(done.set)
    >>> done.wait(5)
    True
    """

    def __init__(self, name: str, idle_seconds: float = 30.0,
                 hold: Optional[Callable[[], None]] = None,
                 release: Optional[Callable[[], None]] = None) -> None:
        self.name = name
        self.idle_seconds = idle_seconds
        #: called on each thread as it starts, and ``release`` as it ends: what a thread
        #: keeps for the next job while it lives (the sender's: the buffer pool)
        self.hold = hold
        self.release = release
        self._lock = threading.Lock()
        self._idle: List[_KeptThread] = []
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._forget_all)

    def run(self, job: Callable[[], None]) -> None:
        """Runs ``job()`` on an idle thread, or on a new one (``RuntimeError`` when none can
        be started, as ``threading.Thread.start`` raises). ``job`` should catch what it
        raises: an exception that leaves it ends its thread, reported as an uncaught
        exception of a thread is."""
        with self._lock:  # the hand-over, whole, under the lock the waiting thread decides by
            kept = self._idle.pop() if self._idle else None
            if kept is not None:
                kept.give(job)
        if kept is None:
            _KeptThread(self, job)

    def idle(self) -> int:
        """How many threads wait for a job now."""
        with self._lock:
            return len(self._idle)

    def _park(self, kept: "_KeptThread") -> None:
        with self._lock:
            self._idle.append(kept)

    def _forget_all(self) -> None:
        """In a forked child: the parent's threads, idle or busy, are not there."""
        self._lock = threading.Lock()
        self._idle = []


class _KeptThread:
    """One thread of :class:`KeptThreads`, started with its first job."""

    def __init__(self, threads: KeptThreads, job: Callable[[], None]) -> None:
        self._threads = threads
        self._job: Optional[Callable[[], None]] = job
        self._wake = threading.Lock()
        self._wake.acquire()  # released by give(): a job is there
        threading.Thread(target=self._loop, name=threads.name, daemon=True).start()

    def give(self, job: Callable[[], None]) -> None:
        """Wakes the thread, taken out of the idle threads, with ``job``: called under the
        threads' lock, by which the thread tells a job given whole (set, then woken) from
        a hand-over that an exception (Ctrl-C) cut short."""
        self._job = job
        self._wake.release()

    def _loop(self) -> None:
        threads = self._threads
        if threads.hold is not None:
            threads.hold()
        try:
            job, self._job = self._job, None
            while job is not None:
                job()  # what it raises ends this thread (it was not parked: nobody gives it work)
                del job  # nothing of the job is kept while the thread waits
                threads._park(self)
                job = self._next_job()
        finally:
            if threads.release is not None:
                threads.release()

    def _next_job(self) -> Optional[Callable[[], None]]:
        """The job given to this parked thread, or None when it is to end: none came for
        ``idle_seconds`` (it leaves the idle threads), or a ``run()`` took it out of them
        and was interrupted before it woke it (a job set without the wake is not run:
        that ``run()`` raised). Never waits longer than ``idle_seconds``."""
        threads = self._threads
        woken = self._wake.acquire(timeout=threads.idle_seconds)
        with threads._lock:
            if not woken:  # woken as the wait ended?
                woken = self._wake.acquire(blocking=False)
            job, self._job = self._job, None
            if woken:
                return job
            if self in threads._idle:
                threads._idle.remove(self)
            return None
