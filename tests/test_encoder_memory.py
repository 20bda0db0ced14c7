"""Reference and memory leaks: repeated calls, success and error paths alike."""
from __future__ import annotations

import datetime
import sys

import numpy as np
import pytest

import bulkwire
from _leaks import assert_no_growth, growth, ignoring


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


CALLS = {
    "dumps_entity": lambda: bulkwire.dumps([Thing(), Thing()]),
    "encoder": lambda: bulkwire.Encoder(float32="shortest").encode({"v": np.ones(64, "f4")}),
    "to_builtins": lambda: bulkwire.to_builtins(Thing()),
    "cycle_error": ignoring(lambda: bulkwire.dumps(_cyclic()), ValueError),
    "hook_error": ignoring(lambda: bulkwire.dumps({"x": [Broken()]}), RuntimeError),
    "key_error": ignoring(lambda: bulkwire.dumps({"ok": 1, (1,): 2}), TypeError),
    "unsupported": ignoring(lambda: bulkwire.dumps([1, {"b": b"x"}]), TypeError),
    "custom_hook": lambda: bulkwire.dumps([1j] * 10, default=lambda o: [o.real, o.imag]),
}

_TOO_DEEP = None


def _too_deep():
    global _TOO_DEEP
    if _TOO_DEEP is None:
        _TOO_DEEP = _deep(bulkwire.MAX_DEPTH + 1)
    return _TOO_DEEP


CALLS["deep_error"] = ignoring(lambda: bulkwire.dumps(_too_deep()), RecursionError)


def _deep(n):
    v = []
    for _ in range(n):
        v = [v]
    return v


@pytest.mark.parametrize("name", sorted(CALLS))
def test_no_memory_growth(name):
    assert_no_growth(CALLS[name], name)


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
    python, heap = growth(lambda: bulkwire.dumps(big), calls=5, rounds=2)
    assert python < 1024
    assert heap is None or heap < 64 * 1024  # the 800 KB output is freed each time
