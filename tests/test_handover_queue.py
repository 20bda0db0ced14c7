"""The bounded handover queue: FIFO, bound, waits without the GIL, Ctrl-C, closing."""
import _thread
import sys
import threading
import time

import pytest

from bulkwire import _core


def test_fifo_and_end_of_stream():
    q = _core.HandoverQueue(3)
    assert q.maxsize == 3 and len(q) == 0
    items = [object() for _ in range(3)]
    for item in items:
        assert q.put(item) is True
    assert len(q) == 3 and q.peak == 3
    q.close_producer()
    assert [q.get() for _ in range(3)] == items
    assert q.drained
    assert q.get() is None  # the end


@pytest.mark.parametrize("maxsize", [0, -1])
def test_maxsize_must_be_positive(maxsize):
    with pytest.raises(ValueError, match="maxsize"):
        _core.HandoverQueue(maxsize)


def test_full_put_waits_with_gil_released_until_a_get():
    q = _core.HandoverQueue(1)
    q.put("first")
    ticks = []
    stop = threading.Event()

    def ticker():  # runs only if the blocked put released the GIL
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.005)

    def consumer():
        time.sleep(0.3)
        q.get()

    threads = [threading.Thread(target=ticker), threading.Thread(target=consumer)]
    for t in threads:
        t.start()
    try:
        assert q.put("second") is True  # waits for the consumer
    finally:
        stop.set()
        for t in threads:
            t.join(5)
    assert q.waits == 1
    assert len(ticks) > 5
    q.close_producer()
    assert q.get() == "second"


def test_close_consumer_wakes_a_blocked_put_and_releases_items():
    q = _core.HandoverQueue(1)
    held = object()
    waiting = object()
    base_held, base_waiting = sys.getrefcount(held), sys.getrefcount(waiting)
    q.put(held)
    assert sys.getrefcount(held) == base_held + 1
    timer = threading.Timer(0.2, q.close_consumer)
    timer.start()
    try:
        assert q.put(waiting) is False
    finally:
        timer.join(5)
    assert q.consumer_closed
    assert sys.getrefcount(held) == base_held      # dropped by close_consumer
    assert sys.getrefcount(waiting) == base_waiting  # never taken
    assert q.put(object()) is False
    assert q.get() is None


def test_dealloc_releases_waiting_items():
    item = object()
    base = sys.getrefcount(item)
    q = _core.HandoverQueue(4)
    q.put(item)
    q.put(item)
    assert sys.getrefcount(item) == base + 2
    del q
    assert sys.getrefcount(item) == base


def test_no_reference_leak_over_many_puts_and_gets():
    q = _core.HandoverQueue(2)
    item = object()
    base = sys.getrefcount(item)
    for _ in range(2000):
        q.put(item)
        assert q.get() is item
    assert sys.getrefcount(item) == base


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="Ctrl-C is delivered to the main thread")
def test_ctrl_c_interrupts_a_blocked_put_promptly():
    q = _core.HandoverQueue(1)
    q.put(1)
    fired = []

    def interrupt():
        fired.append(time.monotonic())
        _thread.interrupt_main()

    timer = threading.Timer(0.3, interrupt)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # bounded: the put must be interrupted
                q.put(2)
    finally:
        timer.join(5)
    assert fired
    # the wait wakes every 100 ms to run signal handlers; generous bound for sanitizer runs
    assert time.monotonic() - fired[0] < 2.0
    assert len(q) == 1


def test_producer_and_consumer_threads_move_everything_in_order():
    q = _core.HandoverQueue(4)
    received = []

    def consumer():
        while True:
            item = q.get()
            if item is None:
                return
            received.append(item)

    t = threading.Thread(target=consumer)
    t.start()
    for i in range(5000):
        assert q.put(i)
    q.close_producer()
    t.join(10)
    assert received == list(range(5000))
    assert q.peak <= 4


def test_close_consumer_wakes_a_waiting_get():
    q = _core.HandoverQueue(2)
    timer = threading.Timer(0.2, q.close_consumer)
    timer.start()
    try:
        assert q.get() is None
    finally:
        timer.join(5)
