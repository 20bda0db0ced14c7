"""A load reads a Parquet file's vector column with bulkwire's page reader and the other
columns with pyarrow: the batches it makes are pyarrow's own, whatever the layout (row
groups, pages, codecs, dictionaries, page index or none, nulls, a unit's range of row
groups), and a file it does not cover is read by pyarrow alone."""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

import bulkwire  # noqa: E402
from bulkwire.load import datasets  # noqa: E402
from bulkwire.load.datasets import _file_batches, _PagedVectors  # noqa: E402
from bulkwire.parquet import TableFile  # noqa: E402


@dataclass
class Plan:
    read_columns: list = field(default_factory=lambda: ["id", "emb"])
    vector_column: str | None = "emb"


def pyarrow_batches(path: str, plan: Plan, batch_rows: int, first: int = 0,
                    stop: int | None = None) -> list:
    pf = pq.ParquetFile(path)
    groups = range(first, pf.metadata.num_row_groups if stop is None else stop)
    return list(pf.iter_batches(batch_size=batch_rows, row_groups=groups,
                                columns=plan.read_columns))


def vector_table(rows: int, dim: int, *, kind: str, dtype: str, null_every: int,
                 seed: int = 0) -> "pa.Table":
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(rows * dim).astype(dtype)
    if kind == "fixed_size_list":
        emb = pa.FixedSizeListArray.from_arrays(pa.array(values), dim)
    else:
        offsets = pa.array(np.arange(0, rows * dim + 1, dim, dtype=np.int32))
        emb = pa.ListArray.from_arrays(offsets, pa.array(values))
    if null_every:
        mask = pa.array([i % null_every == 1 for i in range(rows)])
        emb = pa.compute.if_else(mask, pa.scalar(None, emb.type), emb)
    return pa.table({"id": pa.array(np.arange(rows), pa.int64()), "emb": emb,
                     "name": pa.array([f"row {i}" for i in range(rows)])})


def count_page_reads(monkeypatch) -> list:
    """The rows the page reader was asked for, call by call."""
    calls: list = []
    real = TableFile._take_pages

    def counted(self, pa_, g, name, plan, local):
        calls.append(len(local))
        return real(self, pa_, g, name, plan, local)

    monkeypatch.setattr(TableFile, "_take_pages", counted)
    return calls


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.integers(0, 700), dim=st.integers(1, 24),
       kind=st.sampled_from(["fixed_size_list", "list"]),
       dtype=st.sampled_from(["float32", "float64"]),
       group=st.integers(1, 300), page=st.sampled_from([256, 4096, 1 << 20]),
       compression=st.sampled_from(["none", "snappy", "zstd", "gzip"]),
       dictionary=st.booleans(), page_index=st.booleans(),
       null_every=st.sampled_from([0, 0, 7]), batch_rows=st.integers(1, 400),
       columns=st.sampled_from([["id", "emb"], ["emb", "id", "name"], ["name", "emb"]]),
       data=st.data())
def test_the_batches_are_pyarrows_whatever_the_layout(tmp_path_factory, monkeypatch, rows,
                                                      dim, kind, dtype, group, page,
                                                      compression, dictionary, page_index,
                                                      null_every, batch_rows, columns, data):
    path = os.path.join(tmp_path_factory.mktemp("paged"), "v.parquet")
    pq.write_table(vector_table(rows, dim, kind=kind, dtype=dtype, null_every=null_every),
                   path, row_group_size=group, data_page_size=page, compression=compression,
                   use_dictionary=dictionary, write_page_index=page_index)
    groups = pq.ParquetFile(path).metadata.num_row_groups
    first = data.draw(st.integers(0, groups))
    stop = data.draw(st.one_of(st.none(), st.integers(first, groups)))
    plan = Plan(columns)
    calls = count_page_reads(monkeypatch)
    stats = paged_stats(monkeypatch)
    got = list(_file_batches(path, plan, batch_rows, first, stop))
    expected = pyarrow_batches(path, plan, batch_rows, first, stop)
    assert [b.num_rows for b in got] == [b.num_rows for b in expected]
    for mine, theirs in zip(got, expected):
        assert mine.schema.names == theirs.schema.names
        assert mine.schema.equals(theirs.schema)
        assert mine.equals(theirs)
        mine.validate(full=True)
    if sum(b.num_rows for b in expected):
        # the page reader read the vectors (a row group with nulls goes to pyarrow whole)
        assert calls
        if not null_every:  # every page of the groups read, each once
            with TableFile(path, ["emb"]) as f:
                pages = sum(len(f._chunk_pages(g, "emb", f._plans["emb"]))
                            for g in range(first, groups if stop is None else stop))
            assert stats[0]["pages_read"] == pages and stats[0]["row_groups"] == 0


def test_a_vector_column_read_alone_or_not_covered_is_read_by_pyarrow(tmp_path, monkeypatch):
    path = os.path.join(tmp_path, "v.parquet")
    pq.write_table(vector_table(50, 4, kind="fixed_size_list", dtype="float32", null_every=0),
                   path, row_group_size=20)
    calls = count_page_reads(monkeypatch)
    for plan in (Plan(["emb"]), Plan(["id", "name"], None), Plan(["id", "emb", "emb"]),
                 Plan(["id", "id", "emb"])):
        assert [b.to_pydict() for b in _file_batches(path, plan, 16)] == \
            [b.to_pydict() for b in pyarrow_batches(path, plan, 16)]
    assert not calls
    # a file that names a column twice
    twice = os.path.join(tmp_path, "twice.parquet")
    table = vector_table(30, 4, kind="fixed_size_list", dtype="float32", null_every=0)
    pq.write_table(pa.table([table.column("id"), table.column("emb"), table.column("name")],
                            names=["id", "emb", "id"]), twice)
    mine, theirs = list(_file_batches(twice, Plan(), 8)), pyarrow_batches(twice, Plan(), 8)
    assert len(mine) == len(theirs) == 4
    assert all(a.equals(b) and a.schema.names == b.schema.names for a, b in zip(mine, theirs))
    # a type the page reader does not cover: a list of int8
    other = os.path.join(tmp_path, "i8.parquet")
    pq.write_table(pa.table({"id": pa.array(range(30)),
                             "emb": pa.array([[i % 100, 1] for i in range(30)],
                                             pa.list_(pa.int8()))}), other)
    assert [b.to_pydict() for b in _file_batches(other, Plan(), 7)] == \
        [b.to_pydict() for b in pyarrow_batches(other, Plan(), 7)]
    assert not calls


def paged_stats(monkeypatch) -> list:
    """The page reader's counts of each load's vector column, taken as it is closed."""
    stats: list = []
    real = _PagedVectors.close

    def close(self):
        stats.append(dict(self.file.stats[self.name]))
        real(self)

    monkeypatch.setattr(datasets._PagedVectors, "close", close)
    return stats


def test_the_page_reader_reads_only_the_batchs_rows(tmp_path, monkeypatch):
    """Each batch asks the page reader for the rows it has not read yet, up to the end of
    the page holding the batch's last row, cut at row group ends; the file's open descriptor
    is the load's (the reader closes nothing of it)."""
    path = os.path.join(tmp_path, "v.parquet")
    pq.write_table(vector_table(100, 8, kind="fixed_size_list", dtype="float32", null_every=0),
                   path, row_group_size=30, data_page_size=512, write_page_index=True)
    with TableFile(path, ["emb"]) as f:
        first_rows = [f._chunk_pages(g, "emb", f._plans["emb"])[:, 2].tolist()
                      for g in range(4)]
    assert first_rows == [[0, 29]] * 3 + [[0, 9]]  # pyarrow's pages: 29 rows and 1
    calls = count_page_reads(monkeypatch)
    stats = paged_stats(monkeypatch)
    batches = list(_file_batches(path, Plan(), 25))
    assert [b.num_rows for b in batches] == [25, 25, 25, 25]
    # rows 0-24: 0-28 read | 25-28 kept, 29 read; 0-19 of the next group: 0-28 read | ...
    # | 15-28 kept, 29 read; the last group's 0-9: both its pages read at once
    assert calls == [29, 1, 29, 1, 29, 1, 10]
    assert stats[0]["pages_read"] == 8


@pytest.mark.parametrize("page_index", [False, True])
@pytest.mark.parametrize("batch_rows", [7, 100, 333, 5000])
def test_each_page_is_read_once_per_load_whatever_the_batches(tmp_path, monkeypatch,
                                                              page_index, batch_rows):
    """A page holding the rows of many batches is read and decompressed once, not once per
    batch: the pages read are the chunks' pages, counted by the page reader."""
    import parquet_craft as pc

    path = os.path.join(tmp_path, "v.parquet")
    table = vector_table(3000, 16, kind="fixed_size_list", dtype="float32", null_every=0)
    pq.write_table(table, path, row_group_size=1300, data_page_size=16 << 10,
                   compression="snappy", use_dictionary=False, write_page_index=page_index)
    data = open(path, "rb").read()
    pages = sum(len(pc.data_pages(data, g, 1)) for g in range(3))
    assert pages > 3 * 3  # pages of ~256 rows
    stats = paged_stats(monkeypatch)
    got = list(_file_batches(path, Plan(), batch_rows))
    expected = pyarrow_batches(path, Plan(), batch_rows)
    assert [b.num_rows for b in got] == [b.num_rows for b in expected]
    assert all(a.equals(b) for a, b in zip(got, expected))
    assert len(stats) == 1
    assert stats[0]["pages_read"] == pages
    assert stats[0]["row_groups"] == 0


def test_a_load_with_the_page_reader_writes_the_same_body(tmp_path):
    """End to end: the bulk insert body of a load is the same byte for byte as that of the
    same rows given as a table in memory (read by pyarrow alone)."""
    path = os.path.join(tmp_path, "v.parquet")
    table = vector_table(3000, 16, kind="fixed_size_list", dtype="float32", null_every=0)
    pq.write_table(table, path, row_group_size=700, data_page_size=4096)
    document = dict(id_column="id", collection="Vectors")
    options = dict(vector_column="emb", batch_rows=256)
    from_file = os.path.join(tmp_path, "file.json")
    from_memory = os.path.join(tmp_path, "memory.json")
    assert bulkwire.load_parquet(path, bulkwire.targets.request_file(from_file, **document),
                                 **options).rows == 3000
    assert bulkwire.load_parquet(pq.read_table(path),
                                 bulkwire.targets.request_file(from_memory, **document),
                                 **options).rows == 3000
    with open(from_file, "rb") as a, open(from_memory, "rb") as b:
        assert a.read() == b.read()


def test_a_null_vector_is_still_named_by_row(tmp_path):
    """A null vector is in a row group the page reader leaves to pyarrow: the load's error
    names the same row as ever."""
    path = os.path.join(tmp_path, "v.parquet")
    pq.write_table(vector_table(400, 4, kind="list", dtype="float32", null_every=0)
                   .set_column(1, "emb", pa.array([None if i == 333 else [1.0, 2.0, 3.0, 4.0]
                                                   for i in range(400)],
                                                  pa.list_(pa.float32()))),
                   path, row_group_size=100)
    with pytest.raises(bulkwire.RowError) as caught:
        bulkwire.load_parquet(path,
                              bulkwire.targets.request_file(os.path.join(tmp_path, "o.json"), id_column="id"),
                              vector_column="emb", batch_rows=64)
    assert caught.value.row == 333
    assert caught.value.column == "emb"


def test_a_corrupt_vector_page_is_an_error_naming_the_file(tmp_path):
    """Bytes of the vector column's pages overwritten (not a change while it is read: the
    file was like this when the load planned it): the load raises a ValueError naming the
    file, or reads exactly what pyarrow reads of it; it never crashes."""
    path = os.path.join(tmp_path, "v.parquet")
    pq.write_table(vector_table(600, 8, kind="fixed_size_list", dtype="float32", null_every=0),
                   path, row_group_size=200, data_page_size=1024, use_dictionary=False,
                   compression="none")
    meta = pq.ParquetFile(path).metadata
    chunk = meta.row_group(1).column(1)
    start = chunk.data_page_offset
    pristine = open(path, "rb").read()
    outcomes = set()
    for shift in range(0, 64, 3):
        data = bytearray(pristine)
        for i in range(start + shift, start + shift + 4):
            data[i] ^= 0xA5
        with open(path, "wb") as f:
            f.write(bytes(data))
        try:
            got = list(_file_batches(path, Plan(), 128))
        except ValueError as exc:  # MalformedFileError is one
            assert "v.parquet" in str(exc)
            outcomes.add("error")
            continue
        expected = pyarrow_batches(path, Plan(), 128)
        assert [b.to_pydict() for b in got] == [b.to_pydict() for b in expected]
        outcomes.add("same")
    assert "error" in outcomes


def test_the_paged_reader_is_closed_with_the_batches(tmp_path, monkeypatch):
    path = os.path.join(tmp_path, "v.parquet")
    pq.write_table(vector_table(100, 4, kind="fixed_size_list", dtype="float32", null_every=0),
                   path, row_group_size=30)
    closed = []
    real = _PagedVectors.close

    def close(self):
        closed.append(1)
        real(self)

    monkeypatch.setattr(datasets._PagedVectors, "close", close)
    batches = _file_batches(path, Plan(), 10)
    next(batches)
    batches.close()  # the load stopped after its first batch
    assert closed == [1]
    assert list(_file_batches(path, Plan(), 10))
    assert closed == [1, 1]
