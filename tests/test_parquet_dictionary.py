"""Dictionary encoded pages, strings and nulls on the page path: TableFile/take on files written with
pyarrow's defaults (use_dictionary=True) and PLAIN, against pyarrow.Table.take, for every
codec, page version and required/optional column (optional scalars and strings holding
nulls), including
chunks whose dictionary outgrew its limit and went on with PLAIN pages. The chunk's dictionary page is read once; crafted dictionaries and indices give
MalformedFileError naming the file."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pyarrow as pa
import pyarrow.parquet as pq

import parquet_craft as pc
from parquet_craft import taken_by_pages
from bulkwire import _core
from bulkwire.errors import MalformedFileError
from bulkwire.parquet import PAGES, TableFile

ROWS, DIM = 2500, 4
CODECS = ["none", "snappy", "gzip", "zstd"]
#: every build reads zstd pages page by page (libzstd, else pyarrow's zstd codec)
CODEC_PARAMS = CODECS
#: small enough that the wide columns outgrow it inside a chunk and go on PLAIN
DICTIONARY_LIMIT = 2048


def _table(nullable: bool, seed: int = 11) -> pa.Table:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 4, ROWS)
    values = rng.integers(0, 12, int(lengths.sum())).astype(np.float64)
    lists = pa.ListArray.from_arrays(
        pa.array(np.concatenate(([0], np.cumsum(lengths))).astype(np.int32)), pa.array(values))
    fields = [
        pa.field("cat", pa.int64(), nullable),       # 7 values: dictionary throughout
        pa.field("i32", pa.int32(), nullable),       # 300 values: a bit width of 9
        pa.field("f32", pa.float32(), nullable),     # distinct: the dictionary overflows
        pa.field("id", pa.int64(), nullable),        # distinct: the dictionary overflows
        pa.field("emb", pa.list_(pa.field("element", pa.float32(), nullable), DIM), nullable),
        pa.field("l", pa.list_(pa.field("element", pa.float64(), nullable)), nullable),
        pa.field("word", pa.string(), nullable),     # 40 values, empty strings among them
        pa.field("text", pa.large_string(), nullable),  # distinct: the dictionary overflows
        pa.field("blob", pa.binary(), nullable),     # any bytes, zero bytes too
    ]
    words = [("w%d" % (i % 40)) * (i % 3) for i in range(ROWS)]
    blobs = [bytes(rng.integers(0, 256, i % 9, dtype=np.uint8)) for i in range(ROWS)]
    # optional scalars hold nulls (runs of them too), read page by page
    null = (rng.random(ROWS) < 0.1) | ((np.arange(ROWS) // 50) % 9 == 4) if nullable else None
    arrays = [
        pa.array(rng.integers(0, 7, ROWS) * 1000, mask=null),
        pa.array(rng.integers(-150, 150, ROWS).astype(np.int32), mask=null),
        pa.array(rng.standard_normal(ROWS).astype(np.float32),
                 mask=None if null is None else np.roll(null, 7)),
        pa.array(np.arange(ROWS, dtype=np.int64) * 3),
        pa.FixedSizeListArray.from_arrays(
            pa.array(rng.integers(0, 20, ROWS * DIM).astype(np.float32)), type=fields[4].type),
        lists.cast(fields[5].type),
        pa.array(words, pa.string(), mask=null),
        pa.array([f"{i * 7919}-é-{'x' * (i % 17)}" for i in range(ROWS)], pa.large_string(),
                 mask=None if null is None else np.roll(null, 3)),
        pa.array(blobs, pa.binary(), mask=None if null is None else np.roll(null, 11)),
    ]
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


#: how the files are written (the dictionary's limit is checked after each batch of 128 values)
WRITE_OPTIONS = dict(write_page_index=True, use_dictionary=True, data_page_size=1024,
                     row_group_size=1000, dictionary_pagesize_limit=DICTIONARY_LIMIT,
                     write_batch_size=128)
tables, files = pc.variant_fixtures("dictionary", _table, CODECS, WRITE_OPTIONS)


def _write(path, table, **kw) -> str:
    return pc.written(path, table, WRITE_OPTIONS, **kw)


indices_strategy = st.lists(st.integers(0, ROWS - 1), max_size=60)


@pc.every_variant(CODEC_PARAMS)
@given(indices=indices_strategy)
def test_pages_equal_table_take(files, tables, codec, version, nullable, dictionary, indices):
    taken_by_pages(files[codec, version, nullable, dictionary], tables[nullable], indices,
                   PAGES)


def _dictionaries(path):
    """Each chunk's dictionary page offset, by (row group, leaf)."""
    meta = pq.ParquetFile(path).metadata
    data = open(path, "rb").read()
    locations = _core.parquet_index_locations(data, meta.num_row_groups, meta.num_columns)
    return data, locations[:, :, 3]


@pytest.mark.parametrize("codec", CODEC_PARAMS)
def test_every_row_through_dictionary_and_plain_pages(files, tables, codec):
    """Every row of every chunk, so every page is read: the wide columns' dictionaries hold
    fewer values than the chunk has, so those chunks go on with PLAIN pages, read too."""
    path = files[codec, "1.0", True, True]
    table = tables[True]
    data, offsets = _dictionaries(path)
    assert (offsets >= 0).all()  # pyarrow's defaults: a dictionary page in every chunk
    meta = pq.ParquetFile(path).metadata
    group_rows = meta.row_group(0).num_rows
    for leaf in (2, 3):  # f32, id: distinct values, more than the dictionary holds
        dictionary = _core.parquet_dictionary(data, int(offsets[0, leaf]), -1,
                                              {"none": 0, "snappy": 1, "gzip": 2, "zstd": 6}[codec],
                                              4 if leaf == 2 else 8)
        assert 0 < dictionary.size // (4 if leaf == 2 else 8) < group_rows
    rows = list(range(ROWS))[::-1]
    with TableFile(path) as f:
        f._parquet.read_row_group = None  # no column may fall back
        assert f.take(rows).equals(table.take(rows))


def test_nulls_by_pages(files, tables):
    """Rows around and inside runs of nulls, every row of the file: the optional scalars are
    read page by page, nulls where Table.take has them."""
    table = tables[True]
    assert table.column("cat").null_count > 0
    rows = list(range(ROWS))
    paged = "zstd"  # page by page on every build
    for key in [("none", "1.0", True, False), (paged, "2.0", True, True)]:
        with TableFile(files[key], columns=["cat", "i32", "f32"]) as f:
            f._parquet.read_row_group = None  # no column may fall back
            assert f.take(rows).equals(table.select(["cat", "i32", "f32"]).take(rows))
            assert f.take([200, 201, 7]).equals(
                table.select(["cat", "i32", "f32"]).take([200, 201, 7]))


@pytest.mark.parametrize("dictionary", [True, False], ids=["dictionary", "plain"])
def test_strings_every_row(files, tables, dictionary):
    """Every row, so every value of every page is walked: PLAIN byte arrays have no stride."""
    table = tables[True].select(["word", "text", "blob"])
    rows = list(range(ROWS))[::-1]
    with TableFile(files["snappy", "1.0", True, dictionary],
                   columns=["word", "text", "blob"]) as f:
        f._parquet.read_row_group = None  # no column may fall back
        assert f.take(rows).equals(table.take(rows))


def test_crafted_byte_array_length_is_malformed(tmp_path, tables):
    """A PLAIN byte array's length overruns its page: MalformedFileError naming the file."""
    t = pa.table({"s": pa.array(["abc", "defg", "hi"] * 10)})
    path = _write(tmp_path / "s.parquet", t, use_dictionary=False, compression="none")
    data = open(path, "rb").read()
    at = data.index(struct_le32(3) + b"abc")
    crafted = _patched(tmp_path, data, at + 7, struct_le32(1 << 20))  # "defg"'s length
    with TableFile(crafted) as f:
        # the page is refused whichever of its rows is asked for, row 0 before the bad length
        # included, as pyarrow refuses it
        for rows in ([1], [0], [2, 0]):
            with pytest.raises(MalformedFileError, match=r"d\.parquet.* column 's':.*overruns"):
                f.take(rows)
    with pytest.raises((OSError, pa.ArrowException)):
        pq.read_table(crafted)


def test_crafted_utf8_is_malformed(tmp_path):
    t = pa.table({"s": pa.array(["abc", "defg", "hi"] * 10)})
    path = _write(tmp_path / "s.parquet", t, use_dictionary=False, compression="none")
    data = open(path, "rb").read()
    at = data.index(b"defg")
    crafted = _patched(tmp_path, data, at, b"\xff")
    with TableFile(crafted) as f:
        with pytest.raises(MalformedFileError, match=r"column 's':.*(UTF|utf)"):
            f.take([1])


def test_crafted_byte_dictionary_layout(files):
    data, dict_at, pages, rows = _chunk(files["none", "1.0", False, True], leaf=6)
    dictionary = _core.parquet_dictionary(data, dict_at, int(pages[0, 0]), 0, 0)
    args = (data, pages, rows, 0, 0, 0, 0, 0, np.array([0, 1]))
    assert _core.parquet_take_chunk(*args, dictionary) is not None
    for bad in (dictionary[:8].copy(), np.concatenate((dictionary[:8] + 0, dictionary[8:16])),
                np.frombuffer(np.uint64(1 << 40).tobytes() + dictionary[8:].tobytes(),
                              np.uint8).copy()):
        with pytest.raises(ValueError, match="byte array dictionary"):
            _core.parquet_take_chunk(*args, bad)
    swapped = dictionary.copy()
    swapped[16:24] = np.frombuffer(np.uint64(1 << 30).tobytes(), np.uint8)  # offset 1
    with pytest.raises(ValueError, match="byte array dictionary offset"):
        _core.parquet_take_chunk(*args, swapped)


def struct_le32(n: int) -> bytes:
    return int(n).to_bytes(4, "little")


def test_plain_files_still_plain(tmp_path, tables):
    """use_dictionary=False: no dictionary page, PLAIN pages, the same answers."""
    table = tables[False]
    path = _write(tmp_path / "p.parquet", table, use_dictionary=False,
                  compression="zstd")
    _, offsets = _dictionaries(path)
    assert (offsets == -1).all()
    rows = [4, 2499, 4, 1000, 0]
    with TableFile(path) as f:
        assert f.take(rows).equals(table.take(rows))
        assert f.paths["emb"] == PAGES


def test_dictionary_read_once_per_chunk(files, tables, monkeypatch):
    calls = []
    real = _core.parquet_dictionary

    def counting(*args):
        calls.append(args[1:])
        return real(*args)

    monkeypatch.setattr(_core, "parquet_dictionary", counting)
    table = tables[True]
    with TableFile(files["snappy", "2.0", True, True], columns=["cat", "emb"]) as f:
        for rows in ([1, 2, 900], [3, 999], [5, 1500]):
            assert f.take(rows).equals(table.select(["cat", "emb"]).take(rows))
    # two chunks (row groups 0 and 1) of two columns, each read once however often touched
    assert len(calls) == 4 and len(set(calls)) == 4


# ---- what a TableFile keeps ----------------------------------------------------------------

GROUPS, GROUP_ROWS = 3000, 1000


@pytest.fixture(scope="module")
def many_groups(tmp_path_factory):
    """3,000 row groups of an int64 column of ~600 distinct values each: a dictionary page of
    ~5 KB per chunk, ~15 MB of them in the file."""
    path = str(tmp_path_factory.mktemp("groups") / "groups.parquet")
    rng = np.random.default_rng(3)
    with pq.ParquetWriter(path, pa.schema([("x", pa.int64())]), compression="none") as w:
        for g in range(GROUPS):
            x = rng.integers(0, 1000, GROUP_ROWS) + g * 1000
            w.write_table(pa.table({"x": pa.array(x)}), row_group_size=GROUP_ROWS)
    return path, pq.read_table(path)


def _anonymous_memory() -> int:
    """The process's resident anonymous memory (the mapped file's pages left out), once
    glibc has given back the free memory it holds (``malloc_trim``): what is kept, not what
    earlier tests' frees left to the allocator's trim state."""
    import ctypes
    import ctypes.util

    try:
        ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: RSS as it is
        pass
    return next(int(line.split()[1]) * 1024 for line in open("/proc/self/status")
                if line.startswith("RssAnon:"))


@pytest.mark.parametrize("cache_bytes", [0, 1 << 20])
def test_dictionaries_kept_stay_under_cache_bytes(many_groups, monkeypatch, cache_bytes):
    """Lookups spread over 3,000 row groups of one TableFile: the dictionaries it keeps (the
    arrays still alive, followed through weak references, not the cache's own count) stay
    under cache_bytes (or one dictionary), and so does the process's resident anonymous
    memory, where keeping all of them took ~16 MB. Dictionaries dropped are read again when
    their chunk is touched again, and the rows stay Table.take's."""
    import gc
    import weakref

    path, table = many_groups
    made = []
    real = _core.parquet_dictionary

    def tracked(*args):
        dictionary = real(*args)
        made.append((weakref.ref(dictionary), dictionary.nbytes))
        return dictionary

    monkeypatch.setattr(_core, "parquet_dictionary", tracked)
    rng = np.random.default_rng(5)
    with TableFile(path, cache_bytes=cache_bytes) as f:
        assert f.paths == {"x": "walked pages"}
        f.take([0])
        gc.collect()
        before = _anonymous_memory()
        asked = [(np.arange(first, first + 50) * GROUP_ROWS  # 50 row groups a lookup
                  + rng.integers(0, GROUP_ROWS, 50)).tolist() for first in range(0, GROUPS, 50)]
        asked.append([5, 1007, 2_999_999])  # back to the start
        got = [f.take(rows) for rows in asked]
        gc.collect()
        grown = _anonymous_memory() - before
        for rows, result in zip(asked, got):
            assert result.equals(table.take(rows))
        alive = sum(size for ref, size in made if ref() is not None)
        largest = max(size for _, size in made)
        assert alive <= max(cache_bytes, largest)
        assert f._cache.bytes <= max(cache_bytes, largest + f._cache.ENTRY_BYTES)
        # each read once, and the two dropped ones again (with nothing kept, also any read
        # before its own page table dropped it)
        assert len(made) == GROUPS + 2 if cache_bytes else len(made) >= GROUPS + 2
        if not os.environ.get("BULKWIRE_SANITIZER"):  # ASan keeps freed memory a while
            assert grown < cache_bytes + (4 << 20)
    assert sum(size for _, size in made) > 10 << 20  # what keeping them all would hold


def test_close_lets_go_of_what_the_cache_kept(many_groups, monkeypatch):
    """close() drops the dictionaries and page tables a TableFile kept (followed through weak
    references) along with its descriptor, even while the object itself is still held."""
    import gc
    import weakref

    path, table = many_groups
    made = []
    real_dictionary, real_walk = _core.parquet_dictionary, _core.parquet_walk_pages

    def tracked(real):
        def call(*args):
            result = real(*args)
            made.append(weakref.ref(result))
            return result
        return call

    monkeypatch.setattr(_core, "parquet_dictionary", tracked(real_dictionary))
    monkeypatch.setattr(_core, "parquet_walk_pages", tracked(real_walk))
    open_before = len(os.listdir("/proc/self/fd"))
    f = TableFile(path)
    rows = [3, GROUP_ROWS + 1, 7 * GROUP_ROWS]
    assert f.take(rows).equals(table.take(rows))
    gc.collect()
    assert len(made) == 6 and all(ref() is not None for ref in made)
    f.close()
    gc.collect()
    assert [ref() is None for ref in made] == [True] * 6
    assert len(os.listdir("/proc/self/fd")) == open_before
    with pytest.raises(ValueError, match="closed"):
        f.take(rows)


def test_results_hold_only_their_rows(many_groups):
    """3,000 results of one row each, from as many row groups, kept: each holds its 8 bytes
    of values, not the 4 KiB its values buffer started at (~12 MB for all of them)."""
    import gc

    path, table = many_groups
    with TableFile(path) as f:
        f.take([0])
        for first in range(0, GROUPS, 100):  # every dictionary and page table read, kept
            f.take((np.arange(first, first + 100) * GROUP_ROWS).tolist())
        gc.collect()
        before = _anonymous_memory()
        kept = [f.take([g * GROUP_ROWS + 1]) for g in range(GROUPS)]
        gc.collect()
        grown = _anonymous_memory() - before
    assert pa.concat_tables(kept).equals(table.take((np.arange(GROUPS) * GROUP_ROWS + 1).tolist()))
    if not os.environ.get("BULKWIRE_SANITIZER"):  # ASan's allocator pads every block
        assert grown < 6 << 20


def test_default_cache_keeps_every_dictionary_of_a_small_file(many_groups, monkeypatch):
    """Under the default bound (64 MiB) the 15 MB of dictionaries are all kept: a second pass
    reads none again."""
    path, table = many_groups
    calls = []
    real = _core.parquet_dictionary
    monkeypatch.setattr(_core, "parquet_dictionary", lambda *a: calls.append(1) or real(*a))
    with TableFile(path) as f:
        for _ in range(2):
            rows = (np.arange(GROUPS) * GROUP_ROWS + 17).tolist()
            assert f.take(rows).equals(table.take(rows))
    assert len(calls) == GROUPS


def test_cache_bytes_is_checked():
    for bad in (-1, 1.5, True, "1"):
        with pytest.raises(ValueError, match="cache_bytes must be a non-negative int"):
            TableFile(__file__, cache_bytes=bad)


# ---- crafted dictionaries and indices -----------------------------------------------------

def _chunk(path, leaf, group=0):
    meta = pq.ParquetFile(path).metadata
    data = open(path, "rb").read()
    locations = _core.parquet_index_locations(data, meta.num_row_groups, meta.num_columns)
    rows = meta.row_group(group).num_rows
    offset, length = (int(v) for v in locations[group, leaf, :2])
    pages = _core.parquet_offset_index(data, offset, length, rows,
                                       *(int(v) for v in locations[group, leaf, 4:6]))
    return data, int(locations[group, leaf, 3]), pages, rows


def test_index_past_the_dictionary_is_malformed(files):
    data, dict_at, pages, rows = _chunk(files["none", "1.0", False, True], leaf=1)
    dictionary = _core.parquet_dictionary(data, dict_at, int(pages[0, 0]), 0, 4)
    assert dictionary.size // 4 > 1
    short = dictionary[:4].copy()  # one value: every other index points past it
    with pytest.raises(ValueError, match="dictionary index .* past the 1 values"):
        _core.parquet_take_chunk(data, pages, rows, 0, 4, 0, 0, 0, np.arange(rows), short)
    # only row 0 asked: the bad indices after it in the same page still make it malformed,
    # as a reader of the whole page finds it
    with pytest.raises(ValueError, match="dictionary index .* past the 1 values"):
        _core.parquet_take_chunk(data, pages, rows, 0, 4, 0, 0, 0, np.array([0]), short)
    empty = dictionary[:0].copy()
    with pytest.raises(ValueError, match="past the 0 values"):
        _core.parquet_take_chunk(data, pages, rows, 0, 4, 0, 0, 0, np.array([0]), empty)


@pytest.mark.parametrize("where", ["middle", "last"])
def test_one_index_past_the_dictionary_is_found_anywhere_in_its_run(tmp_path, where):
    """One bad index, in the middle of a long bit-packed run (read with an 8-byte load) or in
    its last value (read byte by byte), and only row 0 asked for: the page is malformed."""
    rows = 800
    values = np.arange(rows) % 5
    at = rows // 2 if where == "middle" else rows - 1
    values[at] = 7  # first seen here: the dictionary's last entry, index 5
    t = pa.table({"id": pa.array(values, pa.int64())},
                 schema=pa.schema([pa.field("id", pa.int64(), nullable=False)]))
    path = _write(tmp_path / "one.parquet", t, compression="none", data_page_size=1 << 20)
    data, dict_at, pages, group_rows = _chunk(path, leaf=0)
    assert len(pages) == 1 and group_rows == rows
    dictionary = _core.parquet_dictionary(data, dict_at, int(pages[0, 0]), 0, 8)
    assert dictionary.view(np.int64).tolist() == [0, 1, 2, 3, 4, 7]
    take = (data, pages, rows, 0, 8, 0, 0, 0, np.array([0]))
    assert _core.parquet_take_chunk(*take, dictionary) is not None
    with pytest.raises(ValueError, match="dictionary index 5 past the 5 values"):
        _core.parquet_take_chunk(*take, dictionary[:40].copy())


def test_dictionary_offset_at_a_data_page_is_malformed(files):
    data, _, pages, _ = _chunk(files["none", "1.0", False, True], leaf=1)
    with pytest.raises(ValueError, match="no dictionary page"):
        _core.parquet_dictionary(data, int(pages[0, 0]), -1, 0, 4)
    with pytest.raises(ValueError, match="outside the file"):
        _core.parquet_dictionary(data, len(data), -1, 0, 4)


def test_bit_packed_indices_short_of_their_groups_are_malformed(tmp_path):
    """A bit-packed run of indices that declares more groups than its page holds is malformed
    even when the rows asked for are all there, as pyarrow finds it."""
    t = pa.table({"id": pa.array(np.arange(16) % 5, pa.int64())},
                 schema=pa.schema([pa.field("id", pa.int64(), nullable=False)]))
    path = _write(tmp_path / "s.parquet", t, compression="none")
    data = open(path, "rb").read()
    meta = pq.ParquetFile(path).metadata
    locations = _core.parquet_index_locations(data, 1, 1)
    first_page = int(_core.parquet_offset_index(data, *(int(v) for v in locations[0, 0, :2]),
                                                16, *(int(v) for v in locations[0, 0, 4:6]))[0, 0])
    at = data.index(b"\x03\x05", first_page)  # bit width 3, a bit-packed run of 2 groups
    assert meta.num_rows == 16
    with TableFile(path) as f:
        assert f.take([0, 15]).equals(t.take([0, 15]))
    crafted = _patched(tmp_path, data, at + 1, b"\x07")  # 3 groups: 9 bytes, 6 there
    with pytest.raises((OSError, pa.ArrowException)):
        pq.read_table(crafted)
    with TableFile(crafted) as f:
        with pytest.raises(MalformedFileError, match=r"end inside a bit-packed run"):
            f.take([0])


def test_dictionary_page_must_end_at_the_first_data_page(files):
    """A dictionary page header read one field longer or shorter shifts its values: the page no
    longer ends where the chunk's first data page starts, and that is malformed (a reader that
    walks the chunk from its start cannot find the next header either)."""
    data, dict_at, pages, _ = _chunk(files["none", "1.0", False, True], leaf=1)
    first = int(pages[0, 0])
    assert _core.parquet_dictionary(data, dict_at, first, 0, 4) is not None
    for wrong in (first - 3, first + 3):
        with pytest.raises(ValueError, match=r"dictionary page at \d+ ends at \d+, not at the "
                                             r"first data page \(%d\)" % wrong):
            _core.parquet_dictionary(data, dict_at, wrong, 0, 4)


def _patched(tmp_path, data, at, new: bytes) -> str:
    out = bytearray(data)
    out[at:at + len(new)] = new
    path = tmp_path / "d.parquet"
    path.write_bytes(bytes(out))
    return str(path)


def test_crafted_dictionary_count_is_malformed_naming_the_file(tmp_path, files):
    """The dictionary page header claims more values than its bytes hold."""
    path = files["none", "1.0", False, True]
    data, dict_at, _, _ = _chunk(path, leaf=0)
    header = data[dict_at:dict_at + 64]
    # the dictionary page header (field 7, a struct: 0x4c after field 3) starts with
    # num_values (field 1, i32: 0x15) as a zigzag varint
    start = header.index(b"\x4c\x15") + 2
    assert header[start] == 7 << 1  # seven values, one varint byte
    crafted = _patched(tmp_path, data, dict_at + start, bytes([63 << 1]))
    with TableFile(crafted, columns=["cat"]) as f:
        with pytest.raises(MalformedFileError, match=r"d\.parquet.* column 'cat':.*dictionary"):
            f.take([0])


@pytest.mark.parametrize("column,leaf,dictionary", [("i32", 1, True), ("word", 6, True),
                                                     ("blob", 8, False)])
@given(at=st.integers(0, 10 ** 6), value=st.integers(0, 255),
       rows=st.lists(st.integers(0, ROWS - 1), max_size=30))
def test_mutated_chunk_never_crashes(tmp_path_factory, files, column, leaf, dictionary, at,
                                     value, rows):
    """One byte of a dictionary page or of a data page changed (headers, bit width, runs, byte
    array lengths): the lookup answers as many rows, or raises MalformedFileError (or pyarrow's
    error for a chunk it falls back to); a sanitizer build turns a read out of bounds into a
    crash."""
    data, dict_at, pages, _ = _chunk(files["snappy", "2.0", True, dictionary], leaf=leaf)
    spans = [(int(p[0]), min(64, int(p[1]))) for p in pages[:3]]
    if dict_at >= 0:
        spans.append((dict_at, 48))
    start, size = spans[at % len(spans)]
    where = start + (at // len(spans)) % size
    path = _patched(tmp_path_factory.mktemp("mut"), data, where, bytes([value]))
    try:
        with TableFile(path, columns=[column]) as f:
            got = f.take(rows)
    except (MalformedFileError, OSError, pa.ArrowException):
        return
    assert got.num_rows == len(rows)


@pytest.mark.parametrize("page_index", [False, True])
def test_dictionary_page_offset_0_means_no_dictionary(tmp_path, page_index):
    """Some writers leave dictionary_page_offset 0 (the file's magic, where no page can be)
    for a chunk without a dictionary: every column is read page by page as pyarrow reads it,
    by take and by the load, and nothing reads a page header at offset 0."""
    from bulkwire import load_parquet, targets

    table = _table(False)
    source = tmp_path / "plain.parquet"
    pq.write_table(table, source, use_dictionary=False, write_page_index=page_index,
                   row_group_size=1000, data_page_size=4096, compression="snappy")
    data = source.read_bytes()
    meta, _ = pc.footer(data)
    for g, group in enumerate(meta.get(4)[1]):
        for c in range(len(group.get(1)[1])):
            pc.column_chunk(meta, g, c).get(3).set(11, pc.I64, 0)
    path = tmp_path / "zero.parquet"
    path.write_bytes(pc.with_footer(data, meta))
    assert pq.ParquetFile(path).metadata.row_group(0).column(0).dictionary_page_offset == 0
    expected = pq.read_table(path)
    assert expected.equals(table)
    rows = np.random.default_rng(3).integers(0, ROWS, 200)
    with TableFile(path) as f:
        assert set(f.paths.values()) == {PAGES if page_index else "walked pages"}
        assert f.take(rows).equals(table.take(rows))
        assert all(s["row_groups"] == 0 for s in f.stats.values())
    body = tmp_path / "zero.json"
    assert load_parquet(path, targets.request_file(str(body), id_column="id"),
                        vector_column="emb", columns=["cat", "emb"], batch_rows=300).rows == ROWS
    memory = tmp_path / "memory.json"
    load_parquet(table, targets.request_file(str(memory), id_column="id"),
                 vector_column="emb", columns=["cat", "emb"], batch_rows=300)
    assert body.read_bytes() == memory.read_bytes()
