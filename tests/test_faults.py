"""A bulk insert against a server that fails at each step of the protocol, in each way
(tests/fault_server.py): whatever happens, nothing hangs, only the BulkInsertError family
escapes, and close() returns normally only when the server answered 2xx to the whole body."""
import _thread
import os
import socket
import threading
import time

import pytest

import bulkwire
import bulkwire.transport
from bulkwire import errors
from bulkwire.bulk import compression_backends
from fault_server import (BODY_FAULTS, FAULTS, STEPS, FaultServer, eventually, read_chunked,
                          hold_the_end_until, shrink_send_buffers)

CELL_LIMIT = 10.0   # seconds a cell may take; a hang is interrupted and fails the test
SHORT_TIMEOUT = 0.5  # the client's timeout where the server stalls
TIMEOUT = 5.0        # elsewhere (no cell waits for it)
NOISE = os.urandom(1 << 19).hex()  # ~1 MiB that gzip cannot shrink much

ONE_BUFFER = 3      # documents: the body's one buffer goes out at close()
SEVERAL = 700       # ~1 MB in 16 KiB buffers, for a server that reads
UNTIL_FAILURE = 20_000  # ~28 MB, far more than the socket buffers hold, for a server that
                        # stops reading: the failure comes while store() waits on the full queue

# (several buffers?, compress)
VARIANTS = {
    "one-buffer-plain": (False, False),
    "one-buffer-gzip": (False, "zlib"),
    "buffers-plain": (True, False),
    "buffers-gzip": (True, "zlib"),
    "buffers-zstd": (True, "zstd"),
}
if "python-isal" in compression_backends():  # the consumer that iterates pieces() (as over TLS)
    VARIANTS["buffers-gzip-pieces"] = (True, "python-isal")

# What each cell must end in: close() returns normally only in these cells, where the POST
# was answered 2xx after the whole body (whatever that answer's body is: the protocol does
# not read it), or after the last byte of its data, before the terminating chunk
# (2xx_at_array_end); in every other cell a BulkInsertError escapes.
SUCCEEDS = {("bulk_insert", f) for f in ("garbage", "shape_id_str", "shape_list",
                                         "shape_result_int", "shape_nested", "2xx_at_array_end")}
# Cells where the server stops reading the body before it fails (the state cells' POST
# fails early too): with several buffers, the producer is blocked when the failure comes.
HOLDING = ({("bulk_insert", f) for f in ("early_2xx", "early_5xx", "reset", "stall")}
           | {("state", f) for f in FAULTS})


@pytest.fixture(autouse=True)
def small_send_buffers(monkeypatch):
    """The client's sockets get a small send buffer, like the server's receive buffer: the
    producer then waits on its queue after ~100 KiB rather than after the megabytes the
    kernel's autotuning gives a socket (which take seconds to fill under the sanitizers)."""
    shrink_send_buffers(monkeypatch)


def document(i):
    return {"i": i, "text": NOISE[(i * 1400) % (len(NOISE) - 1400):][:1400]}


class Watchdog:
    """Interrupts the main thread (KeyboardInterrupt) if the block takes longer than limit."""

    def __init__(self, limit):
        self.limit = limit
        self.fired = False
        self._done = False
        self._lock = threading.Lock()
        self._timer = threading.Timer(limit, self._fire)

    def _fire(self):
        with self._lock:
            if not self._done:
                self.fired = True
                _thread.interrupt_main()

    def __enter__(self):
        self._timer.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        with self._lock:
            self._done = True
        self._timer.cancel()
        if exc_type is KeyboardInterrupt and self.fired:
            pytest.fail(f"hung: still running after {self.limit} s")
        return False


def blocked(bulk):
    q = bulk._writer._queue
    return q.waits > 0 and len(q) == q.maxsize


class ReleaseWhenBlocked(threading.Thread):
    """Sets ``release`` (the server then fails) once the producer waits on its full queue."""

    def __init__(self, bulk, release):
        super().__init__(daemon=True)
        self.bulk, self.release, self.stop = bulk, release, threading.Event()

    def run(self):
        deadline = time.monotonic() + CELL_LIMIT / 2
        while not self.stop.is_set() and time.monotonic() < deadline:
            if blocked(self.bulk):
                self.release.set()
                return
            time.sleep(0.005)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.join(CELL_LIMIT)


def run_insert(bulk, documents, *, abort=False, before_close=None):
    """Stores, then closes (aborting first when asked). Returns (closed normally, [(where,
    error)] raised). Any exception outside the BulkInsertError family propagates."""
    raised = []
    closed = False
    where = "store"
    try:
        for i in range(documents):
            bulk.store(document(i), id=f"d/{i}")
        if before_close is not None:
            before_close()
        if abort:
            where = "abort"
            try:
                bulk.abort()
            except errors.BulkInsertError as exc:  # the kill failed: said, never swallowed
                raised.append((where, exc))
        where = "close"
        bulk.close()
        closed = True
    except errors.BulkInsertError as exc:
        raised.append((where, exc))
    return closed, raised


CELLS = [(step, fault) for step in STEPS for fault in FAULTS] + [("bulk_insert", fault)
                                                                 for fault in BODY_FAULTS]


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("step, fault", CELLS, ids=[f"{s}-{f}" for s, f in CELLS])
def test_every_fault_at_every_step_fails_cleanly(step, fault, variant):
    several, compress = VARIANTS[variant]
    faults = {step: fault}
    if step == "state":  # the state is asked for only after a failure: the POST fails first
        faults["bulk_insert"] = "early_5xx"
    holding = several and (step, fault) in HOLDING
    documents = UNTIL_FAILURE if holding else SEVERAL if several else ONE_BUFFER
    release = threading.Event()
    # a stall outlasts the client's timeout however slow the producer is (sanitizers): the
    # server lets go only when the cell ends
    with FaultServer(faults, release=release if several else None,
                     stall_seconds=CELL_LIMIT) as server:
        started = time.monotonic()
        bulk = bulkwire.BulkInsert(server.url, server.database, compress=compress,
                                   buffer_size=16 << 10, max_buffers=2,
                                   timeout=SHORT_TIMEOUT if fault == "stall" else TIMEOUT)
        before_close = None
        if (step, fault) == ("bulk_insert", "early_2xx") and not several:
            # The one buffer goes out at close(). An early answer that crosses it on the wire
            # looks, to any client, like the answer to the whole body: let it arrive first,
            # so that it is early for the client too.
            before_close = lambda: server.answered_early.wait(CELL_LIMIT / 2)  # noqa: E731
        if fault in BODY_FAULTS:
            # the answer comes after the last data byte, before the terminating chunk
            hold_the_end_until(bulk, server.answered_at_array_end.is_set, CELL_LIMIT / 2)
        with Watchdog(CELL_LIMIT), ReleaseWhenBlocked(bulk, release):
            closed, raised = run_insert(bulk, documents, abort=step == "kill",
                                        before_close=before_close)
            if raised:  # a failed insert stays failed: close raises again, every time
                for _ in range(2):
                    with pytest.raises(errors.BulkInsertError):
                        bulk.close()
        assert time.monotonic() - started < CELL_LIMIT
        if closed:  # never a normal close without the server's 2xx to the whole body
            assert server.ok_to_whole_body(bulk.operation_id)
        assert closed == ((step, fault) in SUCCEEDS), raised
        for _, exc in raised:
            if not isinstance(exc, errors.BulkInsertAborted) or isinstance(exc, errors.EarlyResponse):
                # a failure the transport saw names the request it came from
                assert "http://127.0.0.1:" in str(exc), str(exc)
        if step == "kill":
            assert isinstance(raised[-1][1], errors.BulkInsertAborted)
        if holding:  # the failure woke the producer waiting on its full queue
            assert raised[0][0] == "store" and bulk._writer._queue.waits > 0, raised
        if step == "bulk_insert" and fault == "stall":
            assert isinstance(raised[0][1], errors.TransportTimeoutError), raised
        if step == "bulk_insert" and fault in ("early_2xx", "early_5xx"):
            assert isinstance(raised[0][1], (errors.EarlyResponse, errors.ServerError)), raised
        if fault in BODY_FAULTS:  # answered before the end; the end was still sent
            post, = server.posts
            assert post.answered_before_end and eventually(lambda: post.end_after_answer)
            assert post.documents == documents
        if fault == "garbage_at_array_end":  # after the data or not, it is no answer
            assert isinstance(raised[0][1], errors.ProtocolError), raised


@pytest.mark.parametrize("compress", [False, "zlib", *(["python-isal"] if "python-isal" in
                                                       compression_backends() else [])])
def test_a_2xx_while_the_last_data_chunk_is_being_written_is_early(compress):
    """The body's one data chunk (so its last) is large; the server reads a part of it,
    answers 2xx, then reads the rest. The answer came before the chunk's last byte was sent,
    while the write waited for room: EarlyResponse (from the C pump, and from the Python
    sender with python-isal), never a normal close once the write could finish."""
    with FaultServer({"bulk_insert": "2xx_mid_chunk"}) as server:
        bulk = bulkwire.BulkInsert(server.url, server.database, compress=compress,
                                   buffer_size=8 << 20, timeout=TIMEOUT)
        with Watchdog(CELL_LIMIT):
            closed, raised = run_insert(bulk, 1000)
        assert not closed and isinstance(raised[0][1], errors.EarlyResponse), raised
        assert bulk.stats.buffers == 1 and server.answered_early.wait(10)  # set once its send returned
        assert not server.ok_to_whole_body(bulk.operation_id)


def test_the_fault_server_answers_a_good_insert():
    """The table's control: with no fault the same inserts succeed, and the server records
    the 2xx to the whole body that the table relies on."""
    for several, compress in VARIANTS.values():
        documents = SEVERAL if several else ONE_BUFFER
        with FaultServer() as server:
            bulk = bulkwire.BulkInsert(server.url, server.database, compress=compress,
                                       buffer_size=16 << 10, max_buffers=2, timeout=TIMEOUT)
            closed, raised = run_insert(bulk, documents)
            assert closed and not raised
            assert server.ok_to_whole_body(bulk.operation_id)
            assert [p.documents for p in server.posts] == [documents]
            assert bulk.stats.buffers == (1 if not several else bulk.stats.buffers) > 0


# ---- the sender's failures always reach the producer ----

def test_a_500_after_the_whole_body_with_an_unreadable_state_raises_at_close():
    """The state's Result is not an object: explaining the failure used to raise on the
    sender thread, which then died unreported, and close() returned normally."""
    with FaultServer({"bulk_insert": "5xx", "state": "shape_result_int"}) as server:
        with Watchdog(CELL_LIMIT):
            bulk = bulkwire.BulkInsert(server.url, server.database, timeout=TIMEOUT)
            bulk.store({"a": 1}, id="a/1")
            with pytest.raises(errors.ServerError, match="500") as caught:
                bulk.close()
        assert caught.value.status == 500
        assert not server.ok_to_whole_body(bulk.operation_id)


@pytest.mark.parametrize("state_fault", ["shape_result_int", "shape_nested", "shape_list"])
def test_an_early_500_with_an_unreadable_state_wakes_a_blocked_store(state_fault):
    """The producer waits on the full queue when the server answers 500; the sender must
    wake it with the error whatever operations/state says (it used to wait forever)."""
    release = threading.Event()
    with FaultServer({"bulk_insert": "early_5xx", "state": state_fault}, release=release) as server:
        bulk = bulkwire.BulkInsert(server.url, server.database, buffer_size=16 << 10,
                                   max_buffers=2, timeout=TIMEOUT)
        with Watchdog(CELL_LIMIT), ReleaseWhenBlocked(bulk, release):
            with pytest.raises(errors.ServerError, match="before the end of the body"):
                for i in range(UNTIL_FAILURE):
                    bulk.store(document(i), id=f"d/{i}")
            with pytest.raises(errors.ServerError):
                bulk.close()
        assert release.is_set()  # the server failed once the producer was waiting


@pytest.mark.parametrize("raised", [ZeroDivisionError("bug"), SystemExit(3), RecursionError()])
def test_an_exception_while_explaining_the_failure_still_reaches_the_producer(monkeypatch, raised):
    def explode(self, op_id):
        raise raised

    monkeypatch.setattr(bulkwire.transport.HttpTransport, "operation_error", explode)
    with FaultServer({"bulk_insert": "5xx"}) as server:
        with Watchdog(CELL_LIMIT):
            bulk = bulkwire.BulkInsert(server.url, server.database, timeout=TIMEOUT)
            bulk.store({"a": 1}, id="a/1")
            with pytest.raises(errors.ServerError, match="HTTP 500"):
                bulk.close()


def test_a_sender_that_ends_without_an_answer_is_a_failure(monkeypatch):
    """Success is recorded, not inferred from the absence of an error: a sender that ends
    without the server's answer (here: a request that sends nothing) fails the insert."""
    monkeypatch.setattr(bulkwire.transport.BodySender, "_post", lambda self: None)
    with FaultServer() as server:
        with Watchdog(CELL_LIMIT):
            bulk = bulkwire.BulkInsert(server.url, server.database, buffer_size=4096,
                                       max_buffers=2, timeout=TIMEOUT)
            with pytest.raises(errors.BulkInsertError, match="without the server's"):
                for i in range(500):  # the consumer is gone: a full queue must not block
                    bulk.store({"i": i, "pad": "p" * 200}, id=f"d/{i}")
                bulk.close()
            with pytest.raises(errors.BulkInsertError, match="without the server's"):
                bulk.close()


def test_an_unexpected_exception_in_the_request_reaches_the_producer(monkeypatch):
    def broken(self, fd, timeout):
        raise MemoryError("simulated")

    monkeypatch.setattr(bulkwire.BulkWriter, "pump", broken)
    with FaultServer() as server:
        with Watchdog(CELL_LIMIT):
            bulk = bulkwire.BulkInsert(server.url, server.database, timeout=TIMEOUT)
            bulk.store({"a": 1}, id="a/1")
            with pytest.raises(errors.BulkInsertError, match="MemoryError") as caught:
                bulk.close()
        assert isinstance(caught.value.__cause__, MemoryError)
        assert not server.ok_to_whole_body(bulk.operation_id)


# ---- the protocol requests raise the hierarchy, naming the request ----

@pytest.mark.parametrize("fault, error, cause, match", [
    ("5xx", errors.ServerError, None, r"HTTP 500 from GET http://127\.0\.0\.1:\d+/databases/db/"
                                      r"operations/next-operation-id: fault injected"),
    ("4xx", errors.ServerError, None, "HTTP 400 from GET"),
    ("garbage", errors.ProtocolError, ValueError, "not JSON"),
    ("shape_nested", errors.ProtocolError, RecursionError, "not JSON"),
    ("shape_id_str", errors.ProtocolError, None, "no operation id"),
    ("shape_list", errors.ProtocolError, None, "no operation id"),
    ("shape_result_int", errors.ProtocolError, None, "no operation id"),
    ("not_http", errors.ProtocolError, Exception, "not HTTP"),
    ("disconnect", errors.ConnectionLostError, ConnectionError, "without answering"),
    ("stall", errors.TransportTimeoutError, TimeoutError, "timed out"),
])
def test_next_operation_id_failures(fault, error, cause, match):
    with FaultServer({"next-operation-id": fault}) as server:
        bulk = bulkwire.BulkInsert(server.url, server.database, timeout=SHORT_TIMEOUT)
        with pytest.raises(error, match=match) as caught:
            bulk.store({"a": 1}, id="a/1")
        assert "/operations/next-operation-id" in str(caught.value)
        if cause is not None:
            assert isinstance(caught.value.__cause__, cause)
        # the insert could not start: it stays failed, and never starts over
        with pytest.raises(error):
            bulk.store({"a": 2}, id="a/2")
        with pytest.raises(error):
            bulk.close()
        assert server.log.count("GET /databases/db/operations/next-operation-id") == 1


def test_a_refused_kill_raises_from_abort_and_close_still_fails():
    with FaultServer({"kill": "5xx"}) as server:
        bulk = bulkwire.BulkInsert(server.url, server.database, timeout=TIMEOUT)
        bulk.store({"a": 1}, id="a/1")
        with pytest.raises(errors.ServerError, match=r"HTTP 500 from POST http://.*/operations/kill\?id=1"):
            bulk.abort()
        with pytest.raises(errors.BulkInsertAborted, match="aborted"):
            bulk.close()


def test_the_hierarchy_is_one_module_and_the_old_names_still_import():
    import bulkwire.bulk
    import bulkwire.transport

    classes = [getattr(errors, name) for name in errors.__all__]
    for cls in classes:
        assert issubclass(cls, errors.BulkwireError)  # the one root
        if cls not in (errors.BulkwireError, errors.RowError,  # the root, a row's,
                       errors.MalformedFileError, errors.ResumeStateError,  # a file's, a state's
                       errors.SchemaMismatchError):  # a CQL table's schema
            assert issubclass(cls, errors.LoadError) and issubclass(cls, RuntimeError)
        if cls.__name__.startswith("BulkInsert"):  # RavenDB's case of a load's failure
            assert issubclass(cls, errors.BulkInsertError)
        assert cls.__name__ in errors.__doc__  # the module docstring draws every class
        assert getattr(bulkwire, cls.__name__) is cls
    assert issubclass(errors.RowError, ValueError)
    assert issubclass(errors.MalformedFileError, ValueError)
    assert issubclass(errors.ResumeStateError, ValueError)
    assert issubclass(errors.TransportTimeoutError, errors.TransportError)
    assert issubclass(errors.ConnectError, errors.TransportError)
    assert issubclass(errors.ConnectionLostError, errors.TransportError)
    assert issubclass(errors.ProtocolError, errors.ServerError)
    assert issubclass(errors.EarlyResponse, errors.BulkInsertAborted)
    assert bulkwire.bulk.BulkInsertError is errors.BulkInsertError
    assert bulkwire.bulk.BulkInsertAborted is errors.BulkInsertAborted
    assert bulkwire.transport.ServerError is errors.ServerError
    assert bulkwire.transport.EarlyResponse is errors.EarlyResponse
    # raised again and again as copies that keep their class and attributes
    failure = errors.ServerError("HTTP 500 from POST x: no", status=500, body=b"{}")
    again = failure.with_message(str(failure))
    assert type(again) is errors.ServerError and again.status == 500 and str(again) == str(failure)


# ---- the operation id's connection carries the body, unless the server let go of it ----

def test_the_operation_id_and_the_body_go_on_one_connection():
    from bulkwire.testing import LoopbackServer

    with LoopbackServer() as server:
        for n in range(3):
            with bulkwire.BulkInsert(server.url, "db", timeout=TIMEOUT) as bulk:
                bulk.store({"n": n}, f"docs/{n}")
        assert server.connections_accepted == 3
        assert [r.succeeded for r in server.requests] == [True] * 3
        assert [len(r.commands) for r in server.requests] == [1, 1, 1]


class KeepAliveThenLetGo:
    """Answers the operation id on a kept-alive connection (no ``Connection: close``), then
    ``after``: ``"close"`` closes that connection without a word; ``"bad id"`` answers
    without an id and waits for the client to close (``client_closed``). A bulk insert on
    the second connection is read whole and answered 201."""

    def __init__(self, after: str) -> None:
        self.after = after
        self.posts_on: list = []  # the connection number each POST came on
        self.bodies: list = []
        self.client_closed = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(TIMEOUT)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return "http://127.0.0.1:%d" % self._listener.getsockname()[1]

    def _run(self) -> None:
        for number in range(2):
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            conn.settimeout(TIMEOUT)
            reader = conn.makefile("rb")
            try:
                self._serve(number, conn, reader)
            except OSError:
                pass

    def _serve(self, number: int, conn: socket.socket, reader) -> None:
        line = reader.readline()
        while reader.readline() not in (b"\r\n", b""):
            pass
        if line.startswith(b"GET ") and b"next-operation-id" in line:
            body = b'{"Id": 7, "NodeTag": "A"}' if self.after != "bad id" else b'{"Id": "x"}'
            if self.after == "close":
                # corked, the answer leaves with the FIN in one segment: the client has seen
                # the close when it has the answer (a close that came later, while the body
                # was already going out, would be a failed insert, not this test's case)
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            if self.after == "close":
                conn.shutdown(socket.SHUT_WR)
                reader.close()
                conn.close()
            else:
                if reader.read(1) == b"":  # the client's close, before any other request
                    self.client_closed.set()
                reader.close()
                conn.close()
            return
        if line.startswith(b"POST "):
            self.posts_on.append(number)
            self.bodies.append(read_chunked(reader))
            conn.sendall(b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        reader.close()
        conn.close()

    def close(self) -> None:
        self._listener.close()
        self._thread.join(TIMEOUT)


def test_a_connection_the_server_closed_after_the_operation_id_is_not_used():
    """The server closed the kept connection: the body goes on a new connection, whole."""
    server = KeepAliveThenLetGo("close")
    try:
        with bulkwire.BulkInsert(server.url, "db", timeout=TIMEOUT) as bulk:
            bulk.store({"n": 1}, "docs/1")
            bulk.store({"n": 2}, "docs/2")
        assert bulk.operation_id == 7
        assert server.posts_on == [1]
        assert b'"docs/1"' in server.bodies[0] and server.bodies[0].rstrip().endswith(b"]")
    finally:
        server.close()


def test_an_operation_id_that_is_refused_closes_its_connection():
    """An answer without an operation id on a kept-alive connection: the insert fails, and
    the connection is closed then, not left to the garbage collector."""
    server = KeepAliveThenLetGo("bad id")
    try:
        with pytest.raises(errors.ProtocolError, match="no operation id"):
            with bulkwire.BulkInsert(server.url, "db", timeout=TIMEOUT) as bulk:
                bulk.store({"n": 1}, "docs/1")
        assert server.client_closed.wait(TIMEOUT)
        assert server.posts_on == []
    finally:
        server.close()
