"""Fuzz target: random access page by page (``bulkwire.TableFile.take``) on Parquet files whose
footer, offset index or page headers have been tampered with, against pyarrow reading the
same tampered file.

Input layout (plain Python over the bytes, no FuzzedDataProvider):

- byte 0: bits 0-1 the codec (none, snappy, gzip, zstd), bit 2 the data page version (1.0 or
  2.0) of a small page-indexed file made once (an int64 id, a fixed_size_list<float32>[3] and
  a list<float64>, 40 rows in row groups of 16, pages of a few rows), bit 6 the same file with
  dictionary encoded pages and an optional string column (a dictionary page per chunk, the
  ids from a dictionary of 5 values, the strings with nulls, the other columns falling back
  to PLAIN pages where their dictionary outgrows its limit), bit 3 the same file written
  without a page index (its chunks' page headers walked to find the pages: the spans are the
  same pages, the footer saying where each chunk starts and how long it is);
- byte 1: how many changes follow (at most 24: enough to rewrite a page header's fields
  with longer varints and the level runs after it), each 3 bytes: a 16-bit position into the
  file's metadata (the offset indexes, the first 32 bytes of every page and dictionary page,
  the footer, taken
  one after another) and the byte written there;
- the rest: the row indices asked for, one byte each, modulo the row count.

Oracle: ``take`` raises ``MalformedFileError`` (a bulkwire ``ValueError`` naming the file),
or pyarrow's own error for a file or chunk it reads (``OSError``, ``ArrowException``), or it
returns as many rows as asked. Where no offset index or footer byte changed, each value is
the untouched file's (the page read was not one that changed) or the one pyarrow reads from
a file where only the pages holding that row (its data page and its chunk's dictionary page)
carry their changes: a page reader reads no other page, while pyarrow reads the whole chunk
and may refuse it, or return an invalid array, for a change in a page the row is not in; or
the one pyarrow reads from the chunk with all its changes (the file as it is: what a chunk
falling back to its row group gives, and what a walk over every page header of a chunk
without a page index may find). Where only offset index bytes changed, every value is the
untouched file's: each page location must lie inside its own column chunk, after the page
before it, its header and body filling it exactly, so a location moved onto another page is
refused. A crash, a read out of bounds (under the sanitizer build) or an allocation past the
runner's memory limits is a defect wherever it happens.
"""
from __future__ import annotations

import io
import os
import sys
import tempfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bulkwire import _core
from bulkwire.errors import MalformedFileError
from bulkwire.parquet import _ChunkLocation
from bulkwire.parquet import TableFile

ROWS = 40
GROUP_ROWS = 16
# the codecs this build reads page by page: zstd only with libzstd linked (else gzip twice)
CODECS = ("none", "snappy", "gzip", "zstd" if _core.PARQUET_CODECS[6][1] else "gzip")
MAX_CHANGES = 24
_files: dict = {}
_dir = tempfile.mkdtemp(prefix="fuzz-parquet-pages-")


#: (max_rep, list_size) of each leaf: id, emb, l, s
_LEAVES = ((0, 0), (1, 3), (1, 0), (0, 0))


def _base(codec: str, version: str, dictionary: bool,
          indexed: bool = True) -> tuple[bytes, list, list, list]:
    """The file's bytes, its metadata spans (offset, length), what each span is ("index",
    "footer" or "page") and, for a page, the rows it holds ((row group, column, first row, end row), a
    dictionary page holding every row of its chunk), made once per variant."""
    key = (codec, version, dictionary, indexed)
    if key not in _files:
        rng = np.random.default_rng(1)
        ids = np.arange(ROWS, dtype=np.int64) % 5 if dictionary else np.arange(ROWS)
        columns = {
            "id": pa.array(ids.astype(np.int64)),
            "emb": pa.FixedSizeListArray.from_arrays(
                pa.array(rng.random(ROWS * 3, dtype=np.float32)), 3),
            "l": pa.array([[float(i)] * (i % 3 + 1) for i in range(ROWS)],
                          pa.list_(pa.float64())),
        }
        if dictionary:
            columns["s"] = pa.array([None if i % 7 == 2 else "s%d" % (i * 3 % 11) * (i % 3)
                                     for i in range(ROWS)])
        table = pa.table(columns)
        buf = io.BytesIO()
        pq.write_table(table, buf, write_page_index=indexed, use_dictionary=dictionary,
                       compression=codec, data_page_version=version, row_group_size=GROUP_ROWS,
                       data_page_size=48, dictionary_pagesize_limit=64, store_schema=False)
        data = buf.getvalue()
        meta = pq.ParquetFile(io.BytesIO(data)).metadata
        locations = _core.parquet_index_locations(data, meta.num_row_groups, meta.num_columns)
        spans, kinds, holds = [], [], []
        for g in range(meta.num_row_groups):
            group_rows = meta.row_group(g).num_rows
            for c in range(meta.num_columns):
                chunk = _ChunkLocation._make(locations[g, c].tolist())
                offset, length, number = chunk.index_offset, chunk.index_length, chunk.codec
                start, chunk_size, nulls = chunk.start, chunk.size, chunk.null_count
                if indexed:
                    spans.append((offset, length))
                    kinds.append("index")
                    holds.append(None)
                if chunk.dictionary >= 0:  # the dictionary page's header and first values
                    spans.append((chunk.dictionary, 32))
                    kinds.append("page")
                    holds.append((g, c, 0, group_rows))
                if indexed:
                    pages = _core.parquet_offset_index(data, offset, length, group_rows, start,
                                                       chunk_size)
                else:
                    pages = _core.parquet_walk_pages(data, start, chunk_size, group_rows, number,
                                                     *_LEAVES[c], nulls)
                ends = [int(p[2]) for p in pages[1:]] + [group_rows]
                for p, end in zip(pages, ends):
                    spans.append((int(p[0]), min(32, int(p[1]))))
                    kinds.append("page")
                    holds.append((g, c, int(p[2]), end))
        footer = int.from_bytes(data[-8:-4], "little")
        spans.append((len(data) - 8 - footer, footer))
        kinds.append("footer")  # it says where the offset indexes and chunks are
        holds.append(None)
        _files[key] = (data, spans, kinds, holds)
    return _files[key]


def _read_as_pyarrow(data: bytes, group: int, name: str):
    """pyarrow's reading of one column chunk, None when it refuses it or returns an array that
    is not valid (pyarrow can return one from a tampered file)."""
    try:
        chunk = pq.ParquetFile(io.BytesIO(data)).read_row_group(group, columns=[name],
                                                                use_threads=False).column(0)
        chunk.validate(full=True)
        return chunk
    except (OSError, pa.ArrowException):
        return None


def test_one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    codec, version = CODECS[data[0] & 3], ("1.0", "2.0")[(data[0] >> 2) & 1]
    indexed = not data[0] & 0x08
    base, spans, kinds, holds = _base(codec, version, bool(data[0] & 0x40), indexed)
    size = sum(length for _, length in spans)
    changes = min(data[1], MAX_CHANGES, (len(data) - 2) // 3)
    tampered = bytearray(base)
    changed = []  # (file offset, new byte, the span's rows)
    changed_kinds = set()
    for i in range(changes):
        at = int.from_bytes(data[2 + 3 * i:4 + 3 * i], "little") % size
        for number, (offset, length) in enumerate(spans):
            if at < length:
                tampered[offset + at] = data[4 + 3 * i]
                changed.append((offset + at, data[4 + 3 * i], holds[number]))
                changed_kinds.add(kinds[number])
                break
            at -= length
    rows = [b % ROWS for b in data[2 + 3 * changes:]]
    path = os.path.join(_dir, "t.parquet")
    with open(path, "wb") as f:
        f.write(tampered)
    try:
        with TableFile(path) as tf:
            got = tf.take(rows)
    except (MalformedFileError, OSError, pa.ArrowException):
        return
    except IndexError:
        if "footer" in changed_kinds:  # a footer that says fewer rows: the rows asked are
            return                     # past its end
        raise
    assert got.num_rows == len(rows), (got.num_rows, len(rows))
    original = pq.read_table(io.BytesIO(base), use_threads=False).take(
        pa.array(rows, type=pa.int64()))
    if changed_kinds == {"index"}:  # pages as they were, read where the index says
        assert got.equals(original), "an offset index that changed gave other values"
        return
    if "index" in changed_kinds or "footer" in changed_kinds:
        return  # a footer or an index that changed along with pages: no oracle beyond this
    theirs_by_pages: dict = {}
    for i, row in enumerate(rows):
        g, local = divmod(row, GROUP_ROWS)
        for c, name in enumerate(got.column_names):
            mine = repr(got.column(name)[i].as_py())  # repr: a NaN equals itself
            # the page read was untouched (the original row) ...
            if mine == repr(original.column(name)[i].as_py()):
                continue
            # ... or it reads as pyarrow reads the file where only the pages that hold this
            # row (its data page, the chunk's dictionary page) are changed: the page reader
            # reads no other page, so changes elsewhere in the chunk cannot reach this row
            own = tuple((at, new) for at, new, held in changed
                        if held is not None and held[:2] == (g, c) and held[2] <= local < held[3])
            # ... or as pyarrow reads the chunk with all its changes: the reading of the file
            # as it is, which is what a chunk falling back to its row group gives, and what a
            # walk over every page header of the chunk (no page index) may read
            candidates = [own, tuple((at, new) for at, new, held in changed
                                     if held is not None and held[:2] == (g, c))]
            agrees = False
            for changes_read in candidates:
                if (g, name, changes_read) not in theirs_by_pages:
                    only = bytearray(base)
                    for at, new in changes_read:
                        only[at] = new
                    theirs_by_pages[g, name, changes_read] = _read_as_pyarrow(bytes(only), g,
                                                                              name)
                theirs = theirs_by_pages[g, name, changes_read]
                agrees |= (theirs is not None and local < len(theirs)
                           and mine == repr(theirs[local].as_py()))
            assert agrees, f"row {row} column {name!r} differs from pyarrow's"


if __name__ == "__main__":
    import atheris

    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
