"""The CQL load against a real Cassandra 5.0 node that pushes back, revokes, refuses and
hashes to the ring's edges (``--server cassandra``).

- The server's own backpressure: a rate limit (``native_transport_max_requests_per_second``)
  and a limit on the bytes of requests in flight (``native_transport_max_request_data_in_flight``,
  formerly ``..._max_concurrent_requests_in_bytes``). A protocol v4 client that did not ask
  for THROW_ON_OVERLOAD (the load) is met by the server no longer reading its connection; one
  that asked (``CqlConnection(throw_on_overload=True)``) gets *overloaded* answers.
- Authentication and authorization (PasswordAuthenticator, CassandraAuthorizer, the caches
  off) with the loading role's MODIFY permission revoked, or the role dropped, in the middle
  of a load; ``--resume`` with a good role afterwards.
- TLS to the node (client_encryption_options, certificates made here): an expired server
  certificate, one for another address, a node that requires a client certificate (given,
  not given) and one that does not ask for it; a contact point that resets the connection
  during the handshake (a TLS-only port spoken to in plain, and, without a node, listeners
  that reset at the first bytes).
- Partition keys whose Murmur3 hash is the minimum (-2**63, which the partitioner takes for
  the maximum token) or lands past the ring's largest node token (the wrap-around), beside
  the node's own tokens.

Every test against a node reads back what the server stored and compares it with what was
sent. Two nodes serve the module, one at a time (``node(kind)`` stops the one running before
it starts the other): *guarded* (authentication, authorization with the caches off, TLS requiring a client
certificate, beside plain connections on the same port) and *open* (TLS without client
certificates on a port of its own, TLS_PORT, a rate limit and a bytes-in-flight limit). The
driver reading back uses plain connections to the native port.
"""
from __future__ import annotations

import contextlib
import datetime
import os
import pathlib
import re
import socket
import struct
import subprocess
import sys
import threading
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bulkwire.targets
from bulkwire import _core
from bulkwire.cli import EXIT_SERVER
from bulkwire.cql_statements import TokenRing
from bulkwire.errors import ConnectError, CqlServerError, TLSError
from servers.cassandra import SUPERUSER, connect

server = pytest.mark.cassandra_server

KEYSPACE = "attacks"
ROOT = pathlib.Path(__file__).resolve().parent.parent
PKG = str(pathlib.Path(bulkwire.__file__).resolve().parent.parent)
#: The addresses of the module's two nodes (each its own cluster).
GUARDED, OPEN = "127.0.0.51", "127.0.0.52"
#: Bytes of requests in flight each node takes (per client address and in all): one request
#: of a row of LARGE bytes is over it.
IN_FLIGHT_LIMIT = 16 * 1024
LARGE = 20_000
#: Requests per second the open node serves.
RATE = 300
#: The open node's port taking TLS only (its native port then takes plain connections only).
TLS_PORT = 10142


# --------------------------------------------------------------------------------------------
# certificates


def _pki(folder: pathlib.Path) -> SimpleNamespace:
    """A CA, a client certificate it signs, one signed by another CA, and server
    certificates for each node's address: good, expired, and for another address."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID

    from bulkwire.testing.pki import _certificate, _pem_key

    pem = serialization.Encoding.PEM
    day = datetime.timedelta(days=1)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("attacks CA", "attacks CA", ca_key, ca_key.public_key(), ca=True,
                      usage=None)
    other_key = ec.generate_private_key(ec.SECP256R1())
    other_ca = _certificate("other CA", "other CA", other_key, other_key.public_key(),
                            ca=True, usage=None)

    def leaf(name: str, issuer: str, signer: Any, *, ip: str | None = None,
             valid_from: datetime.timedelta = -day / 24) -> bytes:
        key = ec.generate_private_key(ec.SECP256R1())
        usage = ([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH] if ip
                 else [ExtendedKeyUsageOID.CLIENT_AUTH])
        cert = _certificate(name, issuer, signer, key.public_key(), ca=False, usage=usage,
                            ip=ip, valid_from=valid_from)
        return _pem_key(key) + cert.public_bytes(pem)  # Cassandra's PEM keystore: key first

    files = {"ca": ca.public_bytes(pem),
             "client": leaf("loader", "attacks CA", ca_key),
             "other_client": leaf("loader", "other CA", other_key),
             "other_ca": other_ca.public_bytes(pem)}
    for address in (GUARDED, OPEN):
        files[f"server {address}"] = leaf(address, "attacks CA", ca_key, ip=address)
        files[f"expired {address}"] = leaf(address, "attacks CA", ca_key, ip=address,
                                           valid_from=-3 * day)
        files[f"elsewhere {address}"] = leaf("127.0.0.99", "attacks CA", ca_key,
                                             ip="127.0.0.99")
    paths = {}
    for name, data in files.items():
        path = folder / (name.replace(" ", "-") + ".pem")
        path.write_bytes(data)
        paths[name.replace(" ", "_").replace(".", "_")] = str(path)
    # the file each node reads its certificate from (swapped by the tests, then reloaded)
    for address in (GUARDED, OPEN):
        keystore = folder / f"keystore-{address}.pem"
        keystore.write_bytes(files[f"server {address}"])
        paths[f"keystore_{address.replace('.', '_')}"] = str(keystore)
    return SimpleNamespace(folder=folder, **paths)


def _tls_lines(pki: SimpleNamespace, address: str, *, require_client_auth: bool,
               port: int | None = None) -> str:
    """TLS on the native port beside plain connections, or (``port``) on a port of its own
    that takes TLS only, the native port then taking plain connections only."""
    return f"""\
{f"native_transport_port_ssl: {port}" if port else ""}
client_encryption_options:
  enabled: true
  optional: {"false" if port else "true"}
  require_client_auth: {"true" if require_client_auth else "false"}
  ssl_context_factory:
    class_name: org.apache.cassandra.security.PEMBasedSslContextFactory
  keystore: "{getattr(pki, 'keystore_' + address.replace('.', '_'))}"
  truststore: "{pki.ca}"
"""


def _limits() -> str:
    return (f"native_transport_max_request_data_in_flight_per_ip: {IN_FLIGHT_LIMIT}B\n"
            f"native_transport_max_request_data_in_flight: {IN_FLIGHT_LIMIT}B\n")


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> SimpleNamespace:
    return _pki(tmp_path_factory.mktemp("cql-attacks-pki"))


@pytest.fixture(scope="module")
def node(pki):
    """``node(kind)``: the running node of that kind ("guarded" or "open"), started on first
    use; the node of the other kind is stopped first, so one runs at a time."""
    from servers.cassandra import running

    settings = {
        "guarded": dict(first=51, password_auth=True, extra_config=(
            "authorizer: CassandraAuthorizer\n"
            # no caching of roles, permissions or credentials: a change applies at once
            "permissions_validity: 0ms\nroles_validity: 0ms\ncredentials_validity: 0ms\n"
            + _tls_lines(pki, GUARDED, require_client_auth=True))),
        "open": dict(first=52, max_requests_per_second=RATE, extra_config=(
            _limits() + _tls_lines(pki, OPEN, require_client_auth=False, port=TLS_PORT))),
    }
    current: dict[str, Any] = {}
    stack = contextlib.ExitStack()

    def get(kind: str):
        if current.get("kind") != kind:
            stack.close()
            current.clear()
            nodes = stack.enter_context(running(1, **settings[kind]))
            current.update(kind=kind, node=nodes[0])
            with driver(nodes[0]) as s:
                s.execute(f"CREATE KEYSPACE IF NOT EXISTS {KEYSPACE} WITH replication = "
                          "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        return current["node"]

    with stack:
        yield get


def driver(node, **kwargs):
    """The official driver, over a plain connection, as the superuser where there is one."""
    return connect([node.address], credentials=node.credentials, timeout=60.0, **kwargs)


def make_table(s, name: str, columns: str = "id bigint PRIMARY KEY, v text") -> str:
    s.execute(f"DROP TABLE IF EXISTS {KEYSPACE}.{name}")
    s.execute(f"CREATE TABLE {KEYSPACE}.{name} ({columns})")
    return name


def stored(s, table: str) -> dict:
    return {row.id: row.v for row in s.execute(f"SELECT id, v FROM {KEYSPACE}.{table}")}


def text_rows(path: pathlib.Path, rows: int, size: int = 12, row_group: int = 250) -> dict:
    """A Parquet file of ``rows`` rows (``id`` bigint, ``v`` text of ``size`` bytes); what it
    holds, by id."""
    values = {i: f"{i:0{size}d}" for i in range(rows)}
    pq.write_table(pa.table({"id": pa.array(list(values), pa.int64()),
                             "v": list(values.values())}), str(path), row_group_size=row_group)
    return values


@contextlib.contextmanager
def on_the_open_node(node, path: pathlib.Path, rows: int, name: str):
    """The open node (``node("open")``), a file of ``rows`` text rows at ``path``: yields
    (the node, what the file holds, its TLS port ``HOST:PORT``, the driver's session to it,
    the table ``name`` made anew there)."""
    n = node("open")
    values = text_rows(path, rows)
    with driver(n) as s:
        yield n, values, f"{n.address}:{TLS_PORT}", s, make_table(s, name)


def reload_certificate(node, pki, which: str) -> None:
    """The node's certificate swapped for ``which`` (server, expired, elsewhere) and
    reloaded (``nodetool reloadssl``: new connections get it)."""
    address = node.address.replace(".", "_")
    source = getattr(pki, f"{which}_{address}")
    pathlib.Path(getattr(pki, f"keystore_{address}")).write_bytes(
        pathlib.Path(source).read_bytes())
    node.nodetool("reloadssl")


def cli(*args: str) -> subprocess.CompletedProcess:
    """``bulkwire ARGS`` in a child process (which shares this process's network)."""
    env = dict(os.environ, PYTHONPATH=PKG)
    return subprocess.run([sys.executable, "-m", "bulkwire", *args], capture_output=True,
                          text=True, env=env, timeout=300)


# --------------------------------------------------------------------------------------------
# TLS


def _refused_before_any_row(load, s, table: str, node, words: str, *,
                            port: int = 9042) -> TLSError:
    """``load()`` raises a ``TLSError`` naming the node (at ``port``) and saying ``words`` (a
    regular expression); the table is still empty."""
    with pytest.raises(TLSError) as caught:
        load()
    message = str(caught.value)
    assert f"{node.address}:{port}" in message and re.search(words, message), message
    assert stored(s, table) == {}
    return caught.value


@server
def test_tls_to_a_node_that_requires_a_client_certificate(node, pki, tmp_path):
    """Each refusal is a TLSError naming the node, raised before any row is sent: no client
    certificate, one of a CA the node does not trust, a CA that did not sign the node's,
    an expired node certificate, a node certificate for another address. The admitted
    client certificate loads every row."""
    n = node("guarded")
    path = tmp_path / "t.parquet"
    values = text_rows(path, 600)
    user, password = SUPERUSER

    def load(**tls: Any) -> Any:
        return bulkwire.load_parquet(
            str(path),
            bulkwire.targets.cql(n.address, KEYSPACE, table, username=user, password=password,
                                 timeout=10.0, **tls))

    with driver(n) as s:
        table = make_table(s, "tls_required")
        _refused_before_any_row(lambda: load(tls=True, ca=pki.ca), s, table, n,
                                "alert (certificate required|handshake failure|bad certificate)")
        _refused_before_any_row(lambda: load(certificate=pki.other_client, ca=pki.ca), s,
                                table, n, "TLS")
        _refused_before_any_row(lambda: load(certificate=pki.client, ca=pki.other_ca), s,
                                table, n, "unable to get local issuer certificate")
        try:
            reload_certificate(n, pki, "expired")
            _refused_before_any_row(lambda: load(certificate=pki.client, ca=pki.ca), s, table,
                                    n, "certificate has expired")
            reload_certificate(n, pki, "elsewhere")
            _refused_before_any_row(lambda: load(certificate=pki.client, ca=pki.ca), s, table,
                                    n, "IP address mismatch")
        finally:
            reload_certificate(n, pki, "server")
        result = load(certificate=pki.client, ca=pki.ca)
        assert result.rows == len(values)
        assert stored(s, table) == values


# --------------------------------------------------------------------------------------------
# a role losing its rights in the middle of a load

LOADER = ("loader", "loader secret")


def _unconfirmed_rows(error: BaseException) -> set[int]:
    return {row for _, first, stop in error.unconfirmed for row in range(first, stop)}


def _check_partial(error: BaseException, values: dict, partial: dict) -> None:
    """What a failed load left: rows stored as sent, and every row that is not stored in a
    range the error names as not confirmed."""
    assert error.unconfirmed, "a failed load names what it did not confirm"
    assert all(values[k] == v for k, v in partial.items())
    assert set(values) - set(partial) <= _unconfirmed_rows(error)


@server
@pytest.mark.parametrize("action, row_group, codes", [
    # each unit of work its own session: the next unit's EXECUTE, or its login when its
    # session opened after the change, is refused
    (f"REVOKE MODIFY ON KEYSPACE {KEYSPACE} FROM loader", 200, {0x2100}),
    ("DROP ROLE loader", 200, {0x0100, 0x2100}),
    # one unit, one session: the connection logged in before the role was dropped
    ("DROP ROLE loader", 1200, {0x2100}),
], ids=["modify-revoked", "role-dropped", "role-dropped-under-an-open-connection"])
def test_a_role_losing_its_rights_mid_load_fails_the_load_and_resume_completes(
        node, tmp_path, action, row_group, codes):
    """The load fails with the server's refusal naming the node, never a normal return; what
    it stored is what was sent, and what it did not store it names as not confirmed.
    ``bulkwire load --resume`` with a good role sends the rest: every row once."""
    n = node("guarded")
    path = tmp_path / "r.parquet"
    values = text_rows(path, 1200, row_group=row_group)
    state = str(tmp_path / "state.json")
    with driver(n) as s:
        table = make_table(s, "revoked")
        s.execute("DROP ROLE IF EXISTS loader")
        s.execute(f"CREATE ROLE loader WITH PASSWORD = '{LOADER[1]}' AND LOGIN = true")
        s.execute(f"GRANT MODIFY ON KEYSPACE {KEYSPACE} TO loader")
        done_at: list[int] = []

        def progress(done: int, total: int) -> None:
            if done >= 400 and not done_at:
                s.execute(action)
                done_at.append(done)

        with pytest.raises(CqlServerError) as caught:
            bulkwire.load_parquet(
                str(path),
                bulkwire.targets.cql(n.address, KEYSPACE, table, username=LOADER[0],
                                     password=LOADER[1]), resume=state, batch_rows=100,
                progress=progress)
        error = caught.value
        assert done_at, "the load ended before the role lost its rights"
        assert error.code in codes, error
        assert f"{n.address}:9042" in str(error)
        partial = stored(s, table)
        assert len(partial) < len(values)
        _check_partial(error, values, partial)

        done = cli("load", str(path), "--cql", n.address, "--keyspace", KEYSPACE,
                   "--table", table, "--username", SUPERUSER[0], "--password", SUPERUSER[1],
                   "--resume", state)
        assert done.returncode == 0, done.stderr
        assert stored(s, table) == values
        assert s.execute(f"SELECT count(*) FROM {KEYSPACE}.{table}").one()[0] == len(values)




# --------------------------------------------------------------------------------------------
# the server's backpressure


@server
def test_a_node_pausing_its_reads_under_its_limits_stores_every_row_once(node, tmp_path):
    """The open node serves RATE requests a second and IN_FLIGHT_LIMIT bytes of requests in
    flight, pausing its reads past either. Small rows 64 in flight, and rows whose request
    alone is over the bytes limit (the server takes one such request at a time), each load
    returns with every row stored as sent; the node's log shows it pushed back."""
    n = node("open")
    with driver(n) as s:
        for name, rows, size, window in (("paused_small", 1500, 12, 64),
                                         ("paused_large", 40, LARGE, 8)):
            table = make_table(s, name)
            path = tmp_path / f"{name}.parquet"
            values = text_rows(path, rows, size=size, row_group=500)
            result = bulkwire.load_parquet(
                str(path),
                bulkwire.targets.cql(n.address, KEYSPACE, table, window=window, timeout=10.0))
            assert result.rows == rows
            assert stored(s, table) == values
    log = n.log_path.read_text(errors="replace")
    assert "limit(s) on bytes in flight" in log and "triggered backpressure" in log


@server
def test_a_request_over_the_bytes_limit_is_answered_overloaded_when_asked_for(node):
    """A connection that asked for THROW_ON_OVERLOAD gets *overloaded* for a request larger
    than the node's bytes in flight, every time: the retries end and the run raises naming
    the node and the request, which is not stored; a small request then is."""
    n = node("open")
    with driver(n) as s:
        table = make_table(s, "thrown")
    with _core.CqlConnection(n.address, 9042, throw_on_overload=True, timeout=10.0) as conn:
        _, answer = conn.request(_core.CQL_OP_PREPARE, _core.cql_prepare_body(
            f"INSERT INTO {KEYSPACE}.{table} (id, v) VALUES (?, ?)"))
        from bulkwire.cql_statements import Prepared

        prepared = Prepared.from_result(answer)

        def body(key: int, text: bytes) -> bytes:
            return (struct.pack(">H", len(prepared.id)) + prepared.id
                    + struct.pack(">HBH", 0x0001, 0x01, 2) + struct.pack(">iq", 8, key)
                    + struct.pack(">i", len(text)) + text)

        with pytest.raises(CqlServerError) as caught:
            conn.run(_core.CQL_OP_EXECUTE, [body(1, b"x" * LARGE)], max_retries=3,
                     backoff=0.01)
        error = caught.value
        assert (error.code, error.row, error.unacknowledged) == (0x1001, 0, [0]), error
        assert f"{n.address}:9042" in str(error) and "bytes in flight" in str(error)
        assert conn.run(_core.CQL_OP_EXECUTE, [body(2, b"small")]) == (1, 0)
    with driver(n) as s:
        assert stored(s, table) == {2: "small"}


@server
def test_tls_to_a_node_that_does_not_ask_for_a_client_certificate(node, pki, tmp_path):
    """On the open node's TLS port: without a client certificate and with one (not asked
    for, so not sent), every row is loaded; a CA that did not sign the node's certificate,
    and TLS to the native port (plain only), are refused before any row."""
    path = tmp_path / "t.parquet"
    with on_the_open_node(node, path, 300, "tls_open") as (n, values, tls_port, s, table):
        _refused_before_any_row(
            lambda: bulkwire.load_parquet(
                str(path),
                bulkwire.targets.cql(tls_port, KEYSPACE, table, certificate=pki.client,
                                     ca=pki.other_ca)),
            s, table, n, "unable to get local issuer certificate", port=TLS_PORT)
        _refused_before_any_row(
            lambda: bulkwire.load_parquet(
                str(path), bulkwire.targets.cql(n.address, KEYSPACE, table, tls=True, ca=pki.ca)),
            s, table, n, "wrong version number")
        for tls in (dict(tls=True, ca=pki.ca), dict(certificate=pki.client, ca=pki.ca)):
            s.execute(f"TRUNCATE {KEYSPACE}.{table}")
            result = bulkwire.load_parquet(
                str(path), bulkwire.targets.cql(tls_port, KEYSPACE, table, **tls))
            assert result.rows == len(values)
            assert result.target == f"{KEYSPACE}.{table} at {tls_port}"
            assert stored(s, table) == values


@server
def test_a_contact_point_that_drops_the_handshake_is_named_and_passed_over(node, tmp_path):
    """The open node's TLS port resets a plain connection at its first bytes. Alone, it
    fails the load before any row with a ConnectError naming it and asking whether the node
    wants TLS; beside a contact point that answers, it is passed over and every row loads.
    (A ConnectionLostError raised out of the handshake stopped the load at the first
    contact point, without a word about TLS.)"""
    path = tmp_path / "c.parquet"
    with on_the_open_node(node, path, 200, "contact") as (n, values, tls_port, s, table):
        with pytest.raises(ConnectError) as caught:
            bulkwire.load_parquet(
                str(path), bulkwire.targets.cql(tls_port, KEYSPACE, table, timeout=10.0))
        message = str(caught.value)
        assert tls_port in message and "handshake" in message and "TLS" in message, message
        done = cli("load", str(path), "--cql", tls_port, "--keyspace", KEYSPACE,
                   "--table", table)
        assert done.returncode == EXIT_SERVER, done.stderr
        assert tls_port in done.stderr and "TLS" in done.stderr, done.stderr
        assert stored(s, table) == {}
        result = bulkwire.load_parquet(
            str(path), bulkwire.targets.cql([tls_port, n.address], KEYSPACE, table, timeout=10.0))
        assert result.rows == len(values)
        assert stored(s, table) == values


def test_a_reset_during_the_handshake_is_a_connect_error_and_the_next_contact_is_tried(
        tmp_path):
    """Without a node: two listeners that each reset a connection at its first bytes, as a
    TLS-only port does to a plain one. The load fails before any row with a ConnectError
    asking whether the node wants TLS, having tried both contact points (its note names
    both)."""
    listeners = [socket.create_server(("127.0.0.1", 0)) for _ in range(2)]

    def reset_each(listener: socket.socket) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # closed: the test is over
                return
            conn.recv(9)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()  # RST

    for listener in listeners:
        threading.Thread(target=reset_each, args=(listener,), daemon=True).start()
    hosts = [f"127.0.0.1:{listener.getsockname()[1]}" for listener in listeners]
    path = tmp_path / "r.parquet"
    text_rows(path, 10)
    try:
        with pytest.raises(ConnectError) as caught:
            bulkwire.load_parquet(
                str(path), bulkwire.targets.cql(hosts, KEYSPACE, "t", timeout=5.0))
    finally:
        for listener in listeners:
            listener.close()
    message = "\n".join([str(caught.value), *getattr(caught.value, "__notes__", [])])
    assert "handshake" in message and "TLS" in message, message
    assert all(host in message for host in hosts), message


# --------------------------------------------------------------------------------------------
# the ring's edges

_M = (1 << 64) - 1
_C1, _C2 = 0x87C37B91114253D5, 0x4CF5AD432745937F


def _rotr(x: int, r: int) -> int:
    return ((x >> r) | (x << (64 - r))) & _M


def _unshift33(x: int) -> int:
    return x ^ (x >> 33)  # x ^ x >> 33 is its own inverse on 64 bits


def _unfmix(x: int) -> int:
    x = _unshift33(x) * pow(0xC4CEB9FE1A85EC53, -1, 1 << 64) & _M
    x = _unshift33(x) * pow(0xFF51AFD7ED558CCD, -1, 1 << 64) & _M
    return _unshift33(x)


def key_hashing_to(token: int) -> bytes:
    """16 bytes whose MurmurHash3 x64 128 (seed 0) has ``token`` as its first half, signed.

    Every step of the hash of one 16-byte block is invertible: the finalizer, the two
    halves' sums and each half's multiply-rotate-multiply. So the hash is run backwards from
    ``token`` (and an arbitrary second half)."""
    inverse = lambda a: pow(a, -1, 1 << 64)  # noqa: E731
    second = 0x5EED
    first = (token - second) & _M
    a, b = _unfmix(first), _unfmix(second)        # h1 and h2 before the finalizer
    h2 = (b - a) & _M                            # h1 += h2; h2 += h1, undone
    h1 = (a - h2) & _M
    h1, h2 = h1 ^ 16, h2 ^ 16                    # the length
    t = (((h2 - 0x38495AB5) * inverse(5) & _M) - h1) & _M
    k2 = _rotr(t, 31)                           # h2 = (rotl(k2, 31) + h1) * 5 + c
    k1 = _rotr((h1 - 0x52DCE729) * inverse(5) & _M, 27)
    k1 = _rotr(k1 * inverse(_C2) & _M, 31) * inverse(_C1) & _M
    k2 = _rotr(k2 * inverse(_C1) & _M, 33) * inverse(_C2) & _M
    return k1.to_bytes(8, "little") + k2.to_bytes(8, "little")


@server
def test_keys_at_the_edges_of_the_ring_are_stored_and_routed(node):
    """Blob keys hashing to the minimum (-2**63: the partitioner's token is then the
    maximum), the maximum, the node's smallest and largest tokens and their neighbours (past
    the largest: the ring wraps to the smallest). bulkwire's token of each equals the
    server's ``token()`` and the driver's; every row is stored as sent; each is routed to
    the replica the driver's token map names, on this node's ring and on its tokens dealt
    to three nodes."""
    from cassandra.metadata import Murmur3Token, SimpleStrategy, TokenMap
    from cassandra.murmur3 import murmur3

    n = node("open")
    with driver(n) as s:
        table = make_table(s, "edges", "id blob PRIMARY KEY, v text")
        tokens = sorted(int(t) for t in s.execute("SELECT tokens FROM system.local").one()[0])
        hashes = {"minimum": -(1 << 63), "maximum": (1 << 63) - 1, "zero": 0,
                  "smallest node token": tokens[0], "before it": tokens[0] - 1,
                  "after it": tokens[0] + 1, "largest node token": tokens[-1],
                  "before the largest": tokens[-1] - 1, "past the largest": tokens[-1] + 1,
                  "above the largest": tokens[-1] + ((1 << 63) - 1 - tokens[-1]) // 2}
        keys = {name: key_hashing_to(h) for name, h in hashes.items()}
        expected = {name: (1 << 63) - 1 if h == -(1 << 63) else h for name, h in hashes.items()}
        for name, key in keys.items():
            assert murmur3(key) == hashes[name], name  # the driver's hash: the key is right
            assert _core.cql_partition_token([key]) == expected[name], name
            assert Murmur3Token.from_key(key).value == expected[name], name
        result = bulkwire.load_arrow(
            pa.table({"id": pa.array(list(keys.values()), pa.binary()), "v": list(keys)}),
            bulkwire.targets.cql(n.address, KEYSPACE, table))
        assert result.rows == len(keys)
        got = {row.v: (row.id, row.t) for row in
               s.execute(f"SELECT id, v, token(id) AS t FROM {KEYSPACE}.{table}")}
        assert got == {name: (keys[name], expected[name]) for name in keys}
        token_map = s.cluster.metadata.token_map
        s.cluster.refresh_schema_metadata()
        for name in keys:
            replicas = token_map.get_replicas(KEYSPACE, Murmur3Token(expected[name]))
            assert [str(h.address) for h in replicas] == [n.address], name
            assert TokenRing({n.address: tokens}, 1).replicas(expected[name]) == [n.address]

    # the same tokens dealt round-robin to three nodes: bulkwire's ring and the driver's
    # token map name the same primary replica for every key, wrap-around included
    dealt = {f"10.0.0.{i + 1}": tokens[i::3] for i in range(3)}
    owner = {Murmur3Token(t): host for host, ts in dealt.items() for t in ts}
    metadata = SimpleNamespace(keyspaces={KEYSPACE: SimpleNamespace(
        replication_strategy=SimpleStrategy({"replication_factor": "2"}))})
    theirs = TokenMap(Murmur3Token, owner, sorted(owner), metadata)
    ours = TokenRing(dealt, 2)
    tokens_of_rows = struct.pack(f"={len(expected)}q", *expected.values())
    primaries = ours.primaries(tokens_of_rows)
    for i, (name, token) in enumerate(expected.items()):
        drivers = list(theirs.get_replicas(KEYSPACE, Murmur3Token(token)))
        assert ours.replicas(token) == drivers, name
        assert ours.addresses[primaries[i]] == ours.replicas(token)[0], name
    assert ours.replicas(expected["past the largest"]) == ours.replicas(tokens[0])
    assert ours.replicas(expected["minimum"]) == ours.replicas(tokens[0])
