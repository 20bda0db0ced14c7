"""The C unit tests of the core (tests/c/), built without Python's headers and run here, so
that the suite's test command covers them. Under the sanitizer build (BULKWIRE_SANITIZER=1)
they are compiled with AddressSanitizer and UndefinedBehaviorSanitizer too."""
from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

RUNNER = pathlib.Path(__file__).resolve().parent / "c" / "run.py"
SANITIZER_FLAGS = "-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined"


def test_c_unit_tests_pass():
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)  # the compiler and the test binaries bring their own runtime
    if os.environ.get("BULKWIRE_SANITIZER") == "1":
        env.setdefault("BULKWIRE_C_TEST_FLAGS", SANITIZER_FLAGS)
    result = subprocess.run([sys.executable, str(RUNNER)], capture_output=True, text=True,
                            env=env, timeout=900)
    output = result.stdout + result.stderr
    summary = re.search(r"^(\d+) passed, (\d+) failed$", result.stdout, re.M)
    assert summary is not None, output
    passed, failed = int(summary.group(1)), int(summary.group(2))
    assert failed == 0 and result.returncode == 0, output
    # every test file built and ran: at least one test each
    assert passed >= len(list(RUNNER.parent.glob("test_*.c"))), output
