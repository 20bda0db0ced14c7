"""Crafting Parquet files for the hostile tests: a Thrift compact codec for the metadata
(page headers, the footer, offset indexes), and edits that keep every other byte of a file
pyarrow wrote where it was.

A Thrift struct is read into a ``Struct`` (its fields in file order, each an id, a compact
type code and a value) and written back from one, so a test changes the fields it means to
and leaves the rest as the writer made them. Integers are written as ULEB128 zigzag varints,
optionally longer than they need to be (padded with continuation bytes, which every compact
reader accepts), so that a page header can be made to fill exactly the bytes it had.
"""
from __future__ import annotations

import struct as _struct
from dataclasses import dataclass, field
from typing import Any

from bulkwire import _core

STOP, TRUE, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(13)

# PageHeader fields, and those of the structs it holds
PAGE_TYPE, UNCOMPRESSED_SIZE, COMPRESSED_SIZE, CRC = 1, 2, 3, 4
DATA_PAGE_HEADER, DICTIONARY_PAGE_HEADER, DATA_PAGE_HEADER_V2 = 5, 7, 8
NUM_VALUES, ENCODING = 1, 2          # DataPageHeader, DictionaryPageHeader
V1_STATISTICS = 5                    # DataPageHeader
V2_NUM_ROWS, V2_DEF_BYTES, V2_REP_BYTES, V2_STATISTICS = 3, 5, 6, 8


def varint(value: int, length: int = 0) -> bytes:
    """``value`` (non-negative) as ULEB128, padded to ``length`` bytes when that is longer."""
    out = []
    while True:
        b = value & 0x7F
        value >>= 7
        out.append(b)
        if not value:
            break
    while len(out) < length:
        out.append(0)
    return bytes(b | 0x80 for b in out[:-1]) + bytes(out[-1:])


def zigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def read_varint(data: bytes, at: int) -> tuple[int, int]:
    """The ULEB128 value at ``at`` and where it ends."""
    value = shift = 0
    while True:
        b = data[at]
        value |= (b & 0x7F) << shift
        at += 1
        shift += 7
        if not b & 0x80:
            return value, at


def unzigzag(raw: int) -> int:
    return (raw >> 1) ^ -(raw & 1)


@dataclass
class Struct:
    """A Thrift struct: ``fields`` as [id, type, value], in the order they are written."""

    fields: list = field(default_factory=list)

    def get(self, fid: int, default: Any = None) -> Any:
        for f in self.fields:
            if f[0] == fid:
                return f[2]
        return default

    def set(self, fid: int, ftype: int, value: Any) -> "Struct":
        """Sets the field (kept in its place), or adds it in id order."""
        for f in self.fields:
            if f[0] == fid:
                f[1], f[2] = ftype, value
                return self
        self.fields.append([fid, ftype, value])
        self.fields.sort(key=lambda f: f[0])
        return self

    def drop(self, fid: int) -> "Struct":
        self.fields = [f for f in self.fields if f[0] != fid]
        return self


@dataclass
class Padded:
    """An integer value written in at least ``length`` varint bytes."""

    value: int
    length: int


def _read_value(data: bytes, at: int, ftype: int) -> tuple[Any, int]:
    if ftype in (TRUE, FALSE):
        return ftype == TRUE, at
    if ftype == BYTE:
        return _struct.unpack_from("b", data, at)[0], at + 1
    if ftype in (I16, I32, I64):
        raw, at = read_varint(data, at)
        return unzigzag(raw), at
    if ftype == DOUBLE:
        return data[at:at + 8], at + 8
    if ftype == BINARY:
        n, at = read_varint(data, at)
        return data[at:at + n], at + n
    if ftype in (LIST, SET):
        header = data[at]
        at += 1
        elem, n = header & 0x0F, header >> 4
        if n == 15:
            n, at = read_varint(data, at)
        items = []
        for _ in range(n):
            if elem in (TRUE, FALSE):  # a bool element is one byte
                items.append(data[at] == TRUE)
                at += 1
            else:
                item, at = _read_value(data, at, elem)
                items.append(item)
        return (elem, items), at
    if ftype == STRUCT:
        return read_struct(data, at)
    raise ValueError(f"compact type {ftype} not handled")


def read_struct(data: bytes, at: int = 0) -> tuple[Struct, int]:
    """The struct at ``at`` and where it ends."""
    s = Struct()
    last = 0
    while True:
        header = data[at]
        at += 1
        ftype = header & 0x0F
        if ftype == STOP:
            return s, at
        delta = header >> 4
        if delta:
            fid = last + delta
        else:
            raw, at = read_varint(data, at)
            fid = unzigzag(raw)
        last = fid
        value, at = _read_value(data, at, ftype)
        s.fields.append([fid, ftype, value])


def _write_int(value: Any) -> bytes:
    if isinstance(value, Padded):
        return varint(zigzag(value.value), value.length)
    return varint(zigzag(value))


def _write_value(ftype: int, value: Any) -> bytes:
    if ftype in (TRUE, FALSE):
        return b""
    if ftype == BYTE:
        return _struct.pack("b", value)
    if ftype in (I16, I32, I64):
        return _write_int(value)
    if ftype == DOUBLE:
        return bytes(value)
    if ftype == BINARY:
        return varint(len(value)) + bytes(value)
    if ftype in (LIST, SET):
        elem, items = value
        head = bytes([(len(items) << 4) | elem]) if len(items) < 15 else \
            bytes([0xF0 | elem]) + varint(len(items))
        if elem in (TRUE, FALSE):
            return head + bytes(TRUE if v else FALSE for v in items)
        return head + b"".join(_write_value(elem, v) for v in items)
    if ftype == STRUCT:
        return write_struct(value)
    raise ValueError(f"compact type {ftype} not handled")


def write_struct(s: Struct) -> bytes:
    out = bytearray()
    last = 0
    for fid, ftype, value in s.fields:
        code = ftype
        if ftype in (TRUE, FALSE):
            code = TRUE if value else FALSE
        if 0 < fid - last <= 15:
            out.append(((fid - last) << 4) | code)
        else:
            out.append(code)
            out += varint(zigzag(fid))
        last = fid
        out += _write_value(ftype, value)
    out.append(STOP)
    return bytes(out)


# ---- files ---------------------------------------------------------------------------------

def footer(data: bytes) -> tuple[Struct, int]:
    """The FileMetaData struct and where the footer starts."""
    assert data[-4:] == b"PAR1"
    size = int.from_bytes(data[-8:-4], "little")
    start = len(data) - 8 - size
    meta, _ = read_struct(data, start)
    return meta, start


def with_footer(data: bytes, meta: Struct) -> bytes:
    """The file with its footer replaced (nothing points into a footer, so it may grow)."""
    _, start = footer(data)
    encoded = write_struct(meta)
    return data[:start] + encoded + len(encoded).to_bytes(4, "little") + b"PAR1"


def with_blob(data: bytes, blob: bytes) -> tuple[bytes, int]:
    """The file with ``blob`` put between its last page or index and its footer (which
    nothing points into, so no offset moves), and where the blob starts."""
    _, start = footer(data)
    return data[:start] + blob + data[start:], start


def column_chunk(meta: Struct, group: int, column: int) -> Struct:
    """A ColumnChunk of the FileMetaData: its field 4 is the offset index's offset, 5 its
    length, 3 the ColumnMetaData."""
    return meta.get(4)[1][group].get(1)[1][column]


def chunk_fields(data: bytes) -> Any:
    """parquet_index_locations of the whole file: (row groups, columns, 7)."""
    meta, _ = footer(data)
    groups = meta.get(4)[1]
    columns = len(groups[0].get(1)[1]) if groups else 0
    return _core.parquet_index_locations(data, len(groups), columns)


def data_pages(data: bytes, group: int, leaf: int) -> list:
    """Where the data pages of one chunk start, found by walking its page headers from the
    chunk's start (the footer's) to its end."""
    _, _, _, _, start, size, _ = (int(v) for v in chunk_fields(data)[group, leaf])
    found, at = [], start
    while at < start + size:
        page = read_page(data, at)
        if page.header.get(PAGE_TYPE) in (0, 3):
            found.append(at)
        at += page.span
    return found


@dataclass
class Page:
    """A page as it is in the file: where it starts, its header and its body bytes."""

    at: int
    span: int          # header and body
    header: Struct
    body: bytes


def read_page(data: bytes, at: int) -> Page:
    header, end = read_struct(data, at)
    compressed = header.get(COMPRESSED_SIZE)
    return Page(at, end - at + compressed, header, data[end:end + compressed])


def fit_page(header: Struct, body: bytes, span: int) -> bytes:
    """The header (its compressed size set to the body's length) and the body, in exactly
    ``span`` bytes: the header takes the room left as a field no reader knows (skipped), or as
    longer varints. Raises when they do not fit."""
    header.set(COMPRESSED_SIZE, I32, len(body))
    encoded = write_struct(header)
    gap = span - len(encoded) - len(body)
    if gap < 0:
        raise ValueError(f"page needs {-gap} bytes more than its {span}")
    if gap >= 4:  # a binary field of id 100: type byte, id varint (2 bytes), length, bytes
        n = gap - 4
        while 4 + len(varint(n)) - 1 + n > gap:
            n -= 1
        filler = Struct(list(header.fields) + [[100, BINARY, b"\0" * n]])
        encoded = write_struct(filler)
        gap = span - len(encoded) - len(body)
        header = filler
    if gap:  # the page type's varint made longer
        assert header.fields[0][0] == PAGE_TYPE
        header = Struct([list(f) for f in header.fields])
        header.fields[0][2] = Padded(header.fields[0][2], 1 + gap)
        encoded = write_struct(header)
    assert len(encoded) + len(body) == span
    return encoded + body


def replace_page(data: bytes, page: Page, header: Struct, body: bytes) -> bytes:
    """The file with one page rewritten in the same bytes it had. Its checksum is dropped (it
    would no longer match): a file written with ``write_page_checksum=True`` leaves the
    header that room to grow into."""
    header.drop(CRC)
    return data[:page.at] + fit_page(header, body, page.span) + data[page.at + page.span:]


def hybrid_rle(value: int, count: int, bit_width: int) -> bytes:
    """One RLE run of the RLE/bit-packed hybrid: ``count`` times ``value``."""
    return varint(count << 1) + value.to_bytes((bit_width + 7) // 8, "little")


# ---- data pages of lists cut anywhere --------------------------------------------------------

def hybrid_decode(data: bytes, bit_width: int, count: int) -> list:
    """``count`` values of the RLE/bit-packed hybrid at the start of ``data``."""
    out: list = []
    at = 0
    mask = (1 << bit_width) - 1
    while len(out) < count:
        header, at = read_varint(data, at)
        if header & 1:  # bit-packed: groups of 8 values
            groups = header >> 1
            bits = int.from_bytes(data[at:at + groups * bit_width], "little")
            at += groups * bit_width
            out.extend((bits >> (i * bit_width)) & mask for i in range(groups * 8))
        else:
            width = (bit_width + 7) // 8
            out.extend([int.from_bytes(data[at:at + width], "little")] * (header >> 1))
            at += width
    return out[:count]


def hybrid_bit_packed(values: list, bit_width: int) -> bytes:
    """``values`` as one bit-packed run of the hybrid (its last group padded with zeros)."""
    groups = (len(values) + 7) // 8
    bits = 0
    for i, v in enumerate(values):
        bits |= v << (i * bit_width)
    return varint(groups << 1 | 1) + bits.to_bytes(groups * bit_width, "little")


#: Parquet's codec numbers, by pyarrow's names of them
CODECS = {0: None, 1: "snappy", 2: "gzip", 6: "zstd"}


def split_list_pages(data: bytes, leaf: int, cuts: list, codec: int = 0) -> bytes:
    """The file with the data page of one column of lists cut into v1 data pages at the level
    positions ``cuts`` (sorted, each inside the page: a cut inside a row leaves the rest of
    that row to the next page), each compressed with ``codec`` (Parquet's number). The file
    must have one row group whose chunk of column ``leaf`` is its last bytes before the
    footer, written as one uncompressed v1 PLAIN data page, without a dictionary or a page
    index (``use_dictionary=False, compression="none", write_page_index=False``, a large
    ``data_page_size``)."""
    import io

    import pyarrow
    import pyarrow.parquet

    column = pyarrow.parquet.ParquetFile(io.BytesIO(data)).schema.column(leaf)
    max_def = column.max_definition_level
    def_width = max_def.bit_length()
    value_width = {"FLOAT": 4, "DOUBLE": 8, "INT32": 4, "INT64": 8}[column.physical_type]
    meta, footer_at = footer(data)
    chunk_meta = column_chunk(meta, 0, leaf).get(3)
    start, size = chunk_meta.get(9), chunk_meta.get(7)
    assert chunk_meta.get(11) is None and start + size == footer_at
    page = read_page(data, start)
    assert page.span == size and page.header.get(PAGE_TYPE) == 0
    count = page.header.get(DATA_PAGE_HEADER).get(NUM_VALUES)
    body = page.body
    rep_size = int.from_bytes(body[:4], "little")
    rep = hybrid_decode(body[4:4 + rep_size], 1, count)
    at = 4 + rep_size
    def_size = int.from_bytes(body[at:at + 4], "little")
    defs = hybrid_decode(body[at + 4:at + 4 + def_size], def_width, count)
    values = body[at + 4 + def_size:]
    value_at = [0]  # the values before each level
    for d in defs:
        value_at.append(value_at[-1] + (d == max_def))
    assert len(values) == value_at[-1] * value_width
    name = CODECS[codec]
    compress = (lambda b: b) if name is None else \
        (lambda b, c=pyarrow.Codec(name): c.compress(b, asbytes=True))
    pages = bytearray()
    uncompressed_total = 0
    bounds = [0, *cuts, count]
    assert all(a < b for a, b in zip(bounds, bounds[1:])), "cuts must be inside the page"
    for a, b in zip(bounds, bounds[1:]):
        rep_bytes = hybrid_bit_packed(rep[a:b], 1)
        def_bytes = hybrid_bit_packed(defs[a:b], def_width)
        plain = (len(rep_bytes).to_bytes(4, "little") + rep_bytes +
                 len(def_bytes).to_bytes(4, "little") + def_bytes +
                 values[value_at[a] * value_width:value_at[b] * value_width])
        packed = compress(plain)
        header = Struct([[PAGE_TYPE, I32, 0], [UNCOMPRESSED_SIZE, I32, len(plain)],
                         [COMPRESSED_SIZE, I32, len(packed)],
                         [DATA_PAGE_HEADER, STRUCT, Struct([[NUM_VALUES, I32, b - a],
                                                            [ENCODING, I32, 0],
                                                            [3, I32, 3], [4, I32, 3]])]])
        encoded = write_struct(header)
        pages += encoded + packed
        uncompressed_total += len(encoded) + len(plain)
    old_uncompressed = chunk_meta.get(6)
    chunk_meta.set(4, I32, codec)
    chunk_meta.set(6, I64, uncompressed_total)
    chunk_meta.set(7, I64, len(pages))
    chunk_meta.drop(13)  # the encoding statistics counted the one page
    group = meta.get(4)[1][0]
    group.set(2, I64, group.get(2) - old_uncompressed + uncompressed_total)
    if group.get(6) is not None:
        group.set(6, I64, group.get(6) - size + len(pages))
    return with_footer(data[:start] + bytes(pages) + data[footer_at:], meta)


def variant_files(directory, tables: dict, codecs, **options) -> dict:
    """The files of every variant a page reader must read alike, each of ``tables[nullable]``
    written by pyarrow into ``directory`` with ``options`` (a small page size, a small
    dictionary limit): keyed ``(codec, data page version, nullable, dictionary)``."""
    import pyarrow.parquet as pq

    files = {}
    for codec in codecs:
        for version in ("1.0", "2.0"):
            for nullable in (True, False):
                for dictionary in (True, False):
                    path = directory / f"{codec}-{version}-{nullable}-{dictionary}.parquet"
                    pq.write_table(tables[nullable], path, **{
                        **options, "compression": codec, "data_page_version": version,
                        "use_dictionary": dictionary})
                    files[(codec, version, nullable, dictionary)] = str(path)
    return files


def written(path, table, options: dict, **changes) -> str:
    """``table`` written by pyarrow at ``path`` with ``options`` (``changes`` over them);
    the path as a str."""
    import pyarrow.parquet as pq

    pq.write_table(table, path, **{**options, **changes})
    return str(path)


def by_nulls(make_table) -> dict:
    """``{nullable: make_table(nullable)}`` for a table with nulls and one without."""
    return {nullable: make_table(nullable) for nullable in (True, False)}


def variant_fixtures(folder: str, make_table, codecs, options: dict) -> tuple:
    """The module fixtures ``tables`` (:func:`by_nulls` of ``make_table``) and ``files``
    (:func:`variant_files` of them, written with ``options`` into a folder named
    ``folder``) of a test file of the page reader: ``tables, files = variant_fixtures(...)``."""
    import pytest

    @pytest.fixture(scope="module")
    def tables():
        return by_nulls(make_table)

    @pytest.fixture(scope="module")
    def files(tmp_path_factory, tables):
        return variant_files(tmp_path_factory.mktemp(folder), tables, codecs, **options)

    return tables, files


def every_variant(codec_params):
    """A test parametrized over the keys of :func:`variant_files`: ``codec`` (of
    ``codec_params``), ``version``, ``nullable`` and ``dictionary``."""
    import pytest

    marks = [pytest.mark.parametrize("codec", codec_params),
             pytest.mark.parametrize("version", ["1.0", "2.0"]),
             pytest.mark.parametrize("nullable", [True, False], ids=["optional", "required"]),
             pytest.mark.parametrize("dictionary", [True, False], ids=["dictionary", "plain"])]

    def parametrized(test):
        for mark in reversed(marks):  # as if written above the test, in this order
            test = mark(test)
        return test

    return parametrized


def taken_by_pages(path: str, table, indices, how: str) -> dict:
    """The rows ``indices`` taken from the file at ``path`` by a ``TableFile`` reading every
    column ``how`` (``PAGES``, ``WALKED_PAGES``) and no row group whole, checked equal to
    ``table.take(indices)``, schema included; the file's read statistics."""
    import pyarrow as pa

    from bulkwire.parquet import TableFile

    expected = table.take(pa.array(indices, type=pa.int64()))
    with TableFile(path) as f:
        assert f.paths == {name: how for name in table.column_names}
        got = f.take(indices)
        assert got.schema == table.schema
        assert got.equals(expected)
        assert all(s["row_groups"] == 0 for s in f.stats.values())
        return {name: dict(stats) for name, stats in f.stats.items()}
