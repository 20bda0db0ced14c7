"""Threads kept for the next job (bulkwire._kept_threads), and the bulk insert's sender on them.

A kept thread runs one job at a time, waits a while for the next and then ends; a job that
raises ends its thread and is reported as any thread's uncaught exception; a forked child
never hands a job to a thread of its parent's (it does not exist there). Every wait here is
bounded: a job handed to nobody fails the test, it does not hang it.
"""
from __future__ import annotations

import gc
import os
import threading
import time

import pytest
from hypothesis import given, settings, strategies as st

import bulkwire
from bulkwire import transport
from bulkwire._kept_threads import KeptThreads
from bulkwire.testing import LoopbackServer
from fault_server import eventually
from test_fork import run_in_child

TIMEOUT = 20.0


def named(name: str) -> list:
    return [t for t in threading.enumerate() if t.name == name]


def run_and_wait(threads: KeptThreads, job=None) -> int:
    """Runs ``job`` (or nothing) on ``threads``; the ident of the thread that ran it."""
    ran = {}
    done = threading.Event()

    def record() -> None:
        ran["ident"] = threading.get_ident()
        if job is not None:
            job()
        done.set()

    threads.run(record)
    assert done.wait(TIMEOUT), "the job never ran"
    return ran["ident"]


def wait_until(condition) -> bool:
    return eventually(condition, TIMEOUT)


def test_a_thread_runs_the_next_job_once_it_is_idle():
    threads = KeptThreads("kept-reuse")
    first = run_and_wait(threads)
    assert wait_until(lambda: threads.idle() == 1)
    assert [run_and_wait(threads) for _ in range(20)] == [first] * 20
    assert len(named("kept-reuse")) == 1


def test_jobs_at_once_get_threads_of_their_own_and_all_of_them_are_kept():
    threads = KeptThreads("kept-many")
    release = threading.Event()
    started = threading.Barrier(4, timeout=TIMEOUT)
    idents = set()
    lock = threading.Lock()

    def job() -> None:
        with lock:
            idents.add(threading.get_ident())
        started.wait()  # all three run at the same time
        release.wait(TIMEOUT)

    for _ in range(3):
        threads.run(job)
    started.wait()
    assert len(idents) == 3 and threads.idle() == 0
    release.set()
    assert wait_until(lambda: threads.idle() == 3)
    assert len(named("kept-many")) == 3


def test_an_idle_thread_ends_after_its_wait():
    threads = KeptThreads("kept-expire", idle_seconds=0.05)
    run_and_wait(threads)
    assert wait_until(lambda: not named("kept-expire"))
    assert threads.idle() == 0
    run_and_wait(threads)  # a new thread for the next job
    assert wait_until(lambda: not named("kept-expire"))


@settings(max_examples=20, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=0.003), min_size=1, max_size=30))
def test_a_job_given_as_the_wait_ends_still_runs(pauses):
    """Jobs handed over around the moment an idle thread gives up waiting: each one runs
    (the thread either takes it or has left the idle ones before it was handed out)."""
    threads = KeptThreads("kept-race", idle_seconds=0.001)
    for pause in pauses:
        time.sleep(pause)
        run_and_wait(threads)
    assert wait_until(lambda: not named("kept-race"))


class InterruptedPop(list):
    """The idle threads, where Ctrl-C lands once right after a thread was taken out of
    them, before it was given its job."""

    interrupted = False

    def pop(self, *args):
        kept = super().pop(*args)
        if self.interrupted:
            return kept
        self.interrupted = True
        raise KeyboardInterrupt


class InterruptedWake:
    """A thread's wake lock, where Ctrl-C lands once as it is about to be released: the
    job is set, the thread not woken."""

    def __init__(self, lock) -> None:
        self.lock = lock

    def release(self) -> None:
        raise KeyboardInterrupt

    def acquire(self, *args, **kwargs):
        return self.lock.acquire(*args, **kwargs)


@pytest.mark.parametrize("where", ["after the pop", "before the wake"])
def test_ctrl_c_in_the_hand_over_leaves_no_thread_waiting_for_ever(where):
    """A run() interrupted between taking an idle thread and waking it with its job: it
    raises, the job is not run, and the thread ends after its wait (it does not wait for
    a job that will never come); the next job runs."""
    threads = KeptThreads("kept-interrupted", idle_seconds=0.05)
    run_and_wait(threads)
    assert wait_until(lambda: threads.idle() == 1)
    (waiting,) = threads._idle
    if where == "after the pop":
        threads._idle = InterruptedPop(threads._idle)
    else:
        waiting._wake = InterruptedWake(waiting._wake)
    ran = threading.Event()
    with pytest.raises(KeyboardInterrupt):
        threads.run(ran.set)
    assert threads.idle() == 0
    assert wait_until(lambda: not named("kept-interrupted")), "the thread waits for ever"
    assert not ran.is_set()
    run_and_wait(threads)  # the next job runs, on a new thread
    assert wait_until(lambda: not named("kept-interrupted"))


def test_a_job_that_raises_ends_its_thread_and_is_reported(monkeypatch):
    reported = []
    monkeypatch.setattr(threading, "excepthook", lambda args: reported.append(args))
    threads = KeptThreads("kept-raise")
    run_and_wait(threads)
    assert wait_until(lambda: threads.idle() == 1)

    def boom() -> None:
        raise ValueError("the job's own error")

    threads.run(boom)
    assert wait_until(lambda: reported)
    assert isinstance(reported[0].exc_value, ValueError)
    assert reported[0].thread.name == "kept-raise"
    assert wait_until(lambda: not named("kept-raise"))
    assert threads.idle() == 0  # the thread that raised was never taken back
    run_and_wait(threads)  # the next job runs, on a new thread
    assert wait_until(lambda: threads.idle() == 1) and len(named("kept-raise")) == 1


def test_a_forked_child_runs_its_jobs_on_threads_of_its_own():
    threads = KeptThreads("kept-fork")
    run_and_wait(threads)
    assert wait_until(lambda: threads.idle() == 1)

    def child():
        idle_at_start = threads.idle()
        ran = threading.Event()
        threads.run(ran.set)  # given to the parent's idle thread, it would never run
        return [idle_at_start, ran.wait(5)]

    assert run_in_child(child) == [0, True]
    assert threads.idle() == 1
    run_and_wait(threads)  # the parent's thread still works


def test_a_sender_joins_and_tells_whether_it_runs():
    with LoopbackServer() as server:
        bulk = bulkwire.BulkInsert(server.url, server.database)
        bulk.store({"n": 1}, id="docs/1")
        sender = bulk._sender
        assert sender.name == "bulkwire-sender"
        with pytest.raises(RuntimeError, match="only be started once"):
            sender.start()
        bulk.close()
        assert not sender.is_alive()
        sender.join(0)


def test_inserts_one_after_another_send_on_the_same_kept_thread(monkeypatch):
    """Twenty inserts, each sent on a sender thread: one thread, kept between them."""
    seen = []
    post = transport.BodySender._post

    def recording(self) -> None:
        seen.append(threading.get_ident())
        post(self)

    monkeypatch.setattr(transport.BodySender, "_post", recording)
    with LoopbackServer() as server:
        for i in range(20):
            with bulkwire.BulkInsert(server.url, server.database) as bulk:
                bulk.store({"n": i}, id=f"docs/{i}")
            assert len(server.requests[-1].commands) == 1 and server.requests[-1].succeeded
            # the next insert finds the thread idle once it was put back after this one
            assert wait_until(lambda: transport._SENDER_THREADS.idle() >= 1)
    assert len(set(seen)) == 1
    assert threading.get_ident() not in seen


def test_a_failed_insert_leaves_a_thread_that_sends_the_next_one():
    """A sender whose request failed (the server refused the body) goes back idle, and the
    next insert's body goes out on it whole."""
    with LoopbackServer() as server:
        server.fail_after_bytes = 1  # the first chunk fails
        with pytest.raises(bulkwire.BulkInsertError, match="Simulated failure"):
            with bulkwire.BulkInsert(server.url, server.database) as bulk:
                bulk.store({"n": 0}, id="docs/0")
        server.fail_after_bytes = None
        assert wait_until(lambda: transport._SENDER_THREADS.idle() >= 1)
        with bulkwire.BulkInsert(server.url, server.database) as bulk:
            for i in range(100):
                bulk.store({"n": i}, id=f"docs/{i}")
        assert len(server.requests[-1].commands) == 100 and server.requests[-1].succeeded


def test_a_kept_thread_holds_what_it_was_given_to_hold_while_it_lives():
    """``hold`` runs on each thread as it starts, ``release`` as it ends (after its idle
    wait, and after a job that raised)."""
    events = []
    threads = KeptThreads("kept-hold", idle_seconds=0.05, hold=lambda: events.append("hold"),
                          release=lambda: events.append("release"))
    run_and_wait(threads)
    run_and_wait(threads)
    assert events[:1] == ["hold"]
    assert wait_until(lambda: not named("kept-hold"))
    assert events.count("hold") == events.count("release") >= 1


def test_the_sender_threads_hold_the_buffer_pool_for_the_next_insert():
    """While a sender thread is kept, the body buffer pool keeps the buffers of the insert
    it sent for the next one: a second insert of the same documents takes buffers that are
    already backed (the pool's count of reuses of kept buffers is not observable here, but
    what the pool keeps with no writer alive is)."""
    from bulkwire._core import _testing

    with LoopbackServer() as server:
        with bulkwire.BulkInsert(server.url, server.database, buffer_size=64 * 1024) as bulk:
            for i in range(200):
                bulk.store({"v": "x" * 1000}, id=f"docs/{i}")
        assert server.requests[-1].succeeded
        assert wait_until(lambda: transport._SENDER_THREADS.idle() >= 1)
        del bulk
        gc.collect()
        buffers, nbytes, writers = _testing.pool_memory()
        assert _testing.pool_holds() >= 1
        # writers other tests left to the collector may be alive too: the hold's own effect
        # with no writer is test_bulk_writer's test_a_hold_keeps_the_buffer_pool_without_a_writer
        assert buffers >= 1 and nbytes >= 64 * 1024
