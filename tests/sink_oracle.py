"""Shared by the Dask and Ray sink tests: the rows, the reference commands (bulkwire's own
single-process ``load_parquet`` of the same rows, itself checked against the JSON round
trip in test_load_parquet.py), and the commands a loopback server received, as raw bytes."""
from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.feather

import bulkwire

# names that make the JSON escaper work: non-ASCII, quotes, backslashes, control characters
_NAMES = ["plain", "caf\u00e9", "\u65e5\u672c", "quote\"d", "back\\slash", "tab\tnew\nline",
          "\U0001f600", "", "ctl\x01"]


def make_table(rows: int, dim: int, seed: int = 7) -> pa.Table:
    """Ids 0..rows-1 (int64), a string, a float64 with awkward values, a nullable int, and a
    fixed_size_list<float32> vector."""
    rng = np.random.default_rng(seed)
    specials = np.array([0.0, -0.0, 1e-310, 1.7976931348623157e308, 0.1, -2.5e-8, 1e22, 3.0])
    score = rng.standard_normal(rows) * 10.0 ** rng.integers(-30, 30, rows)
    score[rng.integers(0, rows, rows // 10)] = rng.choice(specials, rows // 10)
    count = pa.array([None if i % 7 == 3 else int(v) for i, v in
                      enumerate(rng.integers(-2**62, 2**62, rows))], pa.int64())
    flat = (rng.standard_normal(rows * dim) * 10.0 ** rng.integers(-8, 8, rows * dim)).astype(np.float32)
    return pa.table({
        "id": pa.array(np.arange(rows, dtype=np.int64)),
        "name": pa.array([_NAMES[i % len(_NAMES)] + str(i) for i in range(rows)]),
        "score": pa.array(score),
        "count": count,
        "emb": pa.FixedSizeListArray.from_arrays(pa.array(flat), dim),
    })


def raw_commands(body: bytes) -> list[tuple[str, bytes]]:
    """The body's commands as (id, the command's exact bytes), in order. (Parsed over the
    bytes read as latin-1, so that the JSON parser's offsets are byte offsets; each command
    is then parsed from its own UTF-8 bytes for its id.)"""
    text = bytes(body).decode("latin-1")
    decoder = json.JSONDecoder()
    assert text[0] == "[" and text[-1] == "]", text[:20]
    pos, out = 1, []
    while pos < len(text) - 1:
        _, end = decoder.raw_decode(text, pos)
        raw = bytes(body[pos:end])
        out.append((json.loads(raw)["Id"], raw))
        assert text[end] in ",]", text[end:end + 10]
        pos = end + 1
    return out


def reference_commands(table: pa.Table, tmp_path, **options) -> dict[str, bytes]:
    """What one single-process ``load_parquet`` of the rows writes, by id."""
    source = os.path.join(str(tmp_path), "reference.arrow")
    pyarrow.feather.write_feather(table, source, compression="uncompressed")
    out = os.path.join(str(tmp_path), "reference.bulk.json")
    from bulkwire.document_options import DOCUMENT_OPTIONS

    document = {name: value for name, value in options.items() if name in DOCUMENT_OPTIONS}
    pipeline = {name: value for name, value in options.items() if name not in DOCUMENT_OPTIONS}
    bulkwire.load_parquet(source, bulkwire.targets.request_file(out, **document), **pipeline)
    with open(out, "rb") as f:
        commands = raw_commands(f.read())
    assert len(commands) == table.num_rows
    return dict(commands)


def received_commands(server) -> list[tuple[str, bytes]]:
    """Every command of every request the loopback server completed, in arrival order."""
    out = []
    for request in server.requests:
        assert request.complete and request.error is None and request.status in (200, 201, 202, None), \
            (request.status, request.error)
        out.extend(raw_commands(bytes(request.body)))
    return out


def assert_exactly_once(received: list[tuple[str, bytes]], reference: dict[str, bytes]) -> None:
    """Every reference document arrived once, with the reference's bytes, and nothing else."""
    counts = Counter(doc_id for doc_id, _ in received)
    repeated = {doc_id: n for doc_id, n in counts.items() if n != 1}
    assert not repeated, f"ids received more than once: {list(repeated.items())[:5]}"
    got = dict(received)
    assert got.keys() == reference.keys(), (len(got), len(reference))
    wrong = [doc_id for doc_id in reference if got[doc_id] != reference[doc_id]]
    assert not wrong, (wrong[:3], got[wrong[0]][:300], reference[wrong[0]][:300])


def fail_first_requests(server, count: int = 1, after_bytes: int = 2000):
    """Makes the server fail bulk insert requests (HTTP 500 once ``after_bytes`` of a body,
    some PUTs, have arrived) until ``count`` have failed, then accept again: the transient
    failure an engine retries. Returns the watching thread (join it)."""
    import threading
    import time

    server.fail_after_bytes = after_bytes

    def watch() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if sum(1 for r in list(server.requests) if r.status == 500) >= count:
                break
            time.sleep(0.001)
        server.fail_after_bytes = None

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def assert_retries_repeat(server, reference: dict[str, bytes]) -> None:
    """The failed requests' bodies are each the start of a completed request's body (the
    retry sent the same PUTs, in the same order), and the completed ones hold every row once."""
    failed = [bytes(r.body) for r in server.requests if r.status == 500]
    done = [r for r in server.requests if r.status != 500]
    assert failed, "no request failed: nothing was retried"
    assert all(body.count(b'"Type":"PUT"') >= 5 for body in failed), [len(b) for b in failed]
    assert all(any(bytes(r.body).startswith(body) for r in done) for body in failed)
    received = []
    for request in done:
        assert request.complete and request.error is None
        received.extend(raw_commands(bytes(request.body)))
    assert_exactly_once(received, reference)


def senders(port: int) -> set:
    """The pids of the processes holding an established TCP connection to 127.0.0.1:port
    (the clients of a loopback server), from /proc."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.read().splitlines()[1:]:
                fields = line.split()
                if int(fields[2].rsplit(":", 1)[1], 16) == port and fields[3] == "01":
                    inodes.add(f"socket:[{fields[9]}]")
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:  # gone, or not ours to read
            continue
        if inodes.intersection(links):
            found.add(int(pid))
    return found


def kill_a_sender(server, among=None, sending: int = 2, resume: bool = True,
                  stall_after_answered: int | None = None,
                  timeout: float = 60.0) -> threading.Thread:
    """A started thread that waits until ``sending`` of the server's requests are under way
    (their headers read, no answer yet), then kills (SIGKILL) one of the processes connected
    to the server (one of ``among`` when given; never this process) and, with ``resume``,
    lets a stalled server read again (also when nothing was killed before ``timeout``). With
    ``stall_after_answered``, it first waits until that many requests were answered 2xx,
    and then stalls the server. ``thread.killed`` holds ``(pid, monotonic time)``."""
    port = int(server.url.rsplit(":", 1)[1])

    def under_way() -> int:
        return sum(q.status is None and q.error is None for q in server.requests)

    def run() -> None:
        deadline = time.monotonic() + timeout
        try:
            if stall_after_answered is not None:
                while sum(q.succeeded for q in server.requests) < stall_after_answered:
                    if time.monotonic() > deadline:
                        return
                    time.sleep(0.002)
                server.stall()
            while True:
                if time.monotonic() > deadline:
                    return
                if under_way() >= sending:
                    candidates = senders(port) - {os.getpid()}
                    if among is not None:
                        candidates &= set(among)
                    if candidates:
                        break
                time.sleep(0.01)
            victim = min(candidates)
            os.kill(victim, signal.SIGKILL)
            thread.killed.append((victim, time.monotonic()))
        finally:
            if resume:
                server.resume()

    thread = threading.Thread(target=run, name="kill-a-sender", daemon=True)
    thread.killed = []
    thread.start()
    return thread
