"""The interleaving that the benchmark scripts time with, and the scripts that use it still
running (tiny sizes; nothing here is timed)."""
import os
import subprocess
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
sys.path.insert(0, BENCH)

from _rounds import interleaved_seconds, median_ratio  # noqa: E402


def test_the_order_rotates_round_by_round():
    calls = []
    contenders = {name: (lambda name=name: calls.append(name)) for name in "abc"}
    seconds = interleaved_seconds(contenders, rounds=4, warmup=False)
    assert calls == list("abc" "bca" "cab" "abc")
    assert {name: len(times) for name, times in seconds.items()} == {"a": 4, "b": 4, "c": 4}


def test_the_warm_up_runs_each_once_untimed():
    calls = []
    seconds = interleaved_seconds({"a": lambda: calls.append("a")}, rounds=2)
    assert calls == ["a"] * 3 and len(seconds["a"]) == 2


def test_the_ratio_is_the_median_of_per_round_ratios():
    # Medians of each side would give 2/2 = 1; the rounds' own ratios are 4, 1/4 and 4.
    assert median_ratio([4.0, 1.0, 8.0], [1.0, 4.0, 2.0]) == 4.0
    with pytest.raises(ValueError):
        median_ratio([1.0], [1.0, 2.0])
    with pytest.raises(ValueError):
        median_ratio([], [])


def run_script(name, *args):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    done = subprocess.run([sys.executable, os.path.join(BENCH, name), *args], cwd=BENCH, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_bench_float_text_checks_the_text_and_runs():
    out = run_script("bench_float_text.py", "--n", "2000", "--runs", "2")
    assert "2 interleaved rounds" in out
    cases = [line for line in out.splitlines() if " ns " in line]
    assert len(cases) == 5 and all(line.rstrip().endswith("x") or "n/a" in line for line in cases)


def test_bench_tls_runs():
    out = run_script("bench_tls.py", "--docs", "30", "--dim", "8", "--rounds", "2", "--modes", "plain")
    rows = [line.split() for line in out.splitlines() if line.startswith("plain ")]
    assert [row[1] for row in rows] == ["http", "tls", "tls-ssl_context"]
    assert rows[0][3] == "1.00x"
