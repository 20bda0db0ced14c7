"""Error and hostile paths keep nothing: repeated failing calls hold no Python memory, no C
heap and no references (the success paths are covered in test_encoder_memory.py)."""
from __future__ import annotations

import gc
import os
import struct
import sys

import numpy as np
import pytest

import bulkwire
from bulkwire import VectorCodec, _core

from _leaks import assert_no_growth, ignoring

pa = pytest.importorskip("pyarrow")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fuzz"))
import arrow_structs as A  # noqa: E402


class AddsKeys:
    """A hook that grows the dict being walked, with a non-str key among others."""

    def __init__(self, target):
        self.target = target

    def to_json(self):
        self.target[10**20] = "big"
        self.target["late"] = [1.5, 2.5]
        return 1


def _mutating_graph():
    d = {"a": None, "b": "x" * 40}
    d["a"] = AddsKeys(d)
    return d


class Raises:
    def to_json(self):
        raise RuntimeError("boom")


def _failing_mid_dict():
    return {"a": [1.0, 2.0], "b": {"c": "d"}, "e": Raises(), "f": "never reached"}


class IterRaises(list):
    def __iter__(self):
        raise RuntimeError("no iteration")


def _nested(depth):
    value = []
    for _ in range(depth):
        value = [value]
    return value


TOO_DEEP = _nested(bulkwire.MAX_DEPTH + 5)
TIME = VectorCodec("time", 4)
OUT_OF_RANGE_TIME = np.array([86400 * 10**9, 0, 0, 0], "i8")


def _bad_offsets_batch():
    strings = A.Node(b"u", 3, [None, struct.pack("<4i", 0, 3, 1, 6), b"abcdef"], name=b"s")
    ids = A.Node(b"l", 3, [None, struct.pack("<3q", 0, 1, 2)], name=b"id")
    exp = A.Exported(A.Node(b"+s", 3, [None], [ids, strings]))
    try:
        _core.encode_batch(exp, "id", ["s"])
    finally:
        exp.free()


BLANK_IDS = pa.record_batch({"id": pa.array(["a", " ", "c"]), "s": pa.array(["x", "y", "z"])})
WRONG_DIM = pa.array([[1.0, 2.0, 3.0]], pa.list_(pa.float32(), 3))


class Replay:
    def __init__(self, obj):
        self.capsules = obj.__arrow_c_array__()

    def __arrow_c_array__(self, requested_schema=None):
        return self.capsules


def _consumed_capsule():
    replay = Replay(WRONG_DIM)
    VectorCodec("float", 3).serialize_many(replay)
    VectorCodec("float", 3).serialize_many(replay)  # raises: already consumed


def _store_failing():
    writer = bulkwire.BulkWriter()
    writer.store({"x": 1}, id="things/1")
    writer.store(_failing_mid_dict(), id="things/2")


CASES = {
    "dumps, hook grows the dict being walked": lambda: bulkwire.dumps(_mutating_graph()),
    "dumps, hook raises mid-dict": ignoring(lambda: bulkwire.dumps(_failing_mid_dict()), RuntimeError),
    "dumps, subclass __iter__ raises": ignoring(lambda: bulkwire.dumps({"l": IterRaises([1])}), RuntimeError),
    "dumps, too deep": ignoring(lambda: bulkwire.dumps(TOO_DEEP), RecursionError),
    "store, hook grows the dict being walked": lambda: bulkwire.BulkWriter().store(_mutating_graph(), id="t/1"),
    "store, hook raises": ignoring(_store_failing, RuntimeError),
    "vectors, out-of-range array": ignoring(lambda: TIME.serialize(OUT_OF_RANGE_TIME), OverflowError),
    "vectors, truncated payload": ignoring(lambda: VectorCodec("double", 3).deserialize(b"\0" * 20), ValueError),
    "vectors, wrong Arrow dimension": ignoring(lambda: VectorCodec("float", 2).serialize_many(WRONG_DIM), ValueError),
    "arrow, consumed capsule": ignoring(_consumed_capsule, ValueError),
    "arrow, decreasing offsets": ignoring(_bad_offsets_batch, ValueError),
    "encode_batch, blank id": ignoring(lambda: _core.encode_batch(BLANK_IDS, "id", ["s"]), ValueError),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_paths_hold_nothing(case):
    calls = 100 if "too deep" in case else 300
    assert_no_growth(CASES[case], case, calls=calls)


def test_the_cases_really_fail():
    """Each 'ignoring' case raises what it ignores: the leak check runs the error path."""
    with pytest.raises(RuntimeError):
        bulkwire.dumps(_failing_mid_dict())
    with pytest.raises(RecursionError):
        bulkwire.dumps(TOO_DEEP)
    with pytest.raises(OverflowError):
        TIME.serialize(OUT_OF_RANGE_TIME)
    with pytest.raises(ValueError):
        VectorCodec("double", 3).deserialize(b"\0" * 20)
    with pytest.raises(ValueError):
        VectorCodec("float", 2).serialize_many(WRONG_DIM)
    with pytest.raises(ValueError, match="already consumed"):
        _consumed_capsule()
    with pytest.raises(ValueError, match="offsets decrease"):
        _bad_offsets_batch()
    with pytest.raises(ValueError):
        _core.encode_batch(BLANK_IDS, "id", ["s"])
    with pytest.raises(RuntimeError):
        _store_failing()
    with pytest.raises(RuntimeError):
        bulkwire.dumps({"l": IterRaises([1])})


def test_held_values_keep_their_reference_counts():
    """What a hostile walk held (dict snapshots, hook results) is released, success or error."""
    sentinel = object.__new__(type("Sentinel", (), {"to_json": lambda self: "s"}))
    before = sys.getrefcount(sentinel)
    for _ in range(200):
        d = {"a": None, "s": sentinel}
        d["a"] = AddsKeys(d)
        bulkwire.dumps(d)
        bad = {"s": sentinel, "e": Raises()}
        with pytest.raises(RuntimeError):
            bulkwire.dumps(bad)
        del d, bad
    gc.collect()  # each d is a cycle through its hook
    assert sys.getrefcount(sentinel) == before


def test_the_heap_measure_sees_a_leak():
    """The C heap measure is not blind: a buffer kept per call shows up."""
    from _leaks import C_HEAP_IN_USE, growth
    assert C_HEAP_IN_USE is not None, "glibc's mallinfo2 or the sanitizer's count is expected here"
    kept = []
    python, heap = growth(lambda: kept.append(bytearray(4096)), calls=100)
    # at least three quarters of it: another thread may free memory of its own meanwhile
    # (4,012 bytes a call were read once after the whole suite); a blind measure reads ~0
    assert heap is not None and heap >= 3 * 4096 // 4


def test_a_leak_fails_however_often_it_is_measured():
    """Measuring again (another thread may allocate meanwhile) does not let a leak pass."""
    from _leaks import assert_no_growth
    kept = []
    with pytest.raises(AssertionError, match="a kept buffer: .* bytes held per call"):
        assert_no_growth(lambda: kept.append(bytearray(4096)), "a kept buffer", calls=50)


# ------------------------------------------------------------ failed loads leave no cycles

#: A child that runs one failing load with the garbage collector off, then collects: what
#: the collection finds (objects only a reference cycle kept) is printed by type.
FAILED_LOAD_CHILD = r'''
import gc, json, os, sys
sys.path.insert(0, sys.argv[2])
import bulkwire, bulkwire.targets
import pyarrow as pa, pyarrow.parquet as pq
from fault_server import FaultServer
from cql_fake_node import FakeNode, error

case, folder = sys.argv[1], sys.argv[3]
docs = os.path.join(folder, "docs.parquet")
pq.write_table(pa.table({"id": pa.array(range(3000), pa.int64()),
                         "v": pa.array(range(3000), pa.int32()),
                         "emb": pa.array([[0.5, 1.5]] * 3000, pa.list_(pa.float32(), 2))}), docs)
null_id = os.path.join(folder, "null.parquet")
pq.write_table(pa.table({"id": pa.array([1, 2, None, 4], pa.int64()),
                         "emb": pa.array([[1.0, 2.0]] * 4, pa.list_(pa.float32(), 2))}), null_id)


def load():
    if case == "lying offsets":
        bulkwire.load_parquet(sys.argv[4],
                              bulkwire.targets.request_file(os.path.join(folder, "o.json")),
                              vector_column="l", columns=["l"])
    elif case == "null id":
        bulkwire.load_parquet(null_id,
                              bulkwire.targets.request_file(os.path.join(folder, "o.json")))
    elif case.startswith("server "):
        with FaultServer({"bulk_insert": case[len("server "):]}) as server:
            bulkwire.load_parquet(docs, bulkwire.targets.ravendb(server.url, "db"))
    elif case == "BulkInsert 5xx":
        with FaultServer({"bulk_insert": "5xx"}) as server:
            with bulkwire.BulkInsert(server.url, "db") as bulk:
                for i in range(3000):
                    bulk.store({"n": i, "text": "x" * 100}, id=f"docs/{i}")
    elif case == "cql refusal":
        refuse = lambda n, body: error(0x1000, "unavailable") if n == 17 else None
        with FakeNode(answer_execute=refuse) as node:
            bulkwire.load_parquet(docs, bulkwire.targets.cql(node.address, "ks", "t"),
                                  columns=["id", "v"])


gc.collect()
gc.disable()
try:
    load()
except Exception as exc:
    failed = [c.__name__ for c in type(exc).__mro__]  # the error and what it also is
else:
    failed = None
gc.set_debug(gc.DEBUG_SAVEALL)
gc.collect()
kept = sorted({f"{type(o).__module__}.{type(o).__qualname__}" for o in gc.garbage})
print(json.dumps({"failed": failed, "kept": kept}))
'''

#: pyarrow's own: a Parquet file's metadata and its schema refer to each other, after any
#: read (a successful one too)
PYARROW_OWN_CYCLE = {"pyarrow._parquet.FileMetaData", "pyarrow._parquet.ParquetSchema"}


#: each case's error
FAILURES = {"lying offsets": "MalformedFileError", "null id": "RowError",
            "server 5xx": "ServerError", "server early_5xx": "ServerError",
            "server reset": "ConnectionLostError", "BulkInsert 5xx": "ServerError",
            "cql refusal": "ProtocolError"}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", list(FAILURES))
def test_a_failed_load_leaves_nothing_to_a_garbage_collection(tmp_path, case):
    """A load that fails (a file that lies, a bad row, a server that refuses or breaks the
    connection, a CQL node that refuses a row) raises, and what it held (Arrow batches, the
    sender, its buffers) is freed when the error is, not kept by a reference cycle through
    the error's traceback until the next collection, or until the interpreter's exit, where
    freeing Arrow objects while its threads are torn down can abort the process."""
    import subprocess
    import json
    import struct

    lying = ""
    if case == "lying offsets":  # a list<float32> column whose last offset is past its end
        import pyarrow.feather
        lying = str(tmp_path / "lie.arrow")
        rows = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0], [10.0, 11.0, 12.0]]
        pyarrow.feather.write_feather(pa.table({"id": pa.array([10, 11, 12, 13], pa.int64()),
                                                "l": pa.array(rows, pa.list_(pa.float32()))}),
                                      lying, compression="uncompressed")
        data = bytearray(open(lying, "rb").read())
        at = data.find(struct.pack("<5i", 0, 3, 6, 9, 12))
        assert at > 0
        data[at:at + 20] = struct.pack("<5i", 0, 3, 6, 9, 4000)
        open(lying, "wb").write(bytes(data))
    tests = os.path.dirname(os.path.abspath(__file__))
    done = subprocess.run([sys.executable, "-c", FAILED_LOAD_CHILD, case, tests, str(tmp_path),
                           lying], capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["failed"] and FAILURES[case] in result["failed"], result
    held = [name for name in result["kept"] if name not in PYARROW_OWN_CYCLE
            and (name.startswith("bulkwire") or name.startswith("pyarrow"))]
    assert held == [], f"{case}: a cycle kept {held}"
