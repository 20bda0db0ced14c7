"""A real Apache Cassandra 5.0 node (or a small cluster) for the tests, from Maven Central.

- ``fetch_jars()``: ``cassandra-all`` and its runtime jars, assembled once per machine by Maven
  from ``pom.xml`` beside this file into a cache folder (``BULKWIRE_CASSANDRA_CACHE``, default
  ``~/.cache/bulkwire/cassandra``; ``BULKWIRE_MAVEN_REPO`` moves Maven's own repository).
  Nothing is compiled: the daemon runs from the jars.
- ``private_loopback()``: moves this process into a network namespace of its own whose only
  interface is loopback (root only). Every node started afterwards listens there, on
  ``127.0.0.N``, and nothing outside the process tree can reach it or be reached from it.
- ``running(count)``: a context manager that starts ``count`` nodes (``127.0.0.1`` is the seed,
  the others join it), waits until each answers ``SELECT release_version FROM system.local``
  and knows all the others, and stops every one of them when it exits, on errors and
  Ctrl-C too. ``advertised=`` gives each node a client address it advertises
  (``broadcast_rpc_address``) other than the one it listens on, as a node behind a NAT or in
  a container does; ``connect`` reaches such nodes through ``translation``. Each JVM is in its own process group, is killed by the kernel if this process
  dies (``PR_SET_PDEATHSIG``), and is also stopped by an ``atexit`` hook.

``python -m tests.servers.cassandra`` starts one by hand (see docs/contributing.md).
"""
from __future__ import annotations

import atexit
import contextlib
import ctypes
import fcntl
import hashlib
import os
import pathlib
import re
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
from typing import Iterator, Sequence

HERE = pathlib.Path(__file__).resolve().parent
POM = HERE / "pom.xml"
NATIVE_PORT = 9042
#: The superuser Cassandra creates when PasswordAuthenticator is on (``running(password_auth=)``).
SUPERUSER = ("cassandra", "cassandra")
STORAGE_PORT = 7000
#: JMX listens on loopback only, one port per node: this plus the last byte of its address.
JMX_PORT_BASE = 7100
#: Per-node heap (``-Xms`` = ``-Xmx``); ``BULKWIRE_CASSANDRA_HEAP`` overrides it.
DEFAULT_HEAP = "1G"
#: Seconds a node may take from ``java`` to answering CQL; ``BULKWIRE_CASSANDRA_START_TIMEOUT``.
DEFAULT_START_TIMEOUT = 240.0

# Java 17 closes the JDK internals Cassandra 5.0 reaches into (its own launcher passes the same
# kind of list from conf/jvm17-server.options): without them the daemon dies while starting.
_JDK_EXPORTS = (
    "java.base/jdk.internal.misc", "java.base/java.lang.ref",
    "java.management.rmi/com.sun.jmx.remote.internal.rmi", "java.rmi/sun.rmi.registry",
    "java.rmi/sun.rmi.server", "java.sql/java.sql", "jdk.unsupported/sun.misc",
    "jdk.compiler/com.sun.tools.javac.file", "jdk.attach/sun.tools.attach",
)
_JDK_OPENS = (
    "java.base/java.lang", "java.base/java.lang.module", "java.base/java.lang.reflect",
    "java.base/java.io", "java.base/java.util", "java.base/sun.nio.ch",
    "java.base/jdk.internal.loader", "java.base/jdk.internal.ref",
    "java.base/jdk.internal.reflect", "java.base/jdk.internal.math",
    "java.base/jdk.internal.module", "java.base/jdk.internal.util.jar",
    "jdk.management/com.sun.management.internal", "jdk.compiler/com.sun.tools.javac",
)


def _java_module_flags() -> list[str]:
    """What every Cassandra JVM (the daemon and nodetool) needs on Java 17."""
    return ["-Djdk.attach.allowAttachSelf=true",
            *(f"--add-exports={m}=ALL-UNNAMED" for m in _JDK_EXPORTS),
            *(f"--add-opens={m}=ALL-UNNAMED" for m in _JDK_OPENS)]


def _java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    java = str(pathlib.Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java:
        raise ServerError("no java on PATH (Cassandra 5.0 runs on Java 11 or 17)")
    return java


class ServerError(RuntimeError):
    """The server could not be assembled, started or reached; the message says which step,
    which node and ends with the end of its log."""


# --------------------------------------------------------------------------------------------
# the jars


def cassandra_version() -> str:
    """The Cassandra release ``pom.xml`` asks for."""
    found = re.search(r"<cassandra\.version>([^<]+)</cassandra\.version>", POM.read_text())
    if not found:
        raise ServerError(f"{POM}: no <cassandra.version> property")
    return found.group(1).strip()


def cache_root() -> pathlib.Path:
    """Where assembled jars are kept between runs."""
    env = os.environ.get("BULKWIRE_CASSANDRA_CACHE")
    return pathlib.Path(env) if env else pathlib.Path.home() / ".cache" / "bulkwire" / "cassandra"


def fetch_jars(*, timeout: float = 900.0) -> pathlib.Path:
    """The folder of Cassandra's runtime jars, assembled by Maven on first use.

    The folder's name holds the version and a hash of ``pom.xml``, so a changed pom assembles
    anew. Concurrent callers wait for one another (a lock file); a half-made folder is never
    returned (it is assembled beside and renamed into place). Raises ``ServerError`` naming the
    Maven command and its output when Maven cannot resolve every artifact.
    """
    pom = POM.read_bytes()
    version = cassandra_version()
    root = cache_root()
    final = root / f"{version}-{hashlib.sha256(pom).hexdigest()[:12]}"
    if _complete(final, version):
        return final
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _complete(final, version):
            return final
        mvn = shutil.which("mvn")
        if mvn is None:
            raise ServerError("Maven (mvn) is not installed: it assembles Cassandra's jars")
        staging = pathlib.Path(tempfile.mkdtemp(prefix=".assembling-", dir=root))
        cmd = [mvn, "-q", "-B", "-f", str(POM), "dependency:copy-dependencies",
               "-DincludeScope=runtime", f"-DoutputDirectory={staging}"]
        repo = os.environ.get("BULKWIRE_MAVEN_REPO")
        if repo:
            cmd.insert(1, f"-Dmaven.repo.local={repo}")
        try:
            done = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=timeout)
            if done.returncode != 0:
                raise ServerError(f"could not assemble Cassandra {version} from Maven "
                                  f"({' '.join(cmd)} exited {done.returncode}):\n"
                                  f"{_tail(done.stdout + done.stderr)}")
            if not _complete(staging, version):
                raise ServerError(f"Maven assembled {staging} without cassandra-all-{version}.jar "
                                  f"and jamm: {sorted(p.name for p in staging.iterdir())}")
            if final.exists():
                shutil.rmtree(final)
            staging.rename(final)
        except subprocess.TimeoutExpired as exc:
            raise ServerError(f"Maven did not assemble Cassandra {version} within {timeout:.0f} s "
                              f"({' '.join(cmd)})") from exc
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return final


def _complete(folder: pathlib.Path, version: str) -> bool:
    return (folder / f"cassandra-all-{version}.jar").is_file() and bool(_jamm(folder))


def _jamm(folder: pathlib.Path) -> list[pathlib.Path]:
    return sorted(folder.glob("jamm-*.jar"))


# --------------------------------------------------------------------------------------------
# the network namespace

_CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_IFREQ = "16sh22x"  # struct ifreq on Linux: the name, then the flags in the union (40 bytes)
_private = threading.Lock()
_private_done: list[bool] = []


def private_loopback() -> None:
    """Move this process into a new network namespace holding only loopback, and bring it up.

    Once per process; later calls do nothing. Linux keeps the namespace per thread, so this
    must run on the main thread, before the threads (driver connections, pools) that should
    share it are started; the servers started afterwards inherit it. Needs root
    (``CAP_SYS_ADMIN``); raises ``ServerError`` otherwise. From here on this process reaches
    nothing but its own loopback: fetch the jars first.
    """
    with _private:
        if _private_done:
            return
        if threading.current_thread() is not threading.main_thread():
            raise ServerError("private_loopback() must run on the main thread")
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(_CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise ServerError(f"cannot make a private network namespace (unshare: "
                              f"{os.strerror(err)}); the real-server tests run as root")
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            flags = struct.unpack(_IFREQ, fcntl.ioctl(sock, _SIOCGIFFLAGS,
                                                      struct.pack(_IFREQ, b"lo", 0)))[1]
            fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack(_IFREQ, b"lo", flags | _IFF_UP))
        _private_done.append(True)


# --------------------------------------------------------------------------------------------
# one node

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _quote(value: str) -> str:
    """A YAML double-quoted scalar (JSON's string form, which YAML reads as the same)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _rate_limit(per_second: int | None) -> str:
    """cassandra.yaml's lines limiting the native transport to ``per_second`` requests."""
    if per_second is None:
        return ""
    return ("native_transport_rate_limiting_enabled: true\n"
            f"native_transport_max_requests_per_second: {per_second}")


class Node:
    """One Cassandra process on ``address`` (``127.0.0.N``) with its files in ``folder``."""

    def __init__(self, address: str, folder: pathlib.Path, jars: pathlib.Path, *,
                 heap: str | None = None, seed: str = "127.0.0.1",
                 password_auth: bool = False, max_requests_per_second: int | None = None,
                 advertised: str | None = None,
                 datacenter: str | None = None, rack: str = "rack1") -> None:
        self.address = address
        #: The client address the node advertises (``broadcast_rpc_address``: system.local's
        #: rpc_address, its peers' native_address), or None: its own. Read when it starts.
        self.advertised = advertised
        #: Where a client reaches each address the cluster advertises ({advertised: address}),
        #: as ``connect`` takes it.
        self.translation: dict[str, str] = {}
        #: The node's data centre and rack, or None: SimpleSnitch (every node in
        #: ``datacenter1``). Given, the node runs GossipingPropertyFileSnitch and reads them
        #: from its ``cassandra-rackdc.properties``.
        self.datacenter = datacenter
        self.rack = rack
        #: The native transport's rate limit (requests per second), or None: none.
        self.max_requests_per_second = max_requests_per_second
        #: PasswordAuthenticator on: clients log in as ``SUPERUSER`` (``credentials``).
        self.password_auth = password_auth
        self.seed = seed
        self.folder = folder
        self.jars = jars
        self.heap = heap or os.environ.get("BULKWIRE_CASSANDRA_HEAP", DEFAULT_HEAP)
        #: Further cassandra.yaml lines, written after the harness's own (keys the harness
        #: does not write: the server refuses a key given twice). Read when the node starts.
        self.extra_config = ""
        self.log_path = folder / "node.log"
        self.jmx_port = JMX_PORT_BASE + int(address.rsplit(".", 1)[1])
        self.process: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0
        #: Seconds from ``java`` to answering CQL, once ready.
        self.start_seconds: float | None = None
        #: What ``SELECT release_version FROM system.local`` answered.
        self.release_version: str | None = None

    def __repr__(self) -> str:
        return f"Node({self.address}, pid={self.process.pid if self.process else None})"

    def write_config(self) -> None:
        """cassandra.yaml (5.0's key names: unknown keys are refused) and logback.xml."""
        conf = self.folder / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        dirs = {name: self.folder / name for name in
                ("data", "commitlog", "saved_caches", "hints", "cdc_raw")}
        for path in dirs.values():
            path.mkdir(exist_ok=True)
        (conf / "cassandra.yaml").write_text(f"""\
cluster_name: bulkwire-tests-{self.seed}
num_tokens: 16
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
auto_bootstrap: false
endpoint_snitch: {"GossipingPropertyFileSnitch" if self.datacenter else "SimpleSnitch"}
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "{self.seed}:{STORAGE_PORT}"
listen_address: {self.address}
rpc_address: {self.address}
{f"broadcast_rpc_address: {self.advertised}" if self.advertised else ""}
storage_port: {STORAGE_PORT}
native_transport_port: {NATIVE_PORT}
start_native_transport: true
commitlog_sync: periodic
commitlog_sync_period: 10000ms
data_file_directories:
  - {_quote(str(dirs["data"]))}
commitlog_directory: {_quote(str(dirs["commitlog"]))}
saved_caches_directory: {_quote(str(dirs["saved_caches"]))}
hints_directory: {_quote(str(dirs["hints"]))}
cdc_raw_directory: {_quote(str(dirs["cdc_raw"]))}
concurrent_compactors: 1
{"authenticator: PasswordAuthenticator" if self.password_auth else ""}
{_rate_limit(self.max_requests_per_second)}
{self.extra_config}
""")
        (conf / "logback.xml").write_text("""\
<configuration>
  <appender name="OUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="OUT"/></root>
</configuration>
""")
        if self.datacenter:
            (conf / "cassandra-rackdc.properties").write_text(
                f"dc={self.datacenter}\nrack={self.rack}\n")

    def command(self) -> list[str]:
        """The ``java`` command line of this node."""
        jamm = _jamm(self.jars)
        conf = self.folder / "conf"
        return [
            _java(), f"-Xms{self.heap}", f"-Xmx{self.heap}", "-Xss256k",
            "-XX:+UseG1GC", "-XX:+ParallelRefProcEnabled", "-XX:+PerfDisableSharedMem",
            "-XX:+ExitOnOutOfMemoryError",
            "-ea", "-da:net.openhft...", "-Djava.net.preferIPv4Stack=true",
            *_java_module_flags(),
            "-Dio.netty.tryReflectionSetAccessible=true",
            f"-javaagent:{jamm[-1]}",
            "-Dcassandra-foreground=yes", f"-Dcassandra.jmx.local.port={self.jmx_port}",
            f"-Dcassandra.config={(conf / 'cassandra.yaml').as_uri()}",
            f"-Dlogback.configurationFile={(conf / 'logback.xml').as_uri()}",
            *([f"-Dcassandra-rackdc.properties={(conf / 'cassandra-rackdc.properties').as_uri()}"]
              if self.datacenter else []),
            f"-Dcassandra.logdir={self.folder}", f"-Dcassandra.storagedir={self.folder}",
            # a test cluster starts empty: no waiting for gossip to settle, no ring delay
            "-Dcassandra.skip_wait_for_gossip_to_settle=0", "-Dcassandra.ring_delay_ms=1000",
            # the default superuser (cassandra/cassandra) at once, not after 10 s
            "-Dcassandra.superuser_setup_delay_ms=0",
            "-cp", f"{self.jars}/*", "org.apache.cassandra.service.CassandraDaemon",
        ]

    def start(self) -> None:
        """Start the JVM in its own process group; output goes to ``node.log``."""
        self.write_config()
        with open(self.log_path, "wb") as log:
            self.started_at = time.monotonic()
            self.process = subprocess.Popen(
                self.command(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=self.folder, start_new_session=True, preexec_fn=_die_with_parent)
        _live.add(self)

    def log_tail(self, lines: int = 40) -> str:
        """The end of the node's log (for error messages)."""
        try:
            return _tail(self.log_path.read_text(errors="replace"), lines)
        except OSError as exc:
            return f"(no log: {exc})"

    def check_alive(self) -> None:
        """Raise ``ServerError`` with the log's end if the JVM has exited."""
        if self.process is None:
            raise ServerError(f"Cassandra node {self.address} was never started")
        code = self.process.poll()
        if code is not None:
            raise ServerError(f"Cassandra node {self.address} exited with {code} "
                              f"(log {self.log_path}):\n{self.log_tail()}")

    def wait_ready(self, deadline: float) -> str:
        """Wait until the node answers ``SELECT release_version FROM system.local``; returns
        the version. Raises ``ServerError`` when the JVM exits or ``deadline``
        (``time.monotonic()``) passes."""
        while True:
            self.check_alive()
            if _port_open(self.address, NATIVE_PORT):
                try:
                    with connect([self.address], credentials=self.credentials,
                                 translation=self.translation) as session:
                        row = session.execute("SELECT release_version FROM system.local").one()
                except Exception as exc:  # the driver's errors while the node is still starting
                    last = exc
                else:
                    self.release_version = row.release_version
                    self.start_seconds = time.monotonic() - self.started_at
                    return self.release_version
            else:
                last = None
            if time.monotonic() > deadline:
                raise ServerError(f"Cassandra node {self.address} did not answer CQL within the "
                                  f"start timeout (last error: {last!r}; log {self.log_path}):\n"
                                  f"{self.log_tail()}")
            time.sleep(0.5)

    @property
    def credentials(self) -> tuple[str, str] | None:
        """(username, password) of the superuser when PasswordAuthenticator is on, else None."""
        return SUPERUSER if self.password_auth else None

    def nodetool(self, *args: str, timeout: float = 120.0) -> str:
        """Run ``nodetool ARGS`` against this node (over its local JMX port); returns its
        output, raises ``ServerError`` with it when nodetool fails."""
        self.check_alive()
        cmd = [_java(), "-Xmx128m", *_java_module_flags(), "-cp", f"{self.jars}/*",
               f"-Dlogback.configurationFile={(self.folder / 'conf' / 'logback.xml').as_uri()}",
               "org.apache.cassandra.tools.NodeTool", "-h", "127.0.0.1", "-p", str(self.jmx_port),
               *args]
        try:
            done = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise ServerError(f"nodetool {' '.join(args)} on {self.address} took over "
                              f"{timeout:.0f} s") from exc
        if done.returncode != 0:
            raise ServerError(f"nodetool {' '.join(args)} on {self.address} exited "
                              f"{done.returncode}:\n{_tail(done.stdout + done.stderr)}")
        return done.stdout

    def rss_bytes(self) -> int:
        """The JVM's resident memory now (0 once it has exited)."""
        if self.process is None:
            return 0
        try:
            status = pathlib.Path(f"/proc/{self.process.pid}/status").read_text()
        except OSError:
            return 0
        found = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
        return int(found.group(1)) * 1024 if found else 0

    def stop(self, grace: float = 5.0) -> None:
        """Stop the node: SIGTERM to its process group, SIGKILL after ``grace`` seconds.
        Idempotent."""
        stop_nodes([self], grace)


def stop_nodes(nodes: Sequence[Node], grace: float = 5.0) -> None:
    """Stop these nodes together: SIGTERM to every process group first, then wait for all
    with one shared ``grace`` period, then SIGKILL the ones still running. Idempotent.
    The nodes' data is thrown away, so a node still draining after ``grace`` is not waited
    for."""
    running_now = [n for n in nodes if n.process is not None and n.process.returncode is None]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for node in running_now:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.process.pid, sig)
        deadline = time.monotonic() + (grace if sig == signal.SIGTERM else 30.0)
        for node in running_now:
            with contextlib.suppress(subprocess.TimeoutExpired):
                node.process.wait(max(0.0, deadline - time.monotonic()))
        running_now = [n for n in running_now if n.process.returncode is None]
        if not running_now:
            break
    for node in nodes:
        _live.discard(node)


_live: set[Node] = set()


@atexit.register
def _stop_all() -> None:
    stop_nodes(list(_live), grace=5.0)


def _port_open(address: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((address, port)) == 0


@contextlib.contextmanager
def connect(addresses: Sequence[str], *, keyspace: str | None = None,
            timeout: float = 30.0,
            credentials: tuple[str, str] | None = None,
            translation: dict[str, str] | None = None
            ) -> Iterator["cassandra.cluster.Session"]:  # noqa: F821
    """A driver session whose requests these nodes coordinate, and no others the driver
    discovers (protocol v5, which Cassandra 5.0 speaks); shut down on exit. ``credentials``:
    (username, password) for a node with PasswordAuthenticator. ``translation``: the address
    each advertised address is reached at (``Node.translation``), for nodes that advertise
    one they do not listen on (the driver reaches every node, the one it asks included, at
    its advertised address translated)."""
    from cassandra import ProtocolVersion
    from cassandra.auth import PlainTextAuthProvider
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import AddressTranslator, WhiteListRoundRobinPolicy

    class Translated(AddressTranslator):
        def translate(self, addr: str) -> str:
            return (translation or {}).get(addr, addr)

    profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy(list(addresses)),
                               request_timeout=timeout)
    cluster = Cluster(list(addresses), port=NATIVE_PORT, protocol_version=ProtocolVersion.V5,
                      execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                      connect_timeout=timeout, control_connection_timeout=timeout,
                      auth_provider=(PlainTextAuthProvider(*credentials)
                                     if credentials else None),
                      address_translator=Translated() if translation else None)
    try:
        session = cluster.connect(keyspace)
        yield session
    finally:
        cluster.shutdown()


# --------------------------------------------------------------------------------------------
# nodes together


def addresses(count: int, first: int = 1) -> list[str]:
    """The loopback addresses of a ``count``-node cluster: ``127.0.0.<first>`` (the seed),
    then the next ones."""
    if not 1 <= count <= 9:
        raise ValueError(f"count must be 1..9, got {count}")
    if not 1 <= first <= 255 - count:
        raise ValueError(f"first must be 1..{255 - count}, got {first}")
    return [f"127.0.0.{i}" for i in range(first, first + count)]


@contextlib.contextmanager
def running(count: int = 1, *, first: int = 1, heap: str | None = None,
            keep_files: bool | None = None,
            extra_config: str = "",
            start_timeout: float | None = None,
            password_auth: bool = False,
            max_requests_per_second: int | None = None,
            advertised: Sequence[str] | None = None,
            datacenters: Sequence[str] | None = None) -> Iterator[list[Node]]:
    """Start ``count`` nodes in this process's private network namespace and yield them ready.

    They listen on ``127.0.0.<first>`` (the seed) and the addresses after it, so two sets of
    nodes with disjoint addresses can run at once (each set is its own cluster).
    ``extra_config``: further cassandra.yaml lines for every node (``Node.extra_config``).
    The jars are fetched first (that needs the network), then the process moves into its own
    namespace (``private_loopback``). The seed starts first; the others are started together
    once it answers. Ready means: every node answers CQL and lists the other ``count - 1`` as
    peers. On leaving (normally, on an exception, on Ctrl-C) every node is stopped and, unless
    ``keep_files`` (default: whether ``BULKWIRE_CASSANDRA_KEEP_FILES`` is set), its folder
    removed. ``password_auth`` turns PasswordAuthenticator on (the superuser ``SUPERUSER``);
    ``max_requests_per_second`` limits each node's native transport to that rate (a client
    that asked for THROW_ON_OVERLOAD gets overloaded errors beyond it). ``advertised``: one
    loopback address per node that it advertises to clients instead of its own (see
    ``Node.advertised``); every node's ``translation`` maps them back. ``datacenters``: the
    data centre of each node, in address order (GossipingPropertyFileSnitch, rack ``rack1``);
    None: SimpleSnitch, one data centre ``datacenter1``.
    """
    if advertised is not None and (len(advertised) != count or not all(
            a.startswith("127.") for a in advertised)):
        raise ValueError(f"advertised must be {count} loopback addresses, not {advertised!r}")
    if keep_files is None:
        keep_files = bool(os.environ.get("BULKWIRE_CASSANDRA_KEEP_FILES"))
    jars = fetch_jars()
    private_loopback()
    timeout = start_timeout or float(os.environ.get("BULKWIRE_CASSANDRA_START_TIMEOUT",
                                                    DEFAULT_START_TIMEOUT))
    sweep_stale()
    root = pathlib.Path(tempfile.mkdtemp(prefix=_FOLDER_PREFIX))
    (root / "owner.pid").write_text(str(os.getpid()))
    hosts = addresses(count, first)
    if datacenters is not None and len(datacenters) != count:
        raise ValueError(f"datacenters names {len(datacenters)} data centres for {count} nodes")
    nodes = [Node(addr, root / addr, jars, heap=heap, seed=hosts[0], password_auth=password_auth,
                  max_requests_per_second=max_requests_per_second,
                  advertised=advertised[i] if advertised else None,
                  datacenter=datacenters[i] if datacenters is not None else None)
             for i, addr in enumerate(hosts)]
    translation = {n.advertised: n.address for n in nodes if n.advertised}
    for node in nodes:
        node.translation = translation  # one dict: a node given a new address updates it
    try:
        for node in nodes:
            node.extra_config = extra_config
        nodes[0].start()
        nodes[0].wait_ready(time.monotonic() + timeout)
        for node in nodes[1:]:
            node.start()
        deadline = time.monotonic() + timeout
        for node in nodes[1:]:
            node.wait_ready(deadline)
        _wait_peers(nodes, deadline)
        yield nodes
    finally:
        stop_nodes(nodes)
        if not keep_files:
            shutil.rmtree(root, ignore_errors=True)


_FOLDER_PREFIX = "bulkwire-cassandra-"


def sweep_stale() -> list[pathlib.Path]:
    """Remove the node folders left by owners that died without cleaning up (killed outright:
    their JVMs died with them); returns what was removed. A folder's owner is the pid in its
    ``owner.pid``; folders without one, or whose owner lives, are kept."""
    removed = []
    for folder in pathlib.Path(tempfile.gettempdir()).glob(_FOLDER_PREFIX + "*"):
        try:
            owner = int((folder / "owner.pid").read_text())
        except (OSError, ValueError):
            continue
        if owner == os.getpid() or pathlib.Path(f"/proc/{owner}").exists():
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def _wait_peers(nodes: list[Node], deadline: float) -> None:
    """Wait until every node lists every other as a peer."""
    want = {n.address for n in nodes}
    for node in nodes:
        while True:
            node.check_alive()
            with connect([node.address], credentials=node.credentials,
                         translation=node.translation) as session:
                peers = {str(r.peer) for r in session.execute("SELECT peer FROM system.peers_v2")}
            if peers == want - {node.address}:
                break
            if time.monotonic() > deadline:
                raise ServerError(f"Cassandra node {node.address} knows peers {sorted(peers)}, "
                                  f"not {sorted(want - {node.address})}:\n{node.log_tail()}")
            time.sleep(0.5)
