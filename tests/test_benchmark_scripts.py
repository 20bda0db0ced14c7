"""The benchmark scripts the docs quote still run (tiny sizes; nothing here is timed)."""
import os
import subprocess
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def run_script(name: str, *args: str) -> str:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    done = subprocess.run([sys.executable, os.path.join(BENCH, name), *args], cwd=BENCH, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("mode", [[], ["--drop-outputs"]])
def test_bench_encode_runs(mode):
    out = run_script("bench_encode.py", "--docs", "20", "--runs", "1", *mode)
    assert ("outputs dropped as made" if mode else "heap trimmed before each timed call") in out
    rows = [line.split() for line in out.splitlines() if line.split()[:1] in (["1024"], ["384"])]
    assert [(r[0], r[1]) for r in rows] == [("1024", "list"), ("1024", "ndarray"),
                                            ("384", "list"), ("384", "ndarray")]
    for r in rows:  # rates, then the ratios (vs rt, vs json, vs orjson when installed)
        assert float(r[2].replace(",", "")) > 0 and r[6].endswith("x") and float(r[6][:-1]) > 0


def test_bench_output_faults_runs():
    out = run_script("bench_output_faults.py", "--docs", "20", "--runs", "1", "--dim", "8")
    labels = [line.split()[0] for line in out.splitlines() if "faults/doc" in line]
    assert labels == ["kept", "dropped"]
