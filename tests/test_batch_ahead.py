"""A Parquet batch's text written ahead by an encoding thread: ``_core.prepare_batch`` with
``buffer_size`` writes the rows' text (without the GIL) into buffers of the writers' pool,
and ``CommandWriter.put_batch`` takes them over in order without a copy. The body is byte
for byte the one the writer writes itself (and the reference body of test_encode_batch's
oracle), whatever the batch sizes, thresholds, compression and number of threads; every
buffer goes back to the pool on every path (a bad row mid-load, Ctrl-C while the encoding
threads work ahead, a writer that fails), and no encoding thread outlives its load.
"""
from __future__ import annotations

import _thread
import os
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")
import pyarrow.parquet as pq  # noqa: E402

import bulkwire  # noqa: E402
from bulkwire import _core  # noqa: E402
from bulkwire._core import _testing  # noqa: E402
from bulkwire.errors import RowError  # noqa: E402
from test_batch_writer import (FIELDS, META_JSON, TABLE, aborted_while_the_queue_is_full,  # noqa: E402
                               decompressed, reference, slices)

COMPRESS = {"none": False, "gzip": True, "zstd": "zstd"}


def prepared(table, ahead=None, row_base=0):
    return _core.prepare_batch(table, "id", FIELDS, vector_column="emb", metadata=META_JSON,
                               row_base=row_base, buffer_size=ahead)


def body_of(batches, threshold, ahead, compress=False) -> bytes:
    """The body a BulkWriter writes of the batches, each prepared with buffer_size=ahead[i]
    (None: written by the writer itself)."""
    w = bulkwire.BulkWriter(compress=compress, buffer_size=threshold, max_buffers=100_000)
    for b, a in zip(batches, ahead):
        w._store_prepared(prepared(b, a))
    w.close()
    data = b"".join(bytes(c) for c in w.pieces())
    assert w.stats.body_bytes == len(decompressed(data, compress))
    return data


def encoding_threads() -> list:
    return [t for t in threading.enumerate() if t.name.startswith("bulkwire-encode")]


def no_text_held() -> bool:
    return _testing.batch_text_memory() == (0, 0)


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(0, 45), min_size=1, max_size=6),
       threshold=st.integers(1, 6000), data=st.data(),
       compress=st.sampled_from(sorted(COMPRESS)))
def test_text_written_ahead_is_the_body_the_writer_writes(sizes, threshold, data, compress):
    """Any mix of batches written ahead (at the writer's threshold or another) and batches
    the writer writes itself: the reference body."""
    batches = slices(sizes)
    ahead = data.draw(st.lists(st.one_of(st.none(), st.just(threshold), st.integers(1, 6000)),
                               min_size=len(batches), max_size=len(batches)))
    body = body_of(batches, threshold, ahead, COMPRESS[compress])
    assert decompressed(body, compress) == reference(batches)
    assert no_text_held()


def test_the_text_is_held_by_the_prepared_batch_until_the_writer_takes_it():
    p = prepared(TABLE, ahead=500)
    buffers, held = _testing.batch_text_memory()
    assert buffers > 1 and held > 500 * buffers
    w = bulkwire.BulkWriter(buffer_size=500, max_buffers=10_000)
    w._store_prepared(p)
    assert no_text_held()
    # a second store of the same batch writes its rows again, as one never written ahead
    w._store_prepared(p)
    w.close()
    assert b"".join(bytes(c) for c in w.pieces()) == reference([TABLE, TABLE])
    q = prepared(TABLE.slice(0, 9), ahead=100)
    assert _testing.batch_text_memory()[0] > 0
    del q  # never stored: its buffers go back
    assert no_text_held()


def test_full_buffers_written_ahead_are_handed_over_as_they_are():
    """Every buffer of the batch's text past the threshold reaches the queue with the
    length it was written with: taken over, not copied and cut again."""
    threshold = 700
    expected = [len(b) for b in _core.encode_batch(TABLE, "id", FIELDS, vector_column="emb",
                                                    metadata=META_JSON, buffer_size=threshold)]
    w = bulkwire.BulkWriter(buffer_size=threshold, max_buffers=10_000)
    w._store_prepared(prepared(TABLE, ahead=threshold))
    w.close()
    sizes = [len(bytes(c)) for c in w.pieces()]
    # the body's first buffer starts with '[' where the text written ahead had ','; the
    # closing ']' goes into the last buffer when that was not full, else into one of its own
    if expected[-1] > threshold:
        expected.append(0)
    assert sizes == expected[:-1] + [expected[-1] + 1]


def test_a_batch_written_ahead_after_counters_and_documents():
    def body(ahead):
        w = bulkwire.BulkWriter(buffer_size=500, max_buffers=10_000)
        w.store({"a": 1}, id="x/1")
        w.counters_for("x/1").increment("likes", 2)
        w._store_prepared(prepared(TABLE.slice(3, 30), ahead))
        w._store_prepared(prepared(TABLE.slice(40, 9), ahead))
        w.store({"b": 2}, id="x/2")
        w.close()
        data = b"".join(bytes(c) for c in w.pieces())
        assert w._writer.bytes == w.stats.body_bytes == len(data)  # the counters end counted
        return data, w.documents

    assert body(500) == body(None)
    assert body(500)[1] == 2 + 39


def test_a_writer_that_refuses_the_batch_leaves_its_text_to_the_batch():
    """A batch refused before anything of it was taken (a time series is open): the body is
    as it was, and the batch's buffers go back once it is gone."""
    w = bulkwire.BulkWriter(buffer_size=300, max_buffers=10_000)
    w._store_prepared(prepared(TABLE.slice(0, 5)))
    series = w.time_series_for("x/1", "heart").__enter__()
    p = prepared(TABLE.slice(5, 20), ahead=300)
    with pytest.raises(RuntimeError, match="time series"):
        w._writer.put_batch(p)
    series.__exit__(None, None, None)
    del p
    assert no_text_held()
    w.close()
    body = b"".join(bytes(c) for c in w.pieces())
    assert body == reference([TABLE.slice(0, 5)])


def test_an_abort_while_the_queue_is_full_gives_the_batchs_buffers_back():
    assert aborted_while_the_queue_is_full(prepared(TABLE, ahead=200)).failed
    assert no_text_held()


# ------------------------------------------------------------------ load_parquet

@pytest.fixture(scope="module")
def source(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("ahead") / "t.parquet")
    pq.write_table(TABLE, path, row_group_size=37)
    return path


def load_bytes(src, out, threads, **options) -> bytes:
    """The body a load of ``src`` writes to ``out`` (the document options, such as
    ``buffer_size`` and ``compress``, are its target's)."""
    from bulkwire.document_options import DOCUMENT_OPTIONS

    document = {name: options.pop(name) for name in list(options) if name in DOCUMENT_OPTIONS}
    result = bulkwire.load_parquet(src, bulkwire.targets.request_file(str(out), **document),
                                   threads=threads, **options)
    assert result.rows == TABLE.num_rows
    with open(out, "rb") as f:
        return f.read()


@settings(max_examples=25, deadline=None)
@given(batch_rows=st.integers(1, 130), buffer_size=st.integers(1, 20_000),
       threads=st.integers(2, 4), compress=st.sampled_from(["none", "gzip"]))
def test_a_load_writes_the_same_body_whatever_the_threads(source, tmp_path_factory, batch_rows,
                                                           buffer_size, threads, compress):
    out = tmp_path_factory.mktemp("out")
    options = dict(batch_rows=batch_rows, buffer_size=buffer_size, compress=COMPRESS[compress])
    one = load_bytes(source, out / "one.json", 1, **options)
    many = load_bytes(source, out / "many.json", threads, **options)
    # threads=1: the writer writes every batch itself (test_batch_writer: the reference body)
    assert decompressed(many, compress) == decompressed(one, compress)
    assert no_text_held() and not encoding_threads()


@pytest.fixture(scope="module")
def bad_source(tmp_path_factory):
    ids = TABLE.column("id").to_pylist()
    ids[87] = None
    path = str(tmp_path_factory.mktemp("bad") / "bad.parquet")
    pq.write_table(TABLE.set_column(0, "id", pa.array(ids, pa.int64())), path, row_group_size=40)
    return path


@pytest.mark.parametrize("threads", [2, 3, 4])
def test_a_bad_row_mid_load_raises_and_gives_every_buffer_back(bad_source, tmp_path, threads):
    """Batches after the bad one are written ahead when it raises: each failure gives their
    buffers back, so repeated failures hold nothing more than the first."""
    out = tmp_path / "bad.json"
    pools = []
    for _ in range(6):
        with pytest.raises(RowError) as info:
            bulkwire.load_parquet(bad_source,
                                  bulkwire.targets.request_file(str(out), buffer_size=300),
                                  batch_rows=10, threads=threads)
        assert (info.value.column, info.value.row, info.value.source) == ("id", 87, bad_source)
        assert not out.exists() and not (tmp_path / "bad.json.partial").exists()
        assert no_text_held() and not encoding_threads()
        pools.append(_testing.pool_memory()[0])
    assert max(pools) <= 12  # the pool's slots: nothing is left anywhere else


class _Interrupted(Exception):
    pass


@pytest.mark.parametrize("threads", [2, 4])
@pytest.mark.parametrize("at_batch", [1, 3, 9])
def test_ctrl_c_while_the_encoding_threads_work_ahead(source, tmp_path, threads, at_batch):
    """Ctrl-C (a KeyboardInterrupt raised in the loading thread wherever it is at the time)
    while encoding threads hold batches written ahead: the load raises it, leaves no output,
    gives every buffer back and ends its threads."""
    out = tmp_path / "ctrl_c.json"
    seen = []

    def progress(rows, total):
        seen.append(rows)
        if len(seen) == at_batch:
            _thread.interrupt_main()

    with pytest.raises(KeyboardInterrupt):
        bulkwire.load_parquet(source, bulkwire.targets.request_file(str(out), buffer_size=200),
                              batch_rows=5, threads=threads, progress=progress)
        # the interrupt may land just after the call: never a normal return before it
        raise _Interrupted("the load returned normally")
    assert not out.exists() and not (tmp_path / "ctrl_c.json.partial").exists()
    assert no_text_held() and not encoding_threads()


def test_no_encoding_thread_outlives_its_load_and_a_forked_child_loads_alike(source, tmp_path):
    """The encoding threads are the load's own: none is left when it returns, so a child
    forked afterwards has nothing of them and loads with threads of its own, the same body."""
    parent = load_bytes(source, tmp_path / "parent.json", 3, batch_rows=9, buffer_size=800)
    assert not encoding_threads()
    child_out = tmp_path / "child.json"
    pid = os.fork()
    if pid == 0:  # the child: only its exit status
        try:
            ok = load_bytes(source, child_out, 3, batch_rows=9, buffer_size=800) == parent
            os._exit(0 if ok and no_text_held() else 2)
        except BaseException:  # noqa: BLE001
            os._exit(1)
    deadline = time.monotonic() + 60
    done, status = os.waitpid(pid, os.WNOHANG)
    while not done and time.monotonic() < deadline:
        time.sleep(0.02)
        done, status = os.waitpid(pid, os.WNOHANG)
    if not done:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    assert done and os.waitstatus_to_exitcode(status) == 0
