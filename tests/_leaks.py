"""Leak checks shared by the test files: what repeated calls still hold afterwards.

Two measures, both after a warm-up:
- Python memory (``tracemalloc``): objects and buffers from Python's allocators;
- the C heap (glibc's ``mallinfo2``): what the C core takes with ``malloc`` (output buffers,
  walker state, Arrow copies). Where it cannot be read (another libc, or the sanitizer
  runtime's own allocator) it is reported as ``None`` and only the first measure applies.
"""
from __future__ import annotations

import ctypes
import gc
import os
import tracemalloc
from typing import Callable, Optional


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
        "uordblks", "fordblks", "keepcost")]


def _mallinfo2() -> Optional[Callable[[], int]]:
    if os.environ.get("BULKWIRE_SANITIZER"):
        return None  # the sanitizer's allocator keeps its own books
    try:
        fn = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype = _MallInfo2

    def in_use() -> int:
        info = fn()
        return info.uordblks + info.hblkhd
    return in_use


C_HEAP_IN_USE = _mallinfo2()


def ignoring(fn: Callable[[], object], *exceptions: type) -> Callable[[], None]:
    """fn, with the given exceptions (the expected failure) swallowed."""
    def run() -> None:
        try:
            fn()
        except exceptions:
            pass
    return run


def growth(fn: Callable[[], object], calls: int = 300, rounds: int = 3) -> tuple:
    """(Python bytes, C heap bytes or None) still held per call after ``calls`` warm-up calls."""
    for _ in range(calls):
        fn()
    gc.collect()
    heap_before = C_HEAP_IN_USE() if C_HEAP_IN_USE else None
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for _ in range(rounds * calls):
            fn()
        gc.collect()
        python = (tracemalloc.get_traced_memory()[0] - base) / (rounds * calls)
    finally:
        tracemalloc.stop()
    heap = None
    if heap_before is not None:
        heap = (C_HEAP_IN_USE() - heap_before) / (rounds * calls)
    return python, heap


def assert_no_growth(fn: Callable[[], object], what: str, calls: int = 300,
                     python_limit: float = 16, heap_limit: float = 64) -> None:
    """Fails when repeated calls of fn keep memory: more than the limits, in bytes per call.

    The limits absorb allocator noise (free lists, arena bookkeeping); a leak of the smallest
    object or buffer the core takes per call exceeds them."""
    python, heap = growth(fn, calls)
    assert python <= python_limit, f"{what}: {python:.1f} Python bytes held per call"
    if heap is not None:
        assert heap <= heap_limit, f"{what}: {heap:.1f} C heap bytes held per call"
