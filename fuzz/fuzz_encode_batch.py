"""Fuzz target: record batches through the batch encoder (``_core.encode_batch``).

The bytes build a valid pyarrow record batch (an id column of integers or strings; fields of
integers, floats, booleans, strings, timestamps, nulls, a fixed_size_list or list vector;
nulls, blank ids, ragged vectors, slices). It is encoded twice:

1. as pyarrow gives it. The oracle is the command for the equivalent dict, with the
   conventions applied: ``{"Id": prefix + id, "Type": "PUT", "Document":
   json.loads(bulkwire.dumps({**fields, "@metadata": metadata}))}`` per row of
   ``to_pylist()``; and the encoder must raise ValueError exactly when some row breaks a
   rule (null id, an id ``bulkwire.conventions.check_id`` refuses, a null or ragged vector,
   a null inside a vector).
2. copied into hand-made structs (fuzz/arrow_structs.py: every buffer an exact malloc) and
   mutated: lengths and offsets shrunk, null counts changed, offsets and bitmaps rewritten.
   The encoder must raise ValueError/TypeError or succeed; a success is checked as in 1
   against pyarrow's own import of the same mutated structs, when pyarrow validates them.

Mutations keep the C Data Interface's one unverifiable promise (what the buffers hold: a
string column's last offset stays within its data), so under AddressSanitizer any read past a
buffer is a defect of the encoder's checks.

Run: ``PYTHONPATH=pkg python fuzz/fuzz_encode_batch.py -max_total_time=30 CORPUS_DIR``.
"""
from __future__ import annotations

import datetime
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

import arrow_structs as A  # noqa: E402
from byte_reader import Reader  # noqa: E402
from references import same  # noqa: E402
import bulkwire  # noqa: E402
from bulkwire import _core  # noqa: E402
from bulkwire.conventions import check_id  # noqa: E402

METADATA = {"@collection": "Things", "Raven-Python-Type": "builtins.dict"}
METADATA_JSON = bulkwire.dumps(METADATA)


TEXT = ["a", "b", "", " ", "\u3000", "é", "x|", "\t", "\u2028", "\"", "\\", "\x00", "zz", "😀"]
SCALARS = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint32(), pa.uint64(),
           pa.float32(), pa.float64(), pa.bool_(), pa.string(), pa.large_string(), pa.null(),
           pa.timestamp("ms"), pa.timestamp("us", "UTC"), pa.timestamp("s", "+05:30"),
           pa.timestamp("ns")]


def text(r: Reader) -> str:
    return "".join(TEXT[r.below(len(TEXT))] for _ in range(r.below(4)))


def scalar(r: Reader, t):
    if r.chance(30):
        return None
    if pa.types.is_integer(t):
        bits = t.bit_width
        lo, hi = (0, 2**bits - 1) if pa.types.is_unsigned_integer(t) else (-2**(bits - 1), 2**(bits - 1) - 1)
        edge = r.below(8)
        return lo if edge == 0 else hi if edge == 1 else max(lo, min(hi, r.below(256) - 128))
    if pa.types.is_floating(t):
        raw = r.raw(8)
        v = struct.unpack("<d", raw)[0] if r.chance(40) else (r.below(200) - 100) / 8
        if t != pa.float32():
            return v
        with np.errstate(over="ignore"):  # a double beyond float32 becomes inf, on purpose
            return float(np.float32(v))
    if pa.types.is_boolean(t):
        return r.chance(128)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return text(r)
    if pa.types.is_timestamp(t):
        return (r.below(256) - 128) * 10**7 + r.below(1000)
    return None


def make_batch(r: Reader):
    rows = r.below(9)
    id_kind = r.below(4)
    if id_kind == 0:
        ids = pa.array([None if r.chance(8) else r.below(1000) - 500 for _ in range(rows)], pa.int64())
    elif id_kind == 1:
        ids = pa.array([None if r.chance(8) else r.below(300) for _ in range(rows)], pa.uint16())
    else:
        t = pa.string() if id_kind == 2 else pa.large_string()
        ids = pa.array([None if r.chance(8) else ("k%d" % i if r.chance(170) else text(r))
                        for i in range(rows)], t)
    columns = {"id": ids}
    for k in range(r.below(4)):
        t = SCALARS[r.below(len(SCALARS))]
        columns[f"f{k}"] = pa.array([scalar(r, t) for _ in range(rows)], t)
    vector_column = None
    if r.chance(170):
        dim = 1 + r.below(3)
        value_type = pa.float32() if r.chance(160) else pa.float64()
        kind = r.below(3)

        def vec():
            if r.chance(10):
                return None
            n = dim if kind == 0 or r.chance(230) else r.below(4)
            return [None if r.chance(4) else scalar(r, pa.float64()) or 0.0 for _ in range(n)]

        values = [vec() for _ in range(rows)]
        if kind == 0:
            values = [v if v is None else (v + [0.0] * dim)[:dim] for v in values]
            t = pa.list_(value_type, dim)
        else:
            t = pa.list_(value_type) if kind == 1 else pa.large_list(value_type)
        columns["vec"] = pa.array(values, t)
        vector_column = "vec"
    batch = pa.record_batch(columns)
    if r.chance(80) and rows:
        start = r.below(rows)
        batch = batch.slice(start, r.below(rows - start + 1))
    return batch, vector_column


def rule_broken(row: dict, prefix: str, vector_column, dim: int) -> bool:
    """Whether the row breaks a rule the encoder must refuse."""
    if row["id"] is None:
        return True
    if isinstance(row["id"], str):
        try:
            check_id(prefix + row["id"])
        except ValueError:
            return True
    if vector_column is not None:
        v = row[vector_column]
        if v is None or any(x is None for x in v) or len(v) != dim:
            return True
    return False


def _microseconds(batch):
    """The batch with nanosecond timestamps read as the encoder reads them: microseconds,
    rounded down. (pyarrow hands sub-microsecond values to Python only through pandas.)"""
    columns = []
    for field, column in zip(batch.schema, batch.columns):
        t = field.type
        if pa.types.is_timestamp(t) and t.unit == "ns":
            micros = [None if v is None else v // 1000 for v in column.cast(pa.int64()).to_pylist()]
            column = pa.array(micros, pa.timestamp("us", t.tz))
        columns.append(column)
    return pa.record_batch(columns, names=batch.schema.names)


def check(batch, fields, vector_column, prefix, float32, result, error) -> None:
    """Compares the encoder's result (or error) with the oracle for pyarrow's batch."""
    rows = _microseconds(batch).to_pylist()
    dim = -1
    if vector_column is not None:
        t = batch.schema.field(vector_column).type
        if pa.types.is_fixed_size_list(t):
            dim = t.list_size
        elif rows and rows[0][vector_column] is not None:
            dim = len(rows[0][vector_column])
    broken = any(rule_broken(row, prefix, vector_column, dim) for row in rows)
    if error is not None:
        assert isinstance(error, ValueError) and broken, (error, rows)
        return
    assert not broken, rows
    body = b"".join(result)
    commands = json.loads(b"[" + body[1:] + b"]") if body else []
    assert len(commands) == len(rows)
    for command, row in zip(commands, rows):
        doc = {}
        for name in fields:
            value = row[name]
            if isinstance(value, datetime.datetime) and value.tzinfo is not None:
                value = value.astimezone(batch.schema.field(name).type.tz and
                                         _zone(batch.schema.field(name).type.tz))
            doc[name] = value
        expected = json.loads(bulkwire.dumps({**doc, "@metadata": METADATA}))
        assert command["Id"] == prefix + str(row["id"]) and command["Type"] == "PUT", command
        got = command["Document"]
        if float32 == "shortest" and vector_column is not None:
            a, b = got.pop(vector_column), expected.pop(vector_column)
            t = batch.schema.field(vector_column).type.value_type
            if t == pa.float32():
                assert len(a) == len(b) and all(same(float(np.float32(x)), float(np.float32(y)))
                                                for x, y in zip(a, b)), (a, b)
            else:
                assert same(a, b), (a, b)
        assert same(got, expected), (got, expected)


def _zone(tz: str):
    if tz in ("UTC", "+00:00"):
        return datetime.timezone.utc
    sign = -1 if tz[0] == "-" else 1
    return datetime.timezone(sign * datetime.timedelta(hours=int(tz[1:3]), minutes=int(tz[4:6])))


def encode(batch, fields, vector_column, prefix, float32):
    try:
        return _core.encode_batch(batch, "id", fields, vector_column=vector_column,
                                  id_prefix=prefix, metadata=METADATA_JSON, float32=float32,
                                  first=False), None
    except (ValueError, TypeError) as exc:
        return None, exc


# ------------------------------------------------------------------ mutation of the structs

def nodes(node: A.Node, out=None) -> list:
    out = [] if out is None else out
    out.append(node)
    for child in node.children:
        nodes(child, out)
    return out


def patch_int(buffer: bytes, index: int, width: int, value: int) -> bytes:
    if buffer is None or (index + 1) * width > len(buffer):
        return buffer
    lo, hi = -(2 ** (8 * width - 1)), 2 ** (8 * width - 1) - 1
    value = max(lo, min(hi, value))
    return buffer[:index * width] + value.to_bytes(width, "little", signed=True) + \
        buffer[(index + 1) * width:]


def mutate(r: Reader, root: A.Node) -> None:
    for _ in range(1 + r.below(3)):
        all_nodes = nodes(root)
        node = all_nodes[r.below(len(all_nodes))]
        k = r.below(8)
        if k == 0 and node.length > 0:  # shrink
            node.length -= 1 + r.below(node.length)
        elif k == 1 and node.length > 0:  # slice: offset up, length down by as much
            step = 1 + r.below(node.length)
            node.offset += step
            node.length -= step
        elif k == 2:
            node.null_count = [-1, 0, 1, node.length, node.length + 1, -2][r.below(6)]
        elif k == 3 and node.buffers and node.buffers[0] is not None:
            b = bytearray(node.buffers[0])
            if b:
                b[r.below(len(b))] ^= 1 << r.below(8)
            node.buffers[0] = bytes(b)
        elif k in (4, 5) and node.format in (b"u", b"U", b"+l", b"+L") and node.buffers[1]:
            width = 8 if node.format in (b"U", b"+L") else 4
            count = len(node.buffers[1]) // width
            index = r.below(count)
            value = int.from_bytes(node.buffers[1][index * width:(index + 1) * width], "little",
                                   signed=True) + (r.below(9) - 4 if k == 4 else r.below(1 << 16) - 256)
            node.buffers[1] = patch_int(node.buffers[1], index, width, value)
        elif k == 6 and node.buffers and r.chance(128):
            node.buffers[r.below(len(node.buffers))] = None
        elif k == 7 and node.children:
            node.children[r.below(len(node.children))].length -= 1
    # the producer's promise: a string column's last offset is within its data buffer
    for node in nodes(root):
        if node.format in (b"u", b"U") and node.length >= 0 and node.offset >= 0 and node.buffers[1]:
            width = 8 if node.format == b"U" else 4
            last = node.offset + node.length
            data = node.buffers[2] or b""
            if (last + 1) * width <= len(node.buffers[1]):
                value = int.from_bytes(node.buffers[1][last * width:(last + 1) * width], "little",
                                       signed=True)
                if value > len(data):
                    node.buffers[1] = patch_int(node.buffers[1], last, width, len(data))
            else:  # the offsets buffer itself is shorter than the slice: keep the slice in it
                node.length = max(0, len(node.buffers[1]) // width - 1 - node.offset)
        if node.length < 0:
            node.length = 0
        for child in node.children:  # a child never claims more than its buffers hold
            if child.length < 0:
                child.length = 0


def pyarrow_view(node: A.Node):
    exp = A.Exported(node)
    try:
        arr = pa.Array._import_from_c(A.ctypes.addressof(exp.array), A.ctypes.addressof(exp.schema))
        arr.validate(full=True)
        return pa.RecordBatch.from_struct_array(arr), exp
    except (pa.ArrowException, ValueError, TypeError, NotImplementedError):
        return None, exp


def test_one_input(data: bytes) -> None:
    r = Reader(data)
    batch, vector_column = make_batch(r)
    fields = [n for n in batch.schema.names if n != "id" and (r.chance(220) or n == vector_column)]
    prefix = ["", "p/", " ", "\u3000", "x|", "é/"][r.below(6)] if r.chance(100) else ""
    float32 = "shortest" if r.chance(60) else "widen"
    result, error = encode(batch, fields, vector_column, prefix, float32)
    check(batch, fields, vector_column, prefix, float32, result, error)

    node = A.from_pyarrow(batch)
    mutate(r, node)
    exp = A.Exported(node)
    try:
        result, error = encode(exp, fields, vector_column, prefix, float32)
        assert exp.released == {"schema": 1, "array": 1}, exp.released
    finally:
        exp.free()
    if error is not None and "malformed" in str(error):
        return
    view, holder = pyarrow_view(node)
    try:
        if view is not None:
            check(view, fields, vector_column, prefix, float32, result, error)
    finally:
        del view
        if holder.released["array"]:
            holder.free()


if __name__ == "__main__":
    import atheris

    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
