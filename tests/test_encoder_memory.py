"""Reference and memory leaks: repeated calls, success and error paths alike."""
from __future__ import annotations

import datetime
import gc
import sys
import tracemalloc

import numpy as np
import pytest

import bulkwire


class Thing:
    def __init__(self):
        self.name = "thing"
        self.when = datetime.datetime(2024, 1, 1)
        self.vec = np.arange(256, dtype=np.float32)
        self.floats = [float(i) for i in range(256)]
        self.keys = {1: "a", "1": "b", 2.5: [1, 2]}


class Broken:
    def to_json(self):
        raise RuntimeError("boom")


def _cyclic():
    d = {"a": [1, 2]}
    d["self"] = d
    return d


def growth(fn, rounds=3, calls=300):
    """Bytes allocated (and still held) per call after warm-up."""
    for _ in range(calls):
        fn()
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for _ in range(rounds * calls):
            fn()
        gc.collect()
        return (tracemalloc.get_traced_memory()[0] - base) / (rounds * calls)
    finally:
        tracemalloc.stop()


def call_ignoring(fn, *exc):
    def run():
        try:
            fn()
        except exc:
            pass
    return run


CALLS = {
    "dumps_entity": lambda: bulkwire.dumps([Thing(), Thing()]),
    "encoder": lambda: bulkwire.Encoder(float32="shortest").encode({"v": np.ones(64, "f4")}),
    "to_builtins": lambda: bulkwire.to_builtins(Thing()),
    "cycle_error": call_ignoring(lambda: bulkwire.dumps(_cyclic()), ValueError),
    "hook_error": call_ignoring(lambda: bulkwire.dumps({"x": [Broken()]}), RuntimeError),
    "key_error": call_ignoring(lambda: bulkwire.dumps({"ok": 1, (1,): 2}), TypeError),
    "unsupported": call_ignoring(lambda: bulkwire.dumps([1, {"b": b"x"}]), TypeError),
    "custom_hook": lambda: bulkwire.dumps([1j] * 10, default=lambda o: [o.real, o.imag]),
}

_TOO_DEEP = None


def _too_deep():
    global _TOO_DEEP
    if _TOO_DEEP is None:
        _TOO_DEEP = _deep(bulkwire.MAX_DEPTH + 1)
    return _TOO_DEEP


CALLS["deep_error"] = call_ignoring(lambda: bulkwire.dumps(_too_deep()), RecursionError)


def _deep(n):
    v = []
    for _ in range(n):
        v = [v]
    return v


@pytest.mark.parametrize("name", sorted(CALLS))
def test_no_memory_growth(name):
    assert growth(CALLS[name]) < 16, f"{name} keeps memory per call"


def test_input_refcounts_unchanged():
    vec = np.arange(16, dtype=np.float32)
    key = "the-key"
    value = [1.5, "s", vec]
    container = {key: value, 3: value}
    before = [sys.getrefcount(o) for o in (vec, key, value, container)]
    for _ in range(1000):
        bulkwire.dumps(container)
        with pytest.raises(TypeError):
            bulkwire.dumps([container, object()])
    after = [sys.getrefcount(o) for o in (vec, key, value, container)]
    assert before == after


def test_large_input_is_released():
    big = {"v": np.random.default_rng(0).random((50, 1024))}
    assert growth(lambda: bulkwire.dumps(big), rounds=2, calls=5) < 1024
