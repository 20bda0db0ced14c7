"""The Cassandra harness (tests/servers/cassandra) leaves no JVM behind: not when its owner is
interrupted, not when its owner is killed outright, not when the JVM cannot start."""
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import pytest

from servers.cassandra import sweep_stale

pytestmark = pytest.mark.cassandra_server

ROOT = pathlib.Path(__file__).resolve().parent.parent
START = float(os.environ.get("BULKWIRE_CASSANDRA_START_TIMEOUT", "240"))


def start_by_hand(*args: str) -> tuple[subprocess.Popen, int, pathlib.Path]:
    """``python -m tests.servers.cassandra ARGS``, read until its node is ready; returns the
    process, the JVM's pid and the node's folder."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.servers.cassandra", *args], cwd=ROOT,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + START + 60
    seen = []
    for line in proc.stdout:
        seen.append(line)
        found = re.match(r"node \S+ \(pid (\d+)\): .* files (.+)$", line.strip())
        if found:
            return proc, int(found.group(1)), pathlib.Path(found.group(2))
        assert time.monotonic() < deadline, "".join(seen)
    proc.wait()
    pytest.fail(f"the node did not start (exit {proc.returncode}):\n{''.join(seen)}")


def gone(pid: int, within: float) -> bool:
    """Whether process ``pid`` has ended (and been reaped) within ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = pathlib.Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":
            return True
        time.sleep(0.2)
    return False


def test_ctrl_c_stops_the_node_and_removes_its_files():
    proc, jvm, folder = start_by_hand()
    try:
        assert folder.is_dir()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 128 + signal.SIGINT
        assert gone(jvm, 5)
        assert not folder.exists()
    finally:
        if proc.poll() is None:
            proc.kill()
        with pytest.raises(ProcessLookupError):
            os.kill(jvm, signal.SIGKILL)


def test_the_node_dies_with_its_owner_killed_outright():
    """SIGKILL runs no cleanup in the owner: the kernel's parent-death signal ends the JVM,
    and the next start removes the folder the owner left."""
    proc, jvm, folder = start_by_hand()
    proc.kill()
    proc.wait(10)
    try:
        assert gone(jvm, 10)
    finally:
        if not gone(jvm, 0):
            os.kill(jvm, signal.SIGKILL)
    assert folder.is_dir()
    assert folder.parent in sweep_stale()
    assert not folder.parent.exists()


def test_a_node_that_cannot_start_is_an_error_naming_it_with_its_log():
    done = subprocess.run([sys.executable, "-m", "tests.servers.cassandra", "--heap", "1X"],
                          cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=START)
    assert done.returncode != 0
    assert "Cassandra node 127.0.0.1 exited with" in done.stderr
    assert "Invalid initial heap size" in done.stderr  # the JVM's own words, from the log
