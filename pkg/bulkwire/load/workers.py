"""Worker processes: each sends a disjoint share of the units through :func:`_send` and
reports its batches, confirmations and outcome to the parent through a pipe of its own; the
parent stops them all at the first failure (:func:`_run_workers`)."""
from __future__ import annotations

import os
import time
from typing import Any, Callable

from ..errors import _add_note, LoadError
from .datasets import _Unit
from .pipeline import _Job, _send, _Stopped


class _StopFlag:
    """The parent's request to stop, a byte of shared memory that the parent sets and the
    workers read, without a lock: a worker killed while reading it leaves nothing held. (A
    ``multiprocessing.Event`` takes a lock shared with every worker to read its flag; a
    worker killed holding it made the parent's ``set()`` wait forever.)"""

    def __init__(self, context: Any) -> None:
        self._flag = context.RawValue("b", 0)

    def set(self) -> None:
        self._flag.value = 1

    def is_set(self) -> bool:
        return self._flag.value != 0


class _StopOrOrphaned:
    """Set when the parent asks to stop, or has died (killed: no one would ever ask)."""

    def __init__(self, stop: Any, parent: int) -> None:
        self.stop = stop
        self.parent = parent

    def is_set(self) -> bool:
        return self.stop.is_set() or os.getppid() != self.parent


def _worker_main(job: _Job, units: list[_Unit], worker: int, messages: Any, stop: Any,
                 parent: int) -> None:
    """A worker process: sends its units and reports to the parent through ``messages``, the
    write end of a pipe of its own: ("started", worker) first, ("batch", worker, rows, body),
    ("confirmed", worker, unit), ("counters", worker, what its sessions counted), then
    ("done", worker, rows, body, wire) or ("error", worker, pickled error or None, text). A
    parent that is gone ends the worker at its next message (a broken pipe) or batch
    (:class:`_StopOrOrphaned`). With rejected rows (``job.rejects``), the worker writes them
    to a log of its own and says how many before each batch's message: ("rejected", worker,
    rows)."""
    import pickle
    import signal

    # Ctrl-C reaches the whole process group: the parent alone decides, and stops the workers
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    rejects = None
    try:
        messages.send(("started", worker))  # the process came up and imported what it needs

        def tell_rejected() -> None:
            if rejects is not None:
                n = rejects.take_unreported()
                if n:
                    messages.send(("rejected", worker, n))

        def on_batch(n: int, added: int) -> None:
            tell_rejected()
            messages.send(("batch", worker, n, added))

        def on_confirmed(unit: _Unit) -> None:
            tell_rejected()
            messages.send(("confirmed", worker, unit))

        counters: dict = {}
        try:
            if job.rejects is not None:
                from .rejects import _Rejects

                rejects = _Rejects(job.rejects, f"w{worker}")
            try:
                rows, body, wire = _send(job, units, on_batch, on_confirmed,
                                         _StopOrOrphaned(stop, parent), rejects, counters)
            finally:
                messages.send(("counters", worker, counters))
            tell_rejected()
        except _Stopped:
            messages.send(("stopped", worker))
        except BaseException as exc:  # noqa: BLE001 - the parent raises it
            try:
                pickled = pickle.dumps(exc)
                pickle.loads(pickled)
            except Exception:  # noqa: BLE001 - sent as text
                pickled = None
            tell_rejected()
            messages.send(("error", worker, pickled, f"{type(exc).__name__}: {exc}"))
        else:
            messages.send(("done", worker, rows, body, wire))
    except OSError:  # the parent is gone: no one to tell
        pass
    finally:
        if rejects is not None:
            rejects.close()
        messages.close()


#: Why a worker dies before its first message, most of the time.
_DIED_STARTING = (
    " while starting, before it ran any of the load: a worker process starts by importing the "
    "main script, so a script that loads with workers must put its work under "
    "'if __name__ == \"__main__\":' (without it, each worker would start the load again; "
    "its own error is above, on standard error)")


def _share(units: list[_Unit], workers: int) -> list[list[_Unit]]:
    """Disjoint sets of units, about the same rows each (each unit to the least loaded)."""
    shares: list[list[_Unit]] = [[] for _ in range(workers)]
    loads = [0] * workers
    for unit in sorted(units, key=lambda u: -u.rows):
        least = loads.index(min(loads))
        shares[least].append(unit)
        loads[least] += unit.rows
    order = {unit: position for position, unit in enumerate(units)}
    return [sorted(share, key=order.__getitem__) for share in shares if share]


def _run_workers(job: _Job, shares: list[list[_Unit]], on_batch: Callable[[int, int], None],
                 on_confirmed: Callable[[_Unit], None],
                 on_rejected: Callable[[int], None] | None = None,
                 counters: dict | None = None) -> tuple[int, int, int]:
    """Runs one spawned process per share; (rows, body, wire) once all succeeded. The first
    failure (or Ctrl-C, or a worker that dies) stops the others and raises. What the
    workers' sessions counted is added into ``counters``.

    Each worker writes to a pipe of its own, and the parent waits on all of them at once: a
    worker that dies (killed, crashed) closes its pipe, which the parent sees at once, even
    while the other workers keep it busy with their messages. No lock is shared with the
    workers, the stop request included (:class:`_StopFlag`): one killed while holding it
    could block the others and the parent. A message cut short by a kill is an end of file,
    not a wait. A worker that died, or sent no error, raises the target's
    :attr:`~bulkwire.load.interface.DescriptionDefaults.load_error` (a :class:`LoadError`)."""
    import multiprocessing
    import multiprocessing.connection

    failed = getattr(job.target, "load_error", LoadError)
    import pickle

    context = multiprocessing.get_context("spawn")  # no fork after threads
    stop = _StopFlag(context)
    pipes = [context.Pipe(duplex=False) for _ in shares]  # (parent's end, worker's end)
    processes = [context.Process(target=_worker_main,
                                 args=(job, share, i, pipes[i][1], stop, os.getpid()),
                                 name=f"bulkwire-load-{i}", daemon=True)
                 for i, share in enumerate(shares)]
    readers = {reader: i for i, (reader, _) in enumerate(pipes)}
    finished: dict[int, tuple[int, int, int]] = {}
    started: set[int] = set()
    try:
        for process, (_, writer) in zip(processes, pipes):
            process.start()
            writer.close()  # the worker holds its end now: its pipe ends when it does
        while len(finished) < len(processes):
            for reader in multiprocessing.connection.wait(list(readers)):
                worker = readers[reader]
                try:
                    message = reader.recv()
                except (EOFError, OSError):  # the worker is gone (a message cut short too)
                    del readers[reader]
                    if worker in finished:
                        continue
                    processes[worker].join(timeout=1)
                    raise failed(
                        f"load worker {worker} (files {_files_of(shares[worker])}) died with "
                        f"exit code {processes[worker].exitcode}"
                        f"{'' if worker in started else _DIED_STARTING}") from None
                kind = message[0]
                if kind == "started":
                    started.add(worker)
                elif kind == "batch":
                    on_batch(message[2], message[3])
                elif kind == "confirmed":
                    on_confirmed(message[2])
                elif kind == "rejected" and on_rejected is not None:
                    on_rejected(message[2])
                elif kind == "counters":
                    if counters is not None:
                        for name, value in message[2].items():
                            counters[name] = counters.get(name, 0) + value
                elif kind == "done":
                    finished[worker] = message[2:]
                elif kind == "error":
                    pickled, text = message[2], message[3]
                    error = pickle.loads(pickled) if pickled is not None else None
                    if not isinstance(error, BaseException):
                        error = failed(f"load worker {worker} "
                                       f"(files {_files_of(shares[worker])}): {text}")
                    else:
                        _add_note(error, f"in load worker {worker}, sending "
                                        f"{_files_of(shares[worker])}")
                    raise error
                elif kind == "stopped":  # only after the parent asked: a failure is on its way
                    finished.setdefault(worker, (0, 0, 0))
    except BaseException:
        _stop_workers(processes, stop)
        raise
    finally:
        for process in processes:
            process.join(timeout=1)
        for reader, writer in pipes:
            reader.close()
            writer.close()
    return tuple(sum(values) for values in zip(*finished.values()))  # type: ignore[return-value]


def _files_of(units: list[_Unit]) -> str:
    return ", ".join(dict.fromkeys(repr(u.path) for u in units))


def _stop_workers(processes: list, stop: Any) -> None:
    """Asks the workers to stop (each aborts its operation on the server at its next batch),
    and ends those still running after 0.3 s (one blocked on a slow server's full queue):
    all are gone well within a second."""
    stop.set()
    deadline = time.monotonic() + 0.3
    for process in processes:
        process.join(timeout=max(0.0, deadline - time.monotonic()))
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=0.3)
        if process.is_alive():
            process.kill()
            process.join()
