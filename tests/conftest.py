import os
import signal

import pytest

from hypothesis import HealthCheck, settings

# The sanitizer run in CI is ~10x slower: it asks for fewer examples.
settings.register_profile("default", max_examples=int(os.environ.get("BULKWIRE_HYPOTHESIS_EXAMPLES", "300")),
                          deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("default")



@pytest.fixture(autouse=True, scope="session")
def ctrl_c_raises_keyboard_interrupt():
    """The Ctrl-C tests simulate it with ``_thread.interrupt_main()``, which does nothing when
    SIGINT is ignored, as it is for a job a non-interactive shell started with ``&``: the
    blocked call would then wait forever. Make SIGINT raise KeyboardInterrupt for the run."""
    previous = signal.getsignal(signal.SIGINT)
    if previous is not signal.default_int_handler:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    if previous is not signal.default_int_handler and previous is not None:
        signal.signal(signal.SIGINT, previous)
