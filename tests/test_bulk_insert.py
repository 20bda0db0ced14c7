"""BulkInsert end to end against the loopback server: intact loads (plain and gzip),
backpressure with bounded memory, server failure, early finish, Ctrl-C, abort, bad input."""
import _thread
import gc
import os
import gzip
import json
import signal
import ssl
import threading
import time
import zlib

import pytest

import bulkwire
from bulkwire import _core
from bulkwire.bulk import BulkInsertAborted, BulkInsertError, compression_backends
from bulkwire.testing import LoopbackServer
from bulkwire.testing.pki import make_pki, server_context
from fault_server import FaultServer, eventually, hold_the_end_until
from _producer_threads import refused_on_another_thread

TIMEOUT = 30.0  # socket timeout for every test client: nothing can hang for long


@pytest.fixture
def server():
    with LoopbackServer(keep_wire=True) as s:
        yield s


def make_doc(i, width=8):
    return {"Name": f"document {i}", "Rank": i, "Score": i / 3, "Vector": [j / 7 + i for j in range(width)],
            "Text": "lorem ipsum \u00e9 " * 40, "Active": i % 2 == 0}


def expected_document(doc, md):
    d = json.loads(json.dumps(doc))
    d.pop("Id", None)
    d["@metadata"] = md
    return d


DICT_MD = {"@collection": "dicts", "Raven-Python-Type": "builtins.dict"}


def assert_pieces_end_on_command_boundaries(decoded):
    """``decoded``: what each gzip piece decoded to on arrival. Every piece that carries a
    buffer decodes whole on arrival (sync flush) and ends on a command boundary: ``}``, or
    ``]`` for the buffer that ends the body. The sender ends the gzip member in the same
    piece as the last buffer only when it already knows that buffer is the last (the
    producer closed before the consumer took it); otherwise the member's end (empty final
    block and trailer) follows as one more piece that decodes to nothing. Which of the two
    happens is a race between the threads, so both are valid; nothing else may be empty."""
    assert decoded and decoded[0].startswith(b"[")
    if len(decoded) > 1 and decoded[-1] == b"":
        decoded = decoded[:-1]  # the member's trailer alone
    so_far = b""
    for piece in decoded[:-1]:
        assert piece  # decodable on arrival, not held back in the decoder
        so_far += piece
        assert so_far.endswith(b"}")
    assert decoded[-1] and (so_far + decoded[-1]).endswith(b"]")


@pytest.mark.parametrize("compress", [False, *compression_backends()])
def test_a_multi_buffer_load_arrives_intact(server, compress):
    buffer_size = 256 << 10
    with bulkwire.BulkInsert(server.url, server.database, compress=compress,
                             buffer_size=buffer_size, timeout=TIMEOUT) as bulk:
        n = 0
        while bulk._writer._writer.bytes < 5.5 * (1 << 20):
            bulk.store(make_doc(n), id=f"docs/{n}")
            n += 1
            assert n < 100_000
    request = server.requests[-1]
    assert request.complete and request.error is None
    assert request.query == {"id": str(bulk.operation_id), "skipOverwriteIfUnchanged": "false"}
    assert len(request.body) >= 5 << 20
    assert request.headers["Transfer-Encoding"] == "chunked"
    assert len(server.documents) == n
    for i in (0, n // 2, n - 1):
        assert server.documents[f"docs/{i}"] == expected_document(make_doc(i), DICT_MD)
    commands = request.commands
    assert [c["Id"] for c in commands] == [f"docs/{i}" for i in range(n)]
    stats = bulk.stats
    assert stats.documents == n and stats.body_bytes == len(request.body)
    assert stats.wire_bytes == sum(request.wire_chunks) and stats.pieces == len(request.wire_chunks)
    assert stats.buffers > 15 and all(size > 0 for size in request.wire_chunks)
    if compress:
        assert request.headers["Content-Encoding"] == "gzip"
        assert stats.compression == compress
        # one gzip member over the whole body
        assert gzip.decompress(bytes(request.wire)) == bytes(request.body)
        assert stats.wire_bytes < stats.body_bytes / 2
        # each piece decoded as soon as it arrived, and ended on a command boundary
        assert_pieces_end_on_command_boundaries(request.decoded_chunks)
    else:
        assert "Content-Encoding" not in request.headers
        assert stats.compression is None
        assert bytes(request.wire) == bytes(request.body)


@pytest.mark.parametrize("late_close", [False, True])
@pytest.mark.parametrize("compress", compression_backends())
def test_gzip_pieces_end_on_boundaries_whichever_thread_wins_the_last_buffer(compress, late_close):
    writer = bulkwire.BulkWriter(compress=compress, buffer_size=2048, max_buffers=4)
    queue = writer._queue
    pieces = []
    consumer = threading.Thread(target=lambda: pieces.extend(bytes(p) for p in writer.pieces()),
                                daemon=True)
    consumer.start()
    for i in range(100):
        writer.store({"i": i, "pad": "x" * 100}, id=f"d/{i}")
    if late_close:
        # what happens at random on a loaded machine, forced: the consumer takes the last
        # buffer before the producer has said it was the last (close_producer comes late)
        queue.put(writer._writer.finish())
        deadline = time.monotonic() + 30
        while (len(queue) or writer.stats.buffers < writer._writer.handovers) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)
        writer._closed = True
        queue.close_producer()
    else:
        writer.close()
    consumer.join(30)
    assert not consumer.is_alive()
    decoder = zlib.decompressobj(31)
    decoded = [decoder.decompress(p) for p in pieces]
    assert decoder.eof and not decoder.unused_data
    assert all(pieces) and writer.stats.pieces == len(pieces)
    assert_pieces_end_on_command_boundaries(decoded)
    assert json.loads(b"".join(decoded))[-1]["Id"] == "d/99"
    if late_close:  # the consumer took the last buffer first: the trailer came on its own
        assert decoded[-1] == b"" and decoded[-2].endswith(b"]")


def test_exact_bytes_on_the_wire(server):
    with bulkwire.BulkInsert(server.url, server.database, timeout=TIMEOUT) as bulk:
        bulk.store({"Name": "a", "Id": "x/1"})
        bulk.store({"V": [1.5, float("nan")]}, id="x/2", metadata={"k": "v"})
    md = json.dumps(DICT_MD).encode()
    assert bytes(server.requests[-1].wire) == (
        b'[{"Id":"x/1","Type":"PUT","Document":{"Name": "a", "@metadata": ' + md + b'}},'
        b'{"Id":"x/2","Type":"PUT","Document":{"V": [1.5, NaN], "@metadata": {"k": "v", '
        b'"@collection": "dicts", "Raven-Python-Type": "builtins.dict"}}}]')
    assert server.log[0] == "GET /databases/db/operations/next-operation-id"


def test_skip_overwrite_flag_and_no_request_without_documents(server):
    with bulkwire.BulkInsert(server.url, server.database, timeout=TIMEOUT):
        pass
    assert server.log == []  # lazily started: nothing stored, nothing sent
    with bulkwire.BulkInsert(server.url, server.database, skip_overwrite_if_unchanged=True,
                             timeout=TIMEOUT) as bulk:
        bulk.store_many([{"a": 1}, {"a": 2}], ids=["a/1", "a/2"])
    assert server.requests[-1].query["skipOverwriteIfUnchanged"] == "true"
    assert set(server.documents) == {"a/1", "a/2"}


def _blocked(bulk, timeout=20.0, give_up=None):
    """Wait until the producer is blocked on a full queue (False on timeout or give_up)."""
    deadline = time.monotonic() + timeout
    q = bulk._writer._queue
    while time.monotonic() < deadline and not (give_up is not None and give_up.is_set()):
        if q.waits > 0 and len(q) == q.maxsize:
            return True
        time.sleep(0.01)
    return False


def _stays_blocked(bulk, timeout=20.0):
    """Wait until the producer is blocked on a full queue and stays so for 0.2 s (no
    document stored meanwhile): a queue that is full only while the sender is busy (writing
    float text, compressing), not stalled, is no wait for a Ctrl-C to land in."""
    deadline = time.monotonic() + timeout
    q = bulk._writer._queue
    while time.monotonic() < deadline:
        if _blocked(bulk, timeout=deadline - time.monotonic()):
            stored = bulk._writer._writer.commands
            time.sleep(0.2)
            if bulk._writer._writer.commands == stored and len(q) == q.maxsize:
                return True
    return False


@pytest.mark.parametrize("kind", ["text", "floats"])
@pytest.mark.parametrize("compress", [False, "zlib"])
def test_backpressure_holds_memory_within_the_bound_and_resumes(compress, kind):
    buffer_size, max_buffers = 64 << 10, 4
    doc_size_bound = 2048
    n = 20_000
    # random hex: compresses only ~2:1, so the gzip body (~14 MB) also fills the socket
    # buffers, which the kernel may grow to a few MB
    noise = os.urandom(700 * n).hex()
    # floats: 40 a document, written later by the sender (pending runs count at their largest
    # text, 1,362 bytes, within doc_size_bound)
    floats = [int.from_bytes(noise[i:i + 8].encode(), "little") / 3 ** 37 for i in range(0, 40 * n, 1)]

    def document(i):
        if kind == "floats":
            return {"i": i, "v": floats[40 * i:40 * (i + 1)]}
        return {"i": i, "text": noise[1400 * i:1400 * (i + 1)]}
    with LoopbackServer(recv_buffer=32 << 10, keep_decoded_chunks=False) as server:
        server.stall(after_bytes=128 << 10)
        gc.collect()
        _core._testing.reset_piece_peak()
        base_live = _core._testing.piece_memory()[0]
        seen = {}
        stores_done = threading.Event()

        def monitor():
            # Wait (polling, generous deadline) for the state the test is about: the server
            # stalled AND the producer blocked on a full queue AND staying blocked (no
            # document stored over 0.3 s). A full queue alone is not enough: with zlib on a
            # loaded machine the compressing consumer can fall behind before the server
            # has reached its stall point, so the queue fills for a moment and then moves.
            try:
                deadline = time.monotonic() + 60.0
                while time.monotonic() < deadline and not stores_done.is_set():
                    if server.stalled and _blocked(bulk, timeout=0.5, give_up=stores_done):
                        stored = bulk._writer._writer.commands
                        time.sleep(0.3)  # hold the stall a little: the producer must stay blocked
                        live = _core._testing.piece_memory()[0] - base_live
                        still = (server.stalled and bulk._writer._writer.commands == stored
                                 and len(bulk._writer._queue) == max_buffers)
                        if still:
                            seen["blocked_live"] = live + bulk._writer._writer.capacity
                            seen["stalled"] = True
                            return
                    time.sleep(0.01)
            finally:
                server.resume()

        bulk = bulkwire.BulkInsert(server.url, server.database, compress=compress,
                                   buffer_size=buffer_size, max_buffers=max_buffers, timeout=TIMEOUT,
                                   defer_float_text=kind == "floats")
        watcher = threading.Thread(target=monitor)
        try:
            with bulk:
                bulk.store(make_doc(0), id="docs/0")
                watcher.start()
                for i in range(1, n):
                    bulk.store(document(i), id=f"docs/{i}")
                stores_done.set()
        finally:
            stores_done.set()
            watcher.join(30)
        peak = _core._testing.piece_memory()[1] - base_live
        assert seen.get("stalled"), "the producer never stayed blocked on the stalled server"
        bound = (max_buffers + 2) * buffer_size
        slack = (max_buffers + 2) * doc_size_bound  # a buffer ends with the command that took it over
        assert seen["blocked_live"] <= bound + slack
        # over the whole run: with gzip the sender briefly holds a buffer and its compressed
        # form together (compressed pieces are at most a buffer, here about half of one)
        assert peak <= bound + slack + (buffer_size if compress else 0)
        assert len(server.documents) == n  # everything arrived after the resume
        assert bulk.stats.blocked_puts > 0 and bulk.stats.queue_peak == max_buffers


def _store_until_error(bulk, limit=20_000):
    """Store until the sender's failure surfaces; returns (exception, documents stored)."""
    try:
        for i in range(limit):
            bulk.store({"i": i, "text": "x" * 900}, id=f"docs/{i}")
    except BulkInsertError as exc:
        return exc, i
    try:
        bulk.close()
    except BulkInsertError as exc:
        return exc, limit
    return None, limit


@pytest.mark.parametrize("compress", [False, True])
def test_server_failure_raises_with_the_servers_message(server, compress):
    server.fail_after_bytes = 300 << 10
    server.fail_message = "Document 'docs/17' is bad: simulated failure"
    bulk = bulkwire.BulkInsert(server.url, server.database, compress=compress, buffer_size=32 << 10,
                               max_buffers=2, timeout=TIMEOUT)
    exc, stored = _store_until_error(bulk)
    assert exc is not None, "the failure never surfaced"
    assert "simulated failure" in str(exc)
    # the failure reaches store() itself, not only close(): the producer is stopped within the
    # bounded queue and what the sockets hold (about 2,000 documents here, of 20,000)
    assert stored < 20_000, "the server's failure surfaced only at close()"
    # later calls keep raising, close included
    with pytest.raises(BulkInsertError, match="simulated failure"):
        bulk.store({"a": 1}, id="late/1")
    with pytest.raises(BulkInsertError, match="simulated failure"):
        bulk.close()
    state = server.operations[bulk.operation_id]
    assert state["Status"] == "Faulted"


def test_server_failure_at_the_end_raises_at_close(server):
    server.fail_after_bytes = 1  # the first (and only) chunk fails
    bulk = bulkwire.BulkInsert(server.url, server.database, timeout=TIMEOUT)
    bulk.store({"a": 1}, id="a/1")
    with pytest.raises(BulkInsertError, match="Simulated failure on the server"):
        bulk.close()


def test_early_finish_raises(server):
    server.finish_after_bytes = 100 << 10
    bulk = bulkwire.BulkInsert(server.url, server.database, buffer_size=16 << 10, max_buffers=2,
                               timeout=TIMEOUT)
    exc, _ = _store_until_error(bulk)
    assert isinstance(exc, BulkInsertError)
    assert "finished" in str(exc) or "early" in str(exc) or "no longer" in str(exc)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(str(tmp_path_factory.mktemp("pki")))


def _tls_options(sender, pki):
    """The BulkInsert arguments of each sender: plain HTTP (the C pump on the socket),
    bulkwire's own TLS (the C pump through its session), Python's ssl (the Python sender)."""
    if sender == "http":
        return {}
    if sender == "https":
        return {"certificate": pki.client, "ca": pki.ca}
    context = ssl.create_default_context(cafile=pki.ca)
    context.load_cert_chain(pki.client_cert, pki.client_key)
    return {"ssl_context": context}


@pytest.mark.parametrize("documents", [3, 400])  # the body in one buffer, in several
@pytest.mark.parametrize("compress", [False, "zlib", "zstd", *(["python-isal"] if "python-isal" in
                                                            compression_backends() else [])])
@pytest.mark.parametrize("sender", ["http", "https", "https-ssl-context"])
def test_a_201_after_the_last_data_byte_but_before_the_terminating_chunk_is_a_success(
        pki, sender, compress, documents):
    """RavenDB answers 201 once it has parsed the array's closing "]", which can come before
    the terminating chunk (and, compressed, the stream's end) leaves the client: the insert
    returns normally, every document stored, and the body's end is still sent."""
    context = None if sender == "http" else server_context(pki)
    with LoopbackServer(ssl_context=context, answer_at_array_end=True) as server:
        bulk = bulkwire.BulkInsert(server.url, server.database, compress=compress,
                                   buffer_size=4096, max_buffers=2, timeout=TIMEOUT,
                                   **_tls_options(sender, pki))
        hold_the_end_until(bulk, lambda: any(r.answered_before_end for r in server.requests))
        for i in range(documents):
            bulk.store(make_doc(i), id=f"d/{i}")
        bulk.close()
        request, = server.requests
        assert request.answered_before_end and request.status == 201
        assert eventually(lambda: request.end_after_answer)  # the body's end was still sent
        # compressed, the sender took the last buffer before the producer closed: the
        # stream's end came as a piece of its own, after the answer
        assert bulk.stats.pieces == len(request.wire_chunks) + (1 if compress else 0)
        assert server.documents == {f"d/{i}": expected_document(make_doc(i), DICT_MD)
                                    for i in range(documents)}
        assert bulk.stats.buffers == (1 if documents == 3 else bulk.stats.buffers) > 0
        assert server.unexpected_errors == []


def _blocking_document(kind, i):
    """About 1.4 KB of body: text, or floats whose text the sender writes (pending runs)."""
    if kind == "floats":
        return {"i": i, "v": [i + j / 7 for j in range(70)]}
    return {"i": i, "text": "k" * 1400}


@pytest.mark.parametrize("kind", ["text", "floats"])
def test_ctrl_c_during_a_blocked_store_raises_keyboard_interrupt_promptly(kind):
    with LoopbackServer(recv_buffer=32 << 10, keep_decoded_chunks=False) as server:
        server.stall(after_bytes=0)
        bulk = bulkwire.BulkInsert(server.url, server.database, buffer_size=32 << 10, max_buffers=2,
                                   timeout=TIMEOUT, defer_float_text=kind == "floats")
        fired = []

        def interrupt():
            if _blocked(bulk):
                fired.append(time.monotonic())
                _thread.interrupt_main()

        timer = threading.Thread(target=interrupt)
        with pytest.raises(KeyboardInterrupt):
            with bulk:
                bulk.store({"i": 0}, id="d/0")
                timer.start()
                for i in range(1, 20_000):
                    bulk.store(_blocking_document(kind, i), id=f"d/{i}")
        timer.join(30)
        assert fired, "the store never blocked"
        assert time.monotonic() - fired[0] < 5.0  # woken within ~100 ms; generous for sanitizers
        # leaving the with block by the exception aborted the operation
        assert bulk.operation_id in server.killed
        server.resume()


@pytest.mark.parametrize("kind", ["text", "floats"])
def test_a_caught_ctrl_c_during_a_blocked_store_never_loses_documents_quietly(kind):
    """The buffer being handed over when Ctrl-C arrived is not in the body: a caller that
    catches the KeyboardInterrupt and goes on storing must get an error, not a body with a
    hole in it."""
    with LoopbackServer(recv_buffer=32 << 10, keep_decoded_chunks=False) as server:
        server.stall(after_bytes=0)
        bulk = bulkwire.BulkInsert(server.url, server.database, buffer_size=32 << 10, max_buffers=2,
                                   timeout=TIMEOUT, defer_float_text=kind == "floats")
        bulk.store({"i": 0}, id="d/0")
        timer = threading.Thread(target=lambda: _stays_blocked(bulk) and _thread.interrupt_main())
        timer.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                for i in range(1, 20_000):
                    bulk.store(_blocking_document(kind, i), id=f"d/{i}")
        finally:
            timer.join(30)
            server.resume()
        with pytest.raises(BulkInsertAborted, match="incomplete"):
            bulk.store({"i": -1}, id="d/after")
        for _ in range(2):  # every later close says so, and so does leaving a with block
            with pytest.raises(BulkInsertAborted, match="incomplete"):
                bulk.close()
        with pytest.raises(BulkInsertAborted, match="incomplete"):
            with bulk:
                pass
        assert not any(r.complete and r.error is None for r in server.requests)


def _ctrl_c_after(seconds):
    """SIGINT to the main thread after ``seconds``: a real signal, so that a blocking socket
    call returns (EINTR) and raises KeyboardInterrupt, as a Ctrl-C would."""
    main = threading.main_thread().ident
    timer = threading.Timer(seconds, signal.pthread_kill, args=(main, signal.SIGINT))
    timer.start()
    return timer


@pytest.mark.parametrize("where", ["next-operation-id", "close", "exit", "kill"])
def test_ctrl_c_at_any_wait_leaves_the_insert_failed_for_good(where):
    """Ctrl-C while waiting for the operation id, for the server's answer in close() (or in
    the with block's exit), or for the kill in abort(): the insert did not complete, so no
    later call may return normally (a second close() used to)."""
    stalled = {"next-operation-id": "next-operation-id", "close": "bulk_insert",
               "exit": "bulk_insert", "kill": "kill"}[where]
    with FaultServer({stalled: "stall"}, stall_seconds=10.0) as server:
        bulk = bulkwire.BulkInsert(server.url, server.database, timeout=TIMEOUT)
        started = time.monotonic()
        if where != "next-operation-id":
            bulk.store({"i": 0}, id="d/0")
        timer = _ctrl_c_after(0.3)
        try:
            with pytest.raises(KeyboardInterrupt):
                if where == "next-operation-id":
                    bulk.store({"i": 0}, id="d/0")
                elif where == "close":
                    bulk.close()
                elif where == "exit":
                    with bulk:
                        bulk.store({"i": 1}, id="d/1")
                else:
                    bulk.abort()
        finally:
            timer.join()
        assert time.monotonic() - started < 5.0  # interrupted, not timed out
        for _ in range(3):
            with pytest.raises(BulkInsertAborted):
                bulk.close()
        with pytest.raises(BulkInsertAborted):
            bulk.store({"i": 2}, id="d/2")
        with pytest.raises(BulkInsertAborted):
            with bulk:
                pass
        assert not server.ok_to_whole_body(bulk.operation_id)
        if bulk._sender is not None:  # the sender was stopped, not left waiting
            bulk._sender.join(TIMEOUT)
            assert not bulk._sender.is_alive()
        assert server.log.count("GET /databases/db/operations/next-operation-id") == 1


@pytest.mark.parametrize("kind", ["small", "floats"])
def test_abort(server, kind):
    server.stall(after_bytes=0)
    bulk = bulkwire.BulkInsert(server.url, server.database, buffer_size=8 << 10, max_buffers=2,
                               timeout=TIMEOUT, defer_float_text=kind == "floats")
    for i in range(5 if kind == "small" else 12):  # floats: buffers with runs wait in the queue
        bulk.store({"i": i} if kind == "small" else _blocking_document(kind, i), id=f"d/{i}")
    bulk.abort()
    assert bulk.operation_id in server.killed
    assert server.operations[bulk.operation_id]["Status"] == "Canceled"
    with pytest.raises(BulkInsertAborted, match="aborted"):
        bulk.store({"i": 99}, id="d/99")
    for _ in range(2):  # an aborted insert did not complete: close raises, every time
        with pytest.raises(BulkInsertAborted, match="aborted"):
            bulk.close()
    bulk.abort()  # a second abort is a no-op
    server.resume()
    assert not bulk._sender.is_alive()


def test_abort_before_any_store_sends_nothing(server):
    bulk = bulkwire.BulkInsert(server.url, server.database, timeout=TIMEOUT)
    bulk.abort()
    assert server.log == []


def test_an_unencodable_document_sends_nothing_and_the_operation_continues(server):
    with bulkwire.BulkInsert(server.url, server.database, buffer_size=4096, timeout=TIMEOUT) as bulk:
        for i in range(200):
            bulk.store({"i": i, "pad": "p" * 100}, id=f"ok/{i}")
            if i % 50 == 0:
                with pytest.raises(TypeError, match="is not JSON serializable"):
                    bulk.store({"i": i, "when": time}, id=f"bad/{i}")
    body = bytes(server.requests[-1].body)
    assert b"bad/" not in body
    assert sorted(server.documents) == sorted(f"ok/{i}" for i in range(200))


@pytest.mark.parametrize("args, kwargs, error, match", [
    ((5, "db"), {}, TypeError, "url must be a str"),
    (("ftp://host", "db"), {}, ValueError, "url 'ftp://host': a server URL starts with http"),
    (("http://127.0.0.1:1", ""), {}, ValueError, "database must be a non-empty"),
    (("http://127.0.0.1:1", None), {}, TypeError, "database must be a str"),
    (("http://127.0.0.1:1", "db"), {"buffer_size": 0}, ValueError, "buffer_size must be positive"),
    (("http://127.0.0.1:1", "db"), {"max_buffers": -1}, ValueError, "max_buffers must be positive"),
    (("http://127.0.0.1:1", "db"), {"timeout": 0}, ValueError, "timeout must be"),
    (("http://127.0.0.1:1", "db"), {"compress": "fast"}, ValueError, "compress must be"),
    (("http://127.0.0.1:1", "db"), {"skip_overwrite_if_unchanged": "yes"}, TypeError,
     "skip_overwrite_if_unchanged"),
])
def test_bad_arguments(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        bulkwire.BulkInsert(*args, **kwargs)


def test_bad_ids_raise_before_anything_is_written(server):
    with bulkwire.BulkInsert(server.url, server.database, timeout=TIMEOUT) as bulk:
        with pytest.raises(ValueError, match=r"id ends with '\|'"):
            bulk.store({"a": 1}, id="users|")
        with pytest.raises(ValueError, match="id is empty"):
            bulk.store({"a": 1}, id="")
        bulk.store({"a": 1}, id="fine/1")
    assert list(server.documents) == ["fine/1"]


def test_unreachable_server_raises_at_the_first_store():
    with LoopbackServer() as s:
        url = s.url
    bulk = bulkwire.BulkInsert(url, "db", timeout=5)
    with pytest.raises(bulkwire.ConnectError, match=r"cannot reach the server for GET http://127\.0\.0\.1:\d+/"
                       r"databases/db/operations/next-operation-id") as caught:
        bulk.store({"a": 1}, id="a/1")
    assert isinstance(caught.value.__cause__, ConnectionRefusedError)
    # the insert stays failed: no new attempt, no later normal return
    with pytest.raises(bulkwire.ConnectError):
        bulk.store({"a": 2}, id="a/2")
    with pytest.raises(bulkwire.ConnectError):
        bulk.close()


@pytest.mark.parametrize("compress", [True, False])
def test_counting_server_mode_and_its_summary_endpoint(compress):
    import http.client
    import urllib.parse

    with LoopbackServer(keep_body=False) as server:
        with bulkwire.BulkInsert(server.url, server.database, compress=compress, buffer_size=2048,
                                 timeout=TIMEOUT) as bulk:
            for i in range(300):
                bulk.store({"i": i, "pad": "q" * 64}, id=f"c/{i}")
        u = urllib.parse.urlsplit(server.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=TIMEOUT)
        conn.request("GET", "/_loopback/last")
        summary = json.loads(conn.getresponse().read())
        conn.close()
    assert summary["documents"] == 300 and summary["complete"] and summary["error"] is None
    assert summary["wire_bytes"] == bulk.stats.wire_bytes
    assert summary["body_bytes"] == bulk.stats.body_bytes
    assert summary["wire_chunks"] == bulk.stats.pieces
    assert summary["content_encoding"] == ("gzip" if compress else None)
    assert server.documents == {}


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("piece", [1, 5, 11, 12, 13, 700])
def test_counting_server_counts_markers_split_across_chunks(compress, piece):
    """The counting server finds every PUT marker, also those split over several chunks."""
    import http.client
    import urllib.parse
    import zlib

    commands = [{"Id": f"k/{i}", "Type": "PUT", "Document": {"i": i}} for i in range(40)]
    body = json.dumps(commands, separators=(",", ":")).encode()
    if compress:
        z = zlib.compressobj(1, zlib.DEFLATED, 31)
        body = z.compress(body) + z.flush()
    with LoopbackServer(keep_body=False) as server:
        u = urllib.parse.urlsplit(server.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=TIMEOUT)
        conn.request("GET", f"/databases/{server.database}/operations/next-operation-id")
        op = json.loads(conn.getresponse().read())["Id"]
        pieces = [body[i:i + piece] for i in range(0, len(body), piece)]
        conn.request("POST", f"/databases/{server.database}/bulk_insert?id={op}", body=iter(pieces),
                     headers={"Content-Encoding": "gzip"} if compress else {}, encode_chunked=True)
        assert conn.getresponse().status == 201
        conn.close()
        summary = server.last_request_summary()
    assert summary["documents"] == 40 and summary["complete"] and summary["error"] is None
    assert summary["wire_chunks"] == len(pieces)


def test_a_server_that_stops_reading_times_out_into_an_error():
    with LoopbackServer(recv_buffer=32 << 10, keep_decoded_chunks=False) as server:
        server.stall(after_bytes=0)
        bulk = bulkwire.BulkInsert(server.url, server.database, buffer_size=32 << 10, max_buffers=2,
                                   timeout=0.5)
        started = time.monotonic()
        with pytest.raises(BulkInsertError, match="timed out"):
            for i in range(20_000):
                bulk.store({"i": i, "text": "s" * 1400}, id=f"s/{i}")
            bulk.close()
        assert time.monotonic() - started < 20
        server.resume()


def test_store_after_close_or_abort_raises(server):
    bulk = bulkwire.BulkInsert(server.url, server.database, timeout=TIMEOUT)
    bulk.store({"i": 0}, id="c/0")
    bulk.close()
    with pytest.raises(ValueError, match="closed"):
        bulk.store({"i": 1}, id="c/1")
    with pytest.raises(ValueError, match="closed"):
        bulk.store_many([{"i": 2}], ids=["c/2"])
    assert list(server.documents) == ["c/0"]
    never_started = bulkwire.BulkInsert(server.url, server.database, timeout=TIMEOUT)
    never_started.abort()
    with pytest.raises(BulkInsertAborted, match="aborted"):
        never_started.store({"i": 3}, id="c/3")
    with pytest.raises(BulkInsertAborted, match="aborted"):
        never_started.close()
    empty = bulkwire.BulkInsert(server.url, server.database, timeout=TIMEOUT)
    empty.close()  # nothing stored: no request, nothing failed
    empty.close()
    with pytest.raises(ValueError, match="closed"):
        empty.store({"i": 4}, id="c/4")


# ---- one producer thread ----

ONE_THREAD = "takes documents from one thread only"


def test_a_writer_refuses_every_call_from_a_second_thread_and_stays_intact():
    """Another thread's store/store_many/store_encoded/close raise RuntimeError every time,
    before anything changes, also when the calls do not overlap (they used to pass, or
    fail at random when they did)."""
    writer = bulkwire.BulkWriter(buffer_size=256)
    writer.store({"a": 0}, id="a/0")
    results = []

    def other():
        calls = (lambda: writer.store({"b": 1}, id="b/1"),
                 lambda: writer.store_many([{"c": 1}], ids=["c/1"]),
                 lambda: writer.store_encoded(b'{"Id":"e/1","Type":"PUT","Document":{}}', 1),
                 writer.close)
        for call in calls:
            try:
                call()
                results.append("returned")
            except RuntimeError as exc:
                results.append(str(exc))

    for _ in range(10):
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert len(results) == 40 and all(ONE_THREAD in r for r in results), results
    writer.store({"a": 1}, id="a/1")
    writer.close()
    body = b"".join(bytes(c) for c in writer.pieces())
    assert [c["Id"] for c in json.loads(body)] == ["a/0", "a/1"]
    assert writer.documents == 2


def test_concurrent_stores_from_two_threads_fail_deterministically():
    writer = bulkwire.BulkWriter(buffer_size=4096, max_buffers=1000)
    writer.store({"i": -1}, id="main/start")
    refused = []
    go = threading.Event()

    def hammer():
        go.wait()
        for i in range(300):
            try:
                writer.store({"i": i, "v": list(range(50))}, id=f"other/{i}")
            except RuntimeError as exc:
                refused.append(str(exc))

    t = threading.Thread(target=hammer)
    t.start()
    go.set()
    for i in range(300):
        writer.store({"i": i, "v": list(range(50))}, id=f"main/{i}")
    t.join()
    writer.close()
    assert len(refused) == 300 and all(ONE_THREAD in r for r in refused)
    ids = [c["Id"] for c in json.loads(b"".join(bytes(c) for c in writer.pieces()))]
    assert ids == ["main/start"] + [f"main/{i}" for i in range(300)]


def test_a_bulk_insert_belongs_to_its_producer_but_abort_may_come_from_another_thread():
    with LoopbackServer(recv_buffer=32 << 10, keep_decoded_chunks=False) as server:
        server.stall(after_bytes=0)
        bulk = bulkwire.BulkInsert(server.url, server.database, buffer_size=32 << 10,
                                   max_buffers=2, timeout=TIMEOUT)
        bulk.store({"i": 0}, id="d/0")
        refused = refused_on_another_thread([lambda: bulk.store({"x": 1}, id="x/1"),
                                             bulk.close])
        assert len(refused) == 2 and all(ONE_THREAD in r for r in refused)
        # a watchdog thread aborts: the producer waiting on the full queue wakes with it
        watchdog = threading.Thread(target=lambda: _blocked(bulk) and bulk.abort())
        watchdog.start()
        try:
            with pytest.raises(BulkInsertAborted, match="aborted"):
                for i in range(1, 20_000):
                    bulk.store({"i": i, "text": "w" * 1400}, id=f"d/{i}")
        finally:
            watchdog.join(30)
            server.resume()
        assert i < 19_999 and bulk.operation_id in server.killed
        assert len(server.operations) == 1  # the refused calls started nothing
        with pytest.raises(BulkInsertAborted):
            bulk.close()


@pytest.mark.parametrize("compress", [False, "zstd"])
def test_stats_are_live_before_close(server, compress):
    n = 5000
    with bulkwire.BulkInsert(server.url, server.database, compress=compress,
                             buffer_size=16 << 10, timeout=TIMEOUT) as bulk:
        for i in range(n):
            bulk.store(make_doc(i), id=f"docs/{i}")
        assert bulk.stats.documents == n  # before close: what was stored so far
        # the sender (the C body pump, on its own thread) counts what it took and sent as it goes
        assert eventually(lambda: bulk.stats.buffers > 10 and bulk.stats.pieces > 10)
        live = bulk.stats
        # zstd bodies on a build without libzstd are compressed in Python (python-zstd), so
        # the Python sender sends them; both count as they go
        sender = "c" if compress is False or _core.HAVE_ZSTD else "python"
        assert live.sender == sender and 0 < live.wire_bytes and 16 << 10 <= live.body_bytes
        assert live.body_bytes <= bulk._writer._writer.bytes  # never more than was written
    request = server.requests[-1]
    final = bulk.stats  # close gives the final figures
    assert final.documents == n and final.body_bytes == len(request.body)
    assert final.wire_bytes == sum(request.wire_chunks) and final.pieces == len(request.wire_chunks)


def test_stats_are_live_while_a_stalled_server_holds_the_queue_full():
    max_buffers = 2
    with LoopbackServer(recv_buffer=32 << 10, keep_decoded_chunks=False) as server:
        server.stall(after_bytes=128 << 10)
        bulk = bulkwire.BulkInsert(server.url, server.database, buffer_size=16 << 10,
                                   max_buffers=max_buffers, timeout=TIMEOUT)
        stored = []
        stop = threading.Event()

        def produce():  # the producer thread: blocks on the full queue while the server stalls
            i = 0
            while not stop.is_set() and i < 20_000:
                bulk.store(make_doc(i), id=f"docs/{i}")
                i += 1
                stored.append(i)
            bulk.close()  # by the thread that owns the insert
        producer = threading.Thread(target=produce)
        producer.start()
        try:
            # the queue may fill for a moment before the server reaches its stall point
            assert eventually(lambda: server.stalled and _blocked(bulk, timeout=0.2), limit=60), \
                "the producer never blocked on the stalled server"
            stats = bulk.stats  # read from this thread, while the producer waits
            # the documents written so far: those stored, and the one whose store is waiting
            # to hand its full buffer over
            assert stats.documents == bulk._writer._writer.commands
            assert 0 < stored[-1] <= stats.documents <= stored[-1] + 1
            assert 0 < stats.body_bytes and 0 < stats.wire_bytes
            assert stats.blocked_puts > 0 and stats.queue_peak == max_buffers
        finally:
            stop.set()
            server.resume()
            producer.join(60)
        assert not producer.is_alive()
        request = server.requests[-1]
        assert bulk.stats.documents == stored[-1] == len(server.documents)
        assert bulk.stats.body_bytes == request.body_bytes
