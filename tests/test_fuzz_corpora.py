"""The fuzz targets' seed corpora, and a fixed set of random inputs, replayed in-process.

Every input a fuzzer found interesting once is checked in under fuzz/corpus/<name>/, so it
runs again in both CI builds (normal and sanitizers) without atheris. The random inputs add a
seeded, repeatable sample of what the fuzzer starts from.
"""
import importlib
import pathlib
import random
import sys

import pytest

FUZZ = pathlib.Path(__file__).resolve().parent.parent / "fuzz"
TARGETS = sorted(p.stem[len("fuzz_"):] for p in FUZZ.glob("fuzz_*.py"))
RANDOM_INPUTS = 150


def _target(name):
    if str(FUZZ) not in sys.path:
        sys.path.insert(0, str(FUZZ))
    return importlib.import_module(f"fuzz_{name}")


def _corpus(name):
    return sorted((FUZZ / "corpus" / name).glob("*"))


def test_every_target_has_a_seed_corpus():
    assert TARGETS, "no fuzz targets found"
    for name in TARGETS:
        assert _corpus(name), f"fuzz target {name} has no seeds in fuzz/corpus/{name}/"


@pytest.mark.parametrize("name", TARGETS)
def test_seed_corpus_replays(name):
    target = _target(name)
    for path in _corpus(name):
        try:
            target.test_one_input(path.read_bytes())
        except Exception as exc:  # name the input that failed
            raise AssertionError(f"fuzz/corpus/{name}/{path.name} fails: {exc!r}") from exc


@pytest.mark.parametrize("name", TARGETS)
def test_random_inputs_replay(name):
    target = _target(name)
    rng = random.Random(f"bulkwire-fuzz-{name}")
    for i in range(RANDOM_INPUTS):
        data = rng.randbytes(rng.choice((1, 4, 16, 64, 256, 1024)))
        try:
            target.test_one_input(data)
        except Exception as exc:
            raise AssertionError(f"random input {i} ({data.hex()}) fails: {exc!r}") from exc


def test_runner_lists_the_targets():
    import subprocess
    out = subprocess.run([sys.executable, str(FUZZ / "run.py"), "--list"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == TARGETS


def test_runner_reports_a_failing_input(tmp_path):
    """The runner's verdict can fail: a target that breaks on any non-empty input is caught,
    and the input is printed so the log alone reproduces it."""
    pytest.importorskip("atheris")  # the runner fuzzes with it (test-all, not the test extra)
    import shutil
    import subprocess
    shutil.copy(FUZZ / "run.py", tmp_path / "run.py")
    (tmp_path / "fuzz_boom.py").write_text(
        "def test_one_input(data):\n"
        "    if data:\n"
        "        raise AssertionError('boom')\n")
    artifacts = tmp_path / "artifacts"
    proc = subprocess.run([sys.executable, str(tmp_path / "run.py"), "boom", "--seconds", "5",
                           "--artifacts", str(artifacts)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "fuzz boom: FAILED" in proc.stdout
    crash = next(artifacts.glob("boom-*"))
    assert f"input {crash.name}: {crash.read_bytes().hex()}" in proc.stdout
    assert crash.read_bytes()
