"""A child forked while this process holds a lock, as another thread of it would."""
from __future__ import annotations

import os
import time
from typing import Any, Callable, Union


def forked_child_exit_code(lock_owner: Any, name: str, calls: Callable[[], None],
                           limit: float = 30.0) -> Union[int, str]:
    """Forks while this process holds ``lock_owner.<name>``, runs ``calls`` in the child and
    returns the child's exit code (0: ``calls`` returned), or ``"hung"`` when the child did
    not end within ``limit`` seconds (it is then killed)."""
    lock = getattr(lock_owner, name)
    lock.acquire()
    try:
        pid = os.fork()
        if pid == 0:  # the child: no pytest, no output, only the exit status
            try:
                calls()
                os._exit(0)
            except BaseException:  # noqa: BLE001
                os._exit(1)
    finally:
        lock.release()
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return "hung"
