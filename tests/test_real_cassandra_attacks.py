"""The CQL load against a real Cassandra 5.0 node that pushes back, revokes, refuses and
hashes to the ring's edges (``--server cassandra``).

- The server's own backpressure: a rate limit (``native_transport_max_requests_per_second``)
  and a limit on the bytes of requests in flight (``native_transport_max_request_data_in_flight``,
  formerly ``..._max_concurrent_requests_in_bytes``), met either by the server no longer
  reading the connection or, with ``native_transport_throw_on_overload``, by *overloaded*
  answers.
- Authentication and authorization (PasswordAuthenticator, CassandraAuthorizer, the caches
  off) with the loading role's MODIFY permission revoked, or the role dropped, in the middle
  of a load; ``--resume`` with a good role afterwards.
- TLS to the node (client_encryption_options, certificates made here): an expired server
  certificate, one for another address, a node that requires a client certificate (given,
  not given) and one that does not ask for it.
- Partition keys whose Murmur3 hash is the minimum (-2**63, which the partitioner takes for
  the maximum token) or lands past the ring's largest node token (the wrap-around), beside
  the node's own tokens.

Every test reads back what the server stored and compares it with what was sent. Two nodes
serve the module, one at a time (``node(kind)`` stops the one running before it starts the
other): *guarded* (authentication, authorization, TLS requiring a client certificate, and a
bytes-in-flight limit answered with *overloaded*) and *open* (TLS without client
certificates, a rate limit and a bytes-in-flight limit met by the server pausing its reads).
Both also take plain connections (``optional: true``), which the driver reading back uses.
"""
from __future__ import annotations

import contextlib
import datetime
import os
import pathlib
import struct
import subprocess
import sys
import threading
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bulkwire.cql
from bulkwire import _core
from bulkwire.cql_statements import TokenRing
from bulkwire.errors import CqlServerError, ServerError, TLSError
from servers.cassandra import SUPERUSER, connect

pytestmark = pytest.mark.cassandra_server

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


def _tls_lines(pki: SimpleNamespace, address: str, *, require_client_auth: bool) -> str:
    return f"""\
client_encryption_options:
  enabled: true
  optional: true
  require_client_auth: {"true" if require_client_auth else "false"}
  ssl_context_factory:
    class_name: org.apache.cassandra.security.PEMBasedSslContextFactory
  keystore: "{getattr(pki, 'keystore_' + address.replace('.', '_'))}"
  truststore: "{pki.ca}"
"""


def _limits(*, throw: bool) -> str:
    lines = (f"native_transport_max_request_data_in_flight_per_ip: {IN_FLIGHT_LIMIT}B\n"
             f"native_transport_max_request_data_in_flight: {IN_FLIGHT_LIMIT}B\n")
    return lines + ("native_transport_throw_on_overload: true\n" if throw else "")


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
            + _limits(throw=True) + _tls_lines(pki, GUARDED, require_client_auth=True))),
        "open": dict(first=52, max_requests_per_second=RATE, extra_config=(
            _limits(throw=False) + _tls_lines(pki, OPEN, require_client_auth=False))),
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


def _refused_before_any_row(load, s, table: str, node, words: str) -> TLSError:
    """``load()`` raises a ``TLSError`` naming the node and saying ``words``; the table is
    still empty."""
    with pytest.raises(TLSError) as caught:
        load()
    message = str(caught.value)
    assert f"{node.address}:9042" in message and words in message, message
    assert stored(s, table) == {}
    return caught.value


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
        return bulkwire.cql.load_parquet(str(path), n.address, KEYSPACE, table,
                                         username=user, password=password, timeout=10.0,
                                         **tls)

    with driver(n) as s:
        table = make_table(s, "tls_required")
        _refused_before_any_row(lambda: load(tls=True, ca=pki.ca), s, table, n,
                                "certificate required")
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
