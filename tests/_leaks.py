"""Leak checks shared by the test files: what repeated calls still hold afterwards.

Two measures, both after a warm-up:
- Python memory (``tracemalloc``): objects and buffers from Python's allocators;
- the C heap: what the C core takes with ``malloc`` (output buffers, walker state, Arrow
  copies), from glibc's ``mallinfo2`` or, under AddressSanitizer, from the sanitizer's own
  count. Where neither exists (another libc) it is ``None`` and only the first measure
  applies.
"""
from __future__ import annotations

import ctypes
import gc
import tracemalloc
from typing import Callable, Optional


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
        "uordblks", "fordblks", "keepcost")]


def _c_heap_meter() -> Optional[Callable[[], int]]:
    """A function giving the C heap's bytes in use, or None where none can be read."""
    process = ctypes.CDLL(None)
    # Under AddressSanitizer malloc is the sanitizer's: it keeps its own count.
    sanitizer = getattr(process, "__sanitizer_get_current_allocated_bytes", None)
    if sanitizer is not None:
        sanitizer.restype = ctypes.c_size_t
        return lambda: int(sanitizer())
    mallinfo2 = getattr(process, "mallinfo2", None)
    if mallinfo2 is None:
        return None
    mallinfo2.restype = _MallInfo2

    def in_use() -> int:
        info = mallinfo2()
        return info.uordblks + info.hblkhd
    return in_use


C_HEAP_IN_USE = _c_heap_meter()


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
                     python_limit: float = 16, heap_limit: float = 64,
                     attempts: int = 3) -> None:
    """Fails when repeated calls of fn keep memory: more than the limits, in bytes per call.

    The limits absorb allocator noise (free lists, arena bookkeeping); a leak of the smallest
    object or buffer the core takes per call exceeds them. Both measures are the whole
    process's: another thread that allocates meanwhile (a server or a pool an earlier test
    left winding down) counts too. So a measure over a limit is taken again, up to
    ``attempts`` times in all; a leak holds its memory in every one."""
    for _ in range(attempts):
        python, heap = growth(fn, calls)
        if python <= python_limit and (heap is None or heap <= heap_limit):
            return
    assert python <= python_limit, f"{what}: {python:.1f} Python bytes held per call"
    if heap is not None:
        assert heap <= heap_limit, f"{what}: {heap:.1f} C heap bytes held per call"
