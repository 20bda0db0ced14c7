"""Shared by the benchmark scripts: timing with medians, and the round-trip oracle."""
from __future__ import annotations

import os
import statistics
import sys
import time
from typing import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))  # oracle.py: the reference round trip


def median_seconds(fn: Callable[[], object], runs: int) -> float:
    """Median wall time of `runs` calls of fn (one untimed warm-up call first)."""
    fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def print_command() -> None:
    print("command: python " + " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]))
