"""bulkwire._core.CqlConnection: the core's CQL connection driven from Python.

Against a real Cassandra 5.0 node with PasswordAuthenticator (``--server cassandra``): the
handshake and login, wrong and missing credentials, pipelined loads of prepared INSERTs with
windows of 1, 2 and 8 whose rows the official driver reads back, an invalid row in the middle
named by its index, and a node killed in the middle of a load naming the rows it did not
acknowledge. Against a fake server in this process (always): the overloaded answers re-sent
with the same bytes, the retries' bound, and the errors' attributes.

The request bodies are written here with ``struct`` (the statement layer is not under test).
"""
from __future__ import annotations

import os
import signal
import socket
import ssl
import struct
import threading
import time
from typing import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from build_extras import needs, skip_without
from cql_frames import read_frame as _frame, send_frame as _send
from bulkwire import _core
from bulkwire.errors import (ConnectError, ConnectionLostError, CqlServerError, ServerError,
                             TLSError, TransportTimeoutError)

QUERY, PREPARE, EXECUTE, RESULT = (_core.CQL_OP_QUERY, _core.CQL_OP_PREPARE,
                                   _core.CQL_OP_EXECUTE, _core.CQL_OP_RESULT)
ONE = 0x0001


def long_string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">i", len(raw)) + raw


def query_body(cql: str, consistency: int = ONE) -> bytes:
    """A QUERY body without values or options."""
    return long_string(cql) + struct.pack(">HB", consistency, 0)


def execute_body(prepared_id: bytes, values: list[bytes | None], consistency: int = ONE) -> bytes:
    """An EXECUTE body with positional values (flag 0x01)."""
    out = [struct.pack(">H", len(prepared_id)), prepared_id,
           struct.pack(">HBH", consistency, 0x01, len(values))]
    for value in values:
        out.append(struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value)
    return b"".join(out)


def prepared_id(answer: bytes) -> bytes:
    """The id of a RESULT Prepared body."""
    kind, id_len = struct.unpack_from(">iH", answer)
    assert kind == 4, kind
    return answer[6:6 + id_len]


# --------------------------------------------------------------------------------------------
# a real node with PasswordAuthenticator


#: The node's native transport rate limit: a pipelined run goes faster than this.
RATE_LIMIT = 1000


@pytest.fixture(scope="module")
def auth_node():
    """One Cassandra 5.0 node on 127.0.0.21 with PasswordAuthenticator and a rate limit of
    RATE_LIMIT requests per second (its own cluster)."""
    from servers.cassandra import running

    with running(1, first=21, password_auth=True, max_requests_per_second=RATE_LIMIT) as nodes:
        yield nodes[0]


def connect(node, **kwargs) -> _core.CqlConnection:
    user, password = node.credentials
    return _core.CqlConnection(node.address, 9042, username=user, password=password,
                               timeout=30.0, **kwargs)


def make_table(conn: _core.CqlConnection, table: str) -> bytes:
    """keyspace ks, table ks.<table> (k int primary key, v text); the INSERT's prepared id."""
    conn.request(QUERY, query_body("CREATE KEYSPACE IF NOT EXISTS ks WITH replication = "
                                   "{'class': 'SimpleStrategy', 'replication_factor': 1}"))
    conn.request(QUERY, query_body(f"CREATE TABLE IF NOT EXISTS ks.{table} "
                                   "(k int PRIMARY KEY, v text)"))
    opcode, answer = conn.request(PREPARE, long_string(f"INSERT INTO ks.{table} (k, v) VALUES (?, ?)"))
    assert opcode == RESULT
    return prepared_id(answer)


def rows_in(node, table: str) -> dict[int, str]:
    """What the official driver reads back."""
    from servers.cassandra import connect as driver

    with driver([node.address], credentials=node.credentials) as session:
        return {r.k: r.v for r in session.execute(f"SELECT k, v FROM ks.{table}")}


@pytest.mark.cassandra_server
def test_handshake_logs_in_with_password_authenticator(auth_node):
    with connect(auth_node) as conn:
        assert conn.authenticator == "org.apache.cassandra.auth.PasswordAuthenticator"
        assert conn.peer == f"{auth_node.address}:9042"
        opcode, answer = conn.request(QUERY, query_body("SELECT release_version FROM system.local"))
        assert opcode == RESULT
        assert auth_node.release_version.encode() in answer


@pytest.mark.cassandra_server
def test_missing_and_wrong_credentials_are_refused(auth_node):
    with pytest.raises(ConnectError, match="requires authentication.*PasswordAuthenticator"):
        _core.CqlConnection(auth_node.address, 9042)
    with pytest.raises(CqlServerError) as caught:
        _core.CqlConnection(auth_node.address, 9042, username="cassandra", password="wrong")
    assert caught.value.code == 0x0100
    assert auth_node.address in str(caught.value)


@pytest.mark.cassandra_server
@pytest.mark.parametrize("window", [1, 2, 8])
def test_pipelined_load_reads_back_through_the_driver(auth_node, window):
    table = f"t_window_{window}"
    rows = {k: f"row {k} " + "x" * (k % 97) for k in range(1500)}
    with connect(auth_node) as conn:
        insert = make_table(conn, table)
        bodies = [execute_body(insert, [struct.pack(">i", k), v.encode()]) for k, v in rows.items()]
        answered, retries = conn.run(EXECUTE, bodies, window=window)
    assert answered == len(rows)
    assert rows_in(auth_node, table) == rows


@pytest.mark.cassandra_server
def test_an_invalid_row_in_the_middle_is_named(auth_node):
    with connect(auth_node) as conn:
        insert = make_table(conn, "t_invalid")
        bodies = [execute_body(insert, [struct.pack(">i", k), b"v"]) for k in range(200)]
        bodies[137] = execute_body(insert, [b"\x00\x01\x02", b"v"])  # a 3-byte int
        with pytest.raises(CqlServerError) as caught:
            conn.run(EXECUTE, bodies, window=8)
        error = caught.value
        assert error.code == 0x2200 and error.row == 137
        # answers come in any order: the requests after 137 may all be answered before its
        # error is, so what the window bounds is the number still in flight, not how far
        # past 137 the run got
        assert 137 in error.unacknowledged and len(error.unacknowledged) <= 8
        assert 137 < error.sent <= len(bodies)
        # the run ended at the error without waiting for the requests still in flight: with
        # any left, their answers may still come and the connection is not used again
        if error.unacknowledged == [137]:
            assert conn.run(EXECUTE, bodies[:5], window=2) == (5, 0)
        else:
            with pytest.raises(ConnectionLostError, match="not used again"):
                conn.run(EXECUTE, bodies[:5], window=2)
    stored = rows_in(auth_node, "t_invalid")
    assert 137 not in stored
    # every row before the window that held row 137 was acknowledged, so it is stored
    assert set(range(137 - 8)) <= set(stored)


@pytest.mark.cassandra_server
def test_a_vector_indexed_table_loads_with_the_default_window(auth_node):
    """The default window (2) is within what Cassandra 5.0.9 takes for a table with a vector
    index (its processors + 1); the driver reads every vector back."""
    rows = {k: [float(k), k / 2, -k / 4, 1.5] for k in range(800)}
    with connect(auth_node) as conn:
        conn.request(QUERY, query_body("CREATE KEYSPACE IF NOT EXISTS ks WITH replication = "
                                       "{'class': 'SimpleStrategy', 'replication_factor': 1}"))
        conn.request(QUERY, query_body("CREATE TABLE IF NOT EXISTS ks.t_vectors "
                                       "(k int PRIMARY KEY, v vector<float, 4>)"))
        conn.request(QUERY, query_body("CREATE CUSTOM INDEX IF NOT EXISTS ON ks.t_vectors (v) "
                                       "USING 'StorageAttachedIndex'"))
        _, answer = conn.request(PREPARE, long_string("INSERT INTO ks.t_vectors (k, v) VALUES (?, ?)"))
        insert = prepared_id(answer)
        bodies = [execute_body(insert, [struct.pack(">i", k), struct.pack(">4f", *v)])
                  for k, v in rows.items()]
        assert conn.run(EXECUTE, bodies)[0] == len(rows)
    from servers.cassandra import connect as driver

    with driver([auth_node.address], credentials=auth_node.credentials) as session:
        stored = {r.k: list(r.v) for r in session.execute("SELECT k, v FROM ks.t_vectors")}
    assert stored == rows


@pytest.mark.cassandra_server
def test_an_overloaded_node_is_retried_until_every_row_is_stored(auth_node):
    """With THROW_ON_OVERLOAD the node answers requests beyond its rate limit with an
    overloaded error: without retries the run fails naming the row, with them every row is
    stored."""
    rows = {k: f"busy {k}" for k in range(3000)}
    with connect(auth_node, throw_on_overload=True) as conn:
        insert = make_table(conn, "t_overloaded")
        bodies = [execute_body(insert, [struct.pack(">i", k), v.encode()]) for k, v in rows.items()]
        with pytest.raises(CqlServerError) as caught:
            conn.run(EXECUTE, bodies, window=64, max_retries=0)
        assert caught.value.code == 0x1001 and caught.value.name == "Overloaded"
        assert caught.value.row in caught.value.unacknowledged
        answered, retries = conn.run(EXECUTE, bodies, window=64, max_retries=100,
                                     backoff=0.01, backoff_max=0.2)
    assert answered == len(rows) and retries > 0
    assert rows_in(auth_node, "t_overloaded") == rows


@pytest.mark.cassandra_server
def test_killed_node_names_the_unacknowledged_rows(auth_node):
    """Last in this module: the node does not come back."""
    with connect(auth_node) as conn:
        insert = make_table(conn, "t_killed")
        bodies = [execute_body(insert, [struct.pack(">i", k), b"v" * 100]) for k in range(300_000)]
        caught: list[BaseException] = []

        def load() -> None:
            try:
                conn.run(EXECUTE, bodies, window=8)
            except BaseException as exc:  # handed to the test thread
                caught.append(exc)

        worker = threading.Thread(target=load)
        worker.start()
        time.sleep(2.0)
        assert worker.is_alive(), "the load ended before the node was killed"
        os.killpg(auth_node.process.pid, signal.SIGKILL)
        worker.join(60)
        assert not worker.is_alive()
    assert len(caught) == 1
    error = caught[0]
    assert isinstance(error, (ConnectionLostError, TransportTimeoutError)), repr(error)
    assert 1 <= len(error.unacknowledged) <= 8
    assert error.unacknowledged == sorted(error.unacknowledged)
    assert error.unacknowledged[-1] < error.sent < len(bodies)
    assert "not acknowledged" in str(error)


# --------------------------------------------------------------------------------------------
# a fake server in this process


def _error(code: int, message: str, extra: bytes = b"") -> bytes:
    raw = message.encode()
    return struct.pack(">iH", code, len(raw)) + raw + extra


def fake_server(answer: Callable[[int, bytes, dict], bytes | None],
                tls: ssl.SSLContext | None = None, host: str = "127.0.0.1"):
    """A one-connection server on ``host`` (over TLS with ``tls``) that does the handshake,
    then answers each request with ``answer(opcode, body, state)``: an ERROR body (sent as
    ERROR) or None (a RESULT Void). Returns (listener, thread, state); state["bodies"] lists
    every request body seen, state["ended"] says how the connection ended."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.create_server((host, 0), family=family)
    state: dict = {"bodies": []}

    def serve() -> None:
        conn, _ = listener.accept()
        if tls is not None:
            try:
                conn = tls.wrap_socket(conn, server_side=True)
            except (ssl.SSLError, OSError) as exc:
                state["ended"] = repr(exc)
                return
        with conn:
            try:
                stream, _, _ = _frame(conn)  # OPTIONS
                _send(conn, stream, 0x06, struct.pack(">H", 0))
                stream, _, _ = _frame(conn)  # STARTUP
                _send(conn, stream, 0x02, b"")
                while True:
                    stream, opcode, body = _frame(conn)
                    state["bodies"].append(body)
                    error = answer(opcode, body, state)
                    if error is None:
                        _send(conn, stream, RESULT, struct.pack(">i", 1))
                    else:
                        _send(conn, stream, 0x00, error)
            except (EOFError, OSError) as exc:
                state["ended"] = repr(exc)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener, thread, state


def test_overloaded_answers_are_sent_again_with_the_same_bytes():
    def answer(opcode: int, body: bytes, state: dict) -> bytes | None:
        seen = state.setdefault("count", {})
        seen[body] = seen.get(body, 0) + 1
        if seen[body] <= 2:  # twice overloaded, then stored
            return _error(0x1001, "Server is in overloaded state")
        return None

    listener, thread, state = fake_server(answer)
    with listener:
        with _core.CqlConnection("127.0.0.1", listener.getsockname()[1], timeout=5.0) as conn:
            bodies = [b"row %d" % i for i in range(20)]
            assert conn.run(EXECUTE, bodies, window=4, backoff=0.001, backoff_max=0.004) == (20, 40)
    thread.join(5)
    assert sorted(state["bodies"]) == sorted(bodies * 3)


def test_retries_are_bounded_and_the_error_names_the_row():
    def answer(opcode: int, body: bytes, state: dict) -> bytes | None:
        if body == b"row 3":
            return _error(0x1100, "Operation timed out",
                          struct.pack(">Hii", 0x0006, 0, 1) + struct.pack(">H", 6) + b"SIMPLE")
        return None

    listener, thread, state = fake_server(answer)
    with listener:
        with _core.CqlConnection("127.0.0.1", listener.getsockname()[1], timeout=5.0) as conn:
            with pytest.raises(CqlServerError) as caught:
                conn.run(EXECUTE, [b"row %d" % i for i in range(6)], window=1, max_retries=3,
                         backoff=0.001, backoff_max=0.002)
    thread.join(5)
    error = caught.value
    assert isinstance(error, ServerError)
    assert (error.code, error.name, error.row, error.unacknowledged) == (0x1100, "Write timeout", 3, [3])
    assert (error.consistency, error.received, error.blockfor, error.write_type) == (6, 0, 1, "SIMPLE")
    assert "row 3" in str(error) and "Operation timed out" in str(error)
    assert error.sent == 4  # rows 0..3: the window of 1 took nothing after the failed row
    assert state["bodies"].count(b"row 3") == 4  # the first send and three retries
    assert b"row 4" not in state["bodies"]  # nothing after the failed row with a window of 1


def test_a_stalled_server_times_out_with_the_rows_in_flight():
    listener, thread, state = fake_server(lambda opcode, body, state: time.sleep(3) or None)
    with listener:
        with _core.CqlConnection("127.0.0.1", listener.getsockname()[1], timeout=0.3) as conn:
            started = time.monotonic()
            with pytest.raises(TransportTimeoutError) as caught:
                conn.run(EXECUTE, [b"a", b"b", b"c"], window=2)
            assert time.monotonic() - started < 2.5
            assert caught.value.unacknowledged == [0, 1]
            assert caught.value.row is None and caught.value.sent == 2
            with pytest.raises(TransportTimeoutError):  # the connection stays failed
                conn.run(EXECUTE, [b"a"], window=1)
    thread.join(5)


def test_arguments_are_checked_before_anything_is_sent():
    listener, thread, state = fake_server(lambda opcode, body, state: None)
    with listener:
        with _core.CqlConnection("127.0.0.1", listener.getsockname()[1], timeout=5.0) as conn:
            with pytest.raises(ValueError, match="window"):
                conn.run(EXECUTE, [b"a"], window=0)
            with pytest.raises(TypeError, match=r"bodies\[1\] must be bytes"):
                conn.run(EXECUTE, [b"a", "b"])
            assert conn.run(EXECUTE, [], window=3) == (0, 0)
        assert conn.closed
        with pytest.raises(ValueError, match="closed"):
            conn.run(EXECUTE, [b"a"])
    thread.join(5)
    assert state["bodies"] == []
    with pytest.raises(ValueError, match="username and password"):
        _core.CqlConnection("127.0.0.1", 1, username="u")


def packed(bodies: list[bytes]) -> tuple[bytearray, bytes]:
    """``bodies`` back to back, and the int64 end of each."""
    ends, at = [], 0
    for body in bodies:
        at += len(body)
        ends.append(at)
    return bytearray(b"".join(bodies)), struct.pack(f"={len(ends)}q", *ends)


@given(st.lists(st.binary(max_size=40), max_size=30), st.data())
@settings(max_examples=25, deadline=None)
def test_a_packed_run_sends_the_selected_bodies_in_order(bodies, data):
    """run_packed sends, of the bodies packed in one buffer, those at ``rows`` in that order,
    each exactly as run would send it as bytes."""
    rows = data.draw(st.none() | st.lists(st.integers(0, max(len(bodies) - 1, 0)),
                                          max_size=30) if bodies else st.none())
    listener, thread, state = fake_server(lambda opcode, body, state: None)
    buffer, ends = packed(bodies)
    with listener:
        with _core.CqlConnection("127.0.0.1", listener.getsockname()[1], timeout=5.0) as conn:
            selection = None if rows is None else struct.pack(f"={len(rows)}i", *rows)
            sent = bodies if rows is None else [bodies[r] for r in rows]
            assert conn.run_packed(EXECUTE, buffer, ends, selection, window=3) == (len(sent), 0)
    thread.join(5)
    assert state["bodies"] == sent


def test_a_packed_run_names_the_failed_body_by_its_index():
    def answer(opcode: int, body: bytes, state: dict) -> bytes | None:
        return _error(0x2200, "Invalid row") if body == b"row 5" else None

    listener, thread, state = fake_server(answer)
    buffer, ends = packed([b"row %d" % i for i in range(8)])
    with listener:
        with _core.CqlConnection("127.0.0.1", listener.getsockname()[1], timeout=5.0) as conn:
            with pytest.raises(CqlServerError) as caught:
                conn.run_packed(EXECUTE, buffer, ends, struct.pack("=3i", 1, 5, 7), window=1)
    thread.join(5)
    assert caught.value.row == 5 and caught.value.unacknowledged == [5]
    assert "row 5" in str(caught.value) and "Invalid row" in str(caught.value)


def test_a_packed_run_checks_its_buffers_before_anything_is_sent():
    listener, thread, state = fake_server(lambda opcode, body, state: None)
    buffer, ends = packed([b"ab", b"cd"])
    with listener:
        with _core.CqlConnection("127.0.0.1", listener.getsockname()[1], timeout=5.0) as conn:
            with pytest.raises(ValueError, match=r"ends\[1\] = 5"):
                conn.run_packed(EXECUTE, buffer, struct.pack("=2q", 2, 5))
            with pytest.raises(ValueError, match=r"ends\[1\] = 1 is not between"):
                conn.run_packed(EXECUTE, buffer, struct.pack("=2q", 2, 1))
            with pytest.raises(ValueError, match=r"rows\[1\] = 2 is not a body"):
                conn.run_packed(EXECUTE, buffer, ends, struct.pack("=2i", 0, 2))
            with pytest.raises(ValueError, match=r"rows\[0\] = -1 is not a body"):
                conn.run_packed(EXECUTE, buffer, ends, struct.pack("=i", -1))
            with pytest.raises(ValueError, match="whole number"):
                conn.run_packed(EXECUTE, buffer, ends[:-1])
            with pytest.raises(ValueError, match="window"):
                conn.run_packed(EXECUTE, buffer, ends, window=0)
            assert conn.run_packed(EXECUTE, b"", b"") == (0, 0)
    thread.join(5)
    assert state["bodies"] == []


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    """(certificate, key) of a self-signed certificate for 127.0.0.1."""
    from test_tls import make_certificate

    return make_certificate(str(tmp_path_factory.mktemp("cql-tls")))


def server_tls(certificate) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*certificate)
    return context


@needs("openssl")  # the connection's TLS is bulkwire's own (OpenSSL), as the C sender's
def test_a_pipelined_run_over_tls(certificate):
    listener, thread, state = fake_server(lambda opcode, body, state: None,
                                          tls=server_tls(certificate))
    bodies = [b"tls row %d" % i + b"x" * (i % 300) for i in range(500)]
    with listener:
        context = _core.TlsContext(ca=certificate[0])
        with _core.CqlConnection("127.0.0.1", listener.getsockname()[1], tls=context,
                                 timeout=5.0) as conn:
            assert conn.run(EXECUTE, bodies, window=8) == (500, 0)
    thread.join(5)
    assert state["bodies"] == bodies


@needs("openssl")
def test_a_server_certificate_that_does_not_verify_is_refused(certificate):
    listener, thread, state = fake_server(lambda opcode, body, state: None,
                                          tls=server_tls(certificate))
    with listener:
        with pytest.raises(TLSError, match="127.0.0.1:.*certificate verify failed"):
            _core.CqlConnection("127.0.0.1", listener.getsockname()[1],
                                tls=_core.TlsContext(), timeout=5.0)
    thread.join(5)
    assert state["bodies"] == []


@pytest.mark.parametrize("over_tls", [False, True])
def test_a_forked_child_cannot_use_an_inherited_connection_and_the_parent_goes_on(
        certificate, over_tls):
    from test_fork import FORKED, run_in_child

    if over_tls:
        skip_without("openssl")
    listener, thread, state = fake_server(lambda opcode, body, state: None,
                                          tls=server_tls(certificate) if over_tls else None)
    with listener:
        context = _core.TlsContext(ca=certificate[0]) if over_tls else None
        conn = _core.CqlConnection("127.0.0.1", listener.getsockname()[1], tls=context,
                                   timeout=5.0)
        assert conn.run(EXECUTE, [b"before"]) == (1, 0)
        holder = [conn]

        def child() -> list[str]:
            said = []
            for call in (lambda: holder[0].run(EXECUTE, [b"child"]),
                         lambda: holder[0].request(QUERY, b"child")):
                try:
                    call()
                    said.append("returned")
                except RuntimeError as exc:
                    said.append(str(exc))
            holder.clear()  # the child's copy is released: nothing may reach the socket
            return said

        said = run_in_child(child)
        assert len(said) == 2 and all(FORKED in s for s in said), said
        # the parent's stream is intact: the child wrote nothing to it, not even a TLS close
        assert conn.run(EXECUTE, [b"after %d" % i for i in range(50)], window=4) == (50, 0)
        conn.close()
    thread.join(5)
    assert state["bodies"] == [b"before"] + [b"after %d" % i for i in range(50)]


class _Alarm(Exception):
    pass


def test_a_signal_handler_that_raises_stops_a_waiting_run():
    """Ctrl-C (here SIGALRM whose handler raises) ends a run that waits for a slow server
    long before its timeout; the connection is unusable afterwards, and says why."""
    listener, thread, state = fake_server(lambda opcode, body, state: time.sleep(2) or None)

    def alarm(signum, frame):
        raise _Alarm()

    previous = signal.signal(signal.SIGALRM, alarm)
    try:
        with listener:
            with _core.CqlConnection("127.0.0.1", listener.getsockname()[1], timeout=30.0) as conn:
                started = time.monotonic()
                signal.setitimer(signal.ITIMER_REAL, 0.2)
                with pytest.raises(_Alarm):
                    conn.run(EXECUTE, [b"a", b"b"], window=2)
                assert time.monotonic() - started < 1.5
                with pytest.raises(ConnectionLostError, match="interrupted"):
                    conn.run(EXECUTE, [b"a"])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    thread.join(5)



def test_an_ipv6_server():
    listener, thread, state = fake_server(lambda opcode, body, state: None, host="::1")
    with listener:
        port = listener.getsockname()[1]
        with _core.CqlConnection("::1", port, timeout=5.0) as conn:
            assert conn.peer == f"[::1]:{port}"
            assert conn.run(EXECUTE, [b"six"], window=1) == (1, 0)
    thread.join(5)
    assert state["bodies"] == [b"six"]
