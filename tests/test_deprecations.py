"""Old spellings keep working: each one warns with a ``DeprecationWarning`` that names its new
spelling and points at the caller's line, and gives what the new spelling gives (the same
body bytes, the same object). Passing an old keyword together with its new one is a
``TypeError`` naming both.

The renames: ``BulkWriter.chunks()`` -> ``pieces()``; ``BulkStats.chunks`` /
``average_chunk`` -> ``pieces`` / ``average_piece``; the load option ``chunk_size`` ->
``buffer_size`` (``LoadOptions``, ``load_parquet``, ``load_arrow``, ``FileDescription``,
``ServerDescription``); ``DEFAULT_CHUNK_SIZE`` -> ``DEFAULT_BUFFER_SIZE``."""
from __future__ import annotations

import copyreg
import dataclasses
import importlib
import pickle
import warnings

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

import bulkwire
from bulkwire import BulkStats, BulkWriter, LoadOptions
from bulkwire.load.targets import FileDescription, ServerDescription

HERE = __file__


def deprecated(call, new: str):
    """``call()``'s result; it must warn exactly once, a DeprecationWarning naming ``new`` and
    pointing at this file (the caller of the public name, not bulkwire's own code)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    assert [w.category for w in caught] == [DeprecationWarning], [str(w.message) for w in caught]
    assert new in str(caught[0].message) and "deprecated" in str(caught[0].message)
    assert caught[0].filename == HERE, caught[0].filename
    return result


def body(pieces) -> bytes:
    return b"".join(bytes(piece) for piece in pieces)


DOCUMENTS = st.lists(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=20),
                                     max_size=4), max_size=30)


@settings(deadline=None)
@given(documents=DOCUMENTS, compress=st.sampled_from([False, "gzip", "zstd"]),
       buffer_size=st.integers(1, 300))
def test_chunks_is_pieces(documents, compress, buffer_size):
    """BulkWriter.chunks() yields the pieces pieces() yields: the same bytes, piece by piece."""
    def written():
        w = BulkWriter(compress=compress, buffer_size=buffer_size, max_buffers=len(documents) + 8)
        for i, document in enumerate(documents):
            w.store(document, id=f"d/{i}")
        w.close()
        return w

    new = [bytes(piece) for piece in written().pieces()]
    old_writer = written()
    old = [bytes(piece) for piece in deprecated(lambda: old_writer.chunks(), "pieces()")]
    assert old == new
    assert old_writer.stats.pieces == len(new)


def test_bulk_stats_old_fields():
    stats = BulkStats(documents=2, wire_bytes=300, pieces=3)
    assert deprecated(lambda: stats.chunks, "BulkStats.pieces") == 3
    assert deprecated(lambda: stats.average_chunk, "BulkStats.average_piece") == stats.average_piece == 100
    assert deprecated(lambda: BulkStats(documents=2, wire_bytes=300, chunks=3),
                      "pieces") == stats
    deprecated(lambda: setattr(stats, "chunks", 6), "BulkStats.pieces")
    assert stats.pieces == 6 and stats.average_piece == 50
    with pytest.raises(TypeError, match="both pieces and chunks"):
        BulkStats(pieces=1, chunks=1)
    assert [f.name for f in dataclasses.fields(BulkStats)].count("chunks") == 0


def test_bulk_stats_count_the_pieces_sent(tmp_path):
    """The live stats of a writer count the pieces its consumer took (the old name reads the
    same count)."""
    w = BulkWriter(buffer_size=10, max_buffers=32)  # every buffer queued before reading
    for i in range(20):
        w.store({"n": i}, id=f"n/{i}")
    w.close()
    pieces = list(w.pieces())
    assert w.stats.pieces == len(pieces) > 1
    assert deprecated(lambda: w.stats.chunks, "pieces") == len(pieces)


def test_load_options_chunk_size():
    new = LoadOptions(buffer_size=4096, collection="Points")
    old = deprecated(lambda: LoadOptions(chunk_size=4096, collection="Points"), "buffer_size")
    assert old == new and hash(old) == hash(new) and old.buffer_size == 4096
    assert deprecated(lambda: old.chunk_size, "LoadOptions.buffer_size") == 4096
    assert deprecated(lambda: new.replace(chunk_size=10), "buffer_size") == new.replace(buffer_size=10)
    assert deprecated(lambda: LoadOptions.of(new, chunk_size=10), "buffer_size").buffer_size == 10
    with pytest.raises(ValueError, match="buffer_size must be a positive int, not 0"):
        deprecated(lambda: LoadOptions(chunk_size=0), "buffer_size")
    with pytest.raises(TypeError, match="both buffer_size and chunk_size"):
        LoadOptions(chunk_size=1, buffer_size=2)
    with pytest.raises(TypeError, match="both buffer_size and chunk_size"):
        new.replace(chunk_size=1, buffer_size=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        old.chunk_size = 5
    assert "chunk_size" not in [f.name for f in dataclasses.fields(LoadOptions)]


def test_load_options_replace_pickle_and_equality_still_work():
    options = LoadOptions(collection="Points", buffer_size=777, metadata={"a": 1})
    assert dataclasses.replace(options, buffer_size=5).buffer_size == 5
    assert dataclasses.replace(options, collection="Other") == options.replace(collection="Other")
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert pickle.loads(pickle.dumps(options, protocol)) == options
    assert LoadOptions(buffer_size=1) != LoadOptions(buffer_size=2)


class OldPickle:
    """Pickles as ``obj`` did while its field ``new`` was called ``old``."""

    def __init__(self, obj, new: str, old: str) -> None:
        self.obj, self.new, self.old = obj, new, old

    def __reduce__(self):
        state = {(self.old if key == self.new else key): value for key, value in vars(self.obj).items()}
        return copyreg._reconstructor, (type(self.obj), object, None), state


def test_a_pickle_of_the_old_spelling_loads():
    """A LoadOptions (a FileDescription) pickled while the field was chunk_size loads with
    that value as buffer_size."""
    for obj in (LoadOptions(buffer_size=4321, collection="Old"), FileDescription(buffer_size=99, out="x")):
        old_pickle = pickle.dumps(OldPickle(obj, "buffer_size", "chunk_size"))
        assert b"chunk_size" in old_pickle and b"buffer_size" not in old_pickle
        assert pickle.loads(old_pickle) == obj


def table(rows: int = 40) -> pa.Table:
    return pa.table({"id": list(range(rows)),
                     "v": pa.array([[float(i), 0.5] for i in range(rows)], pa.list_(pa.float32()))})


@pytest.mark.parametrize("load", ["load_arrow", "load_parquet"])
def test_load_with_chunk_size(tmp_path, load):
    """load_parquet / load_arrow(chunk_size=...), the load options' former spelling, write
    the body the target's buffer_size= writes, warning of each old spelling."""
    source: object = table()
    if load == "load_parquet":
        source = str(tmp_path / "t.parquet")
        import pyarrow.parquet as pq
        pq.write_table(table(), source)
    entry = getattr(bulkwire, load)
    new = entry(source, bulkwire.targets.request_file(str(tmp_path / "new.json"),
                                                      buffer_size=100, compress="gzip"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = entry(source, out=str(tmp_path / "old.json"), chunk_size=100, compress="gzip")
    messages = [str(w.message) for w in caught]
    assert {w.category for w in caught} == {DeprecationWarning}
    assert {w.filename for w in caught} == {HERE}, [w.filename for w in caught]
    for spelling in ("chunk_size", "out=", "compress=", "buffer_size="):
        assert any(spelling in m for m in messages), (spelling, messages)
    assert new.rows == old.rows == 40
    assert open(new.target, "rb").read() == open(old.target, "rb").read()
    with pytest.raises(TypeError, match="both buffer_size and chunk_size"):
        entry(source, out=str(tmp_path / "both.json"), chunk_size=100, buffer_size=100)


def test_target_descriptions_chunk_size():
    assert deprecated(lambda: FileDescription(chunk_size=5, out="x"),
                      "buffer_size") == FileDescription(buffer_size=5, out="x")
    server = ServerDescription(buffer_size=5, url="http://127.0.0.1:1", database="db")
    old = deprecated(lambda: ServerDescription(chunk_size=5, url="http://127.0.0.1:1",
                                               database="db"), "buffer_size")
    assert old == server and deprecated(lambda: old.chunk_size, "buffer_size") == 5
    assert dataclasses.replace(server, database="other").buffer_size == 5


@pytest.mark.parametrize("module", ["bulkwire.load_options", "bulkwire.load", "bulkwire.load.targets"])
def test_default_chunk_size(module):
    mod = importlib.import_module(module)
    assert deprecated(lambda: mod.DEFAULT_CHUNK_SIZE, f"{module}.DEFAULT_BUFFER_SIZE") \
        == mod.DEFAULT_BUFFER_SIZE == bulkwire.bulk.DEFAULT_BUFFER_SIZE == LoadOptions().buffer_size
    with pytest.raises(AttributeError, match="no attribute 'DEFAULT_NOTHING'"):
        mod.DEFAULT_NOTHING


def test_from_import_of_the_old_constant():
    """``from bulkwire.load import DEFAULT_CHUNK_SIZE`` works and warns at the import line
    (the import system looks the name up twice in a package: it may warn twice)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from bulkwire.load import DEFAULT_CHUNK_SIZE
    assert DEFAULT_CHUNK_SIZE == bulkwire.load.DEFAULT_BUFFER_SIZE
    assert caught and all(w.category is DeprecationWarning and "DEFAULT_BUFFER_SIZE" in str(w.message)
                          and w.filename == HERE for w in caught)
