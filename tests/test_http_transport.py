"""The HTTP transport (bulkwire.transport) against what a process and a server may do to it:
descriptors past select()'s reach, interim answers, a kept connection the server let go of,
request heads that would split."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import bulkwire

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.dirname(os.path.dirname(bulkwire.__file__))  # the bulkwire under test
TIMEOUT = 5.0


def run_child(code: str) -> str:
    """Runs ``code`` in a fresh interpreter with the package on its path; its stdout."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([PKG, os.path.join(ROOT, "tests")]))
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


# ---- a process holding more than FD_SETSIZE descriptors ----

def test_inserts_work_with_their_sockets_past_descriptor_1024():
    """Every socket of the insert gets a descriptor above 1024 (where select() refuses to
    look): the kept connection's idle check and the ssl_context= sender's check for an
    early answer both work there, and every document is stored, on every sender."""
    out = run_child("""
        import os, resource, ssl, tempfile
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard != resource.RLIM_INFINITY and hard < 2048:
            raise SystemExit(f"the hard limit of open files is {hard}: too low for the test")
        resource.setrlimit(resource.RLIMIT_NOFILE, (4096 if hard == resource.RLIM_INFINITY
                                                    else min(hard, 4096), hard))
        held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
        assert min(held[-5:]) > 1024
        import bulkwire
        from bulkwire.testing import LoopbackServer
        from bulkwire.testing.pki import make_pki, server_context
        with tempfile.TemporaryDirectory() as folder:
            pki = make_pki(folder)
            context = ssl.create_default_context(cafile=pki.ca)
            context.load_cert_chain(pki.client_cert, pki.client_key)
            senders = {"http": (None, {}),
                       "https": (server_context(pki), {"certificate": pki.client, "ca": pki.ca}),
                       "ssl_context": (server_context(pki), {"ssl_context": context})}
            for name, (server_tls, options) in senders.items():
                with LoopbackServer(ssl_context=server_tls) as server:
                    try:
                        for round in range(2):  # the second insert finds the sender kept
                            with bulkwire.BulkInsert(server.url, server.database, timeout=5,
                                                     buffer_size=4096, **options) as bulk:
                                for i in range(200):
                                    bulk.store({"n": i, "pad": "x" * 100}, id=f"{round}/{i}")
                    except bulkwire.BulkInsertError as exc:
                        print(name, "failed:", repr(exc))
                    else:
                        print(name, len(server.documents), server.unexpected_errors)
    """)
    assert out.split("\n")[:3] == ["http 400 []", "https 400 []", "ssl_context 400 []"]


# ---- a server that answers as a test tells it ----

import socket
import threading

from bulkwire import errors
from fault_server import accepted, read_chunked

OPERATION_ID = b'{"Id": 7, "NodeTag": "A"}'
ID_ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(OPERATION_ID), OPERATION_ID)
CREATED = b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


class ScriptedServer:
    """The two requests of a bulk insert, answered as a test says: ``on_id(conn)`` and
    ``on_post(conn, reader)`` write the answers (by default a good one), each on the
    connection it came on (the operation id's answer keeps it open: the body may follow
    on it). ``bodies`` holds each POST body read whole; ``connections`` counts them."""

    def __init__(self, on_id=None, on_post=None) -> None:
        self.on_id = on_id or (lambda conn: conn.sendall(ID_ANSWER))
        self.on_post = on_post or self.read_body_then(CREATED)
        self.bodies: list = []
        self.heads: list = []  # each request's first line
        self.connections = 0
        self.posts = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.address = "127.0.0.1:%d" % self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._threads: list = []
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    @property
    def url(self) -> str:
        return "http://" + self.address

    def _accept(self) -> None:
        for conn in accepted(self._listener, lambda: not self._stop.is_set()):
            self.connections += 1
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(TIMEOUT)
        reader = conn.makefile("rb")
        try:
            while True:
                line = reader.readline()
                if not line:
                    return
                self.heads.append(line)
                while reader.readline() not in (b"\r\n", b""):
                    pass
                if b"next-operation-id" in line:
                    self.on_id(conn)
                elif line.startswith(b"POST "):
                    self.posts += 1
                    self.on_post(conn, reader)
                    return
                else:
                    conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
        except OSError:
            pass
        finally:
            reader.close()
            conn.close()

    def read_body(self, reader) -> bytes:
        body = read_chunked(reader)
        self.bodies.append(body)
        return body

    def read_body_then(self, answer: bytes):
        def on_post(conn, reader):
            self.read_body(reader)
            conn.sendall(answer)
        return on_post

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        self._acceptor.join(TIMEOUT)
        for thread in self._threads:
            thread.join(TIMEOUT)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def hang_up(conn: socket.socket) -> None:
    """Ends the connection now (its reader, still open in the server, would keep it)."""
    conn.shutdown(socket.SHUT_RDWR)
    conn.close()


def insert(server, documents=3, **options):
    with bulkwire.BulkInsert(server.url, "db", timeout=TIMEOUT, **options) as bulk:
        for i in range(documents):
            bulk.store({"n": i}, f"docs/{i}")
    return bulk


def stream_after(head: bytes, limit: int = 64 << 20):
    """An answer that starts with ``head`` and then sends ``x`` until the client stops
    reading (``limit`` bytes at most)."""
    def answer(conn):
        conn.sendall(head)
        block = b"x" * 65536
        sent = 0
        try:
            while sent < limit:
                conn.sendall(block)
                sent += len(block)
        except OSError:
            pass
    return answer


# ---- chunk sizes that are not: refused before anything of the chunk is read ----

NEGATIVE_CHUNK = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n"


def test_a_negative_chunk_size_in_the_operation_ids_answer_is_a_protocol_error():
    with ScriptedServer(on_id=stream_after(NEGATIVE_CHUNK)) as server:
        with pytest.raises(errors.ProtocolError, match="chunk size") as raised:
            insert(server)
    assert server.address in str(raised.value) and "next-operation-id" in str(raised.value)
    assert server.posts == 0


def test_a_negative_chunk_size_in_the_bodys_answer_is_a_protocol_error():
    def on_post(conn, reader):
        server.read_body(reader)
        stream_after(NEGATIVE_CHUNK.replace(b"200 OK", b"201 Created"))(conn)

    with ScriptedServer(on_post=on_post) as server:
        with pytest.raises(errors.ProtocolError, match="chunk size") as raised:
            insert(server)
    assert server.address in str(raised.value) and "bulk_insert" in str(raised.value)


# ---- interim answers ----

def test_a_102_before_the_operation_ids_answer_is_skipped():
    with ScriptedServer(on_id=lambda conn: conn.sendall(
            b"HTTP/1.1 102 Processing\r\n\r\n" + ID_ANSWER)) as server:
        bulk = insert(server)
    assert bulk.operation_id == 7 and server.bodies[0].count(b'"docs/') == 3


def test_a_103_before_the_bodys_201_is_a_success():
    with ScriptedServer() as server:
        server.on_post = server.read_body_then(
            b"HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\n" + CREATED)
        insert(server)
    assert server.bodies[0].count(b'"docs/') == 3


def test_a_101_is_a_protocol_error_naming_the_server():
    with ScriptedServer(on_id=lambda conn: conn.sendall(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n" + ID_ANSWER)) as server:
        with pytest.raises(errors.ProtocolError, match="101") as raised:
            insert(server)
    assert server.address in str(raised.value)


# ---- a request's head: nothing that would end a line or the head early ----

from bulkwire.transport import HttpTransport  # noqa: E402
from bulkwire.urls import ServerUrl  # noqa: E402


@pytest.mark.parametrize("url, part", [
    (ServerUrl("http", "127.0.0.1", 8080, "/x\r\nX-Injected: 1"), "path"),
    (ServerUrl("http", "127.0.0.1", 8080, "/x y"), "path"),
    (ServerUrl("http", "127.0.0.1", 8080, "/r\u00e9"), "path"),
    (ServerUrl("http", "127.0.0.1\r\nX-Injected: 1", 8080, ""), "host"),
    (ServerUrl("http", "127.0.0.1\n", 8080, ""), "host"),
])
def test_a_hand_built_url_that_would_split_the_head_is_refused_naming_the_part(url, part):
    transport = HttpTransport(url, "db")
    with pytest.raises(ValueError, match=f"request's {part} "):
        transport.head("GET", transport.base + "/operations/next-operation-id", [])


@pytest.mark.parametrize("method, fields, part", [
    ("GET\r\nX: 1", [], "method"),
    ("GET", [("X-Ok", "a\r\nX-Injected: 1")], "header"),
    ("GET", [("X-Ok", "a\nb")], "header"),
    ("GET", [("X:Bad", "a")], "header"),
    ("GET", [("", "a")], "header"),
])
def test_a_method_or_header_that_would_split_the_head_is_refused(method, fields, part):
    transport = HttpTransport("http://127.0.0.1:8080", "db")
    with pytest.raises(ValueError, match=f"request's {part} "):
        transport.head(method, "/x", fields)
    # what is allowed stays as it was written
    assert transport.head("GET", "/x?id=1", [("X-Ok", "a b\tc")]) == (
        b"GET /x?id=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nX-Ok: a b\tc\r\n\r\n")


def test_a_request_to_a_url_that_would_split_the_head_sends_nothing():
    with ScriptedServer() as server:
        host, port = server.address.split(":")
        transport = HttpTransport(ServerUrl("http", host, int(port), "/a\r\nX-Injected: 1"), "db")
        with pytest.raises(ValueError, match="request's path"):
            transport.next_operation_id()
        assert server.connections in (0, 1) and server.posts == 0 and not server.heads


# ---- before the body's first byte: a kept connection that ended, an unasked 100 ----

def test_a_kept_connection_closed_before_the_bodys_first_byte_is_replaced():
    """The server closes the operation id's connection once the POST's head is in, before
    any byte of the body came: the body goes whole on a new connection (nothing of it was
    sent on the first), and the insert succeeds."""
    closed = threading.Event()

    def on_post(conn, reader):
        if server.posts == 1:  # the kept connection: let go of it, the head read
            hang_up(conn)
            closed.set()
            return
        server.read_body_then(CREATED)(conn, reader)

    with ScriptedServer(on_post=on_post) as server:
        with bulkwire.BulkInsert(server.url, "db", timeout=TIMEOUT) as bulk:
            bulk.store({"n": 0}, "docs/0")  # the POST's head goes out on the kept connection
            assert closed.wait(TIMEOUT)
            bulk.store({"n": 1}, "docs/1")
        # the body's first byte waited for close(): by then the server had closed
        assert server.connections == 2 and server.posts == 2
        assert len(server.bodies) == 1 and server.bodies[0].count(b'"docs/') == 2


def test_a_fresh_connection_closed_before_the_body_is_not_retried():
    """Only a kept connection is replaced: a new one that ends without an answer fails the
    insert, naming the server, and nothing is sent again."""
    def on_post(conn, reader):
        hang_up(conn)

    with ScriptedServer(on_id=lambda conn: (conn.sendall(ID_ANSWER.replace(
            b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n", 1)), hang_up(conn)),
            on_post=on_post) as server:
        with pytest.raises(errors.ConnectionLostError) as raised:
            insert(server)
    assert server.address in str(raised.value) and server.posts == 1


@pytest.mark.parametrize("interim", [b"HTTP/1.1 100 Continue\r\n\r\n",
                                     b"HTTP/1.1 100 Continue\r\nServer: x\r\n\r\n"
                                     b"HTTP/1.1 102 Processing\r\n\r\n"])
def test_an_unasked_100_continue_after_the_posts_head_is_skipped(interim):
    """A server that answers the POST's head with 100 Continue (nobody asked: no Expect),
    then reads the body and answers 201: the sender skips the interim answer, sends the
    body and the insert succeeds (it does not wait for a final answer that comes only
    after the body)."""
    sent = threading.Event()

    def on_post(conn, reader):
        conn.sendall(interim)
        sent.set()
        server.read_body_then(CREATED)(conn, reader)

    with ScriptedServer(on_post=on_post) as server:
        with bulkwire.BulkInsert(server.url, "db", timeout=2.0) as bulk:
            bulk.store({"n": 0}, "docs/0")
            assert sent.wait(TIMEOUT)
            bulk.store({"n": 1}, "docs/1")  # the body's first byte waits for close()
    assert server.bodies[0].count(b'"docs/') == 2


def test_a_final_answer_before_the_bodys_first_byte_is_early():
    """A 500 after the POST's head, before any of the body: the insert fails with the
    server's message (and a 2xx there is an early answer, never a success)."""
    answered = threading.Event()

    def on_post(conn, reader):
        conn.sendall(b'HTTP/1.1 500 Internal Server Error\r\nContent-Length: 17\r\n'
                     b'Connection: close\r\n\r\n{"Message": "no"}')
        answered.set()

    with ScriptedServer(on_post=on_post) as server:
        with pytest.raises(errors.ServerError, match="no"):
            with bulkwire.BulkInsert(server.url, "db", timeout=TIMEOUT) as bulk:
                bulk.store({"n": 0}, "docs/0")
                assert answered.wait(TIMEOUT)
                bulk.store({"n": 1}, "docs/1")


# ---- a server that lies about its answer ----

def test_an_operation_id_answer_shorter_than_its_length_is_a_lost_connection():
    with ScriptedServer(on_id=lambda conn: (conn.sendall(
            b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"Id": 7}'), hang_up(conn))) as server:
        with pytest.raises(errors.ConnectionLostError, match="middle of the answer") as raised:
            insert(server)
    assert server.address in str(raised.value) and server.posts == 0


def test_an_operation_id_answer_shorter_than_its_length_that_stalls_times_out():
    stop = threading.Event()

    def on_id(conn):
        conn.sendall(b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"Id": 7}')
        stop.wait(TIMEOUT)

    with ScriptedServer(on_id=on_id) as server:
        try:
            with pytest.raises(errors.TransportTimeoutError) as raised:
                with bulkwire.BulkInsert(server.url, "db", timeout=0.3) as bulk:
                    bulk.store({"n": 0}, "docs/0")
        finally:
            stop.set()
    assert server.address in str(raised.value)


@pytest.mark.parametrize("body", [b"<html>not json</html>", b"", b'{"Id": "7"}', b"[7]"])
def test_a_2xx_operation_id_answer_that_is_not_one_is_a_protocol_error(body):
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    with ScriptedServer(on_id=lambda conn: conn.sendall(answer)) as server:
        with pytest.raises(errors.ProtocolError) as raised:
            insert(server)
    assert server.address in str(raised.value) and server.posts == 0


def test_a_201_to_the_body_shorter_than_its_length_is_not_a_success():
    with ScriptedServer() as server:
        server.on_post = lambda conn, reader: (
            server.read_body(reader),
            conn.sendall(b"HTTP/1.1 201 Created\r\nContent-Length: 50\r\n\r\n{}"), hang_up(conn))
        with pytest.raises(errors.ConnectionLostError) as raised:
            insert(server)
    assert server.address in str(raised.value) and "bulk_insert" in str(raised.value)
