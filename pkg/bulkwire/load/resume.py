"""The resume state of a load: a JSON file recording, per source file, the row groups whose
request the server confirmed; judged whole before a resumed load trusts it, locked for the
load's life, rewritten atomically after each confirmation (:class:`_ResumeState`)."""
from __future__ import annotations

import json
import os
from typing import Any, Mapping, Sequence

from .datasets import _Unit
from .interface import ResumableTarget, _remove, _short


#: The resume state's format. Version 2 records the target (database and servers) and keeps
#: each file's confirmed row groups with the file; a state of version 1 is refused.
RESUME_VERSION = 2


class _Ranges:
    """Row groups as sorted, disjoint ranges ``[first, stop)`` (adjacent ones merged): the
    groups of one file that the server confirmed. Kept as ranges, never expanded, so its
    size follows the number of confirmations, not of row groups."""

    def __init__(self) -> None:
        self.firsts: list[int] = []
        self.stops: list[int] = []

    def add(self, first: int, stop: int) -> None:
        """Adds ``[first, stop)``, merged with the ranges it overlaps or touches."""
        import bisect

        low = bisect.bisect_left(self.stops, first)  # the first range ending at first or later
        high = bisect.bisect_right(self.firsts, stop)  # past the last starting at stop or before
        if low < high:
            first, stop = min(first, self.firsts[low]), max(stop, self.stops[high - 1])
        self.firsts[low:high] = [first]
        self.stops[low:high] = [stop]

    def __contains__(self, index: int) -> bool:
        import bisect

        at = bisect.bisect_right(self.firsts, index) - 1
        return at >= 0 and index < self.stops[at]

    def rows(self, sizes: Sequence[int]) -> int:
        """The rows of these groups, given every group's rows."""
        return sum(sum(sizes[first:stop]) for first, stop in zip(self.firsts, self.stops))

    def pairs(self) -> list[list[int]]:
        return [[first, stop] for first, stop in zip(self.firsts, self.stops)]


def _identity(path: str) -> dict:
    info = os.stat(path)
    return {"path": os.path.abspath(path), "size": info.st_size, "mtime_ns": info.st_mtime_ns}


def _is_int(value: Any) -> bool:
    return type(value) is int  # a JSON integer: not a bool, not a float


def _checked_state(path: str, state: Any, target: ResumableTarget,
                   options: Mapping[str, Any],
                   sources: Mapping[str, tuple[str, dict, list[int]]]) -> dict[str, _Ranges]:
    """The one judge of a resume state read from ``path``: its whole shape (the type of
    every member, every range well formed and within its file's row groups; the recorded
    target as ``target``'s kind judges it), then whether it belongs to this load (target,
    options, files unchanged). Returns each file's confirmed ranges (by absolute path);
    anything else raises :class:`ResumeStateError` naming the state file and what is wrong.
    Work and memory follow the state's size."""
    from ..errors import ResumeStateError

    def refuse(what: str) -> ResumeStateError:
        return ResumeStateError(f"resume state {path!r} {what}", path)

    members = ("version", "target", "options", "sources")
    if not isinstance(state, dict):
        raise refuse(f"is not a bulkwire resume state (a JSON object with "
                     f"{', '.join(members)}), but a JSON {type(state).__name__}")
    version = state.get("version")
    if version == 1 and _is_int(version):
        raise refuse("was written by an earlier bulkwire (version 1, which does not record the "
                     "database and servers it loaded into): start over with a new state file")
    if not (_is_int(version) and version == RESUME_VERSION):
        raise refuse(f"is not a bulkwire resume state of version {RESUME_VERSION} "
                     f"(its version: {_short(version)})")
    for name in members:
        if name not in state:
            raise refuse(f"has no {name!r}")
    for name in state:
        if name not in members:
            raise refuse(f"has an unknown member {_short(name)}")

    try:
        recorded = target.checked_identity(state["target"])
    except ValueError as exc:
        raise refuse(str(exc)) from None
    if recorded != target.resume_identity():
        raise refuse(target.identity_mismatch(recorded))

    if not isinstance(state["options"], dict):
        raise refuse(f"options are {_short(state['options'])}, not an object")
    if state["options"] != options:
        differ = [name for name in sorted(set(options) | set(state["options"]))
                  if state["options"].get(name, ...) != options.get(name, ...)]
        said = "; ".join(f"{name}: {_short(state['options'].get(name, '(none)'))} then, "
                         f"{_short(options.get(name, '(none)'))} now" for name in differ[:3])
        more = f"; and {len(differ) - 3} more" if len(differ) > 3 else ""
        raise refuse(f"was written by a load with other options ({said}{more}): start over "
                     f"with a new state file")

    if not isinstance(state["sources"], list):
        raise refuse(f"sources are {_short(state['sources'])}, not a list")
    found: dict[str, _Ranges] = {}
    for at, source in enumerate(state["sources"]):
        where = f"sources[{at}]"
        if not (isinstance(source, dict) and set(source) == {"path", "size", "mtime_ns", "done"}):
            raise refuse(f"{where} is {_short(source)}, not an object of path, size, mtime_ns "
                         f"and done")
        name, size, mtime, done = (source[k] for k in ("path", "size", "mtime_ns", "done"))
        if not isinstance(name, str) or not _is_int(size) or size < 0 or not _is_int(mtime) \
                or not isinstance(done, list):
            raise refuse(f"{where} is {_short(source)}: path must be a str, size and mtime_ns "
                         f"integers, done a list")
        if name in found:
            raise refuse(f"records {_short(name)} twice")
        if name not in sources:
            raise refuse(f"records {_short(name)}, which is not part of this load's dataset")
        given, identity, groups = sources[name]
        if {"path": name, "size": size, "mtime_ns": mtime} != identity:
            raise ResumeStateError(f"{given!r} changed since resume state {path!r} recorded it "
                                   f"(size or modification time): start over with a new state "
                                   f"file", path)
        ranges = found[name] = _Ranges()
        previous = 0
        for number, pair in enumerate(done):
            if not (isinstance(pair, list) and len(pair) == 2 and all(map(_is_int, pair))
                    and previous <= pair[0] < pair[1] <= len(groups)):
                raise refuse(f"{where}.done[{number}] is {_short(pair)}, not a range "
                             f"[first, stop) of the {len(groups)} row groups of {given!r} "
                             f"(0 <= first < stop <= {len(groups)}, after the range before it)")
            ranges.add(pair[0], pair[1])
            previous = pair[1]
    missing = [given for name, (given, _, _) in sources.items() if name not in found]
    if missing:
        raise refuse(f"does not record {missing[0]!r} of this load's dataset (it was written "
                     f"for a dataset of {len(found)} files, this one has {len(sources)})")
    return found


def _state_size_limit(sources: Mapping[str, tuple[str, dict, list[int]]],
                      options: Mapping[str, Any]) -> int:
    """More bytes than any state of this dataset takes, however it is indented: a file that
    is larger is refused without being read whole."""
    per_source = sum(256 + 12 * len(name) + 64 * len(groups)
                     for name, (_, _, groups) in sources.items())
    return (1 << 20) + 8 * len(json.dumps(options)) + 4 * per_source


def _lock_state(path: str) -> int:
    """An exclusive ``flock`` on ``<path>.lock``, held (by the descriptor returned) for the
    whole load: a second load given the same state file is refused, naming it, instead of
    interleaving its writes with the first one's. (The lock file stays: removing it could
    let a third load lock a file the second one no longer sees.)"""
    import fcntl

    from ..errors import ResumeStateError

    lock = path + ".lock"
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as exc:
        raise OSError(exc.errno, f"cannot lock resume state {path!r}: {exc.strerror}",
                      lock) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ResumeStateError(f"resume state {path!r} is in use by another load (it holds "
                               f"{lock!r}): wait for that load to end, or give this one its "
                               f"own state file", path) from None
    except OSError as exc:
        os.close(fd)
        raise OSError(exc.errno, f"cannot lock resume state {path!r}: {exc.strerror}",
                      lock) from None
    return fd


class _ResumeState:
    """The units of work the server confirmed, in a JSON file rewritten atomically (a
    temporary file, fsync, rename, fsync of the folder) after each confirmation, so a run
    killed at any moment leaves either the old or the new state, never a torn one. The
    state belongs to one target (its resume identity: for RavenDB the database and
    servers), one set of options and one set of files; it is locked for the load's whole
    life (:meth:`close` unlocks it)."""

    def __init__(self, path: str, files: list[str], groups: list[list[int]],
                 options: dict, target: ResumableTarget) -> None:
        self.path = path
        self.options = options
        self.target = target
        self.target_identity = target.resume_identity()
        # absolute path -> (the user's path, identity, rows of each row group), in file order
        self.sources: dict[str, tuple[str, dict, list[int]]] = {}
        for name, sizes in zip(files, groups):
            identity = _identity(name)
            self.sources.setdefault(identity["path"], (name, identity, sizes))
        self.done: dict[str, _Ranges] = {name: _Ranges() for name in self.sources}
        self._lock: int | None = _lock_state(path)
        try:
            self.resumed = os.path.exists(path)
            if self.resumed:
                self.done = _checked_state(path, self._load(), target, options, self.sources)
            self._write()  # a run that dies before its first confirmation is a re-run too
        except BaseException:
            self.close()
            raise

    def _load(self) -> Any:
        from ..errors import ResumeStateError

        limit = _state_size_limit(self.sources, self.options)
        try:
            with open(self.path, "rb") as f:
                data = f.read(limit + 1)
        except OSError as exc:
            raise ResumeStateError(f"resume state {self.path!r} cannot be read: "
                                   f"{exc.strerror or exc}", self.path) from None
        if len(data) > limit:
            raise ResumeStateError(f"resume state {self.path!r} is larger than any state of "
                                   f"this dataset ({limit:,} bytes at most)", self.path)
        try:
            return json.loads(data.decode("utf-8"))
        except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, too deep, too long
            raise ResumeStateError(f"resume state {self.path!r} cannot be read: it is not "
                                   f"JSON ({_short(str(exc), 200)})", self.path) from None

    def ranges(self, path: str) -> _Ranges:
        """The confirmed row groups of ``path`` (a file of the load)."""
        return self.done[os.path.abspath(path)]

    def skipped_rows(self) -> int:
        return sum(self.done[name].rows(sizes) for name, (_, _, sizes) in self.sources.items())

    def confirm(self, unit: _Unit) -> None:
        """Records ``unit`` (its request was answered 2xx). Raises OSError, naming the state
        file, when it cannot be written: the load then fails (the state on disk stays the
        previous one, and a re-run sends the unit again)."""
        self.ranges(unit.path).add(unit.first, unit.stop)
        self._write()

    def _write(self) -> None:
        state = {"version": RESUME_VERSION, "target": self.target_identity,
                 "options": self.options,
                 "sources": [{**identity, "done": self.done[name].pairs()}
                             for name, (_, identity, _) in self.sources.items()]}
        text = json.dumps(state, indent=1)
        temporary = f"{self.path}.{os.getpid()}.tmp"
        try:
            try:
                with open(temporary, "w", encoding="utf-8") as f:
                    f.write(text)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(temporary, self.path)
            except BaseException:  # every failure leaves the previous state, and no temporary
                _remove(temporary)
                raise
            folder = os.open(os.path.dirname(os.path.abspath(self.path)), os.O_RDONLY)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)
        except OSError as exc:
            message = (f"cannot write resume state {self.path!r} ({exc.strerror or exc}): the "
                       f"load stops; a run with this state again sends what it does not record")
            raise (OSError(exc.errno, message) if exc.errno is not None
                   else OSError(message)) from None

    def close(self) -> None:
        """Unlocks the state file (once)."""
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def __enter__(self) -> "_ResumeState":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
