"""Rules that several entry points share, each written by one C writer: the float32 option,
numeric JSON arrays, datetime text, JSON strings of UTF-8 text. Every entry point that uses a
rule must give the same answer for the same input, and that answer is the json round trip's.
"""
from __future__ import annotations

import datetime
import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")

import bulkwire  # noqa: E402
from bulkwire import _core  # noqa: E402

META_JSON = b"{}"


def encode_rows(table, fields, vector_column=None, float32="widen") -> list[bytes]:
    """The document text of each row that encode_batch writes (between '"Document":' and the
    command's closing brace), with the metadata member dropped."""
    body = b"".join(_core.encode_batch(table, "id", fields, vector_column=vector_column,
                                       metadata=META_JSON, float32=float32, first=True))
    docs = json.loads(b"[" + body + b"]")
    return [doc["Document"] for doc in docs], body


# ------------------------------------------------------------------ the float32 option

def float32_entry_points():
    codec = bulkwire.VectorCodec("float", 2)
    table = pa.table({"id": [1], "v": pa.array([[1.0, 2.0]], pa.list_(pa.float32(), 2))})
    return {
        "dumps": lambda mode: bulkwire.dumps(np.zeros(2, "f4"), float32=mode),
        "Encoder": lambda mode: bulkwire.Encoder(float32=mode),
        "to_json_many": lambda mode: codec.to_json_many(np.zeros((1, 2), "f4"), float32=mode),
        "encode_batch": lambda mode: _core.encode_batch(table, "id", ["v"], vector_column="v",
                                                        float32=mode),
        "load_parquet": lambda mode: load_into_file(table, mode),
    }


def load_into_file(table, mode):
    """load_parquet of table into a file, with the float32 mode given."""
    import os
    import tempfile

    import pyarrow.parquet as pq

    folder = tempfile.mkdtemp()
    source = os.path.join(folder, "t.parquet")
    pq.write_table(table, source)
    bulkwire.load_parquet(source,
                          bulkwire.targets.request_file(os.path.join(folder, "t.bulk.json"), float32=mode))


@pytest.mark.parametrize("entry", sorted(float32_entry_points()))
@pytest.mark.parametrize("bad", ["half", "Widen", "", "widen\0", 1, None, b"widen"])
def test_float32_option_has_one_rule_and_one_message(entry, bad):
    call = float32_entry_points()[entry]
    with pytest.raises(ValueError) as raised:
        call(bad)
    assert str(raised.value) == f"float32 must be 'widen' or 'shortest', not {bad!r}"
    for mode in ("widen", "shortest"):
        call(mode)  # accepted


def test_encoder_reports_the_mode_it_parsed():
    assert bulkwire.Encoder(float32="shortest").float32 == "shortest"
    assert bulkwire.Encoder().float32 == "widen"


# ------------------------------------------------------------------ numeric JSON arrays

finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False)


@given(values=st.lists(finite32 | st.sampled_from([float("nan"), float("inf"), -0.0]),
                       min_size=0, max_size=12),
       mode=st.sampled_from(["widen", "shortest"]), swapped=st.booleans())
def test_float_vectors_are_one_text_on_every_path(values, mode, swapped):
    row = np.array(values, dtype=">f4" if swapped else "<f4")
    want = bulkwire.dumps(row, float32=mode)
    if mode == "widen":  # the round trip of what tolist() gives
        assert want == json.dumps(row.tolist()).encode()
    if values:  # a CQL vector has at least one element
        codec = bulkwire.VectorCodec("float", len(values))
        assert codec.to_json_many(row.reshape(1, -1), float32=mode) == [want]
        table = pa.table({"id": [0], "v": pa.array([row.astype("=f4")], pa.list_(pa.float32()))})
        body = b"".join(_core.encode_batch(table, "id", ["v"], vector_column="v",
                                           metadata=META_JSON, float32=mode, first=True))
        assert b'"v": ' + want + b', "@metadata"' in body


@pytest.mark.parametrize("dtype", ["?", "i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f2", "f4",
                                   "f8", "l", "L", "q", "Q", "h", "H"])
@pytest.mark.parametrize("order", ["<", ">"])
def test_ndarray_elements_of_every_direct_dtype(dtype, order):
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None
    base = [0, 1, 2, 3] if info is None else [info.min, info.max, 0, 1]
    a = np.array(base, dtype=np.dtype(dtype).newbyteorder(order))
    if a.dtype.kind == "f":
        a = np.array([0.1, -2.5, 65504.0 if dtype == "f2" else 1e30, float("nan")], dtype=a.dtype)
    strided = np.stack([a, a[::-1]])[:, ::2]
    for value in (a, strided, a[2]):
        assert bulkwire.dumps(value) == json.dumps(value.tolist()).encode()


# ------------------------------------------------------------------ datetime text

@given(dt=st.datetimes(min_value=datetime.datetime(1, 1, 1),
                    max_value=datetime.datetime(9999, 12, 31, 23, 59, 59, 999999)),
       aware=st.booleans())
def test_datetime_text_is_the_same_from_python_and_arrow(dt, aware):
    value = dt.replace(tzinfo=datetime.timezone.utc) if aware else dt
    table = pa.table({"id": [0], "t": pa.array([value],
                                               pa.timestamp("us", tz="UTC" if aware else None))})
    docs, _ = encode_rows(table, ["t"])
    assert json.dumps(docs[0]["t"]).encode() == bulkwire.dumps(value)


def test_datetime_max_text_only_when_naive():
    top = datetime.datetime.max
    assert bulkwire.dumps(top) == b'"9999-12-31T23:59:59.9999999"'
    assert bulkwire.dumps(top.replace(tzinfo=datetime.timezone.utc)) == b'"9999-12-31T23:59:59.9999990"'


# ------------------------------------------------------------------ UTF-8 text as JSON strings

def string_column(raw: list[bytes]):
    """An Arrow string array holding these bytes as they are (not validated as UTF-8)."""
    offsets = np.cumsum([0] + [len(b) for b in raw]).astype(np.int32)
    return pa.Array.from_buffers(pa.string(), len(raw),
                                 [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(b"".join(raw))])


utf8_edges = st.sampled_from([b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82",
                              b"\x80", b"\xff", b"\xf0\x9f\x98\x80", b"\xe2\x80\xa8", b"\x7f",
                              b"\x00", b'"\\'])


@given(raw=st.lists(st.binary(max_size=6) | utf8_edges | st.text(max_size=4).map(str.encode),
                min_size=1, max_size=6).map(b"".join))
def test_utf8_strings_escape_as_json_or_are_refused(raw):
    table = pa.table({"id": [0], "s": string_column([raw])})
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        with pytest.raises(ValueError, match=r"column 's', row 0: string is not valid UTF-8"):
            encode_rows(table, ["s"])
        return
    _, body = encode_rows(table, ["s"])
    assert b'"s": ' + json.dumps(text).encode() + b', "@metadata"' in body
    if not text or text.isspace() or text.endswith("|") or "\0" in text or \
            text in ("id", "Id", "@metadata"):
        return  # not a valid id or field name: the conventions refuse it before writing
    # ids and column names go through the same writer
    table = pa.table({"id": string_column([raw]), text: [1]})
    _, body = encode_rows(table, [text])
    assert body.startswith(b'{"Id":' + json.dumps(text, ensure_ascii=False).encode() + b',')
    assert b"{" + json.dumps(text).encode() + b": 1, " in body
