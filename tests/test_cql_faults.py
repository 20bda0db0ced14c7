"""A CQL load against a fake node that misbehaves (``tests/cql_fake_node.py``): answers that
are not acknowledgements, malformed system tables, a node that stops answering while a
signal comes, server errors that fail the load, and the rows each failure names."""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import struct
import threading
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bulkwire.targets
from bulkwire import _core
from bulkwire.cql_placement import NoLocalReplica
from bulkwire.errors import ConnectionLostError, CqlServerError, ProtocolError
from build_extras import skip_without
from cql_fake_node import (INET, INT, MAP, READY, RESULT, SET, UUID, VARCHAR, VOID, FakeNode,
                           error, host_id, refusing, rows, text_map, text_set)


def table_file(tmp_path, rows: int = 50, name: str = "t.parquet") -> str:
    path = str(tmp_path / name)
    pq.write_table(pa.table({"id": pa.array(range(rows), pa.int64()),
                             "v": pa.array(range(rows), pa.int32())}), path)
    return path


@pytest.mark.parametrize("answer, said", [
    ((RESULT, b""), "a RESULT body that does not parse (0 bytes"),
    ((RESULT, struct.pack(">i", 77)), "unknown kind 77"),
    ((READY, b""), "opcode 0x02, not RESULT"),
    ((RESULT, struct.pack(">i", 3) + struct.pack(">H", 2) + b"ks"), "kind Set_keyspace, not Void"),
])
def test_an_answer_that_is_not_an_acknowledgement_fails_the_load_naming_its_row(
        tmp_path, answer, said):
    """One EXECUTE of 50 answered with what does not say the row was stored: the load raises
    ProtocolError naming the node and the row, which is unacknowledged, never rows=50."""
    path = table_file(tmp_path)
    with FakeNode(answer_execute=lambda n, body: answer if n == 17 else None) as node:
        with pytest.raises(ProtocolError) as caught:
            bulkwire.load_parquet(path, bulkwire.targets.cql(node.address, "ks", "t"))
    error = caught.value
    assert node.address in str(error) and said in str(error)
    assert error.source_row == 17 and error.row == 17
    assert 17 in error.unacknowledged
    assert error.unconfirmed == [(path, 0, 50)]


# --------------------------------------------------------------------------------------------
# Ctrl-C while a node does not answer


def _interrupt_after(seconds: float) -> threading.Timer:
    """SIGINT to the main thread after ``seconds`` (Python's handler: KeyboardInterrupt)."""
    main = threading.main_thread().ident
    timer = threading.Timer(seconds, signal.pthread_kill, (main, signal.SIGINT))
    timer.start()
    return timer


@contextlib.contextmanager
def _unanswered_connect(host: str = "127.0.0.1"):
    """An address whose connect waits: a listener whose accept queue is full (nothing accepts),
    so the kernel drops the next SYN. Yields "host:port"."""
    listener = socket.socket()
    listener.bind((host, 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(4):  # the queue holds one or two, depending on the kernel
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex((host, port))
            fillers.append(filler)
        yield f"{host}:{port}"
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


@pytest.mark.parametrize("silent_at", ["connect", "tls handshake", "startup", "query",
                                       "prepare", "execute"])
def test_ctrl_c_ends_every_wait_of_a_load_on_a_node_that_does_not_answer(tmp_path, silent_at):
    """A node that takes the connection (or not even that) and never answers, at each step of
    the load: SIGINT raises KeyboardInterrupt from the load at once, never after its timeout
    (an hour here); the connections are closed on the way out."""
    if silent_at == "tls handshake":
        skip_without("openssl")  # a CQL connection's TLS is bulkwire's own (OpenSSL)
    path = table_file(tmp_path)
    tls = {}
    with contextlib.ExitStack() as stack:
        if silent_at == "connect":
            address = stack.enter_context(_unanswered_connect())
        else:  # a TLS client's hello is read as a frame that never ends: no answer
            tls = {"tls": True, "ca": False} if silent_at == "tls handshake" else {}
            address = stack.enter_context(FakeNode(silent_at=silent_at)).address
        started = time.monotonic()
        timer = _interrupt_after(0.5)
        try:
            with pytest.raises(KeyboardInterrupt):
                bulkwire.load_parquet(
                    path, bulkwire.targets.cql(address, "ks", "t", timeout=3600, **tls))
        finally:
            timer.cancel()
        # the connect's own limit is 10 s and the others' an hour: far below either
        assert time.monotonic() - started < 8


def test_ctrl_c_ends_a_request_and_the_connection_then_closes_at_once():
    """``CqlConnection.request`` waiting on a silent node ends on SIGINT; the connection is
    unusable afterwards (it says it was interrupted), and closing it does not wait."""
    with FakeNode(silent_at="query") as node:
        conn = _core.CqlConnection("127.0.0.1", node.port, timeout=3600)
        timer = _interrupt_after(0.3)
        try:
            with pytest.raises(KeyboardInterrupt):
                conn.request(_core.CQL_OP_QUERY, _core.cql_query_body("SELECT 1", 1))
        finally:
            timer.cancel()
        with pytest.raises(ConnectionLostError, match="interrupted"):
            conn.request(_core.CQL_OP_QUERY, _core.cql_query_body("SELECT 1", 1))
        started = time.monotonic()
        conn.close()
        assert conn.closed and time.monotonic() - started < 5


def test_ctrl_c_in_the_command_line_exits_130(tmp_path, capsys):
    """The same from ``bulkwire load --cql``: exit status 130, well before the timeout
    (30 s)."""
    from bulkwire.cli import EXIT_INTERRUPTED, main

    path = table_file(tmp_path)
    with FakeNode(silent_at="query") as node:
        started = time.monotonic()
        timer = _interrupt_after(0.5)
        try:
            code = main(["load", path, "--cql", node.address, "--keyspace", "ks", "--table", "t"])
        finally:
            timer.cancel()
    assert code == EXIT_INTERRUPTED and "interrupted" in capsys.readouterr().err
    assert time.monotonic() - started < 8


# --------------------------------------------------------------------------------------------
# system tables that do not hold what they should


def _with_schema_rows(node: FakeNode, body: bytes) -> FakeNode:
    node.schema_rows = lambda: body  # type: ignore[method-assign]
    return node


@pytest.mark.parametrize("make, said", [
    (lambda: FakeNode(answer_query=lambda q: VOID if "system_schema" in q else None),
     "system_schema.columns WHERE keyspace_name = 'ks' AND table_name = 't' is malformed: "
     "a RESULT of kind void, not Rows"),
    (lambda: FakeNode(answer_query=lambda q: VOID if "system.local" in q else None),
     "SELECT host_id, rpc_address, data_center, rack, tokens FROM system.local is malformed: "
     "a RESULT of kind void"),
    (lambda: FakeNode(answer_query=lambda q: VOID if "system_schema.keyspaces" in q else None),
     "SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = 'ks' is "
     "malformed: a RESULT of kind void"),
    (lambda: FakeNode(replication={"replication_factor": "1"}),
     "system_schema.keyspaces is malformed: the replication {'replication_factor': '1'} "
     "names no class"),
    (lambda: FakeNode(tokens=[str(1 << 70)]), "system.local and system.peers is malformed: "
                                              f"the token {1 << 70} of 127.0.0.1 is not a "
                                              "Murmur3 token"),
    (lambda: FakeNode(tokens=["12x"]), "system.local and system.peers is malformed: invalid "
                                       "literal for int()"),
    (lambda: _with_schema_rows(FakeNode(), rows(
        "system_schema", "columns", [("column_name", struct.pack(">H", VARCHAR)),
                                     ("kind", struct.pack(">H", VARCHAR))],
        [[b"\xff", b"partition_key"]])), "system_schema.columns is malformed: 'utf-8' codec"),
    (lambda: _with_schema_rows(FakeNode(), rows(
        "system_schema", "columns", [(b"\xffname", struct.pack(">H", VARCHAR))], [])),
     "system_schema.columns WHERE keyspace_name = 'ks' AND table_name = 't' is malformed"),
])
def test_a_malformed_system_table_answer_is_a_protocol_error_naming_node_and_query(
        tmp_path, make, said):
    path = table_file(tmp_path)
    with make() as node:
        with pytest.raises(ProtocolError) as caught:
            bulkwire.load_parquet(path, bulkwire.targets.cql(node.address, "ks", "t"))
    assert str(caught.value).startswith(f"{node.address}: the answer to ")
    assert said in str(caught.value)


_TEXT = struct.pack(">H", VARCHAR)
_CELLS = st.one_of(st.none(), st.binary(max_size=12))
_TOKENS = st.lists(st.one_of(st.integers(-(1 << 80), 1 << 80).map(str),
                             st.text(max_size=6)), max_size=3)


@st.composite
def _system_answer(draw) -> tuple[str, tuple[int, bytes]]:
    """(the table whose query is answered, the answer): a body of random bytes, Void, or
    Rows of the right or wrong columns holding random cells or token sets."""
    table = draw(st.sampled_from(["system_schema.columns", "system_schema.keyspaces",
                                  "system.local", "system.peers_v2", "system.peers"]))
    shape = draw(st.sampled_from(["bytes", "void", "rows"]))
    if shape == "bytes":
        return table, (RESULT, draw(st.binary(max_size=40)))
    if shape == "void":
        return table, VOID
    names = {"system_schema.columns": ["column_name", "kind"],
             "system_schema.keyspaces": ["replication"],
             "system.local": ["host_id", "rpc_address", "data_center", "rack", "tokens"],
             "system.peers_v2": ["host_id", "peer", "native_address", "native_port",
                                 "data_center", "rack", "tokens"],
             "system.peers": ["host_id", "peer", "rpc_address", "data_center", "rack",
                              "tokens"]}[table]
    names = draw(st.one_of(st.just(names), st.lists(st.sampled_from(names + ["x"]), max_size=4)))
    options = [struct.pack(">H", INET) if n in ("peer", "rpc_address", "native_address") else
               struct.pack(">HH", SET, VARCHAR) if n == "tokens" else
               struct.pack(">H", UUID) if n == "host_id" else
               struct.pack(">H", INT) if n == "native_port" else
               struct.pack(">HHH", MAP, VARCHAR, VARCHAR) if n == "replication" else _TEXT
               for n in names]

    def value(name: str):
        if name == "host_id":  # this node's, or a cell that is no uuid
            return draw(st.one_of(st.just(host_id("127.0.0.1")), _CELLS))
        if name == "native_port":
            return draw(st.one_of(st.just(b""), _CELLS))
        if name in ("peer", "rpc_address", "native_address"):  # this node, or no address an INSERT could reach
            return draw(st.sampled_from([socket.inet_aton("127.0.0.1"), None, b"", b"\x7f\x00",
                                         socket.inet_aton("0.0.0.0")]))
        if name == "tokens":
            return draw(st.one_of(_TOKENS.map(text_set), _CELLS))
        if name == "replication":  # a replication map, or one of no class, or no map
            return draw(st.one_of(st.sampled_from([
                text_map({"class": "SimpleStrategy", "replication_factor": "2"}),
                text_map({"class": "NetworkTopologyStrategy", "datacenter1": "1", "dc2": "x"}),
                text_map({"replication_factor": "1"})]), _CELLS))
        if name in ("data_center", "rack"):
            return draw(st.one_of(st.sampled_from([b"datacenter1", b"rack1", b"dc2"]), _CELLS))
        if name == "column_name":
            return draw(st.sampled_from([b"id", b"v", b"\xff", b"other"]))
        return draw(st.one_of(st.sampled_from([b"partition_key", b"regular"]), _CELLS))

    values = draw(st.lists(st.builds(lambda: None).map(lambda _: [value(n) for n in names]),
                           max_size=3))
    return table, (RESULT, rows("s", "t", list(zip(names, options)), values))


def _read_from(query: str) -> str:
    """The table a SELECT reads (system.peers is not system.peers_v2)."""
    return query.split(" FROM ", 1)[1].split()[0]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(answer=_system_answer())
def test_random_system_table_answers_fail_only_as_documented(tmp_path, answer):
    """Whatever a node answers to the plan's and the ring's queries, the load either stores
    every row or raises ProtocolError naming the node, or the plan's ValueError naming the
    table (a table without the data's columns); never a bare Python error."""
    table, given_answer = answer
    path = table_file(tmp_path, rows=5)
    with FakeNode(answer_query=lambda q: given_answer if _read_from(q) == table else None) \
            as node:
        try:
            result = bulkwire.load_parquet(path, bulkwire.targets.cql(node.address, "ks", "t"))
        except ProtocolError as exc:
            assert str(exc).startswith(f"{node.address}: ")
        except NoLocalReplica as exc:  # the node's data centre is not its peers'
            assert "keyspace ks (replication" in str(exc), repr(exc)
        except ValueError as exc:
            assert type(exc) is ValueError and "ks.t" in str(exc), repr(exc)
        else:
            assert result.rows == 5 and node.executes == 5


# --------------------------------------------------------------------------------------------
# the rows a failure names


_refusing = refusing


def test_a_refused_row_of_a_take_is_named_as_the_files_row_and_its_place(tmp_path):
    """take=[5, 9, 777, 3], the server refusing file row 777 (and not answering row 3, in
    flight with it): the error names row 777 and take[2] (never another row of the file),
    and says that rows 5 and 9 were confirmed and 777 and 3 were not."""
    path = table_file(tmp_path, rows=1000)
    with FakeNode(answer_execute=_refusing(777)) as node:
        with pytest.raises(CqlServerError) as caught:
            bulkwire.load_parquet(path, bulkwire.targets.cql(node.address, "ks", "t"),
                                  take=[5, 9, 777, 3])
    error = caught.value
    assert (error.source_row, error.take_index) == (777, 2)
    assert error.source_unacknowledged == [777, 3]
    assert ("(source row 777 (take[2]); 2 source row(s) not acknowledged: 777 (take[2]), "
            "3 (take[3]))") in str(error)
    assert error.unconfirmed == [(path, 777, 778), (path, 3, 4)]
    assert error.__notes__ == [f"of the 4 rows taken from {path!r}, confirmed by the server 2: "
                               f"5 (take[0]), 9 (take[1]); not confirmed 2: 777 (take[2]), "
                               f"3 (take[3])"]


def test_the_command_line_names_a_take_rows_file_row(tmp_path, capsys):
    from bulkwire.cli import EXIT_SERVER, main

    path = table_file(tmp_path, rows=1000)
    with FakeNode(answer_execute=_refusing(777)) as node:
        code = main(["load", path, "--cql", node.address, "--keyspace", "ks", "--table", "t",
                     "--take", "5,9,777,3"])
    err = capsys.readouterr().err
    assert code == EXIT_SERVER
    assert "source row 777 (take[2])" in err and "confirmed by the server 2: 5 (take[0])" in err


def test_a_run_error_numbers_rows_as_the_source_everywhere(tmp_path):
    """Batches of 100 rows, row 777 refused: the message, source_row and the rows not
    acknowledged are the file's rows (777 and those after it in its batch), never the
    batch's own numbers (77)."""
    path = table_file(tmp_path, rows=1000)
    with FakeNode(answer_execute=_refusing(777)) as node:
        with pytest.raises(CqlServerError) as caught:
            bulkwire.load_parquet(path, bulkwire.targets.cql(node.address, "ks", "t"),
                                  batch_rows=100)
    error = caught.value
    assert error.source_row == 777 and 777 in error.source_unacknowledged
    assert all(777 <= r < 800 for r in error.source_unacknowledged)
    # rows never sent after the refusal are not acknowledged either
    assert error.source_unacknowledged[-1] == 799
    first_line = str(error).splitlines()[0]
    assert "(source row 777; " in first_line and " 77," not in first_line
    assert "row 77;" not in first_line


# --------------------------------------------------------------------------------------------
# the command line's words


def test_a_data_column_the_table_lacks_is_named_with_the_option_to_leave_it_out(tmp_path,
                                                                                 capsys):
    """The Python API says ``columns=``; the command line ``--columns``."""
    from bulkwire.cli import EXIT_INPUT, main

    path = str(tmp_path / "extra.parquet")
    pq.write_table(pa.table({"id": pa.array([1], pa.int64()), "extra": [1]}), path)
    with FakeNode() as node:
        with pytest.raises(ValueError, match=r"\(leave it out with columns=\)"):
            bulkwire.load_parquet(path, bulkwire.targets.cql(node.address, "ks", "t"))
        code = main(["load", path, "--cql", node.address, "--keyspace", "ks", "--table", "t"])
    err = capsys.readouterr().err
    assert code == EXIT_INPUT
    assert "column 'extra'" in err and "(leave it out with --columns)" in err
    assert "columns=" not in err


def test_a_server_error_fails_the_load_at_once_with_the_row_in_flight_unconfirmed(tmp_path):
    """The node answers row 20 with "Request is too big" and never answers row 21, which is
    in flight with it: the load fails with the server's error at once, not after its
    timeout (an hour here), and row 21 is among the rows not acknowledged."""
    path = table_file(tmp_path)

    def answer(n: int, body: bytes):
        if n == 20:
            return error(0x000A, "Request is too big")
        return "silent" if n > 20 else None

    with FakeNode(answer_execute=answer) as node:
        started = time.monotonic()
        with pytest.raises(CqlServerError, match="Request is too big") as caught:
            bulkwire.load_parquet(
                path, bulkwire.targets.cql(node.address, "ks", "t", timeout=3600))
        assert time.monotonic() - started < 30
    error_ = caught.value
    assert error_.source_row == 20 and 21 in error_.source_unacknowledged
    assert error_.unconfirmed == [(path, 0, 50)]


@pytest.mark.parametrize("silent_at", ["prepare", "execute"])
def test_ctrl_c_ends_runs_waiting_on_two_nodes_in_other_threads(tmp_path, silent_at):
    """Two nodes, each sent its rows from a thread of its own, neither answering the session's
    PREPARE, or an EXECUTE: SIGINT (to the main thread, waiting for both) ends the load at
    once, the waits in the other threads included, never after the timeout (an hour)."""
    path = table_file(tmp_path, rows=200)
    with FakeNode(host="127.0.0.2", tokens=[str(1 << 62)], silent_at=silent_at) as second, \
            FakeNode(tokens=["0"], peers=[("127.0.0.2", [str(1 << 62)])],
                     silent_at=None if silent_at == "prepare" else silent_at) as first:
        started = time.monotonic()
        timer = _interrupt_after(0.5)
        try:
            with pytest.raises(KeyboardInterrupt):
                bulkwire.load_parquet(
                    path,
                    bulkwire.targets.cql([first.address, second.address], "ks", "t", timeout=3600))
        finally:
            timer.cancel()
        assert time.monotonic() - started < 8
        assert first.seen.get("execute") and second.seen.get(silent_at)  # both were reached


@pytest.mark.parametrize("silent_at", ["connect", "startup"])
def test_ctrl_c_ends_a_connect_to_a_second_node_still_being_made_in_another_thread(
        tmp_path, silent_at):
    """Two nodes, each sent its rows from a thread of its own; the second's connection is
    still being made when SIGINT comes: its TCP connect is never accepted, or it never answers
    the handshake (OPTIONS). The load ends at once, not after the connect timeout (10 s) or
    the timeout (an hour), and leaves no descriptor of its cancel behind. A watchdog ends the
    second node's connections after 20 s, so that a connect the abort does not reach fails
    this test rather than hanging it."""
    path = table_file(tmp_path, rows=200)
    with contextlib.ExitStack() as stack:
        if silent_at == "connect":
            second = None
            address = stack.enter_context(_unanswered_connect("127.0.0.2"))
        else:
            second = stack.enter_context(FakeNode(host="127.0.0.2", tokens=[str(1 << 62)],
                                                  silent_at=silent_at))
            address = second.address
        first = stack.enter_context(FakeNode(tokens=["0"],
                                             peers=[("127.0.0.2", [str(1 << 62)])]))

        def end_the_second_nodes_connections() -> None:
            for conn in second.conns if second is not None else []:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
        watchdog = threading.Timer(20, end_the_second_nodes_connections)
        watchdog.start()
        stack.callback(watchdog.cancel)
        pipes = _pipes()
        started = time.monotonic()
        timer = _interrupt_after(0.5)
        try:
            with pytest.raises(KeyboardInterrupt):
                bulkwire.load_parquet(
                    path, bulkwire.targets.cql([first.address, address], "ks", "t", timeout=3600))
        finally:
            timer.cancel()
        assert time.monotonic() - started < 8
        assert first.seen.get("execute")
        assert second is None or second.seen.get("startup")  # it was reached
        assert not _pipes() - pipes  # the session's cancel is closed


@pytest.mark.parametrize("silent_at", ["connect", "tls handshake", "startup"])
def test_a_cancel_ends_a_connect_still_being_made_in_another_thread(silent_at):
    """``CqlCancel.cancel()`` from the main thread ends a ``CqlConnection`` still being made
    in another thread, whichever wait it is in (the TCP connect, the TLS handshake, the
    handshake's OPTIONS): ConnectionLostError saying it was aborted, at once, never after the
    connect timeout or the timeout (an hour). A connection given the cancel afterwards fails
    at once, without connecting."""
    if silent_at == "tls handshake":
        skip_without("openssl")
    cancel = _core.CqlCancel()
    caught: list[BaseException] = []
    with contextlib.ExitStack() as stack:
        node = None
        if silent_at == "connect":
            address = stack.enter_context(_unanswered_connect())
        else:  # a TLS client's hello is read as a frame that never ends: no answer
            node = stack.enter_context(FakeNode(silent_at=silent_at))
            address = node.address
        host, port = address.rsplit(":", 1)
        tls = _core.TlsContext(verify=False) if silent_at == "tls handshake" else None

        def connect() -> None:
            try:
                _core.CqlConnection(host, int(port), tls=tls, connect_timeout=3600,
                                    timeout=3600, cancel=cancel)
            except BaseException as exc:  # noqa: BLE001 - the test looks at it
                caught.append(exc)

        making = threading.Thread(target=connect, daemon=True)  # daemon: a hang fails only
        making.start()
        time.sleep(0.5)
        assert making.is_alive() and not cancel.cancelled  # waiting, as the node makes it
        started = time.monotonic()
        cancel.cancel()
        making.join(8)
        assert not making.is_alive() and time.monotonic() - started < 8
        assert isinstance(caught[0], ConnectionLostError), caught
        assert "aborted" in str(caught[0]) and host in str(caught[0])
        assert node is None or node.seen.get("startup") or silent_at == "tls handshake"
    assert cancel.cancelled
    with FakeNode() as node:
        with pytest.raises(ConnectionLostError, match="aborted"):
            _core.CqlConnection("127.0.0.1", node.port, cancel=cancel)
        assert not node.conns
        with pytest.raises(TypeError, match="CqlCancel"):
            _core.CqlConnection("127.0.0.1", node.port, cancel=3)


def _pipes() -> set[int]:
    """This process's descriptors that are pipes."""
    found = set()
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/self/fd/{name}").startswith("pipe:"):
                found.add(int(name))
    return found


def test_a_cancel_is_a_close_on_exec_pipe_held_by_its_connections():
    """A CqlCancel is one pipe, close-on-exec (a program the load starts inherits nothing);
    close() closes it at once, or, while an open connection holds it, when the last one
    closes; a closed cancel is given to no connection."""
    before = _pipes()
    cancel = _core.CqlCancel()
    made = _pipes() - before
    assert len(made) == 2
    for fd in made:
        with open(f"/proc/self/fdinfo/{fd}") as info:
            flags = int(next(line for line in info if line.startswith("flags:")).split()[1], 8)
        assert flags & os.O_CLOEXEC
    with FakeNode() as node:
        conns = [_core.CqlConnection("127.0.0.1", node.port, cancel=cancel) for _ in range(2)]
        cancel.close()
        conns[0].close()
        assert _pipes() - before == made  # the other connection still watches it
        conns[1].close()
        assert not _pipes() - before
        with pytest.raises(ValueError, match="closed"):
            _core.CqlConnection("127.0.0.1", node.port, cancel=cancel)
        cancel.cancel()  # nothing left to end
        cancel.close()
        spare = _core.CqlCancel()
        del spare  # never closed: its pipe goes with it
        assert not _pipes() - before


def test_a_forked_child_cannot_use_an_inherited_cancel_nor_end_the_parents_waits():
    """In a forked child, cancel() of a CqlCancel made by the parent does nothing (the waits
    it ends are the parent's) and a connection given it is refused; the parent's cancel and
    its connection go on."""
    from test_fork import FORKED, run_in_child

    cancel = _core.CqlCancel()
    with FakeNode() as node:
        conn = _core.CqlConnection("127.0.0.1", node.port, cancel=cancel)

        def child() -> str:
            cancel.cancel()
            try:
                _core.CqlConnection("127.0.0.1", node.port, cancel=cancel)
            except RuntimeError as exc:
                return str(exc)
            return "returned"

        assert FORKED in run_in_child(child)
        assert not cancel.cancelled
        conn.request(_core.CQL_OP_QUERY,
                     _core.cql_query_body("SELECT host_id FROM system.local", 1))
        cancel.cancel()
        with pytest.raises(ConnectionLostError, match="aborted"):
            conn.request(_core.CQL_OP_QUERY,
                         _core.cql_query_body("SELECT host_id FROM system.local", 1))
        conn.close()


def test_abort_from_another_thread_ends_a_waiting_run():
    """``CqlConnection.abort`` while a run waits on a silent node in another thread: the run
    raises ConnectionLostError saying so, at once; the connection then refuses every call."""
    with FakeNode(silent_at="execute") as node:
        conn = _core.CqlConnection("127.0.0.1", node.port, timeout=3600)
        caught: list[BaseException] = []

        def run() -> None:
            try:
                conn.run(_core.CQL_OP_EXECUTE, [b"a", b"b"], window=2)
            except BaseException as exc:  # noqa: BLE001 - the test looks at it
                caught.append(exc)

        waiting = threading.Thread(target=run)
        waiting.start()
        while not node.seen.get("execute"):
            time.sleep(0.01)
        conn.abort()
        waiting.join(8)
        assert not waiting.is_alive()
        assert isinstance(caught[0], ConnectionLostError) and "aborted" in str(caught[0])
        assert caught[0].unacknowledged == [0, 1]
        with pytest.raises(ConnectionLostError):
            conn.run(_core.CQL_OP_EXECUTE, [b"c"])
        conn.close()
