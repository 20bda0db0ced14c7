"""BulkWriter/BulkInsert.store_encoded: commands that are already encoded, framed by the
writer, mixed with store(); through the bounded queue (memory bound), against the loopback
server (plain and gzip); bad arguments; failures, abort and interruption."""
import gc
import json
import threading
import time
import zlib

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import bulkwire
from bulkwire import _core
from bulkwire.bulk import BulkInsertAborted, BulkInsertError, BulkWriter, compression_backends
from bulkwire.testing import LoopbackServer
from _producer_threads import interrupt_when_queue_waits

TIMEOUT = 30.0
MD = {"@collection": "Things", "Raven-Python-Type": "builtins.dict"}


def command(i, pad=0):
    """One command's bytes exactly as BulkWriter.store writes it for the same document."""
    w = BulkWriter()
    w.store({"i": i, "pad": "x" * pad}, id=f"things/{i}", metadata=MD)
    w.close()
    body = b"".join(bytes(c) for c in w.pieces())
    return body[1:-1]


def drain(writer):
    """Close the writer and return its body and the pieces (the writer must not block)."""
    writer.close()
    pieces = [bytes(c) for c in writer.pieces()]
    assert all(pieces)  # never an empty piece
    return b"".join(pieces), pieces


def consume(writer):
    """Drain the writer's pieces on a thread, as a transport would; returns (thread, pieces)."""
    pieces = []
    thread = threading.Thread(target=lambda: pieces.extend(bytes(c) for c in writer.pieces()))
    thread.start()
    return thread, pieces


def store_group(w, kind, cmds, start):
    """Store cmds (command bytes of documents start, start+1, ...) in one call of kind."""
    joined = b",".join(cmds)
    if kind == "store":
        for k in range(len(cmds)):
            w.store({"i": start + k, "pad": json.loads(cmds[k])["Document"]["pad"]},
                    id=f"things/{start + k}", metadata=MD)
    elif kind == "bytes":
        w.store_encoded(joined, len(cmds))
    elif kind == "bytearray":
        w.store_encoded(bytearray(joined), len(cmds))
    elif kind == "numpy":
        w.store_encoded(np.frombuffer(joined, np.uint8), len(cmds))
    else:  # a list of pieces split at arbitrary points, empty ones included
        cut = sorted({0, len(joined) // 3, len(joined) // 2, len(joined) // 2, len(joined)})
        w.store_encoded([joined[a:b] for a, b in zip(cut, cut[1:])] + [b""], len(cmds))


# ---------------------------------------------------------------- framing and mixing

def test_only_encoded_gives_the_same_body_as_store():
    cmds = [command(i, pad=i * 10) for i in range(20)]
    ref = BulkWriter(buffer_size=64, max_buffers=1000)
    for i in range(20):
        ref.store({"i": i, "pad": "x" * (i * 10)}, id=f"things/{i}", metadata=MD)
    want, _ = drain(ref)
    w = BulkWriter(buffer_size=64, max_buffers=1000)
    w.store_encoded(b",".join(cmds[:7]), 7)
    w.store_encoded(cmds[7], 1)
    w.store_encoded([cmds[8][:3], cmds[8][3:] + b"," + cmds[9]], 2)
    w.store_encoded(b",".join(cmds[10:]), 10)
    body, _ = drain(w)
    assert body == want == b"[" + b",".join(cmds) + b"]"
    assert w.documents == 20 and w.stats.documents == 20 and w.stats.body_bytes == len(body)


def test_empty_call_is_a_no_op_and_empty_body_is_an_array():
    w = BulkWriter()
    w.store_encoded(b"", 0)
    w.store_encoded([], 0)
    w.store_encoded([b"", bytearray()], 0)
    assert drain(w)[0] == b"[]" and w.documents == 0


KINDS = ["store", "bytes", "bytearray", "numpy", "pieces"]


@settings(max_examples=60)
@given(data=st.data(), n=st.integers(1, 40), buffer_size=st.sampled_from([1, 50, 300, 2000, 1 << 20]))
def test_hypothesis_random_mix_of_store_and_store_encoded(data, n, buffer_size):
    pads = data.draw(st.lists(st.integers(0, 400), min_size=n, max_size=n))
    cmds = [command(i, pad) for i, pad in enumerate(pads)]
    w = BulkWriter(buffer_size=buffer_size, max_buffers=4)
    consumer, pieces = consume(w)  # tiny buffers make many pieces: the queue must drain
    i = 0
    calls = []
    try:
        while i < n:
            size = data.draw(st.integers(1, n - i))
            kind = data.draw(st.sampled_from(KINDS))
            store_group(w, kind, cmds[i:i + size], i)
            calls.append((kind, size))
            i += size
    finally:
        w.close()
        consumer.join(30)
    assert all(pieces)  # never an empty piece
    body = b"".join(pieces)
    assert body == b"[" + b",".join(cmds) + b"]", calls
    parsed = json.loads(body)
    assert [c["Id"] for c in parsed] == [f"things/{k}" for k in range(n)]
    assert w.documents == n


def test_large_bytes_are_handed_over_without_a_copy():
    bs = 1000
    cmds = [command(i, pad=50) for i in range(200)]
    big = b",".join(cmds)  # ~30 buffers
    assert len(big) > 20 * bs
    w = BulkWriter(buffer_size=bs, max_buffers=10_000)
    w.store({"first": 1}, id="a/1")
    w.store_encoded(big, len(cmds))
    w.store({"last": 1}, id="a/2")
    w.close()
    items = list(w.pieces())
    views = [c for c in items if isinstance(c, memoryview)]
    assert views and all(v.obj is big for v in views)  # slices of the caller's bytes
    assert sum(map(len, views)) == len(big)
    assert all(bs <= len(v) < 2 * bs for v in views)
    body = b"".join(bytes(c) for c in items)
    assert [c["Id"] for c in json.loads(body)] == ["a/1"] + [f"things/{i}" for i in range(200)] + ["a/2"]


def test_mutable_input_is_copied():
    bs = 100
    data = bytearray(b",".join(command(i) for i in range(10)))
    original = bytes(data)
    w = BulkWriter(buffer_size=bs, max_buffers=10_000)
    w.store_encoded(data, 10)
    data[:] = b"#" * len(data)  # the caller reuses its buffer: the body must not change
    body, _ = drain(w)
    assert body == b"[" + original + b"]"


def test_bounded_memory_for_a_large_encoded_input():
    """A bytearray of ~40 buffers, no consumer yet: the writer copies it buffer by buffer and
    blocks on the full queue; live piece memory stays within (max_buffers + 2) buffers."""
    bs, max_buffers = 32 << 10, 4
    cmds = [command(i, pad=900) for i in range(1400)]
    data = bytearray(b",".join(cmds))
    assert len(data) > 40 * bs
    w = BulkWriter(buffer_size=bs, max_buffers=max_buffers)
    gc.collect()
    _core._testing.reset_piece_peak()
    base = _core._testing.piece_memory()[0]
    done = threading.Event()
    errors = []

    def produce():
        try:
            w.store_encoded(data, len(cmds))
            w.close()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            done.set()

    producer = threading.Thread(target=produce)
    producer.start()
    deadline = time.monotonic() + 30
    while not (w._queue.waits and len(w._queue) == max_buffers) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert w._queue.waits and not done.is_set(), "the producer never blocked on the full queue"
    live = _core._testing.piece_memory()[0] - base + w._writer.capacity
    bound = (max_buffers + 2) * (bs + 2)
    assert live <= bound + (64 << 10)  # the buffer being filled may keep its initial slack
    body = b"".join(bytes(c) for c in w.pieces())  # consume: the producer resumes
    producer.join(30)
    assert not errors and done.is_set()
    peak = _core._testing.piece_memory()[1] - base
    assert peak <= bound + (64 << 10) + bs
    assert body == b"[" + bytes(data) + b"]" and w.documents == len(cmds)


# ---------------------------------------------------------------- bad arguments

@pytest.mark.parametrize("commands, count, error, message", [
    ("{}", 1, TypeError, "commands must be a bytes-like object, not str"),
    (123, 1, TypeError, "commands must be a bytes-like object or a list/tuple of them, not int"),
    (None, 1, TypeError, "not NoneType"),
    ([b"{}", 5], 1, TypeError, r"commands\[1\] must be a bytes-like object, not int"),
    (b"{}", "1", TypeError, "count must be an int, not str"),
    (b"{}", True, TypeError, "count must be an int, not bool"),
    (b"", 1, ValueError, "commands is empty but count is 1"),
    (b"{}", -1, ValueError, "count must not be negative"),
    (b"{}", 0, ValueError, "count must be the number of commands"),
    (b",{}", 1, ValueError, "must not start with ','"),
    (b"[{}]", 1, ValueError, "must not start with '\\['"),
    (b" {}", 1, ValueError, "must start with '{'"),
    (b"{},", 1, ValueError, "must end with '}'.*trailing ','"),
    (b"{}]", 1, ValueError, "must end with '}'.*']'"),
    (memoryview(b"{}{}")[::2], 1, ValueError, "contiguous"),
    ([b"{}", b"{}"], 2, ValueError, r"commands\[1\] starts with '{' right after a '}'.*join the commands with ','"),
])
def test_bad_arguments(commands, count, error, message):
    w = BulkWriter()
    w.store({"a": 1}, id="a/1")
    with pytest.raises(error, match=message):
        w.store_encoded(commands, count)
    body, _ = drain(w)  # nothing of the bad call went in
    assert [c["Id"] for c in json.loads(body)] == ["a/1"]


def test_closed_writer():
    w = BulkWriter()
    w.close()
    with pytest.raises(ValueError, match="closed"):
        w.store_encoded(command(1), 1)


# ---------------------------------------------------------------- the loopback server

@pytest.mark.parametrize("compress", [False, *compression_backends()])
def test_store_encoded_into_the_loopback_server(compress):
    cmds = [command(i, pad=300) for i in range(600)]
    with LoopbackServer(keep_wire=True) as server:
        with bulkwire.BulkInsert(server.url, server.database, compress=compress, buffer_size=16 << 10,
                                 timeout=TIMEOUT) as bulk:
            bulk.store({"i": -1, "pad": ""}, id="things/start", metadata=MD)
            bulk.store_encoded(b",".join(cmds[:200]), 200)            # large bytes: direct
            bulk.store_encoded(bytearray(b",".join(cmds[200:210])), 10)  # copied
            for k in range(210, 300):
                bulk.store_encoded(cmds[k], 1)                          # small: into the buffer
            bulk.store({"i": -2, "pad": ""}, id="things/middle", metadata=MD)
            bulk.store_encoded([cmds[300]] + [b"," + c for c in cmds[301:]], 300)  # pieces
        request = server.requests[-1]
        assert request.complete and request.error is None
        assert (request.headers.get("Content-Encoding") == "gzip") == bool(compress)
        ids = [c["Id"] for c in json.loads(bytes(request.body))]
        assert ids == (["things/start"] + [f"things/{i}" for i in range(300)] + ["things/middle"]
                       + [f"things/{i}" for i in range(300, 600)])
        assert len(server.documents) == 602 and bulk.stats.documents == 602
        assert server.documents["things/450"] == json.loads(cmds[450])["Document"]
        assert bulk.stats.body_bytes == len(request.body)
        assert bulk.stats.wire_bytes == sum(request.wire_chunks) == len(request.wire)
        if compress:
            d = zlib.decompressobj(31)  # one gzip member, nothing after it
            assert d.decompress(bytes(request.wire)) == bytes(request.body)
            assert d.eof and d.unused_data == b""


def test_empty_encoded_calls_make_no_request():
    with LoopbackServer() as server:
        with bulkwire.BulkInsert(server.url, server.database, timeout=TIMEOUT) as bulk:
            bulk.store_encoded(b"", 0)
        assert server.requests == [] and bulk.operation_id is None
        with pytest.raises(ValueError, match="must not start with ','"):
            with bulkwire.BulkInsert(server.url, server.database, timeout=TIMEOUT) as bulk:
                bulk.store_encoded(b"," + command(1), 1)  # bad arguments: no request either
        assert server.requests == []


def test_server_failure_raises_with_its_message():
    cmd = command(1, pad=1000)
    with LoopbackServer() as server:
        server.fail_after_bytes = 64 << 10
        with pytest.raises(BulkInsertError, match="Simulated failure on the server"):
            with bulkwire.BulkInsert(server.url, server.database, buffer_size=8 << 10,
                                     timeout=TIMEOUT) as bulk:
                for _ in range(2000):
                    bulk.store_encoded(cmd, 1)


def test_abort_and_exception_in_the_with_block():
    cmd = command(1)
    with LoopbackServer() as server:
        bulk = bulkwire.BulkInsert(server.url, server.database, timeout=TIMEOUT)
        bulk.store_encoded(cmd, 1)
        bulk.abort()
        assert bulk.operation_id in server.killed
        with pytest.raises(BulkInsertAborted):
            bulk.store_encoded(cmd, 1)
        with pytest.raises(BulkInsertAborted):
            bulk.store_encoded(b"", 0)
        with pytest.raises(RuntimeError, match="boom"):
            with bulkwire.BulkInsert(server.url, server.database, timeout=TIMEOUT) as bulk2:
                bulk2.store_encoded(cmd, 1)
                raise RuntimeError("boom")
        assert bulk2.operation_id in server.killed


def test_interrupted_part_way_marks_the_writer_failed():
    bs = 1000
    data = bytearray(b",".join(command(i, pad=100) for i in range(100)))  # ~15 buffers
    w = BulkWriter(buffer_size=bs, max_buffers=2)  # no consumer: the third buffer blocks

    timer = interrupt_when_queue_waits(w)
    with pytest.raises(KeyboardInterrupt):
        w.store_encoded(data, 100)
    timer.join(30)
    assert w.failed
    with pytest.raises(BulkInsertAborted, match="interrupted"):
        w.store_encoded(command(1), 1)
    with pytest.raises(BulkInsertAborted):
        w.close()
