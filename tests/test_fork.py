"""A forked child and what it inherited from its parent.

fork() copies the parent's memory and only the thread that called it: the parent's sender
thread, compression helpers and load threads do not exist in the child, a lock one of them
held stays locked there, and the child shares the parent's sockets and TLS sessions. An
inherited bulk insert (or writer, queue, compressor on several threads, TLS session) must
refuse every call in the child at once with RuntimeError, and nothing the child does,
explicitly or through garbage collection and interpreter exit, may reach the parent's
request: the parent's insert completes with every document, the server sees no kill and no
early end of the connection. What a child makes itself works as anywhere.

Each child runs under a deadline: a child that hangs is killed and the test fails.
"""
from __future__ import annotations

import gc
import json
import multiprocessing
import os
import select
import signal
import ssl
import subprocess
import sys
import textwrap
import threading
import time
import traceback
import zlib

import pytest

import bulkwire
from bulkwire import _core
from bulkwire.testing import LoopbackCluster, LoopbackServer, ZstdInflater
from bulkwire.testing.pki import make_pki, server_context
from bulkwire.tls import TlsSettings
from build_extras import needs

TIMEOUT = 20.0
#: A refusal is immediate, and a close does not wait on the peer: the bound only has to tell
#: that apart from a wait on TIMEOUT, with room for a loaded machine and sanitizer builds (a
#: child's ``gc.collect()`` took 2.3 s on two cores shared by twenty runnable processes).
QUICK = 5.0
#: Every refusal says why: the object was made by the process this one was forked from.
FORKED = "was made by the process this one was forked from"
HERE = os.path.dirname(os.path.abspath(__file__))
# where the bulkwire under test is (the checkout with PYTHONPATH=pkg, or the installed copy)
PKG = os.path.dirname(os.path.dirname(os.path.abspath(bulkwire.__file__)))


class Pulse:
    def __init__(self, rate=None):
        self.rate = rate

    def get_time_series_mapping(self):
        return {0: ("rate", None)}


def wait_for_exit(pid, deadline):
    """The child's wait status once it ended, or None when it had not by ``deadline``
    (``time.monotonic()``): it is then killed."""
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


def run_in_child(action, timeout=TIMEOUT):
    """Forks; the child runs ``action()`` and sends back what it returns (JSON), then ends
    with ``os._exit``. A child that does not end within ``timeout`` is killed: the test
    fails."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never back into pytest
        try:
            os.close(read_end)
            try:
                data = json.dumps({"result": action()}).encode()
            except BaseException:  # noqa: BLE001 - reported to the parent
                data = json.dumps({"crashed": traceback.format_exc()}).encode()
            view = memoryview(data)
            while view:
                view = view[os.write(write_end, view):]
        finally:
            os._exit(0)
    os.close(write_end)
    deadline = time.monotonic() + timeout
    data = b""
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            readable, _, _ = select.select([read_end], [], [], left)
            if not readable:
                continue
            piece = os.read(read_end, 1 << 16)
            if not piece:
                break
            data += piece
        status = wait_for_exit(pid, deadline)
        if status is None:
            pytest.fail(f"the forked child did not end within {timeout} s")
    finally:
        os.close(read_end)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    report = json.loads(data)
    assert "crashed" not in report, report.get("crashed")
    return report["result"]


def attempts(calls):
    """Runs each ``(name, call)``; ``[name, outcome, message, seconds]`` for each, outcome
    "returned" or the exception's class name."""
    out = []
    for name, call in calls:
        start = time.monotonic()
        try:
            call()
            outcome, message = "returned", ""
        except BaseException as exc:  # noqa: BLE001 - what it raised is the result
            outcome, message = type(exc).__name__, str(exc)
        out.append([name, outcome, message, time.monotonic() - start])
    return out


def assert_refused(report, names):
    """Every call was refused at once with the fork's RuntimeError."""
    assert [r[0] for r in report] == names
    for name, outcome, message, seconds in report:
        assert outcome == "RuntimeError" and FORKED in message, (name, outcome, message)
        assert seconds < QUICK, (name, seconds)


def insert_calls(bulk, counters, attachments):
    """Every call of a bulk insert a child could make, the helpers (made before the fork)
    included."""
    return [
        ("store", lambda: bulk.store({"x": 1}, id="child/1")),
        ("store_many", lambda: bulk.store_many([{"x": 2}], ids=["child/2"])),
        ("store_many of nothing", lambda: bulk.store_many([])),
        ("store_encoded", lambda: bulk.store_encoded(
            b'{"Id":"child/3","Type":"PUT","Document":{}}', 1)),
        ("store_encoded of nothing", lambda: bulk.store_encoded(b"", 0)),
        ("counters_for", lambda: bulk.counters_for("c/2")),
        ("increment", lambda: counters.increment("n")),
        ("attachments_for", lambda: bulk.attachments_for("a/2")),
        ("attachment", lambda: attachments.store("f", b"xyz")),
        ("time_series_for", lambda: bulk.time_series_for("s/1", "S")),
        ("typed_time_series_for", lambda: bulk.typed_time_series_for(Pulse, "s/2")),
        ("close", lambda: bulk.close()),
        ("abort", lambda: bulk.abort()),
        ("with", lambda: bulk.__enter__()),
        ("with exit", lambda: bulk.__exit__(None, None, None)),
        ("with exit by an exception", lambda: bulk.__exit__(
            ValueError, ValueError("in the child"), None)),
    ]


INSERT_CALLS = [name for name, _ in insert_calls(None, None, None)]


def document(kind, i):
    """About 1.4 KB of body: text, or floats whose text the sender writes (pending runs)."""
    if kind == "floats":
        return {"i": i, "v": [i + j / 7 for j in range(70)]}
    return {"i": i, "text": "k" * 1400}


def fill_the_queue(server, bulk, kind, ids):
    """Stores until the sender, held by the stalled server, leaves the queue full: the next
    hand-over would wait for it."""
    queue = bulk._writer._queue
    deadline = time.monotonic() + TIMEOUT
    while len(queue) < queue.maxsize:
        assert time.monotonic() < deadline, "the queue never filled"
        doc_id = f"p/{len(ids)}"
        bulk.store(document(kind, len(ids)), id=doc_id)
        ids.append(doc_id)
    assert server.wait_stalled(TIMEOUT)  # the request is under way, its body held


def wait_for_the_request(log):
    """Until the bulk insert's POST is in ``log()`` (the server writes it down as the
    request comes in, a moment after the sender sent it)."""
    deadline = time.monotonic() + TIMEOUT
    while not any("/bulk_insert" in line for line in log()):
        assert time.monotonic() < deadline, "the request never started"
        time.sleep(0.01)


def child_makes_its_own():
    """What a child makes itself works: a writer (its buffers from the pool the parent's
    sender was using), deferred float text, a compressor on several threads."""
    writer = bulkwire.BulkWriter(buffer_size=256, max_buffers=1000, defer_float_text=True)
    docs = [document("floats", i) for i in range(20)]
    for i, doc in enumerate(docs):
        writer.store(doc, id=f"own/{i}")
    writer.close()
    body = b"".join(bytes(c) for c in writer.pieces())
    got = [(c["Id"], c["Document"]["v"]) for c in json.loads(body)]
    gz = _core.GzipStream(threads=2)
    data = os.urandom(1 << 20).hex().encode()
    packed = bytes(gz.compress(data)) + bytes(gz.finish())
    return {"writer": got == [(f"own/{i}", json.loads(json.dumps(d["v"])))
                              for i, d in enumerate(docs)],
            "gzip": zlib.decompress(packed, 31) == data}


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(str(tmp_path_factory.mktemp("pki")))


def open_server(transport, pki):
    if transport == "http":
        return LoopbackServer(recv_buffer=32 << 10, keep_decoded_chunks=False)
    return LoopbackServer(recv_buffer=32 << 10, keep_decoded_chunks=False,
                          ssl_context=server_context(pki))


def tls_arguments(transport, pki):
    if transport == "https":  # bulkwire's own TLS: the body pump writes through it
        return {"certificate": pki.client, "ca": pki.ca}
    if transport == "https-ssl-context":  # Python's ssl: the Python sender
        context = ssl.create_default_context(cafile=pki.ca)
        context.load_cert_chain(pki.client_cert, pki.client_key)
        return {"ssl_context": context}
    return {}


def assert_the_parent_completed(server, bulk, ids, kind):
    """Every document of the parent on the server, one request, complete, never killed."""
    assert server.killed == set() and not any("kill" in line for line in server.log)
    (request,) = server.requests
    assert request.complete and request.error is None
    assert set(server.documents) == set(ids)
    for doc_id in (ids[0], ids[len(ids) // 2], ids[-1]):
        stored = dict(server.documents[doc_id])
        stored.pop("@metadata")
        assert stored == json.loads(json.dumps(document(kind, int(doc_id.split("/")[1]))))
    assert server.unexpected_errors == []
    assert bulk.stats.documents == len(ids)


@pytest.mark.parametrize("transport, kind, compress", [
    ("http", "text", False),
    ("http", "floats", "zlib"),
    ("https", "text", False),
    ("https", "floats", "zlib"),
    ("https-ssl-context", "text", "zlib"),
])
def test_a_forked_child_cannot_use_an_inherited_insert_and_the_parent_completes(
        pki, transport, kind, compress):
    """The parent's sender is blocked on a stalled server and its queue is full (a store
    that hands a buffer over would wait): every call of the child raises RuntimeError at
    once, none waits, none reaches the server; then the parent's insert completes."""
    with open_server(transport, pki) as server:
        server.stall(after_bytes=0)
        bulk = bulkwire.BulkInsert(server.url, server.database, compress=compress,
                                   buffer_size=32 << 10, max_buffers=2, timeout=TIMEOUT,
                                   defer_float_text=kind == "floats",
                                   **tls_arguments(transport, pki))
        ids = []
        try:
            counters = bulk.counters_for("c/1")
            attachments = bulk.attachments_for("a/1")
            fill_the_queue(server, bulk, kind, ids)
            requests_before = len(server.log)

            def child():
                return {"refused": attempts(insert_calls(bulk, counters, attachments)),
                        "own": child_makes_its_own()}

            report = run_in_child(child)
            assert_refused(report["refused"], INSERT_CALLS)
            assert report["own"] == {"writer": True, "gzip": True}
            assert len(server.log) == requests_before  # the child asked the server nothing
        finally:
            server.resume()
        for _ in range(50):  # the parent's insert goes on as if nothing happened
            doc_id = f"p/{len(ids)}"
            bulk.store(document(kind, len(ids)), id=doc_id)
            ids.append(doc_id)
        bulk.close()
        assert_the_parent_completed(server, bulk, ids, kind)


def test_a_forked_child_cannot_use_an_inherited_writer():
    """BulkWriter has no thread, but its queue's other side may be the parent's, and its
    ids would repeat the parent's: every call of the child raises, the parent's body is
    whole."""
    writer = bulkwire.BulkWriter(buffer_size=256, max_buffers=1000)
    writer.store({"a": 0}, id="d/0")
    writer.store({"a": 1})  # a generated id: the child would repeat it

    def child():
        calls = [("store", lambda: writer.store({"b": 1})),
                 ("store_many", lambda: writer.store_many([])),
                 ("store_encoded", lambda: writer.store_encoded(
                     b'{"Id":"e/1","Type":"PUT","Document":{}}', 1)),
                 ("counters_for", lambda: writer.counters_for("c/1")),
                 ("attachments_for", lambda: writer.attachments_for("a/1")),
                 ("time_series_for", lambda: writer.time_series_for("s/1", "S")),
                 ("close", writer.close),
                 ("fail", lambda: writer.fail(RuntimeError("x"))),
                 ("pieces", lambda: next(iter(writer.pieces()))),
                 ("pump", lambda: writer.pump(0, 1.0))]
        return attempts(calls)

    assert_refused(run_in_child(child), ["store", "store_many", "store_encoded", "counters_for",
                                         "attachments_for", "time_series_for", "close", "fail",
                                         "pieces", "pump"])
    writer.store({"a": 2}, id="d/2")
    writer.close()
    ids = [c["Id"] for c in json.loads(b"".join(bytes(c) for c in writer.pieces()))]
    assert ids[0] == "d/0" and ids[2] == "d/2" and ids[1].startswith("dicts/")


def _touch_the_inherited_insert(call):
    """A Pool task in a worker forked from the test: the insert (and its helpers) are the
    parent's."""
    if call == "all":
        return attempts(insert_calls(*_INHERITED))
    return _INHERITED[0].store({"from": "pool"}, id="pool/1")


_INHERITED: list = []


@pytest.mark.parametrize("transport", ["http", "https"])
def test_a_multiprocessing_pool_task_cannot_use_an_inherited_insert(pki, transport):
    """multiprocessing with the fork start method: a worker forked while the insert is live
    (queue full, sender blocked) gets RuntimeError from every call, raised again in the
    parent by the pool; the parent's insert completes."""
    with open_server(transport, pki) as server:
        server.stall(after_bytes=0)
        bulk = bulkwire.BulkInsert(server.url, server.database, buffer_size=32 << 10,
                                   max_buffers=2, timeout=TIMEOUT, **tls_arguments(transport, pki))
        ids = []
        _INHERITED[:] = [bulk, bulk.counters_for("c/1"), bulk.attachments_for("a/1")]
        pool = None
        try:
            fill_the_queue(server, bulk, "text", ids)
            pool = multiprocessing.get_context("fork").Pool(1)
            report = pool.apply_async(_touch_the_inherited_insert, ("all",)).get(TIMEOUT)
            assert_refused(report, INSERT_CALLS)
            with pytest.raises(RuntimeError, match=FORKED):
                pool.apply_async(_touch_the_inherited_insert, ("store",)).get(TIMEOUT)
        finally:
            _INHERITED.clear()
            if pool is not None:
                pool.terminate()
                pool.join()
            server.resume()
        bulk.close()
        assert_the_parent_completed(server, bulk, ids, "text")


CHILD_EXIT_SCRIPT = textwrap.dedent('''
    """The parent: an insert whose sender a stalled server holds, its queue full. The
    child: a with block left by an exception, the insert dropped and collected, then the
    interpreter's exit (atexit, module teardown). The parent then completes its insert."""
    import gc, json, os, ssl, sys, time
    import bulkwire
    from bulkwire.testing import LoopbackServer
    from bulkwire.testing.pki import make_pki, server_context

    transport, compress, pki_dir, tests = sys.argv[1:5]
    sys.path.insert(0, tests)
    from test_fork import wait_for_exit
    compress = False if compress == "none" else compress
    pki = make_pki(pki_dir)
    tls = {}
    server_tls = {}
    if transport != "http":
        server_tls = {"ssl_context": server_context(pki)}
        if transport == "https":
            tls = {"certificate": pki.client, "ca": pki.ca}
        else:
            context = ssl.create_default_context(cafile=pki.ca)
            context.load_cert_chain(pki.client_cert, pki.client_key)
            tls = {"ssl_context": context}
    server = LoopbackServer(recv_buffer=32 << 10, keep_decoded_chunks=False, **server_tls)
    server.stall(after_bytes=0)
    bulk = bulkwire.BulkInsert(server.url, server.database, compress=compress,
                               buffer_size=32 << 10, max_buffers=2, timeout=20.0, **tls)
    ids = []
    queue = bulk._writer._queue
    while len(queue) < queue.maxsize:
        ids.append(f"p/{len(ids)}")
        bulk.store({"i": len(ids), "text": "k" * 1400}, id=ids[-1])
    assert server.wait_stalled(20.0)  # the request is under way, its body held
    log_before = len(server.log)
    pid = os.fork()
    if pid == 0:
        try:
            with bulk:
                raise ValueError("the child's own failure")
        except RuntimeError:
            pass  # refused: the with block's exception is not the insert's business
        del bulk, queue
        gc.collect()
        sys.exit(0)  # the whole interpreter exit, finalizers included
    status = wait_for_exit(pid, time.monotonic() + 20.0)
    server.resume()
    for _ in range(50):
        ids.append(f"p/{len(ids)}")
        bulk.store({"i": len(ids), "text": "k" * 1400}, id=ids[-1])
    bulk.close()
    (request,) = server.requests
    print(json.dumps({
        "child_status": status, "child_log": server.log[log_before:log_before + 1],
        "killed": sorted(server.killed), "complete": request.complete, "error": request.error,
        "documents": sorted(server.documents) == sorted(ids), "count": len(server.documents),
        "unexpected": server.unexpected_errors}))
    server.close()
''')


@pytest.mark.parametrize("transport, compress", [
    ("http", "none"), ("https", "none"), ("https", "zlib"), ("https-ssl-context", "zlib")])
def test_a_childs_with_block_and_interpreter_exit_leave_the_parents_insert_alone(
        tmp_path, transport, compress):
    """The child leaves a with block by an exception (the with refuses), drops the insert,
    collects it and exits the interpreter normally: no kill, no shutdown of the shared
    socket, no TLS close_notify in the parent's session, no hang; the parent completes."""
    script = tmp_path / "child_exit.py"
    script.write_text(CHILD_EXIT_SCRIPT)
    (tmp_path / "pki").mkdir()
    env = dict(os.environ, PYTHONPATH=PKG + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, str(script), transport, compress,
                           str(tmp_path / "pki"), HERE],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["child_status"] == 0, result  # ended on its own, at once
    assert result["child_log"] == []  # the child asked the server nothing
    assert result["killed"] == [] and result["unexpected"] == []
    assert result["complete"] and result["error"] is None
    assert result["documents"], result["count"]


def _http_get(conn, path):
    conn.request("GET", path)
    response = conn.getresponse()
    return response.status, response.read()


@needs("openssl")  # bulkwire's own TLS session and context
def test_a_child_closing_an_inherited_tls_session_sends_nothing_on_it(pki):
    """bulkwire's own TLS session, inherited: the child's calls on it raise, and its close
    (explicit, then by collection) drops the child's copy without a close_notify, which the
    server would take for the parent's end of the session."""
    with LoopbackServer(ssl_context=server_context(pki)) as server:
        port = int(server.url.rsplit(":", 1)[1])
        conn = TlsSettings(pki.client, pki.ca).http_connection("127.0.0.1", port, TIMEOUT)
        path = "/databases/db/operations/next-operation-id"
        assert _http_get(conn, path)[0] == 200
        session = conn.sock.session

        def child():
            buffer = bytearray(16)
            report = attempts([("sendall", lambda: session.sendall(b"GET / HTTP/1.1\r\n\r\n")),
                               ("recv_into", lambda: session.recv_into(buffer)),
                               ("answered", session.answered)])
            start = time.monotonic()
            conn.close()  # the socket's copy closes; the session's copy is dropped
            gc.collect()
            return {"refused": report, "closed": time.monotonic() - start}

        report = run_in_child(child)
        assert_refused(report["refused"], ["sendall", "recv_into", "answered"])
        assert report["closed"] < QUICK
        # the same session, on the same connection, still serves the parent
        assert _http_get(conn, path)[0] == 200
        assert conn.sock.session is session
        conn.close()
        assert server.tls_failures == [] and server.unexpected_errors == []


@needs("openssl")  # bulkwire's own TLS session and context
def test_an_inherited_tls_context_makes_no_session_in_the_child(pki):
    settings = TlsSettings(pki.client, pki.ca)

    def child():
        return attempts([("connect", lambda: settings._native_context.connect(0, "127.0.0.1"))])

    assert_refused(run_in_child(child), ["connect"])


@pytest.mark.parametrize("kind", ["gzip", "zstd"])
def test_a_compressor_on_several_threads_is_refused_in_a_child_and_goes_on_in_the_parent(kind):
    """Its helpers (libzstd's workers) are the parent's: the child's calls raise, and
    dropping its copy does not wait for them; the parent's stream still ends right."""
    if kind == "zstd" and not _core.HAVE_ZSTD:
        pytest.skip("built without libzstd: ZstdStream does not exist")
    holder = [_core.GzipStream(threads=3) if kind == "gzip" else _core.ZstdStream(threads=2)]
    data = os.urandom(3 << 19).hex().encode()
    out = [bytes(holder[0].compress(data[:len(data) // 2]))]  # the helpers run now

    def child():
        stream = holder[0]
        report = attempts([("compress", lambda: stream.compress(b"abc")),
                           ("finish", stream.finish)])
        start = time.monotonic()
        del stream
        holder.clear()  # the only reference: the child's copy is freed here
        gc.collect()
        return {"refused": report, "freed": time.monotonic() - start}

    report = run_in_child(child)
    assert_refused(report["refused"], ["compress", "finish"])
    assert report["freed"] < QUICK
    out.append(bytes(holder[0].finish(data[len(data) // 2:])))
    body = b"".join(out)
    if kind == "gzip":
        assert zlib.decompress(body, 31) == data
    else:
        inflater = ZstdInflater()
        assert b"".join(inflater.feed(body)) == data
        inflater.finish()


def test_a_forked_child_cannot_use_an_inherited_dropin_bulk_insert():
    """bulkwire.ravendb's operation, inherited: every call raises at once, before the
    store's HiLo could ask the server for ids, and leaving a with block (the client commits
    there) does not end the parent's insert."""
    import bulkwire.ravendb as dropin
    from ravendb_store import Person, store_on

    with LoopbackServer() as server, store_on(server) as store:
        bulk = dropin.bulk_insert(store)
        # the whole HiLo range: the next id would need a request
        ids = [bulk.store(Person(f"u{i}")) for i in range(LoopbackServer.HILO_RANGE)]
        wait_for_the_request(lambda: server.log)
        requests_before = len(server.log)

        def child():
            return attempts([
                ("store", lambda: bulk.store(Person("child"))),
                ("store_as", lambda: bulk.store_as(Person("child"), "users/child")),
                ("counters_for", lambda: bulk.counters_for(ids[0]).increment("n")),
                ("attachments_for", lambda: bulk.attachments_for(ids[0]).store("f", b"x")),
                ("time_series_for", lambda: bulk.time_series_for(ids[0], "S")),
                ("abort", bulk.abort),
                ("with", bulk.__enter__),
                ("with exit", lambda: bulk.__exit__(None, None, None)),
                ("with exit by an exception", lambda: bulk.__exit__(
                    ValueError, ValueError("in the child"), None)),
            ])

        report = run_in_child(child)
        assert_refused(report, ["store", "store_as", "counters_for", "attachments_for",
                                "time_series_for", "abort", "with", "with exit",
                                "with exit by an exception"])
        assert len(server.log) == requests_before  # no HiLo, no kill: nothing asked
        ids.append(bulk.store(Person("after")))
        with bulk:
            pass
    assert server.killed == set()
    assert set(server.documents) == set(ids)
    (request,) = server.requests
    assert request.complete and request.error is None


def test_a_forked_child_asks_no_node_of_a_cluster_for_an_inherited_insert():
    """The topology client: an inherited insert to a cluster's nodes refuses before any node
    is asked anything; the parent's insert goes on to the node that issued its id."""
    with LoopbackCluster(2) as cluster:
        bulk = bulkwire.BulkInsert(cluster.urls, cluster.database, timeout=TIMEOUT)
        bulk.store({"i": 0}, id="d/0")
        wait_for_the_request(lambda: [line for _, line in cluster.journal])
        asked = len(cluster.journal)

        def child():
            return attempts([(name, call) for name, call in insert_calls(bulk, None, None)
                             if name not in ("increment", "attachment")])

        report = run_in_child(child)
        assert_refused(report, [n for n in INSERT_CALLS if n not in ("increment", "attachment")])
        assert len(cluster.journal) == asked
        bulk.store({"i": 1}, id="d/1")
        bulk.close()
        node = next(s for s in cluster.servers if s.node_tag == bulk._node_tag)
        assert set(node.documents) == {"d/0", "d/1"}
        assert all(s.killed == set() for s in cluster.servers)


def test_a_table_file_works_in_a_forked_child_and_in_its_parent(tmp_path):
    """TableFile has no thread and no connection: a child's lookups read its own copy of
    the map and give what the parent's give."""
    import pyarrow
    import pyarrow.parquet

    path = str(tmp_path / "t.parquet")
    table = pyarrow.table({"id": pyarrow.array(range(5000), pyarrow.int64()),
                           "name": pyarrow.array([f"n{i}" for i in range(5000)])})
    pyarrow.parquet.write_table(table, path, write_page_index=True, row_group_size=1000,
                                data_page_size=1024)
    rows = [4321, 7, 1999, 3000, 7]
    with bulkwire.TableFile(path) as f:
        before = f.take(rows).to_pylist()

        def child():
            return f.take(rows).to_pylist()

        assert run_in_child(child) == before == table.take(rows).to_pylist()
        assert f.take(rows).to_pylist() == before


def test_a_child_forked_during_a_load_runs_a_load_of_its_own(tmp_path):
    """A parent thread loads a file into a stalled server (its encoding threads and sender
    alive); a child forked meanwhile runs a load of its own (to a file), and the parent's
    load then completes with the same body."""
    src = bulkwire.sample_parquet(tmp_path / "s.parquet", rows=3000, dim=16, row_group_rows=500)
    with LoopbackServer(recv_buffer=32 << 10) as server:
        server.stall(after_bytes=64 << 10)
        result = {}

        def load():
            try:
                result["load"] = bulkwire.load_parquet(src,
                                                       bulkwire.targets.ravendb(server.url, server.database),
                                                       batch_rows=100, threads=2)
            except BaseException as exc:  # noqa: BLE001 - checked below
                result["error"] = exc

        thread = threading.Thread(target=load)
        thread.start()
        try:
            assert server.wait_stalled(TIMEOUT)
            out = str(tmp_path / "child.json")

            def child():
                r = bulkwire.load_parquet(src, bulkwire.targets.request_file(out), batch_rows=100,
                                          threads=2)
                return r.rows

            assert run_in_child(child, timeout=60.0) == 3000
        finally:
            server.resume()
            thread.join(60)
        assert "error" not in result and result["load"].rows == 3000
        with open(out, "rb") as f:
            assert bytes(server.requests[-1].body) == f.read()
        assert server.killed == set()
