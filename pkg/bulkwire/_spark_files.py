"""A file target's writes under Spark's commit protocol: each task attempt writes its file
under a temporary name of its own (:func:`temporary_name`: hidden, in the final file's
folder, unique to the attempt); the driver's commit renames the files of the committed
attempts to their final names (:func:`commit_files`) and its abort removes them
(:func:`remove_temporaries`). A task's rejected file (``rejected``) takes the same way. A
task never gives a final name itself, so a job whose driver died leaves temporary names
only. Needs PySpark, as :mod:`bulkwire.spark` does.
"""
from __future__ import annotations

import os
import secrets
from typing import Any, List, Optional, Tuple, Union

from ._spark_results import TaskWritten
from .errors import LoadError
from .load.interface import _remove

#: What a temporary file's name holds after its final name, before the attempt's token.
ATTEMPT_MARK = ".attempt-"


def temporary_name(final: str, attempt: int) -> str:
    """The temporary name of the file a task's attempt (Spark's ``attemptNumber``) writes for
    ``final``: in the same folder (so that the commit's rename is atomic), hidden (a leading
    dot: Spark's and Hadoop's file readers, and ``part-*`` globs, skip it), the final name
    followed by :data:`ATTEMPT_MARK`, the attempt and a random token (two attempts running
    at once, or attempts of different jobs, never share one).

    >>> import re
    >>> name = temporary_name("out/part-00001.jsonl", 7)
    >>> bool(re.fullmatch(r"out/\\.part-00001\\.jsonl\\.attempt-7-[0-9a-f]{8}", name))
    True
    """
    folder, name = os.path.split(final)
    return os.path.join(folder, f".{name}{ATTEMPT_MARK}{attempt}-{secrets.token_hex(4)}")


def rejected_task(partition: int, batch_id: Optional[int]) -> Union[int, str]:
    """What a Spark task's rejected file is named after: its partition, and in a streaming
    query its micro-batch too.

    >>> rejected_task(3, None), rejected_task(3, 12)
    (3, '12-3')
    """
    return partition if batch_id is None else f"{batch_id}-{partition}"


#: one file of a commit message: (temporary name, final name, size, mtime_ns, what it is)
_File = Tuple[str, str, int, int, str]


def _files(message: Any) -> List[_File]:
    """The files ``message`` (a task's commit message, or None) asks the commit to rename:
    its output (a file target's) and its rejected file (with ``rejected``)."""
    if not isinstance(message, TaskWritten):
        return []
    files = []
    if message.temporary is not None and message.output is not None:
        files.append((message.temporary, message.output, message.size, message.mtime_ns,
                      "file"))
    if message.rejected_temporary is not None and message.rejected_output is not None:
        files.append((message.rejected_temporary, message.rejected_output,
                      message.rejected_size, message.rejected_mtime_ns, "rejected file"))
    return files


def commit_files(messages: List[Any], finals: List[str]) -> List[Any]:
    """The driver's commit of a job's (or micro-batch's) files, ``finals`` the final names of
    its partitions' files (:func:`sweep`'s; none for a server without rejected rows): each
    file a committed attempt wrote under its temporary name (its output, its rejected file)
    renamed to its final name (``os.replace``: a file of the same name, an earlier job's or
    a replayed micro-batch's, is replaced whole). Every temporary file is checked first, and
    none renamed unless all are there as their tasks left them (the size and modification
    time each task saw): else ``LoadError`` naming the file. A second message for the same
    partition (another attempt's file of the same rows) is not committed: its files are
    removed and it is left out of the messages returned, which the job's result sums. A
    rename that fails removes the files this commit renamed before raising. Then every
    other temporary file of those final names (attempts that ended without reaching the
    commit) is removed (:func:`sweep`). Returns ``messages`` without those left out.

    >>> commit_files([None], [])  # a failed task's message: nothing to rename
    [None]
    """
    first: dict = {}
    extra: List[TaskWritten] = []
    for message in messages:
        if _files(message):
            if message.partition in first:
                extra.append(message)
            else:
                first[message.partition] = message
    for message in first.values():
        for file in _files(message):
            _check(message, file)
    renamed: List[str] = []
    for message in first.values():
        for temporary, final, _, _, what in _files(message):
            try:
                os.replace(temporary, final)
            except OSError as exc:
                for done in renamed:
                    _remove(done)
                raise LoadError(f"the Spark commit could not rename partition "
                                f"{message.partition}'s {what} {temporary!r} to "
                                f"{final!r}: {exc.strerror or exc}") from exc
            renamed.append(final)
    remove_temporaries(extra, finals)
    return [m for m in messages if not any(m is e for e in extra)]


def remove_temporaries(messages: List[Any], finals: List[str]) -> None:
    """Removes the temporary files of each message that has them (its output, its rejected
    file), and every other temporary file of the final names ``finals`` (:func:`sweep`:
    the attempts whose messages did not arrive, a task that was still running when another
    failed). A file already gone is no error.

    >>> remove_temporaries([None], [])
    """
    for message in messages:
        for temporary, *_ in _files(message):
            _remove(temporary)
    sweep(finals)


def abort_files(messages: List[Any], finals: List[str]) -> List[str]:
    """The driver's abort: the outputs of the tasks that finished are removed (the job wrote
    nothing under a final name), while their rejected files are renamed to their final
    names, checked as the commit checks them (the rows those tasks refused are recorded, not
    dropped with the job); then every other temporary file of ``finals`` is removed.
    Returns the rejected files kept. A rejected file that cannot be kept is removed, and
    the abort goes on: the job has already failed, with its own error.

    >>> abort_files([None], [])
    []
    """
    kept: List[str] = []
    for message in messages:
        for temporary, final, size, mtime_ns, what in _files(message):
            if what == "rejected file":
                try:
                    _check(message, (temporary, final, size, mtime_ns, what))
                    os.replace(temporary, final)
                    kept.append(final)
                    continue
                except (LoadError, OSError):
                    pass
            _remove(temporary)
    sweep(finals)
    return kept


def sweep(finals: List[str]) -> None:
    """Removes every temporary file (:func:`temporary_name`, finished or still ``.partial``)
    of the final names ``finals``, one listing per folder. An attempt still writing when
    this runs can leave its file after it.

    >>> sweep([])
    """
    prefixes: dict = {}
    for final in finals:
        folder, name = os.path.split(final)
        prefixes.setdefault(folder, set()).add(f".{name}{ATTEMPT_MARK}")
    for folder, these in prefixes.items():
        try:
            names = os.listdir(folder or ".")
        except OSError:  # no folder: no file
            continue
        for name in names:
            if name.startswith(".") and ATTEMPT_MARK in name and \
                    name[:name.index(ATTEMPT_MARK) + len(ATTEMPT_MARK)] in these:
                _remove(os.path.join(folder, name))


def _check(message: TaskWritten, file: _File) -> None:
    """Raises ``LoadError`` naming ``file``, one of ``message``'s (:func:`_files`), unless
    it is there as its task left it."""
    temporary, final, size, mtime_ns, what = file
    where = (f"partition {message.partition}'s {what} {temporary!r} (attempt "
             f"{message.attempt}" + (f", micro-batch {message.batch_id}"
                                     if message.batch_id is not None else "") + ")")
    try:
        stat = os.stat(temporary)
    except OSError as exc:
        raise LoadError(f"the Spark commit cannot rename {where} to {final!r}: "
                        f"{exc.strerror or exc}") from exc
    if (stat.st_size, stat.st_mtime_ns) != (size, mtime_ns):
        raise LoadError(f"the Spark commit cannot rename {where} to {final!r}: it "
                        f"was changed after its task wrote it ({stat.st_size} bytes, "
                        f"modified at {stat.st_mtime_ns} ns; the task left {size} "
                        f"bytes, modified at {mtime_ns} ns)")
