"""The sessions a streaming query's tasks keep in their worker process, into a CQL table, from
one micro-batch to the next (closed when idle too long, at the process's exit, and left to
the parent in a forked child).
"""
from __future__ import annotations

import atexit
import os
import threading
import time
from typing import Any

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
