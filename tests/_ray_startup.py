"""Ray's one known environmental failure, shared by the tests that start Ray.

``ray.init`` waits a fixed 30 s for its raylet to register with the GCS; on a loaded
machine (the sanitizer suite, a CI run beside other work) that wait can pass once, and
``ray.init`` raises "The current node timed out during startup". A test that starts Ray
tries again once when that is what it raised, and fails on anything else.
"""
from __future__ import annotations

STARTUP_TIMED_OUT = "timed out during startup"


def startup_timed_out(text: str) -> bool:
    """Whether an error message or a script's stderr is Ray's startup timeout."""
    return STARTUP_TIMED_OUT in text


def init(ray, **options) -> None:
    """``ray.init(**options)``, tried again once after Ray's startup timeout."""
    try:
        ray.init(**options)
    except Exception as exc:  # noqa: BLE001 - Ray raises a bare Exception for it
        if not startup_timed_out(str(exc)):
            raise
        ray.shutdown()
        ray.init(**options)
