"""Random access page by page in Parquet files without a page index: each column chunk's page
headers are walked once to find its pages. TableFile/take against pyarrow.Table.take for
every codec, page version, dictionary on and off, required and optional columns, several row
groups and pyarrow's default writer; the walked page table against the offset index pyarrow
writes for the same file; crafted page headers give MalformedFileError naming the file."""
from __future__ import annotations

import io
import mmap
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyarrow as pa
import pyarrow.parquet as pq

import parquet_craft as pc
from bulkwire import _core
from bulkwire.errors import MalformedFileError
from bulkwire.load.datasets import _file_batches
from bulkwire.parquet import PAGES, WALKED_PAGES, TableFile, take

ROWS, DIM = 2500, 4
CODECS = ["none", "snappy", "gzip", "zstd"]
#: every build reads zstd pages page by page (libzstd, else pyarrow's zstd codec)
CODEC_PARAMS = CODECS
CODEC_NUMBERS = {"none": 0, "snappy": 1, "gzip": 2, "zstd": 6}


def _table(nullable: bool, seed: int = 17) -> pa.Table:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 5, ROWS)  # no empty list: those pages are not covered
    lists = pa.ListArray.from_arrays(
        pa.array(np.concatenate(([0], np.cumsum(lengths))).astype(np.int32)),
        pa.array(rng.integers(0, 9, int(lengths.sum())).astype(np.float64)))
    fields = [
        pa.field("id", pa.int64(), nullable),
        pa.field("cat", pa.int32(), nullable),  # few values: dictionary pages throughout
        pa.field("f64", pa.float64(), nullable),
        pa.field("emb", pa.list_(pa.field("element", pa.float32(), nullable), DIM), nullable),
        pa.field("l", pa.list_(pa.field("element", pa.float64(), nullable)), nullable),
        pa.field("name", pa.string(), nullable),
    ]
    null = ((rng.random(ROWS) < 0.1) | ((np.arange(ROWS) // 40) % 7 == 3)) if nullable else None
    arrays = [
        pa.array(np.arange(ROWS, dtype=np.int64) * 11),
        pa.array(rng.integers(0, 6, ROWS).astype(np.int32), mask=null),
        pa.array(rng.standard_normal(ROWS), mask=None if null is None else np.roll(null, 5)),
        pa.FixedSizeListArray.from_arrays(pa.array(rng.random(ROWS * DIM, dtype=np.float32)),
                                          type=fields[3].type),
        lists.cast(fields[4].type),
        pa.array([f"n{i % 300}-{'x' * (i % 5)}" for i in range(ROWS)],
                 mask=None if null is None else np.roll(null, 9)),
    ]
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


#: how the files are written: no page index, small pages and dictionaries
WRITE_OPTIONS = dict(write_page_index=False, use_dictionary=True, data_page_size=1024,
                     row_group_size=1000, dictionary_pagesize_limit=2048, write_batch_size=128)
tables, files = pc.variant_fixtures("walk", _table, CODECS, WRITE_OPTIONS)


def _write(path, table, **kw) -> str:
    return pc.written(path, table, WRITE_OPTIONS, **kw)


indices_strategy = st.lists(st.integers(0, ROWS - 1), max_size=60)


@pc.every_variant(CODEC_PARAMS)
@given(indices=indices_strategy)
def test_walked_pages_equal_table_take(files, tables, codec, version, nullable, dictionary,
                                       indices):
    stats = pc.taken_by_pages(files[codec, version, nullable, dictionary], tables[nullable],
                              indices, WALKED_PAGES)
    groups = len(set(np.asarray(indices, dtype=np.int64) // 1000))
    assert all(s["walks"] == groups for s in stats.values())


def _chunk_tables(path: str, walk: bool, plans: dict) -> dict:
    """Every chunk's page table, by (row group, leaf): walked, or from the offset index."""
    meta = pq.ParquetFile(path).metadata
    out = {}
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as m:
        locations = _core.parquet_index_locations(m, meta.num_row_groups, meta.num_columns)
        for g in range(meta.num_row_groups):
            rows = meta.row_group(g).num_rows
            for leaf, (max_rep, list_size) in plans.items():
                offset, length, codec, _, start, size, nulls = (int(v) for v in locations[g, leaf])
                if walk:  # the page index, when there is one, is not looked at
                    out[g, leaf] = _core.parquet_walk_pages(m, start, size, rows, codec, max_rep,
                                                            list_size, nulls)
                else:
                    out[g, leaf] = _core.parquet_offset_index(m, offset, length, rows, start,
                                                              size)
    return out


#: (max_rep, list_size) of each leaf of _table's columns
LEAF_PLANS = {0: (0, 0), 1: (0, 0), 2: (0, 0), 3: (1, DIM), 4: (1, 0), 5: (0, 0)}


@pytest.mark.parametrize("codec", CODEC_PARAMS)
@pytest.mark.parametrize("version", ["1.0", "2.0"])
@pytest.mark.parametrize("statistics", [True, False], ids=["statistics", "no-statistics"])
def test_walked_table_is_the_offset_index(tmp_path, tables, codec, version, statistics):
    """The same table written twice, with and without a page index: every chunk's walk finds
    the pages pyarrow's offset index lists, first rows included. Without statistics the null
    count is unknown, so the fixed_size_list's rows are counted from its repetition levels."""
    table = tables[True]
    options = dict(compression=codec, data_page_version=version, write_statistics=statistics)
    plain = _write(tmp_path / "plain.parquet", table, **options)
    indexed = _write(tmp_path / "indexed.parquet", table, write_page_index=True, **options)
    index = _chunk_tables(indexed, False, LEAF_PLANS)
    walked_indexed = _chunk_tables(indexed, True, LEAF_PLANS)
    walked = _chunk_tables(plain, True, LEAF_PLANS)
    assert walked.keys() == index.keys() == walked_indexed.keys()
    for key in walked:
        # the file with the index, walked: the very table its index holds
        np.testing.assert_array_equal(walked_indexed[key], index[key], err_msg=str(key))
        # the file without: its headers hold page statistics, so only the offsets move
        np.testing.assert_array_equal(walked[key][:, 2], index[key][:, 2], err_msg=str(key))
        ends = walked[key][:, 0] + walked[key][:, 1]
        np.testing.assert_array_equal(ends[:-1], walked[key][1:, 0])


def test_fixed_size_list_with_nulls_is_walked_by_its_levels(tmp_path):
    """A null fixed_size_list row has one level, not list_size: the statistics say the chunk
    has nulls, so its rows are counted from the repetition levels; the page with the null is
    not covered and is read by its row group, the others page by page."""
    rows = 3000
    emb = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(rows * 3, dtype=np.float32)), 3)
    emb = pa.array([None if i in (10, 2500) else v for i, v in enumerate(emb.to_pylist())],
                   emb.type)
    t = pa.table({"emb": emb, "id": pa.array(np.arange(rows))})
    for version in ("1.0", "2.0"):
        plain = _write(tmp_path / f"p{version}.parquet", t, data_page_version=version,
                       use_dictionary=False)
        indexed = _write(tmp_path / f"i{version}.parquet", t, data_page_version=version,
                         use_dictionary=False, write_page_index=True)
        assert pq.ParquetFile(plain).metadata.row_group(0).column(0).statistics.null_count > 0
        plans = {0: (1, 3), 1: (0, 0)}
        walked, index = _chunk_tables(indexed, True, plans), _chunk_tables(indexed, False, plans)
        for key in walked:
            np.testing.assert_array_equal(walked[key], index[key])
        walked = _chunk_tables(plain, True, plans)
        for key in walked:
            np.testing.assert_array_equal(walked[key][:, 2], index[key][:, 2])
        asked = [10, 11, 2999, 1500, 2500, 10]
        with TableFile(plain) as f:
            assert f.paths["emb"] == WALKED_PAGES
            assert f.take(asked).equals(t.take(asked))
            assert f.stats["emb"]["row_groups"] > 0  # the null's page
            assert f.take([1500]).equals(t.take([1500]))
            assert f.stats["emb"]["pages"] > 0


def test_walk_once_per_chunk(files, tables):
    """The walked table is kept like the offset index: a second lookup walks nothing."""
    path = files["snappy", "1.0", True, True]
    with TableFile(path) as f:
        f.take([1, 2, 1500])
        assert {s["walks"] for s in f.stats.values()} == {2}
        got = f.take([3, 1501, 2400])
        assert {s["walks"] for s in f.stats.values()} == {3}  # only group 2 is new
        assert got.equals(tables[True].take([3, 1501, 2400]))


def test_reads_only_the_pages_holding_the_rows(files, tables, monkeypatch):
    path = files["zstd", "2.0", False, False]
    asked = [5, 6, 1500, 2499, 5]
    with TableFile(path) as f:
        monkeypatch.setattr(f._parquet, "read_row_group", None)  # nothing may fall back
        assert f.take(asked).equals(tables[False].take(asked))
        walked = _chunk_tables(path, True, {3: (1, DIM)})
        pages_in_groups = sum(len(walked[g, 3]) for g in (0, 1, 2))
        assert 3 <= f.stats["emb"]["pages_read"] <= 4 < pages_in_groups


def test_pyarrow_defaults(tmp_path):
    """pyarrow's default writer: no page index, dictionary on, snappy, statistics, one row
    group here, vectors that outgrow the dictionary and go on PLAIN."""
    rng = np.random.default_rng(5)
    rows, dim = 20000, 16
    t = pa.table({"id": pa.array(np.arange(rows, dtype=np.int64)),
                  "emb": pa.FixedSizeListArray.from_arrays(
                      pa.array(rng.random(rows * dim, dtype=np.float32)), dim)})
    path = str(tmp_path / "default.parquet")
    pq.write_table(t, path)
    asked = rng.integers(0, rows, 200).tolist() + [0, rows - 1]
    with TableFile(path) as f:
        assert f.paths == {"id": WALKED_PAGES, "emb": WALKED_PAGES}
        assert f.take(asked).equals(t.take(asked))
        assert f.stats["emb"]["row_groups"] == 0 and f.stats["emb"]["walks"] == 1
    assert take(path, [7, 3, 7]).equals(t.take([7, 3, 7]))


def test_page_index_still_preferred(tmp_path, tables):
    path = _write(tmp_path / "i.parquet", tables[False], write_page_index=True)
    with TableFile(path) as f:
        assert set(f.paths.values()) == {PAGES}
        assert f.take([3, 2000]).equals(tables[False].take([3, 2000]))
        assert all(s["walks"] == 0 for s in f.stats.values())


# ---- crafted files -------------------------------------------------------------------------

def _zigzag_of_length(value: int, length: int) -> bytes:
    """A zigzag ULEB128 of exactly `length` bytes (padded with continuation bytes)."""
    out = pc.varint(pc.zigzag(value), length)
    assert len(out) == length, "value too large for the length"
    return out


def _header_fields(data: bytes, at: int) -> dict:
    """Where the page header at `at` keeps its compressed size and its data page header's
    num_values: field -> (offset, length) of the varint. Headers as pyarrow writes them:
    type, uncompressed size, compressed size, optional crc, then the data page header."""
    fields = {}
    pos = at
    for name in ("type", "uncompressed", "compressed"):
        assert data[pos] == 0x15
        _, end = pc.read_varint(data, pos + 1)
        fields[name] = (pos + 1, end - pos - 1)
        pos = end
    if data[pos] == 0x15:  # crc
        _, pos = pc.read_varint(data, pos + 1)
    assert data[pos] & 0x0F == 0x0C  # a struct: the data page header
    assert data[pos + 1] == 0x15  # its field 1, num_values
    _, end = pc.read_varint(data, pos + 2)
    fields["num_values"] = (pos + 2, end - pos - 2)
    return fields


def _crafted(tmp_path, table, leaf, page, field, new_value, **kw):
    """The table written without a page index, then the varint `field` of the header of page
    `page` of row group 0's chunk `leaf` rewritten (same length); the path and that page's
    first row."""
    source = _write(tmp_path / "source.parquet", table, use_dictionary=False, **kw)
    data = bytearray(open(source, "rb").read())
    pages = _chunk_tables(source, True, {leaf: LEAF_PLANS[leaf]})[0, leaf]
    at = int(pages[page, 0])
    where, length = _header_fields(data, at)[field]
    value = new_value(int(pages[page, 1]))
    if value is None:  # the largest the varint's bytes hold
        value = (2 ** (7 * length) - 1) >> 1
    data[where:where + length] = _zigzag_of_length(value, length)
    path = tmp_path / "crafted.parquet"
    path.write_bytes(bytes(data))
    return str(path), int(pages[page, 2])


@pytest.mark.parametrize("field, new_value, message", [
    ("compressed", lambda size: size + 4000, "runs past its column chunk's end"),
    ("compressed", lambda size: None, "runs past its column chunk's end"),  # the largest
    ("compressed", lambda size: size - 10, r"page at \d+: page header"),  # onto garbage
])
def test_page_size_walks_out_of_the_chunk(tmp_path, tables, field, new_value, message):
    """The last page of a chunk claims more bytes than the chunk has, or the one before it
    fewer, so the next header is read from inside a page: MalformedFileError naming the
    file and the column, never a read past the chunk."""
    table = tables[False]
    pages = _chunk_tables(_write(tmp_path / "x.parquet", table, use_dictionary=False), True,
                          {3: LEAF_PLANS[3]})[0, 3]
    page = len(pages) - 1 if "past" in message else len(pages) - 2
    path, first_row = _crafted(tmp_path, table, 3, page, field, new_value)
    with TableFile(path, columns=["emb"]) as f:
        with pytest.raises(MalformedFileError, match=rf"crafted\.parquet.* column 'emb':.*"
                                                     rf"{message}") as info:
            f.take([first_row])
        assert info.value.path == path


def test_garbage_header(tmp_path, tables):
    source = _write(tmp_path / "source.parquet", tables[False], use_dictionary=False)
    data = bytearray(open(source, "rb").read())
    pages = _chunk_tables(source, True, {0: (0, 0)})[0, 0]
    at = int(pages[1, 0])
    data[at:at + 8] = b"\xff" * 8
    path = tmp_path / "garbage.parquet"
    path.write_bytes(bytes(data))
    with TableFile(path, columns=["id"]) as f:
        with pytest.raises(MalformedFileError, match=r"garbage\.parquet.* column 'id':.*"
                                                     r"page at \d+"):
            f.take([0])  # the walk reads every header, whichever rows are asked


@pytest.mark.parametrize("leaf, name, message", [
    (0, "id", "pages hold 999 rows, its row group 1000"),
    (3, "emb", r"row \d+ of a fixed_size_list of 4 holds 3 values"),
    (4, "l", "page starts inside a row|levels end"),
])
def test_page_rows_that_do_not_add_up(tmp_path, tables, leaf, name, message):
    """One value fewer in a page header: a scalar chunk's rows no longer add up to the row
    group's, a fixed_size_list page's values are no longer whole rows (its levels are
    counted, a row of v1 pages may go on into the next page, and the page's last row is one
    value short), a list page's levels are read short. MalformedFileError naming the file,
    the column and what is wrong."""
    table = tables[False]
    source = _write(tmp_path / "source.parquet", table, use_dictionary=False)
    data = bytearray(open(source, "rb").read())
    pages = _chunk_tables(source, True, {leaf: LEAF_PLANS[leaf]})[0, leaf]
    at = int(pages[0, 0])
    where, length = _header_fields(data, at)["num_values"]
    raw, _ = pc.read_varint(data, where)
    num_values = (raw >> 1) ^ -(raw & 1)
    if leaf == 4:  # a list page one level longer: its levels run out, or start mid-row
        new = num_values + 1
    else:
        new = num_values - 1
    data[where:where + length] = _zigzag_of_length(new, length)
    path = tmp_path / "rows.parquet"
    path.write_bytes(bytes(data))
    with TableFile(path, columns=[name]) as f:
        with pytest.raises(MalformedFileError, match=rf"rows\.parquet.* column '{name}':.*"
                                                     rf"({message})"):
            f.take([1])


def test_walk_refuses_a_chunk_outside_the_file():
    data = open(__file__, "rb").read()[:4000]
    for start, size in [(-1, 10), (10, -1), (3990, 11), (4001, 0), (0, 2 ** 62)]:
        with pytest.raises(ValueError, match="outside the file"):
            _core.parquet_walk_pages(data, start, size, 1, 0, 0, 0, 0)
    with pytest.raises(ValueError, match="hold 0 rows, its row group 5"):
        _core.parquet_walk_pages(data, 100, 0, 5, 0, 0, 0, 0)
    # a header that would be read past the chunk's end (and the buffer's): refused
    header = bytes([0x15, 0x00, 0x15, 0x10, 0x15, 0x10, 0x2C, 0x15, 0x04, 0x00])
    with pytest.raises(ValueError, match="page at 0"):
        _core.parquet_walk_pages(header, 0, len(header), 2, 0, 0, 0, 0)


def test_walk_in_memory_file_bytes():
    """The binding takes any buffer: bytes of a file written to memory."""
    t = pa.table({"x": pa.array(np.arange(100, dtype=np.int64))})
    buf = io.BytesIO()
    pq.write_table(t, buf, data_page_size=64, use_dictionary=False, compression="none",
                   write_batch_size=10)
    data = buf.getvalue()
    locations = _core.parquet_index_locations(data, 1, 1)
    _, _, codec, _, start, size, nulls = (int(v) for v in locations[0, 0])
    pages = _core.parquet_walk_pages(data, start, size, 100, codec, 0, 0, nulls)
    assert pages[0, 0] == start and pages[0, 2] == 0 and len(pages) > 1
    assert int(pages[-1, 0] + pages[-1, 1]) == start + size
    values, lengths, read = _core.parquet_take_chunk(data, pages, 100, codec, 8, 0, 1, 0,
                                                     np.array([0, 99], dtype=np.int64))
    assert values.view(np.int64).tolist() == [0, 99] and read == 2


# ---- rows that go on from one v1 data page into the next -----------------------------------

def _vectors_table(rows: int, dim: int, kind: str, dtype: str) -> pa.Table:
    values = pa.array(np.arange(rows * dim).astype(dtype) / 7)
    if kind == "fixed_size_list":
        v = pa.FixedSizeListArray.from_arrays(values, dim)
    else:
        v = pa.ListArray.from_arrays(
            pa.array(np.arange(0, rows * dim + 1, dim, dtype=np.int32)), values)
    return pa.table({"id": pa.array(np.arange(rows), pa.int64()), "v": v})


def _rows_across_pages(tmp_path, table: pa.Table, cuts: list, codec: int = 0) -> str:
    """The table written with its vector column's one v1 page cut at the level positions
    ``cuts`` (inside rows: pyarrow never writes such pages itself, other writers do)."""
    sink = io.BytesIO()
    pq.write_table(table, sink, use_dictionary=False, compression="none",
                   data_page_size=1 << 30, write_page_index=False)
    path = str(tmp_path / "across.parquet")
    with open(path, "wb") as f:
        f.write(pc.split_list_pages(sink.getvalue(), 1, cuts, codec))
    return path


@dataclass
class _Plan:
    read_columns: list = field(default_factory=lambda: ["id", "v"])
    vector_column: str | None = "v"


@pytest.mark.parametrize("kind", ["list", "fixed_size_list"])
def test_a_row_that_starts_in_one_v1_page_and_ends_in_the_next(tmp_path, kind):
    """Row 10 of lists of 3 starts in one v1 data page and ends in the next (31 levels in the
    first page): legal without a page index, and pyarrow reads it. The load, take and the
    command line give its rows, the chunk read by pyarrow."""
    from bulkwire import cli, load_parquet, targets

    table = _vectors_table(20, 3, kind, "float32")
    path = _rows_across_pages(tmp_path, table, [31])
    assert len(pc.data_pages(open(path, "rb").read(), 0, 1)) == 2
    assert pq.read_table(path).equals(table)
    with TableFile(path) as f:
        assert f.take([10, 11, 0, 19]).equals(table.take([10, 11, 0, 19]))
        assert f.stats["v"]["row_groups"] == 1 and f.stats["v"]["pages"] == 0
    assert take(path, range(20)).equals(table)
    batches = list(_file_batches(path, _Plan(), 7))
    assert pa.Table.from_batches(batches).equals(table)
    body = str(tmp_path / "body.json")
    assert load_parquet(
        path, targets.request_file(body), vector_column="v", batch_rows=7).rows == 20
    memory = str(tmp_path / "memory.json")
    load_parquet(table, targets.request_file(memory), vector_column="v", batch_rows=7)
    assert open(body, "rb").read() == open(memory, "rb").read()
    cli_body = str(tmp_path / "cli.json")
    assert cli.main(["load", path, "--out", cli_body, "--vector-column", "v", "-q"]) == 0
    assert open(cli_body, "rb").read() == open(memory, "rb").read()


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.integers(2, 40), dim=st.integers(1, 9),
       kind=st.sampled_from(["list", "fixed_size_list"]),
       dtype=st.sampled_from(["float32", "float64"]),
       codec=st.sampled_from(sorted(pc.CODECS)), batch_rows=st.integers(1, 50), data=st.data())
def test_rows_cut_anywhere_across_v1_pages_read_as_pyarrow_reads_them(
        tmp_path, rows, dim, kind, dtype, codec, batch_rows, data):
    """The levels of a column of lists cut into v1 pages at random places, inside rows or at
    their ends (a row may run over several pages): take and the load's batches are
    pyarrow's, value for value."""
    table = _vectors_table(rows, dim, kind, dtype)
    levels = rows * dim
    cuts = sorted(data.draw(st.sets(st.integers(1, levels - 1), max_size=min(6, levels - 1))))
    path = _rows_across_pages(tmp_path, table, cuts, codec)
    expected = pq.read_table(path)
    assert expected.equals(table)
    order = data.draw(st.lists(st.integers(0, rows - 1), min_size=1, max_size=12))
    assert take(path, order).equals(expected.take(order))
    mine = list(_file_batches(path, _Plan(), batch_rows))
    theirs = list(pq.ParquetFile(path).iter_batches(batch_size=batch_rows))
    assert [b.num_rows for b in mine] == [b.num_rows for b in theirs]
    for a, b in zip(mine, theirs):
        assert a.equals(b)
