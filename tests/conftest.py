import os
import signal

import pytest

from hypothesis import HealthCheck, settings

from examples_budget import EXAMPLES

settings.register_profile("default", max_examples=EXAMPLES,
                          deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("default")


#: BULKWIRE_REQUIRE_EXTRAS=1 (CI, which installs every optional test dependency): a test file
#: that skips at import (``pytest.importorskip`` at module level) fails the collection, and a
#: test that ``pytest.importorskip`` skips fails, each naming the package. Without it both are
#: skips with their reason, which pytest's summary shows (``-ra``). tests/c/run.py reads the
#: same variable for the C tests of optional libraries.
REQUIRE_EXTRAS = os.environ.get("BULKWIRE_REQUIRE_EXTRAS") == "1"
REQUIRE_EXTRAS_HINT = ("but BULKWIRE_REQUIRE_EXTRAS=1 requires every optional test dependency "
                       "(pip install '.[test-all]')")


def _skip_reason(report: pytest.CollectReport | pytest.TestReport) -> str:
    """The reason of a skip report (its longrepr is (path, line, "Skipped: reason"))."""
    longrepr = report.longrepr
    reason = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return reason.removeprefix("Skipped: ")


def _raised_by_importorskip(excinfo: pytest.ExceptionInfo[BaseException] | None) -> bool:
    """Whether the skip came from pytest.importorskip (a package could not be imported)."""
    if excinfo is None or not excinfo.errisinstance(pytest.skip.Exception):
        return False
    tb = excinfo.tb
    while tb is not None:
        if tb.tb_frame.f_code is pytest.importorskip.__code__:
            return True
        tb = tb.tb_next
    return False


def pytest_report_header(config: pytest.Config) -> list[str]:
    """The run's header says what the build under test has (``bulkwire --version``)."""
    from bulkwire.config import config_lines

    return config_lines()


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    report = yield
    if REQUIRE_EXTRAS and report.skipped and isinstance(collector, pytest.Module):
        report.outcome = "failed"
        report.longrepr = (f"{collector.nodeid} skips at import ({_skip_reason(report)}), "
                           f"{REQUIRE_EXTRAS_HINT}")
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    report = yield
    if REQUIRE_EXTRAS and report.skipped and _raised_by_importorskip(call.excinfo):
        report.outcome = "failed"
        report.longrepr = f"{item.nodeid} skips ({_skip_reason(report)}), {REQUIRE_EXTRAS_HINT}"
    return report


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


def _check_the_installed_copy_is_tested() -> None:
    """BULKWIRE_TEST_INSTALLED=1 (CI's run on the installed wheel): the bulkwire under test
    must be the one installed into this Python's site-packages, not the checkout's pkg/
    (which a sys.path entry that pytest or PYTHONPATH added would find first)."""
    if os.environ.get("BULKWIRE_TEST_INSTALLED") != "1":
        return
    import sysconfig

    import bulkwire

    where = os.path.realpath(bulkwire.__file__)
    sites = {os.path.realpath(sysconfig.get_path(key)) for key in ("purelib", "platlib")}
    if not any(where.startswith(site + os.sep) for site in sites):
        raise pytest.UsageError(f"BULKWIRE_TEST_INSTALLED=1 but the bulkwire under test is "
                                f"{where}, not the copy installed in {' or '.join(sorted(sites))}")


def pytest_configure(config: pytest.Config) -> None:
    _check_the_installed_copy_is_tested()
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


# --- real Cassandra 5.0 (tests/servers/cassandra) -------------------------------------------
# The first fixture that starts a node fetches the jars (once per machine) and then moves this
# test process into a network namespace of its own with only loopback: from then on the
# session reaches nothing outside the machine's process tree, and the nodes nothing outside it.


@pytest.fixture(scope="session")
def cassandra_node():
    """One Cassandra 5.0 node on 127.0.0.1 for the whole session (``servers.cassandra.Node``).
    Stopped when the session ends; the harness's atexit hook and the kernel's parent-death
    signal stop it if the session dies first."""
    from servers.cassandra import running

    with running(1) as nodes:
        yield nodes[0]


@pytest.fixture(scope="module")
def cassandra_cluster():
    """Three Cassandra 5.0 nodes on 127.0.0.11, .12 and .13 (one cluster, .11 its seed), for
    the module that asks for them; they do not share addresses with ``cassandra_node``."""
    from servers.cassandra import running

    with running(3, first=11) as nodes:
        yield nodes
