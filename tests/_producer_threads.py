"""A writer's producer thread as the tests press on it: Ctrl-C while it waits on its full
queue, and calls of its producer methods made from another thread."""
from __future__ import annotations

import _thread
import threading
import time


def interrupt_when_queue_waits(writer, timeout: float = 20.0) -> threading.Thread:
    """Starts (and returns) a thread that presses Ctrl-C in the main thread
    (``_thread.interrupt_main``) once a put on ``writer``'s queue found it full, or after
    ``timeout`` seconds."""
    def interrupt():
        deadline = time.monotonic() + timeout
        while not writer._queue.waits and time.monotonic() < deadline:
            time.sleep(0.01)
        _thread.interrupt_main()

    thread = threading.Thread(target=interrupt)
    thread.start()
    return thread


def refused_on_another_thread(calls) -> list[str]:
    """Each of ``calls`` made in turn on a thread other than the caller's: the messages of
    the ``RuntimeError`` each raised (one that raised nothing adds none)."""
    refused: list[str] = []

    def other():
        for call in calls:
            try:
                call()
            except RuntimeError as exc:
                refused.append(str(exc))

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    return refused
