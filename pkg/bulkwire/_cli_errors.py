"""The command line's exit codes and its errors in its own words: an error of the Python API
naming an argument says the option that sets it (:func:`in_cli_words`), printed on stderr
(:func:`_fail`); SIGTERM stops a command as Ctrl-C does (:func:`_sigterm_stops`).
"""
from __future__ import annotations

import ast
import contextlib
import re
import signal
import sys
from typing import Iterator


#: Exit codes of ``bulkwire load`` and ``bulkwire sample``.
EXIT_OK, EXIT_INPUT, EXIT_USAGE, EXIT_SERVER, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
#: the load completed, with rows rejected (written to --rejected)
EXIT_REJECTED = 4
#: ``bulkwire load`` and ``bulkwire sample`` stopped by SIGTERM (128 + 15, as a shell says it).
EXIT_TERMINATED = 143


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C would be: the same clean-up runs on the way out."""


@contextlib.contextmanager
def _sigterm_stops() -> Iterator[None]:
    """While the block runs (in the main thread), SIGTERM raises :class:`_Terminated` instead
    of ending the process at once, which would leave a partial output file, an operation
    running on the server and worker processes behind."""
    import threading

    def stop(signum: int, frame: object) -> None:
        raise _Terminated

    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach the main thread only
        return
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)



#: The option of each argument of the Python API that an option of the command line sets
#: (``compress`` is ``--gzip`` or ``--zstd``, by its value: :func:`_option`).
OPTIONS = {"url": "--url", "database": "--database", "certificate": "--certificate",
           "ca": "--ca", "out": "--out", "collection": "--collection",
           "id_column": "--id-column", "id_prefix": "--id-prefix",
           "vector_column": "--vector-column", "columns": "--columns",
           "batch_rows": "--batch-rows", "take": "--take", "float32": "--float32",
           "workers": "--workers", "threads": "--threads", "resume": "--resume",
           "rows": "--rows", "dim": "--dim", "seed": "--seed", "row_group_rows": "--row-group",
           "id_start": "--id-start", "consistency": "--consistency", "constants": "--set",
           "ttl": "--ttl", "timestamp": "--timestamp", "ttl_column": "--ttl-column",
           "timestamp_column": "--timestamp-column", "nulls": "--nulls",
           "max_errors": "--max-errors", "rejected": "--rejected", "dry_run": "--dry-run",
           "max_rows_per_second": "--max-rate", "max_bytes_per_second": "--max-bytes-rate",
           "report": "--report"}

#: An error of the Python API that begins by naming its argument: ``compress='zstd': ...``,
#: ``columns[2] is ...``, ``batch_rows must be ...``, ``take needs ...``, ``database is required ...``.
_ARGUMENT_FIRST = re.compile(r"^(?P<name>[a-z_0-9]+)(?:=(?P<value>'[^']*'|\"[^\"]*\"|[^\s:]+)"
                             r"|(?P<index>\[\d+\]))?(?=:| must | needs | is )")


def _option(name: str, value: str | None) -> str:
    """How the command line says ``name=value`` of the Python API (``value`` its repr, or
    None): ``--zstd`` for ``compress='zstd'``, ``--id-column x`` for ``id_column='x'``."""
    try:
        given = None if value is None else ast.literal_eval(value)
    except (ValueError, SyntaxError):
        given = value
    if name == "compress":  # --gzip and --zstd are the two encodings' own flags
        if given in ("gzip", "zstd"):
            return f"--{given}"
        return f"--compress {given}" if isinstance(given, str) else "--gzip"
    if value is None:
        return OPTIONS[name]
    return f"{OPTIONS[name]} {given}"


def in_cli_words(message: str) -> str:
    """``message`` (an error of the Python API) naming the command line's option where it
    names the Python argument that option sets; as it is otherwise.

    >>> in_cli_words("compress='zstd': bulkwire was built without libzstd")
    '--zstd: bulkwire was built without libzstd'
    >>> in_cli_words("batch_rows must be positive, got 0")
    '--batch-rows must be positive, got 0'
    """
    message = _arguments_inside(message)
    found = _ARGUMENT_FIRST.match(message)
    if found is None or (found["name"] not in OPTIONS and found["name"] != "compress"):
        return message
    option = _option(found["name"], found["value"])
    if found["index"]:  # columns[2]: the third name given to --columns
        option = f"{option} (name {int(found['index'][1:-1]) + 1})"
    return option + message[found.end():]


#: An argument named without a value inside a message: ``(leave it out with columns=)``.
_ARGUMENT_INSIDE = re.compile(r"(?<![\w.-])(?P<name>[a-z_0-9]+)=(?=$|[\s),.;])")


def _arguments_inside(message: str) -> str:
    """``message`` with each argument it names inside (``columns=``) as its option."""
    return _ARGUMENT_INSIDE.sub(
        lambda m: OPTIONS.get(m["name"], m[0]) if m["name"] != "compress" else m[0], message)


def _fail(message: str, code: int = EXIT_INPUT, error: BaseException | None = None) -> int:
    """Prints ``message`` (and the notes of ``error``: which worker, which rows were not
    confirmed) on stderr, naming the command line's options where the Python API's errors
    name its arguments (:func:`in_cli_words`); returns ``code``."""
    message = in_cli_words(message)
    print(f"bulkwire: error: {message}", file=sys.stderr)
    for note in getattr(error, "__notes__", None) or ():
        print(f"  {note}", file=sys.stderr)
    return code
