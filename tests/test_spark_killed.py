"""A Spark job writing through the ``bulkwire`` data source, killed mid-write: the Spark
driver's JVM killed (SIGKILL) while tasks are writing, or one Python worker killed (its task
run again). Nothing hangs (the job's processes all end, no connection stays open to the
server), the caller's ``save()`` raises, never returns; rows the server confirmed before the
kill are stored once (a row the server had not confirmed: once or not at all); the same job
run again stores every row once, by key (a CQL ``INSERT`` is an upsert, a RavenDB PUT by id
replaces its document), and every file whole. A file target's tasks write under temporary
names that only the driver's commit renames: a killed driver leaves no file under a final
name holding part of its partition (docs/scale.md, "A killed job").

The jobs run in a process of its own (``spark_killed_job.py``, a ``local[6,2]`` session):
first a write into a CQL table whose Python worker is killed, then three writes at once (a
CQL table, a RavenDB database, a folder of JSONL files) whose JVM is killed. Each kill comes
when the server (or the file target's folder) says the writes reached a given point, never
after a sleep. The writes run again in this process's session.
"""
from __future__ import annotations

import collections
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import types

import pytest

pytest.importorskip("pyspark")

import bulkwire.spark  # noqa: E402
from bulkwire.testing import LoopbackServer  # noqa: E402

from _spark_session import PACKAGE_PARENT  # noqa: E402
from cql_nodes import EmulatedCluster  # noqa: E402
from test_spark import connections_to, key_of, put_ids  # noqa: E402
from test_spark import spark  # noqa: E402,F401  (the module's local[2] session, a fixture)

pytestmark = pytest.mark.timeout(600)

HERE = os.path.dirname(os.path.abspath(__file__))
ROWS = 60  # ids 0..59 in 2 partitions of 30, batches of 5 rows
#: what the emulated CQL node answers before it holds every later row
CONFIRMED = 12


def frame(spark):
    """The child job's DataFrame, in this process's session."""
    return spark.range(0, ROWS, 1, numPartitions=2).selectExpr(
        "id", "concat('v', cast(id as string)) as v")


class Job:
    """``spark_killed_job.py`` in a process of its own (its own session, JVM and workers)."""

    def __init__(self, folder) -> None:
        self.folder = str(folder)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (PACKAGE_PARENT, HERE, os.environ.get("PYTHONPATH", "")) if p)}
        self.process = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "spark_killed_job.py"), self.folder],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.jvm = self.answer(600)["jvm"]

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(json.loads(line))

    def answer(self, timeout: float) -> dict:
        """The job's next line, read within ``timeout`` seconds (a test failure otherwise)."""
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"the Spark job said nothing in {timeout} s") from None

    def quiet(self) -> bool:
        """True while the job has said nothing more; else a test failure showing what it
        said (a write that ended while the test waited for it to reach a point)."""
        if self.lines.empty():
            return True
        raise AssertionError(f"the Spark job said, too early: {self.lines.get()}")

    def write(self, name: str, options: dict, gate: bool = False) -> None:
        self.process.stdin.write(json.dumps({"name": name, "rows": ROWS, "options": options,
                                             "gate": gate}) + "\n")
        self.process.stdin.flush()

    def processes(self) -> set:
        """The job's process and every process under it (its JVM, the Python workers)."""
        found, todo = set(), [self.process.pid]
        while todo:
            pid = todo.pop()
            found.add(pid)
            try:
                for task in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{task}/children") as children:
                        todo += [int(c) for c in children.read().split()]
            except OSError:  # ended meanwhile
                continue
        return found

    def close(self) -> None:
        left = self.processes() - {self.process.pid}
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(60)
        for pid in left:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a process that has not ended (a zombie has)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Holding:
    """An ``answer_execute`` of the emulated CQL node: answers the first ``confirmed`` rows
    (their keys in ``answered``), then holds each later one unanswered until ``release`` is
    set (``holding`` is set when the first is held), and then stores and answers it."""

    def __init__(self, confirmed: int) -> None:
        self.confirmed = confirmed
        self.answered: list = []
        self.holding, self.release = threading.Event(), threading.Event()
        self.lock = threading.Lock()

    def __call__(self, n: int, body: bytes):
        key = key_of(body)
        with self.lock:
            if len(self.answered) < self.confirmed:
                self.answered.append(key)
                return None
        self.holding.set()
        self.release.wait(120)
        return None


def cql_options(cluster) -> dict:
    return {"target": "cql", "hosts": cluster.contact(0), "keyspace": "ks", "table": "t",
            "batch_rows": "5", "window": "4"}


def wait_for(check, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    """The job's process, its first write (into a CQL table) with one Python worker killed
    while the node holds its rows; then three writes at once (a CQL table, a RavenDB
    database, a folder of JSONL files), the JVM killed while each is mid-write. Yields what
    was seen, with the servers still up for the tests to run the writes again."""
    folder = tmp_path_factory.mktemp("killed")
    seen = types.SimpleNamespace(folder=folder, out=folder / "out")
    job = Job(folder)
    try:
        with EmulatedCluster(1) as first, EmulatedCluster(1) as cql, LoopbackServer() as server:
            # a Python worker killed while its rows are held: Spark runs its task again
            seen.first, seen.first_hold = first, Holding(CONFIRMED)
            first.nodes[0].answer_execute = seen.first_hold
            job.write("first", cql_options(first))
            wait_for(lambda: job.quiet() and seen.first_hold.holding.is_set(),
                     "the first write's rows held", 300)
            workers = set(connections_to(first.nodes[0].endpoint[1])) & job.processes()
            assert workers and job.process.pid not in workers, workers
            seen.victim = min(workers)
            os.kill(seen.victim, signal.SIGKILL)
            wait_for(lambda: not _alive(seen.victim), "the killed worker ending")
            seen.first_hold.release.set()
            seen.first_answer = job.answer(300)
            # three writes at once, the JVM killed while each is mid-write: the CQL node
            # holds its rows after CONFIRMED; the RavenDB and JSONL writes' partition 0 done,
            # partition 1 waiting after its first batch
            seen.cql, seen.hold = cql, Holding(CONFIRMED)
            cql.nodes[0].answer_execute = seen.hold
            seen.server = server
            seen.ravendb_options = {"target": "ravendb", "url": server.url,
                                    "database": server.database, "batch_rows": "5"}
            seen.jsonl_options = {"target": "jsonl", "path": str(seen.out) + "/",
                                  "batch_rows": "5"}
            job.write("cql", cql_options(cql))
            job.write("ravendb", seen.ravendb_options, gate=True)
            job.write("jsonl", seen.jsonl_options, gate=True)
            job.process.stdin.close()
            wait_for(lambda: job.quiet() and seen.hold.holding.is_set()
                     and any(r.succeeded for r in server.requests)
                     and (folder / "gated-ravendb").exists()
                     and temporaries(seen.out, 0, ended=True)
                     and temporaries(seen.out, 1, ended=False)
                     and (folder / "gated-jsonl").exists(), "every write mid-way", 300)
            seen.partial_before = sorted(os.listdir(seen.out))
            processes = job.processes() - {job.process.pid}
            assert len(processes) >= 4  # its JVM, the Python workers' daemon, workers
            os.kill(job.jvm, signal.SIGKILL)
            seen.hold.release.set()
            seen.answers = {a["name"]: a for a in (job.answer(300) for _ in range(3))}
            seen.status = job.process.wait(120)
            deadline = time.monotonic() + 60
            while [p for p in processes if _alive(p)] and time.monotonic() < deadline:
                time.sleep(0.1)
            seen.left = [p for p in processes if _alive(p)]
            seen.cql_connections = wait_closed(cql.nodes[0].endpoint[1])
            seen.server_connections = wait_closed(server._httpd.server_address[1])
            seen.left_files = sorted(os.listdir(seen.out))
            yield seen
    finally:
        (folder / "release").touch()
        job.close()


def temporaries(folder, partition: int, ended: bool) -> list:
    """The temporary files a task attempt of ``partition`` left in ``folder``: whole
    (``ended``: its load renamed its ``.partial`` file) or still being written."""
    prefix = f".part-{partition:05d}.jsonl.attempt-"
    return [n for n in os.listdir(folder)
            if n.startswith(prefix) and n.endswith(".partial") != ended]


def wait_closed(port: int) -> dict:
    """The processes still holding a connection to ``port`` after up to a minute."""
    deadline = time.monotonic() + 60
    while connections_to(port) and time.monotonic() < deadline:
        time.sleep(0.1)
    return connections_to(port)


def test_a_killed_worker_s_task_runs_again_every_row_stored_once(killed):
    assert killed.first_answer["name"] == "first"
    result = killed.first_answer["returned"]  # a normal return: the job committed
    assert result["committed"] and result["rows"] == ROWS and result["tasks"] == 2
    assert killed.first.stored == {i: f"v{i}" for i in range(ROWS)}
    sent = collections.Counter(killed.first.nodes[0].rows)
    assert set(sent) == set(range(ROWS)) and max(sent.values()) <= 2
    assert any(n == 2 for n in sent.values())  # the killed task's rows, sent again
    assert set(killed.first_hold.answered) <= set(killed.first.stored)


def test_a_killed_driver_fails_every_write_and_leaves_nothing_running(killed):
    assert set(killed.answers) == {"cql", "ravendb", "jsonl"}
    assert all("failed" in a for a in killed.answers.values()), killed.answers  # no return
    assert killed.status == 3
    assert killed.left == [], f"processes left after the kill: {killed.left}"
    assert killed.cql_connections == {} and killed.server_connections == {}


def test_cql_rows_confirmed_before_the_kill_stored_once_then_all_once(killed, spark):
    cluster, hold = killed.cql, killed.hold
    # every row the node confirmed is stored, sent once; a row sent again is one the node
    # held unanswered (the session sends a request that timed out again), stored by its key
    # once, with its value; and not every row was stored
    assert len(hold.answered) == CONFIRMED and set(hold.answered) <= set(cluster.stored)
    sent = collections.Counter(cluster.nodes[0].rows)
    assert all(sent[key] == 1 for key in hold.answered)
    assert all(cluster.stored[key] == f"v{key}" for key in cluster.stored)
    # the same job run again: every row stored, once by key, with its value
    frame(spark).write.format("bulkwire").options(**cql_options(cluster)).mode("append").save()
    assert cluster.stored == {i: f"v{i}" for i in range(ROWS)}
    assert bulkwire.spark.last_result(spark).rows == ROWS


def test_ravendb_the_confirmed_request_stored_once_then_all_once(killed, spark):
    server = killed.server
    # the request confirmed before the kill (partition 0's) stored its documents, each PUT
    # once; no document was PUT twice (partition 1's request: see the JSONL test below)
    assert {f"embeddings/{i}" for i in range(ROWS // 2)} <= set(server.documents)
    assert set(server.documents) <= {f"embeddings/{i}" for i in range(ROWS)}
    assert max(put_ids(server).values()) == 1
    # the same job run again: every document, by id, with its value
    frame(spark).write.format("bulkwire").options(**killed.ravendb_options) \
        .mode("append").save()
    assert set(server.documents) == {f"embeddings/{i}" for i in range(ROWS)}
    assert all(server.documents[f"embeddings/{i}"]["v"] == f"v{i}" for i in range(ROWS))


def test_jsonl_after_a_killed_driver_the_job_run_again_writes_every_file_whole(killed, spark):
    out = killed.out
    # before the kill: partition 0's task had ended and partition 1's was writing, each under
    # its attempt's temporary name; no final name (the driver commits when both have ended)
    assert len(killed.partial_before) == 2
    assert all(n.startswith((".part-00000.jsonl.attempt-0-", ".part-00001.jsonl.attempt-0-"))
               for n in killed.partial_before), killed.partial_before
    # after the kill: no file under a final name (partition 1's task, whose input ended
    # with the JVM, holds part of its partition: never renamed, as the commit never ran);
    # only the attempts' hidden temporary files
    assert [n for n in killed.left_files if not n.startswith(".")] == [], killed.left_files
    assert all(".jsonl.attempt-0-" in n for n in killed.left_files), killed.left_files
    # the same job run again into the same folder: each file whole under its final name, and
    # the killed attempts' temporary files of those partitions removed by the commit
    frame(spark).write.format("bulkwire").options(**killed.jsonl_options).mode("append").save()
    assert sorted(os.listdir(out)) == ["part-00000.jsonl", "part-00001.jsonl"]
    assert ids_in(out / "part-00000.jsonl") + ids_in(out / "part-00001.jsonl") \
        == list(range(ROWS))


def ids_in(path) -> list:
    with open(path, encoding="utf-8") as lines:
        return [int(json.loads(line)["v"][1:]) for line in lines]  # v is "v<id>"
