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


#: Test markers for real database servers that a harness under tests/servers/ starts. Their tests
#: run only when asked for (``--server ravendb``, repeatable), because starting a server takes
#: seconds to minutes and fetches packages once per machine; otherwise they are deselected, and
#: pytest's summary counts them as deselected, never as passed.
REAL_SERVER_MARKERS = {"ravendb": "ravendb_server", "cassandra": "cassandra_server"}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--server", action="append", default=[], choices=sorted(REAL_SERVER_MARKERS),
                     help="also run the tests against this real server (started by the tests)")


def pytest_configure(config: pytest.Config) -> None:
    for kind, marker in REAL_SERVER_MARKERS.items():
        config.addinivalue_line("markers", f"{marker}: needs a real {kind} server (--server {kind})")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wanted = {REAL_SERVER_MARKERS[kind] for kind in config.getoption("--server")}
    keep, drop = [], []
    for item in items:
        markers = {m.name for m in item.iter_markers()} & set(REAL_SERVER_MARKERS.values())
        (drop if markers - wanted else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
