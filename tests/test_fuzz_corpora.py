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


_BOOM = ("def test_one_input(data):\n"
         "    if data:\n"
         "        raise AssertionError('boom in the target')\n")


def _run_runner(tmp_path, targets: dict, *args: str):
    """Copies the runner beside the given targets (name -> source) and runs it with ``args``
    and an artifacts folder in ``tmp_path``: (the finished process, its stdout)."""
    pytest.importorskip("atheris")  # the runner fuzzes with it (test-all, not the test extra)
    import shutil
    import subprocess
    shutil.copy(FUZZ / "run.py", tmp_path / "run.py")
    for name, source in targets.items():
        (tmp_path / f"fuzz_{name}.py").write_text(source)
    proc = subprocess.run([sys.executable, str(tmp_path / "run.py"), *args,
                           "--artifacts", str(tmp_path / "artifacts")],
                          capture_output=True, text=True, timeout=300)
    return proc, proc.stdout


def _assert_the_input_is_printed(tmp_path, out: str) -> None:
    crash = next((tmp_path / "artifacts").glob("boom-*"))
    assert crash.read_bytes()
    assert f"input {crash.name}: {crash.read_bytes().hex()}" in out


def test_runner_reports_a_failing_input(tmp_path):
    """The runner's verdict can fail: a target that breaks on any non-empty input is caught,
    and the input is printed so the log alone reproduces it."""
    proc, out = _run_runner(tmp_path, {"boom": _BOOM}, "boom", "--seconds", "5")
    assert proc.returncode == 1, out + proc.stderr
    assert "fuzz boom: FAILED" in out
    _assert_the_input_is_printed(tmp_path, out)


_MEETS_THE_OTHER = """
import pathlib, time
HERE = pathlib.Path(__file__).parent
(HERE / "{me}.started").touch()
deadline = time.monotonic() + 60
while not (HERE / "{other}.started").exists():
    if time.monotonic() > deadline:
        raise AssertionError("{other} did not start while {me} ran")
    time.sleep(0.05)

def test_one_input(data):
    pass
"""


def test_jobs_fuzz_targets_at_once_and_a_failure_still_prints_its_output_and_input(tmp_path):
    """--jobs 2: two targets that each wait, at import, for the other to have started pass
    only when they run at the same time; a third that fails on any input is reported with its
    own output (its traceback) and its input, while the others still report their verdicts."""
    targets = {"left": _MEETS_THE_OTHER.format(me="left", other="right"),
               "right": _MEETS_THE_OTHER.format(me="right", other="left"), "boom": _BOOM}
    proc, out = _run_runner(tmp_path, targets, "left", "right", "boom", "--seconds", "3",
                            "--jobs", "2")
    assert proc.returncode == 1, out + proc.stderr
    assert "fuzz left: ok" in out and "fuzz right: ok" in out, out + proc.stderr
    assert "fuzz boom: FAILED" in out and "boom in the target" in out
    _assert_the_input_is_printed(tmp_path, out)
    assert "fuzz: 1 target(s) failed: boom" in out
