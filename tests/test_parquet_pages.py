"""Random access page by page: TableFile/take on Parquet files with a page index, against
pyarrow.Table.take, for every encoding, codec, page version and column type the page reader
covers, and the fallback (whole row groups, one at a time) for what it does not. Crafted
files give MalformedFileError naming the file, never a crash or a read out of bounds."""
from __future__ import annotations

import os
import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pyarrow as pa
import pyarrow.parquet as pq

from bulkwire import _core
from bulkwire.errors import MalformedFileError
from bulkwire.parquet import PAGES, TableFile, take, zstd_page_decoder

ROWS, DIM = 3000, 6
CODECS = ["none", "snappy", "gzip", "zstd"]
#: every build reads zstd pages page by page (libzstd, else pyarrow's zstd codec)
CODEC_PARAMS = CODECS


def test_this_build_decompresses_every_codec():
    """The page path covers snappy and zstd on every build: snappy is bulkwire's own, zstd
    is libzstd's or, where libzstd is not linked, pyarrow's zstd codec one page at a time."""
    assert _core.HAVE_SNAPPY and _core.PARQUET_CODECS[1][1]
    assert zstd_page_decoder() == ("libzstd" if _core.HAVE_ZSTD else "pyarrow's zstd codec")


def test_the_flags_say_what_the_codec_table_says():
    """One fact each: the build's zstd flag is the page reader's, snappy's flag is read from
    the codec table (and snappy, bulkwire's own, needs no library)."""
    assert _core.PARQUET_CODECS[6][:2] == ("ZSTD", bool(_core.HAVE_ZSTD))
    assert _core.PARQUET_CODECS[1] == ("SNAPPY", True, None) and _core.HAVE_SNAPPY


@pytest.mark.parametrize("compression", ["none", "snappy", "gzip", "zstd", "brotli", "lz4"])
def test_the_codec_tables_names_are_the_files_own(compression, tmp_path):
    """The number a footer holds, named by the table, is the name pyarrow reads for it (LZ4
    is written as LZ4_RAW, which pyarrow calls LZ4)."""
    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"x": pa.array(range(100), pa.int64())}), path,
                   compression=compression)
    data = path.read_bytes()
    number = int(_core.parquet_index_locations(data, 1, 1)[0, 0, 2])
    name = _core.PARQUET_CODECS[number][0]
    said = pq.ParquetFile(path).metadata.row_group(0).column(0).compression
    assert name == said or (said, name) == ("LZ4", "LZ4_RAW")


def _table(rows: int = ROWS, seed: int = 3, nullable: bool = True) -> pa.Table:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 5, rows)
    lists = pa.ListArray.from_arrays(
        pa.array(np.concatenate(([0], np.cumsum(lengths))).astype(np.int32)),
        pa.array(rng.random(int(lengths.sum()))))
    fields = [pa.field("id", pa.int64(), nullable), pa.field("i32", pa.int32(), nullable),
              pa.field("f64", pa.float64(), nullable),
              pa.field("emb", pa.list_(pa.field("element", pa.float32(), nullable), DIM),
                       nullable),
              pa.field("l", pa.list_(pa.field("element", pa.float64(), nullable)), nullable),
              pa.field("name", pa.string(), nullable)]
    arrays = [pa.array(np.arange(rows, dtype=np.int64) * 7),
              pa.array(rng.integers(-2**31, 2**31, rows, dtype=np.int32)),
              pa.array(rng.standard_normal(rows)),
              pa.FixedSizeListArray.from_arrays(pa.array(rng.random(rows * DIM, dtype=np.float32)),
                                                type=fields[3].type),
              lists.cast(fields[4].type),
              pa.array([f"n{i}" for i in range(rows)])]
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _write(path, table, **kw) -> str:
    options = dict(write_page_index=True, use_dictionary=False, data_page_size=2048,
                   row_group_size=1100, compression="snappy")
    options.update(kw)
    pq.write_table(table, path, **options)
    return str(path)


@pytest.fixture(scope="module")
def table():
    return _table()


@pytest.fixture(scope="module")
def page_files(tmp_path_factory, table):
    """One file per codec and page version, all with a page index and PLAIN pages."""
    d = tmp_path_factory.mktemp("pages")
    return {(codec, version): _write(d / f"{codec}-{version}.parquet", table,
                                     compression=codec, data_page_version=version)
            for codec in CODECS for version in ("1.0", "2.0")}


indices_strategy = st.lists(st.integers(0, ROWS - 1), max_size=80)


@pytest.mark.parametrize("codec", CODEC_PARAMS)
@pytest.mark.parametrize("version", ["1.0", "2.0"])
@given(indices=indices_strategy)
def test_pages_equal_table_take(page_files, table, codec, version, indices):
    path = page_files[codec, version]
    expected = table.take(pa.array(indices, type=pa.int64()))
    with TableFile(path) as f:
        assert f.paths == {"id": PAGES, "i32": PAGES, "f64": PAGES, "emb": PAGES, "l": PAGES,
                           "name": PAGES}
        got = f.take(indices)
        assert got.schema == table.schema
        assert got.equals(expected)
        if indices:
            assert f.stats["emb"]["row_groups"] == 0 and f.stats["emb"]["pages"] > 0


def _pages_holding(path, leaf, rows):
    """How many distinct pages of the leaf column hold the rows (by the offset index)."""
    f = pq.ParquetFile(path)
    offsets = np.cumsum([0] + [f.metadata.row_group(g).num_rows
                               for g in range(f.metadata.num_row_groups)])
    import mmap
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as m:
        locations = _core.parquet_index_locations(m, f.metadata.num_row_groups,
                                                  f.metadata.num_columns)
        touched = set()
        for row in set(rows):
            g = int(np.searchsorted(offsets, row, side="right") - 1)
            pages = _core.parquet_offset_index(m, int(locations[g, leaf, 0]),
                                               int(locations[g, leaf, 1]),
                                               int(offsets[g + 1] - offsets[g]),
                                               int(locations[g, leaf, 4]),
                                               int(locations[g, leaf, 5]))
            touched.add((g, int(np.searchsorted(pages[:, 2], row - offsets[g], side="right"))))
    return len(touched)


#: a compressed codec every build reads page by page, through libzstd or pyarrow's codec
PAGED_CODEC = "zstd"


def test_reads_only_the_pages_holding_the_rows(page_files, table, monkeypatch):
    path = page_files[PAGED_CODEC, "1.0"]
    rows = [5, 6, 1500, 2999, 1500, 5]
    names = ["id", "i32", "f64", "emb", "l"]
    with TableFile(path, columns=names) as f:
        monkeypatch.setattr(f._parquet, "read_row_group", None)  # no column may fall back
        got = f.take(rows)
        stats = {name: dict(s) for name, s in f.stats.items()}
    assert got.equals(table.select(names).take(rows))
    pages_in_group = len(_offset_index_span(path)[3])
    for leaf, name in enumerate(names):
        want = _pages_holding(path, leaf, rows)
        assert stats[name]["pages_read"] == want, name
        assert stats[name]["pages"] == 3  # three row groups touched, one chunk each
    assert _pages_holding(path, 3, rows) < pages_in_group  # not every page


def test_pages_only_without_pyarrow_reads(page_files, table, monkeypatch):
    """With only covered columns selected, no row group is read through pyarrow at all."""
    path = page_files["gzip", "2.0"]
    rows = [2999, 0, 1, 1, 1200]
    with TableFile(path, columns=["emb", "id", "l"]) as f:
        monkeypatch.setattr(f._parquet, "read_row_group", None)
        monkeypatch.setattr(f._parquet, "read_row_groups", None)
        got = f.take(rows)
    assert got.equals(table.select(["emb", "id", "l"]).take(rows))


@given(indices=indices_strategy)
def test_required_columns(tmp_path_factory, indices):
    """Non-nullable fields: no definition levels at all (max_def 0) for the scalars."""
    t = _table(nullable=False, seed=5)
    path = _write(tmp_path_factory.mktemp("req") / "r.parquet", t, compression="none",
                  data_page_size=1 << 20, row_group_size=ROWS)
    with TableFile(path) as f:
        assert f.paths["id"] == PAGES and f.paths["emb"] == PAGES
        assert f.take(indices).equals(t.take(pa.array(indices, type=pa.int64())))


def test_nulls_and_empty_lists_fall_back_per_chunk(tmp_path):
    """A scalar's nulls are read page by page; a list page with a null or an empty list is not
    covered: that chunk is read whole, and the answer is still Table.take's, nulls where they
    are."""
    rows = 2000
    ids = pa.array([None if i % 97 == 5 else i for i in range(rows)], pa.int64())
    lists = pa.array([[] if i == 1500 else [float(i)] * (i % 3 + 1) for i in range(rows)],
                     pa.list_(pa.float64()))
    emb = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(rows * 4, dtype=np.float32)), 4)
    emb = pa.array([None if i == 10 else v for i, v in enumerate(emb.to_pylist())], emb.type)
    t = pa.table({"id": ids, "l": lists, "emb": emb})
    path = _write(tmp_path / "n.parquet", t, row_group_size=1000, data_page_size=1024)
    rows_asked = [5, 6, 1500, 1999, 10, 11, 900]
    with TableFile(path) as f:
        assert f.take(rows_asked).equals(t.take(rows_asked))
        assert f.stats["id"]["row_groups"] == 0  # row 5 is null, read by pages
        assert f.stats["emb"]["row_groups"] > 0 and f.stats["l"]["row_groups"] > 0
        assert f.take([900]).equals(t.take([900]))  # a page with no null: by pages
        assert f.stats["emb"]["pages"] > 0 and f.stats["l"]["pages"] > 0


def test_fallback_paths_say_why(tmp_path, table):
    brotli = _write(tmp_path / "b.parquet", table, compression="brotli")
    rows = [3, 2999, 3, 1200]
    for path, why in [(brotli, "BROTLI not covered")]:
        with TableFile(path) as f:
            assert f.paths["emb"] == f"row groups ({why})", path
            assert f.take(rows).equals(table.take(rows))
            assert f.stats["emb"] == {"pages": 0, "row_groups": 3, "pages_read": 0, "walks": 0}
            assert f"'emb': 'row groups ({why})'" in repr(f)
    # without a page index the chunks' page headers are walked instead
    no_index = _write(tmp_path / "x.parquet", table, write_page_index=False)
    with TableFile(no_index) as f:
        assert f.paths["emb"] == "walked pages"
        assert f.take(rows).equals(table.take(rows))
        assert f.stats["emb"] == {"pages": 3, "row_groups": 0, "pages_read": 3, "walks": 3}


def test_reopen_mode_and_columns(page_files, table):
    path = page_files["snappy", "1.0"]
    assert take(path, [7, 3, 7], columns=["l", "id"]).equals(
        table.select(["l", "id"]).take([7, 3, 7]))
    assert take(path, []).num_rows == 0


# ---- crafted files -------------------------------------------------------------------------

def _offset_index_span(path, leaf=3, group=0):
    f = pq.ParquetFile(path)
    data = open(path, "rb").read()
    locations = _core.parquet_index_locations(data, f.metadata.num_row_groups,
                                              f.metadata.num_columns)
    offset, length, _, _, start, size, _ = (int(v) for v in locations[group, leaf])
    rows = f.metadata.row_group(group).num_rows
    return data, offset, length, _core.parquet_offset_index(data, offset, length, rows, start,
                                                            size)


def _patched(tmp_path, data, at, new: bytes, name="c.parquet"):
    out = bytearray(data)
    out[at:at + len(new)] = new
    p = tmp_path / name
    p.write_bytes(bytes(out))
    return str(p)


def test_crafted_page_header_is_malformed_naming_the_file(tmp_path, page_files):
    data, _, _, pages = _offset_index_span(page_files["none", "1.0"])
    page_at = int(pages[1, 0])
    path = _patched(tmp_path, data, page_at, b"\xff" * 8)  # garbage where a header starts
    first_row = int(pages[1, 2])
    with TableFile(path, columns=["emb"]) as f:
        with pytest.raises(MalformedFileError, match=r"c\.parquet.* column 'emb':") as info:
            f.take([first_row])
        assert info.value.path == path


def test_crafted_page_sizes_are_caught(tmp_path, page_files):
    """The page header claims more uncompressed bytes than the page holds: no read past it."""
    data, _, _, pages = _offset_index_span(page_files["none", "1.0"])
    page_at, size = int(pages[0, 0]), int(pages[0, 1])
    header = data[page_at:page_at + size]
    assert header[0] == 0x15  # field 1 (type), i32
    # field 2 (uncompressed size) as a varint: made larger by rewriting it to 0x7fffff
    field2 = 2  # after b'\x15\x00' (type 0): header byte 0x15 again for field 2
    assert header[field2] == 0x15
    path = _patched(tmp_path, data, page_at + field2, b"\x15\xfe\xff\xff\x07", "big.parquet")
    with TableFile(path, columns=["emb"]) as f:
        with pytest.raises(MalformedFileError, match="big.parquet"):
            f.take([0])


def test_crafted_offset_index_outside_the_file(tmp_path, page_files):
    data, offset, length, pages = _offset_index_span(page_files["none", "1.0"])
    with pytest.raises(ValueError, match="outside the file"):
        _core.parquet_offset_index(data, offset, length + 10 ** 9, 1100, 4, 100)
    bad = pages.copy()
    bad[1, 0] = len(data) - 2
    with pytest.raises(ValueError, match="bad location"):
        _core.parquet_take_chunk(data, bad, 1100, 0, 4, 1, 3, DIM, np.array([int(bad[1, 2])]))
    bad = pages.copy()
    bad[1, 2] = bad[0, 2]
    with pytest.raises(ValueError, match="bad location"):
        _core.parquet_take_chunk(data, bad, 1100, 0, 4, 1, 3, DIM, np.array([0]))
    with pytest.raises(ValueError, match="not in the row group"):
        _core.parquet_take_chunk(data, pages, 1100, 0, 4, 1, 3, DIM, np.array([5, 5]))
    with pytest.raises(ValueError, match="no Parquet footer"):
        _core.parquet_index_locations(b"PAR1" + b"\0" * 10, 1, 1)
    with pytest.raises(ValueError, match="footer length"):
        _core.parquet_index_locations(b"PAR1" + b"\0" * 4 + struct.pack("<I", 1000) + b"PAR1",
                                      1, 1)


@given(at=st.integers(0, 10 ** 6), value=st.integers(0, 255), rows=indices_strategy)
def test_mutated_metadata_never_crashes(tmp_path_factory, page_files, table, at, value, rows):
    """One byte of the offset index or of a page header changed: the lookup answers
    correctly, or raises MalformedFileError (or pyarrow's error, for a chunk it falls back
    to); a sanitizer build turns any read out of bounds into a crash."""
    data, offset, length, pages = _offset_index_span(page_files["snappy", "1.0"])
    spans = [(offset, length)] + [(int(p[0]), 24) for p in pages[:4]]
    start, size = spans[at % len(spans)]
    where = start + (at // len(spans)) % size
    path = _patched(tmp_path_factory.mktemp("mut"), data, where, bytes([value]))
    try:
        with TableFile(path, columns=["emb"]) as f:
            got = f.take(rows)
    except (MalformedFileError, OSError, pa.ArrowException):
        return
    assert got.num_rows == len(rows)


def test_a_page_without_values_that_pyarrow_writes_is_left_out_and_every_row_read(tmp_path):
    """pyarrow writes, now and then, a data page holding no values: here in a row group of
    148 lists of 7 floats, dictionary encoded, in pages of 256 bytes. In the offset index its
    first row is the next page's, so by the index's own count it holds no rows. take() and
    the load's batches read every row as pyarrow does; the file is not malformed."""
    from types import SimpleNamespace

    import parquet_craft as pc
    from bulkwire.load.datasets import _file_batches

    values = np.random.default_rng(0).standard_normal(148 * 7).astype("float32")
    table = pa.table({"id": pa.array(np.arange(148), pa.int64()),
                      "emb": pa.FixedSizeListArray.from_arrays(pa.array(values), 7)})
    path = str(tmp_path / "v.parquet")
    pq.write_table(table, path, row_group_size=148, data_page_size=256, compression="none",
                   use_dictionary=True, write_page_index=True)
    data = open(path, "rb").read()
    index_offset = int(pc.chunk_fields(data)[0, 1][0])
    first_rows = [page.get(3) for page in pc.read_struct(data, index_offset)[0].get(1)[1]]
    values_per_page = [pc.read_page(data, at).header.get(pc.DATA_PAGE_HEADER).get(pc.NUM_VALUES)
                       for at in pc.data_pages(data, 0, 1)]
    # the case itself (pyarrow 26 writes it so; another writer may not, and then this test
    # must craft the page instead)
    assert first_rows == [0, 147, 147] and values_per_page == [1029, 0, 7], \
        (first_rows, values_per_page)
    assert take(path, list(range(148))).equals(table)
    assert take(path, [146, 147]).equals(table.take([146, 147]))
    with TableFile(path) as f:
        assert f.paths["emb"] == PAGES
    plan = SimpleNamespace(read_columns=["id", "emb"], vector_column="emb")
    batches = list(_file_batches(path, plan, 50))
    assert pa.Table.from_batches(batches).equals(table)
