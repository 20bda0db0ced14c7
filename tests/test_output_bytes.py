"""Large dumps outputs grow one bytes object in place (no scratch buffer plus final copy):
the same bytes as the JSON round trip at every size around the switch, every error path
frees what it took, nested encodes keep their own output, and the fresh pages a large output
faults in stay far below one per output page where huge pages can be had."""
from __future__ import annotations

import ctypes
import json
import os
import random
import resource
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import bulkwire
from _leaks import assert_no_growth, ignoring

SWITCH = 1 << 20  # BW_OUT_BYTES_FROM: outputs past this move into their bytes result
from examples_budget import EXAMPLES  # noqa: E402


def usable_size(obj):
    """Bytes the C allocator holds for obj's block (glibc or the sanitizer's malloc_usable_size;
    None elsewhere, or for blocks pymalloc keeps)."""
    if sys.getsizeof(obj) <= 512:
        return None
    try:
        libc = ctypes.CDLL(None)
        fn = libc.malloc_usable_size
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_size_t
    fn.argtypes = [ctypes.c_void_p]
    return fn(id(obj))


def oracle(x) -> bytes:
    return json.dumps(json.loads(json.dumps(x))).encode()


def strings_of(total: int) -> list:
    """A list whose JSON text is exactly `total` bytes (total >= 2)."""
    if total < 8:
        return [1] if total == 3 else ["x" * (total - 4)] if total >= 4 else []
    # ["aaa", "aaa", ...]: each item is len + 2 quotes + 2 for ", " (the first has no ", ")
    items, size = [], 2
    while total - size > 40:
        items.append("a" * 30)
        size += 32 + (2 if len(items) > 1 else 0)
    rest = total - size - (2 if items else 0) - 2
    items.append("b" * rest)
    return items


@pytest.mark.parametrize("total", [SWITCH - 1, SWITCH, SWITCH + 1, 2 * SWITCH + 7,
                                   5 * SWITCH + 3])
def test_sizes_around_the_switch(total):
    value = strings_of(total)
    out = bulkwire.dumps(value)
    assert len(out) == total
    assert out == oracle(value)
    # the result is shrunk to its length: no doubled capacity kept alive (the block behind a
    # large bytes object is the C heap's: ask the allocator what it holds)
    assert sys.getsizeof(out) < total + 128
    held = usable_size(out)
    if held is not None:
        assert held < total + 8192, (held, total)


@settings(max_examples=max(5, EXAMPLES // 20), deadline=None)
@given(st.integers(SWITCH // 4, 3 * SWITCH), st.integers(0, 2**32))
def test_large_float_lists_match_the_round_trip(n_bytes, seed):
    rng = random.Random(seed)
    values = [rng.uniform(-1e6, 1e6) for _ in range(n_bytes // 20)]
    values += [{"k": rng.random(), "s": "é\n" * rng.randrange(40)} for _ in range(50)]
    assert bulkwire.dumps(values) == oracle(values)
    assert bulkwire.dumps(np.array(values[:1000])) == oracle(values[:1000])


class Boom:
    pass


def failing_late(size: int):
    """A document that fails after `size` bytes of output: the hook raises."""
    return ["z" * 1000] * (size // 1004) + [Boom()]


def raising_hook(obj):
    raise RuntimeError("no encoding for Boom")


@pytest.mark.parametrize("size", [SWITCH // 2, 3 * SWITCH])
def test_errors_after_output_free_it(size):
    doc = failing_late(size)
    with pytest.raises(RuntimeError, match="no encoding for Boom"):
        bulkwire.dumps(doc, default=raising_hook)
    # the buffer is usable again at once, small and large
    assert bulkwire.dumps({"a": 1}) == b'{"a": 1}'
    assert bulkwire.dumps(doc[:-1]) == oracle(doc[:-1])
    assert_no_growth(ignoring(lambda: bulkwire.dumps(doc, default=raising_hook), RuntimeError),
                     f"error after {size} bytes", calls=20, python_limit=256,
                     heap_limit=4096)


def test_large_outputs_do_not_leak():
    doc = strings_of(3 * SWITCH)
    assert_no_growth(lambda: bulkwire.dumps(doc), "3 MiB output", calls=20,
                     python_limit=256, heap_limit=4096)
    assert_no_growth(lambda: bulkwire.Encoder().encode(doc), "Encoder 3 MiB output", calls=20,
                     python_limit=256, heap_limit=4096)


def test_nested_large_encodes_keep_their_own_output():
    # a hook that encodes a large document while the outer large encode is under way: the
    # outer output keeps growing in its own bytes object
    inner_doc = strings_of(2 * SWITCH + 11)
    inner_out = []

    class Nested:
        pass

    def hook(obj):
        text = bulkwire.dumps(inner_doc)
        inner_out.append(text)
        return len(text)

    outer = strings_of(3 * SWITCH) + [Nested()] + ["tail" * 1000]
    out = bulkwire.dumps(outer, default=hook)
    assert inner_out[0] == oracle(inner_doc)
    assert out == oracle(outer[:-2] + [2 * SWITCH + 11, "tail" * 1000])
    refs = sys.getrefcount(inner_out[0])
    assert refs == 2  # only inner_out and getrefcount's argument hold it


def test_fresh_pages_per_large_output():
    rng = random.Random(0)
    values = [rng.uniform(-1, 1) for _ in range(1_000_000)]  # about 21 MB of text
    size = len(bulkwire.dumps(values))
    faults = []
    for _ in range(5):
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        out = bulkwire.dumps(values)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
        del out
    per_page = min(faults) / (size / 4096)
    # Writing the output into fresh 4 KiB pages costs one fault per page; a scratch buffer
    # plus a copy costs that for each. With transparent huge pages available (the output
    # asks for them, as NumPy's large arrays do) it is a small fraction. Sanitizer builds
    # allocate through the sanitizer, which copies on realloc: one copy's worth is allowed.
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            huge = "[never]" not in f.read()
    except OSError:
        huge = False
    if os.environ.get("BULKWIRE_SANITIZER") == "1":
        limit = 2.2
    elif huge:
        limit = 0.5
    else:
        limit = 1.2
    assert per_page <= limit, (per_page, faults, size)
