"""Module-level locks that a forked child can take: a child forked while another thread of its
parent held such a lock would wait for it forever, since the thread that would release it
does not exist in the child. :func:`renew_in_child` gives the child a new lock."""
from __future__ import annotations

import os
import threading
from typing import Any, MutableMapping


def renew_in_child(namespace: MutableMapping[str, Any], name: str) -> None:
    """Makes a forked child replace ``namespace[name]`` (a module's ``globals()`` and the
    name of its lock) with a new lock. Where there is no fork, nothing to do."""
    def renew() -> None:
        namespace[name] = threading.Lock()

    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=renew)
