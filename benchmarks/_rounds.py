"""Interleaved timing for benchmarks on a shared, noisy machine: every round runs each
contender once, in an order that rotates from round to round, so that drift in the machine's
load lands on all of them alike; a contender's figure against a baseline is the median of its
per-round ratios, never a ratio of separately taken medians."""
from __future__ import annotations

import os
import statistics
import time
from typing import Callable, Iterator, Mapping


def load_average() -> str:
    """The 1-minute load average as text (``?`` where the OS does not report it)."""
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "?"


def rotation(names: list[str], rounds: int) -> Iterator[tuple[int, str]]:
    """(round, contender) in the order contenders run: round r starts with contender r mod n
    and goes on in ``names``' order, so that no contender always runs first or last."""
    for round_index in range(rounds):
        start = round_index % len(names)
        for name in names[start:] + names[:start]:
            yield round_index, name


def interleaved_seconds(contenders: Mapping[str, Callable[[], object]], rounds: int,
                        warmup: bool = True) -> dict[str, list[float]]:
    """Wall seconds of each contender in each round: round r starts with contender r mod n and
    goes on in the mapping's order. With ``warmup``, every contender runs once untimed first."""
    names = list(contenders)
    if warmup:
        for name in names:
            contenders[name]()
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for _, name in rotation(names, rounds):
        began = time.perf_counter()
        contenders[name]()
        seconds[name].append(time.perf_counter() - began)
    return seconds


def median_ratio(numerators: list[float], denominators: list[float]) -> float:
    """The median of the per-round ratios numerator/denominator (rounds paired by index)."""
    if len(numerators) != len(denominators) or not numerators:
        raise ValueError("ratios need the same, non-zero number of rounds on both sides")
    return statistics.median(n / d for n, d in zip(numerators, denominators))
