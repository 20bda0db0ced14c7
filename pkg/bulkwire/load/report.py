"""The run report of a load (``report=`` / ``--report FILE.json``): what the load did, in
JSON, written whether it completed or failed, and the one-line summary made from the same
data (:func:`summary_line`).

The report holds every field of :class:`~bulkwire.load.LoadResult` (read generically, so a
field added there appears here), the rate, the options of the load, the target without its
credentials, bulkwire's version and build, and, for a load that failed, its error and the
rows no session confirmed. It is written to a temporary file next to its path and renamed
over it: a reader sees the previous report or the new one, never half of one.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import tempfile
from typing import Any

#: The version of the report's layout.
REPORT_FORMAT = 1

#: ``user:password@`` in a URL.
_USERINFO = re.compile(r"(?<=://)[^/@\s]*@")


def check_writable(path: str) -> None:
    """Raises ``ValueError`` naming ``path`` when a report cannot be written there (its
    directory missing or not writable, or a directory in its place): said before anything
    is read or sent, not after the load."""
    folder = os.path.dirname(os.path.abspath(path))
    why = None
    if os.path.isdir(path):
        why = "it is a directory"
    elif not os.path.isdir(folder):
        why = f"its directory {folder!r} does not exist"
    else:
        try:
            fd, probe = tempfile.mkstemp(prefix=".bulkwire-report-", dir=folder)
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            why = exc.strerror or str(exc)
        if why is None and os.path.exists(path) and not os.access(path, os.W_OK):
            why = "the file is not writable"
    if why is not None:
        raise ValueError(f"report {path!r} cannot be written: {why}")


def _scrubbed(text: str) -> str:
    """``text`` without the user and password of the URLs it holds."""
    return _USERINFO.sub("", text)


def _plain(value: Any) -> Any:
    """``value`` as JSON takes it (tuples as lists, paths as text, others by ``repr``)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return repr(value)


def target_facts(target: Any) -> dict:
    """The target of a load without its credentials: its kind, its description, and what a
    resume state binds to (which never holds a credential)."""
    facts = {"kind": getattr(type(target), "kind", None) or type(target).__name__,
             "description": _scrubbed(target.describe())}
    identity = getattr(target, "resume_identity", None)
    if callable(identity):
        try:
            facts["identity"] = _plain(identity())
        except Exception:  # noqa: BLE001 - a target placed nowhere yet: the description says it
            pass
    return facts


def options_facts(options: Any, **more: Any) -> dict:
    """The load's options (its :class:`~bulkwire.LoadOptions`, and ``more``), as JSON."""
    facts = {f.name: _plain(getattr(options, f.name)) for f in dataclasses.fields(options)}
    facts.update({name: _plain(value) for name, value in more.items()})
    return facts


def build_facts() -> dict:
    """bulkwire's version and what its build has (what ``bulkwire --version`` prints)."""
    from .._version import __version__
    from ..config import build_config

    try:
        config = dataclasses.asdict(build_config())
    except Exception as exc:  # noqa: BLE001 - the report is still worth writing
        config = {"error": f"{type(exc).__name__}: {exc}"}
    return {"version": __version__, "build": config}


def result_facts(result: Any) -> dict:
    """Every field of a :class:`~bulkwire.load.LoadResult`, and its rates."""
    facts = {f.name: _plain(getattr(result, f.name)) for f in dataclasses.fields(result)}
    facts["rows_per_second"] = _finite(result.rows_per_second)
    facts["mb_per_second"] = _finite(result.mb_per_second)
    return facts


def _finite(value: float) -> float | None:
    return value if value == value and value not in (float("inf"), float("-inf")) else None


def write_report(path: str, data: dict) -> None:
    """Writes ``data`` as JSON to ``path``: a temporary file in its directory, renamed over
    it once complete."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(prefix=".bulkwire-report-", suffix=".json", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out, indent=2, sort_keys=False)
            out.write("\n")
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def _ranges(ranges: list) -> str:
    listed = ", ".join(f"{name!r} rows {first}-{stop - 1}" for name, first, stop in ranges[:5])
    return listed + (f", and {len(ranges) - 5} more ranges" if len(ranges) > 5 else "")


def summary_line(facts: dict) -> str:
    """The summary of a load from its report's ``result`` (:func:`result_facts`): rows,
    bytes, time and rates, and whatever else happened (rows of an earlier run not sent
    again, answers sent again, rejected rows)."""
    compress = facts.get("compress")
    if compress:
        from ..compression import compress_encoding

        wire = f" ({facts['wire_bytes']:,} {compress_encoding(compress)})"
    else:
        wire = ""
    workers = facts.get("workers", 1)
    by = f" by {workers} worker processes" if workers > 1 else ""
    rate = facts.get("rows_per_second")
    mb = facts.get("mb_per_second")
    rejected = ""
    if facts.get("rejected_rows") or facts.get("rejected_path") is not None:
        where = (f", written to {facts['rejected_path']}"
                 if facts.get("rejected_path") is not None else "")
        rejected = f"; {facts.get('rejected_rows') or 0:,} rows rejected{where}"
    if facts.get("dry_run"):
        return (f"dry run: checked {facts['rows']:,} good rows from {facts['source']} for "
                f"{facts['target']}{by} in {facts['seconds']:.2f} s, nothing sent or "
                f"written{rejected}")
    line = (f"loaded {facts['rows']:,} rows from {facts['source']} into {facts['target']}{by}: "
            f"{facts['body_bytes']:,} bytes{wire} in {facts['seconds']:.2f} s, "
            f"{rate if rate is not None else float('inf'):,.0f} rows/s, "
            f"{mb if mb is not None else float('inf'):,.1f} MB/s")
    if facts.get("skipped_rows"):
        line += (f"; {facts['skipped_rows']:,} rows confirmed by an earlier run were not "
                 f"sent again")
    if facts.get("retries"):
        overloaded = facts.get("overloaded") or 0
        line += (f"; {facts['retries']:,} requests sent again"
                 + (f" ({overloaded:,} after an overloaded answer)" if overloaded else ""))
    line += rejected
    if facts.get("unconfirmed"):
        line += f"; not confirmed: {_ranges(facts['unconfirmed'])}"
    return line
