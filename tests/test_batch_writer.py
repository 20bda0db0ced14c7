"""An Arrow batch handed to the writer in one call: ``_core.prepare_batch`` validates it and
``CommandWriter.put_batch`` (``BulkWriter._store_prepared``) encodes its rows straight into
the writer's buffers. The body is byte for byte the reference body (test_encode_batch's
oracle: the command ``store()`` writes for the row's dict), whatever the batch sizes, the
threshold and the compression; the body is cut only where a buffer passes the threshold;
a batch with a bad row leaves nothing behind; Ctrl-C or an abort while the queue is full
leaves the writer failed, never a body with a hole in it.
"""
from __future__ import annotations

import _thread
import gzip
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")
import pyarrow.parquet as pq  # noqa: E402

import bulkwire  # noqa: E402
import bulkwire.load.ravendb_target  # noqa: E402
from bulkwire import _core  # noqa: E402
from bulkwire.errors import BulkInsertAborted, RowError  # noqa: E402
from test_encode_batch import META_JSON, fsl, oracle, vectors  # noqa: E402

ROWS = 120
TABLE = pa.table({
    "id": pa.array(np.arange(ROWS, dtype=np.int64) * 5 - 7),
    "emb": fsl(vectors(ROWS, 4, np.float32, seed=11)),
    "name": [None if i % 4 == 0 else "é\"" * (i % 7) + f"n{i}" for i in range(ROWS)],
    "score": np.linspace(-3, 3, ROWS),
})
FIELDS = ["emb", "name", "score"]


def prepared(table, row_base=0):
    return _core.prepare_batch(table, "id", FIELDS, vector_column="emb", metadata=META_JSON,
                               row_base=row_base)


def decompressed(data: bytes, compress: str) -> bytes:
    if compress in ("gzip", True):
        return gzip.decompress(data)
    if compress == "zstd":
        zstandard = pytest.importorskip("zstandard")
        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    return data


def slices(sizes):
    """Consecutive slices of TABLE of the given sizes (wrapping around)."""
    out, at = [], 0
    for n in sizes:
        at = at if at + n <= ROWS else 0
        out.append(TABLE.slice(at, n))
        at += n
    return out


def reference(batches) -> bytes:
    return b"[" + b",".join(oracle(b, vector_column="emb") for b in batches if b.num_rows) + b"]"


def written(batches, threshold, compress=False) -> tuple[bytes, list]:
    """(body, pieces) of a BulkWriter given the batches with _store_prepared."""
    w = bulkwire.BulkWriter(compress=compress, buffer_size=threshold, max_buffers=100_000)
    added = 0
    for b in batches:
        added += w._store_prepared(prepared(b))
    w.close()
    pieces = [bytes(c) for c in w.pieces()]
    assert w.stats.body_bytes == len(decompressed(b"".join(pieces), compress))
    return b"".join(pieces), pieces


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(0, 45), min_size=1, max_size=6),
       threshold=st.integers(1, 6000), compress=st.sampled_from(["none", "gzip", "zstd"]))
def test_the_body_is_the_reference_body_whatever_the_sizes_threshold_and_compression(
        sizes, threshold, compress):
    batches = slices(sizes)
    body, _ = written(batches, threshold, {"none": False, "gzip": True, "zstd": "zstd"}[compress])
    assert decompressed(body, compress) == reference(batches)


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(0, 45), min_size=1, max_size=6), threshold=st.integers(1, 6000))
def test_no_piece_is_shorter_than_the_threshold_but_the_last(sizes, threshold):
    """No buffer of its own for the separator ('[' or ','), and no short piece at the end of
    each batch: the next batch goes on in the same buffer."""
    batches = slices(sizes)
    _, pieces = written(batches, threshold)
    assert all(len(p) > threshold for p in pieces[:-1]), [len(p) for p in pieces]
    # one HTTP chunk per piece, with the same rule
    w = bulkwire.BulkWriter(buffer_size=threshold, max_buffers=100_000)
    for b in batches:
        w._store_prepared(prepared(b))
    w.close()
    sizes_sent = [int(c.split(b"\r\n", 1)[0], 16) for c in w.http_chunks()]
    assert sizes_sent[-1] == 0 and sizes_sent[:-1] == [len(p) for p in pieces]


def test_the_load_hands_over_no_short_piece(tmp_path, monkeypatch):
    """load_parquet to a file: every piece of the body (none, gzip) is cut at the threshold,
    none but the last shorter: the separator between batches travels inside a full buffer."""
    src = str(tmp_path / "t.parquet")
    pq.write_table(TABLE, src, row_group_size=50)
    seen: list = []

    class Counting(bulkwire.BulkWriter):
        def pieces(self):
            for piece in super().pieces():
                seen.append(len(piece))
                yield piece

    monkeypatch.setattr(bulkwire.load.ravendb_target, "BulkWriter", Counting)
    counts = {}
    for compress in (False, "gzip"):
        seen.clear()
        result = bulkwire.load_parquet(src,
                                       bulkwire.targets.request_file(str(tmp_path / f"out{compress}"), buffer_size=900, compress=compress),
                                       batch_rows=7, threads=1)
        assert result.rows == ROWS and len(seen) > 10
        counts[compress] = len(seen)
        if not compress:
            assert all(n > 900 for n in seen[:-1]), seen
            assert sum(seen) == result.body_bytes
    # compressed: one piece per buffer (and the stream's end)
    assert counts["gzip"] <= counts[False] + 1


def test_mixed_with_store_and_counters_as_store_encoded_writes_it():
    """A batch between documents and an open counters command: the same body as the pieces
    path (store_encoded of encode_batch's commands), the counters command closed first."""
    def body(put):
        w = bulkwire.BulkWriter(buffer_size=500, max_buffers=10_000)
        w.store({"a": 1}, id="x/1")
        w.counters_for("x/1").increment("likes", 2)
        put(w, TABLE.slice(3, 30))
        put(w, TABLE.slice(40, 9))
        w.store({"b": 2}, id="x/2")
        w.close()
        return b"".join(bytes(c) for c in w.pieces()), w.documents

    def by_pieces(w, batch):
        w.store_encoded(b"".join(_core.encode_batch(batch, "id", FIELDS, vector_column="emb",
                                                    metadata=META_JSON, first=True)),
                        batch.num_rows)

    new, documents = body(lambda w, batch: w._store_prepared(prepared(batch)))
    old, old_documents = body(by_pieces)
    assert new == old and documents == old_documents == 2 + 39


def test_a_bad_row_raises_naming_it_and_leaves_nothing_behind():
    w = bulkwire.BulkWriter(buffer_size=300, max_buffers=10_000)
    w._store_prepared(prepared(TABLE.slice(0, 20)))
    before = (w._writer.bytes, w._writer.buffered, w.documents)
    ids = TABLE.column("id").to_pylist()
    ids[23] = None  # row 23 of the file; row 3 of the batch starting at 20
    bad = TABLE.set_column(0, "id", pa.array(ids, pa.int64())).slice(20, 30)
    with pytest.raises(RowError) as info:
        w._store_prepared(prepared(bad, row_base=20))
    assert (info.value.column, info.value.row, info.value.reason) == ("id", 23, "null id")
    assert (w._writer.bytes, w._writer.buffered, w.documents) == before
    w._store_prepared(prepared(TABLE.slice(50, 10)))
    w.close()
    body = b"".join(bytes(c) for c in w.pieces())
    assert body == reference([TABLE.slice(0, 20), TABLE.slice(50, 10)])


def test_a_bad_row_in_a_later_batch_of_a_load_names_the_row_and_leaves_no_file(tmp_path):
    ids = TABLE.column("id").to_pylist()
    ids[87] = None
    src = str(tmp_path / "bad.parquet")
    pq.write_table(TABLE.set_column(0, "id", pa.array(ids, pa.int64())), src, row_group_size=40)
    out = tmp_path / "bad.json"
    for threads in (1, 2):
        with pytest.raises(RowError) as info:
            bulkwire.load_parquet(src, bulkwire.targets.request_file(str(out), buffer_size=500),
                                  batch_rows=10, threads=threads)
        assert (info.value.column, info.value.row, info.value.source) == ("id", 87, src)
        assert not out.exists() and not (tmp_path / "bad.json.partial").exists()


def _blocked(w: bulkwire.BulkWriter) -> bool:
    """Waits until the writer's producer is blocked on its full queue."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if w._queue.waits > 0:  # a put found the queue full: the producer waits now
            time.sleep(0.05)
            return True
        time.sleep(0.01)
    return False


def test_ctrl_c_while_the_queue_is_full_leaves_the_writer_failed():
    w = bulkwire.BulkWriter(buffer_size=200, max_buffers=1)
    timer = threading.Thread(target=lambda: _blocked(w) and _thread.interrupt_main())
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            w._store_prepared(prepared(TABLE))
    finally:
        timer.join(30)
    assert w.failed
    with pytest.raises(BulkInsertAborted, match="incomplete"):
        w._store_prepared(prepared(TABLE.slice(0, 1)))
    with pytest.raises(BulkInsertAborted, match="incomplete"):
        w.close()


def aborted_while_the_queue_is_full(batch) -> bulkwire.BulkWriter:
    """A writer (one buffer of 200 bytes in its queue) aborted while it waits on its full
    queue in the call storing ``batch``, which must raise the abort."""
    w = bulkwire.BulkWriter(buffer_size=200, max_buffers=1)
    stopper = threading.Thread(
        target=lambda: _blocked(w) and w.fail(BulkInsertAborted("the load was stopped")))
    stopper.start()
    try:
        with pytest.raises(BulkInsertAborted, match="the load was stopped"):
            w._store_prepared(batch)
    finally:
        stopper.join(30)
    return w


def test_an_abort_while_the_queue_is_full_raises_in_the_batch_call():
    assert aborted_while_the_queue_is_full(prepared(TABLE)).failed


def test_the_batch_call_keeps_the_writer_rules():
    w = bulkwire.BulkWriter()
    w._store_prepared(prepared(TABLE.slice(0, 2)))
    errors: list = []
    other = threading.Thread(target=lambda: errors.append(
        pytest.raises(RuntimeError, w._store_prepared, prepared(TABLE.slice(0, 2)))))
    other.start()
    other.join()
    assert "one thread only" in str(errors[0].value)
    with pytest.raises(TypeError, match="expected a PreparedBatch"):
        w._writer.put_batch(b"{}")
    w.close()
    with pytest.raises(ValueError, match="closed"):
        w._store_prepared(prepared(TABLE.slice(0, 2)))
    assert b"".join(bytes(c) for c in w.pieces()) == reference([TABLE.slice(0, 2)])


# ------------------------------------------------------------------ the one slicer

def _slices(length: int, threshold: int) -> list:
    """The slicer's rule for immutable bytes of at least the threshold: whole below twice
    the threshold, else threshold-sized slices, the last up to twice that."""
    sizes, left = [], length
    while left >= 2 * threshold:
        sizes.append(threshold)
        left -= threshold
    return sizes + [left]


def _contains_run(sizes: list, run: list) -> bool:
    return any(sizes[i:i + len(run)] == run for i in range(len(sizes) - len(run) + 1))


@pytest.mark.parametrize("factor", [1, 1.5, 2, 3.7, 6])
def test_store_encoded_and_attachment_bytes_are_sliced_by_one_rule(factor):
    """The bytes the body carries as they are, a store_encoded piece or an attachment's
    bytes, go through the same slicer: no copy, the same slices."""
    threshold = 1000
    length = int(threshold * factor)
    command = b'{"Id":"e/1","Type":"PUT","Document":{"x":"'
    command += b"y" * (length - len(command) - 3) + b'"}}'
    assert len(command) == length
    encoded = bulkwire.BulkWriter(buffer_size=threshold, max_buffers=1000)
    encoded.store({"a": 1}, id="p/1")
    encoded.store_encoded(command, 1)
    encoded.close()
    attached = bulkwire.BulkWriter(buffer_size=threshold, max_buffers=1000)
    attached.attachments_for("p/1").store("n", b"z" * length)
    attached.close()
    for w in (encoded, attached):
        sizes = [len(bytes(c)) for c in w.pieces()]
        assert _contains_run(sizes, _slices(length, threshold)), sizes
