"""The C unit tests of the core (tests/c/), built without Python's headers and run here, so
that the suite's test command covers them. Under the sanitizer build (BULKWIRE_SANITIZER=1)
they are compiled with AddressSanitizer and UndefinedBehaviorSanitizer too. A test file that
needs an optional library whose headers are missing is skipped (the test reports a skip);
under BULKWIRE_REQUIRE_EXTRAS=1 the runner fails instead."""
from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

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
    # every test file built and ran (at least one test each), but those skipped for an
    # optional library's missing headers, which are reported as a skip, never as a pass
    skipped = re.findall(r"^SKIP (test_\w+\.c): (.*)$", result.stdout, re.M)
    assert passed >= len(list(RUNNER.parent.glob("test_*.c"))) - len(skipped), output
    if skipped:
        pytest.skip("C unit tests not built here: " + "; ".join(f"{name} ({why})" for name, why in skipped))


def test_a_file_needing_missing_headers_is_skipped_or_fails_when_extras_are_required(tmp_path):
    """A test file whose ``requires:`` headers do not build here is skipped with the header
    named, and counted as neither passed nor failed; under BULKWIRE_REQUIRE_EXTRAS=1 it fails."""
    folder = tmp_path / "tests" / "c"
    folder.mkdir(parents=True)
    for name in ("run.py", "check.h"):
        (folder / name).write_bytes((RUNNER.parent / name).read_bytes())
    (folder / "test_needs.c").write_text(
        "/* sources:\n   requires: bulkwire_no_such_header.h */\n#include \"check.h\"\n"
        "TEST(runs) { CHECK(1); }\nRUN_TESTS(runs)\n")
    (folder / "test_plain.c").write_text(
        "/* sources: */\n#include \"check.h\"\nTEST(runs) { CHECK(1); }\nRUN_TESTS(runs)\n")
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "BULKWIRE_REQUIRE_EXTRAS")}
    env["BULKWIRE_C_TEST_FLAGS"] = "-O0"
    relaxed = subprocess.run([sys.executable, str(folder / "run.py")], capture_output=True,
                             text=True, env=env, timeout=300)
    assert relaxed.returncode == 0, relaxed.stdout + relaxed.stderr
    assert "SKIP test_needs.c: <bulkwire_no_such_header.h> not found" in relaxed.stdout
    assert relaxed.stdout.splitlines()[-2:] == ["1 passed, 0 failed", "1 files skipped"]
    strict = subprocess.run([sys.executable, str(folder / "run.py")], capture_output=True,
                            text=True, env={**env, "BULKWIRE_REQUIRE_EXTRAS": "1"}, timeout=300)
    assert strict.returncode == 1, strict.stdout + strict.stderr
    assert "FAIL test_needs.c: <bulkwire_no_such_header.h> not found" in strict.stdout
    assert strict.stdout.splitlines()[-1] == "1 passed, 1 failed"
