"""Fuzz target: hostile Arrow C Data Interface structs through bulkwire's one import path.

The bytes drive a generator of hand-made ArrowSchema/ArrowArray trees (fuzz/arrow_structs.py):
random formats (known, unknown, NULL, malformed), lengths and offsets (small, negative,
overflowing), validity bitmaps, offsets (mostly increasing, sometimes not), children and
dictionaries, NULL pointers, released children and roots, streams of arrays. Each tree goes to
every consumer of the import path: ``_core._testing.arrow_vectors_info``, ``VectorCodec``'s
``serialize_many``/``serialize_into``/``to_json_many``, and ``_core.encode_batch`` (the tree as a
column of a record batch), each on a fresh copy.

The producer keeps the one promise the C Data Interface cannot check: every buffer holds what
its own array's offset + length imply (and a string buffer its largest offset). Each buffer is
a malloc of exactly that size, so under AddressSanitizer any read the import path failed to
bound is reported. Everything else may be a lie.

A consumer must raise ValueError/TypeError or succeed; it must release the root structs exactly
once (never when it refused a released root); a second use of the same capsules must be refused.
A success is checked against pyarrow: the same structs imported by pyarrow and fully validated
give the oracle (``to_pylist``), and bulkwire's output must match it.

Run: ``PYTHONPATH=pkg python fuzz/fuzz_arrow_import.py -max_total_time=30 CORPUS_DIR``.
"""
from __future__ import annotations

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
from bulkwire import VectorCodec, _core  # noqa: E402

INT64_MAX = 2**63 - 1


FIXED = {b"c": 1, b"C": 1, b"s": 2, b"S": 2, b"e": 2, b"i": 4, b"I": 4, b"f": 4, b"l": 8,
         b"L": 8, b"g": 8, b"tsm:": 8, b"tsu:UTC": 8, b"tdD": 4}
TOP_FORMATS = [b"+w:2", b"+w:3", b"+l", b"+L", b"+w:0", b"+w:1", b"+s", b"u", b"U", b"i", b"f",
               b"b", b"n", None, b"", b"+w:", b"+w:-1", b"+w:99999999999999999999", b"zz",
               b"+m", b"tsx:", b"+w:2"]
VALUE_FORMATS = [b"f", b"g", b"f", b"g", b"i", b"l", b"u", b"+l", None, b"e", b"n", b"b"]


def length_offset(r: Reader):
    """(length, offset, sane): sane means both small and non-negative (buffers can hold them)."""
    k = r.below(24)
    if k == 0:
        return -1 - r.below(3), r.below(3), False
    if k == 1:
        return r.below(4), -1 - r.below(3), False
    if k == 2:
        return 2 + r.below(3), INT64_MAX - r.below(2), False  # offset + length overflows
    if k == 3:  # no overflow, but more than memory holds (length 0: nothing to read at all)
        return r.below(2), INT64_MAX - 1 - r.below(2**40), False
    if k == 4:
        return -(2**63), 0, False
    return r.below(7), (r.below(4) if r.chance(80) else 0), True


def offsets_bytes(r: Reader, count: int, large: bool, limit: int):
    """count offsets, mostly non-decreasing within [0, limit], sometimes not; and the largest."""
    values = []
    v = r.below(3) if r.chance(40) else 0
    for _ in range(count):
        k = r.below(16)
        if k == 0:
            v -= 1 + r.below(3)
        elif k == 1:
            v = limit + 1 + r.below(3)
        else:
            v += r.below(3)
        values.append(v)
    raw = struct.pack(f"<{count}{'q' if large else 'i'}", *values)
    return raw, max([0, *values])


def bitmap(r: Reader, end: int) -> bytes:
    return r.raw((end + 7) // 8)


def gen_clean(r: Reader) -> A.Node:
    """A well-formed vector column (fixed_size_list or list of float32/float64, rows of 2 or
    3 values, maybe sliced, maybe with nulls): the inputs whose output is checked."""
    value_fmt = b"f" if r.chance(160) else b"g"
    width = 4 if value_fmt == b"f" else 8
    dim = 2 + r.below(2)
    length, offset = r.below(6), r.below(3)
    end = offset + length
    kind = r.below(3)
    if kind == 0:
        values = end * dim + r.below(3)
        child_offset = r.below(2)
        child = A.Node(value_fmt, values, [None, r.raw((child_offset + values) * width)],
                       name=b"item", offset=child_offset)
        node = A.Node(b"+w:%d" % dim, length, [None], [child], name=b"v", offset=offset)
    else:
        large = kind == 2
        start = r.below(3)
        steps = [dim if r.chance(240) else r.below(4) for _ in range(end)]
        offs = [start]
        for step in steps:
            offs.append(offs[-1] + step)
        values = offs[-1] + r.below(2)
        child = A.Node(value_fmt, values, [None, r.raw(values * width)], name=b"item")
        node = A.Node(b"+L" if large else b"+l", length,
                      [None, struct.pack(f"<{len(offs)}{'q' if large else 'i'}", *offs)], [child],
                      name=b"v", offset=offset)
    if r.chance(60) and end:
        node.buffers[0] = r.raw((end + 7) // 8)
        node.null_count = -1
    if r.chance(40) and child.length:
        child.buffers[0] = bytes(b | (0 if r.chance(20) else 0xFF) for b in
                                 r.raw((child.offset + child.length + 7) // 8))
        child.null_count = -1
    return node


def gen(r: Reader, depth: int, value_role: bool) -> A.Node:
    if depth == 0 and r.chance(90):
        return gen_clean(r)
    pool = VALUE_FORMATS if value_role else TOP_FORMATS
    fmt = pool[r.below(len(pool))]
    length, offset, sane = length_offset(r)
    end = offset + length if sane else 0
    node = A.Node(fmt, length, [], name=b"item" if value_role else b"v", offset=offset)
    # null_count: usually right for the bitmap we give, sometimes a lie
    nk = r.below(8)
    node.null_count = 0 if nk < 4 else -1 if nk == 4 else r.below(9) - 1 if nk < 7 else -5
    validity = bitmap(r, end) if (r.chance(128) and sane) else None
    if validity is not None and node.null_count == 0 and r.chance(128):
        node.null_count = -1
    if depth > 3 and fmt is not None and fmt.startswith(b"+"):
        fmt = node.format = b"f"
    if fmt in FIXED or fmt == b"b":
        width = FIXED.get(fmt, 0)
        values = r.raw(end * width) if width else r.raw((end + 7) // 8)
        node.buffers = [validity, values if (r.chance(240) or end == 0) else None]
    elif fmt in (b"u", b"U"):
        if sane:
            offs, top = offsets_bytes(r, end + 1, fmt == b"U", 12)
        else:
            offs, top = b"", 0
        data = bytes((32 + (b % 95)) if r.chance(230) else b for b in r.raw(top))
        node.buffers = [validity, offs if r.chance(245) else None,
                        data if (r.chance(240) or top == 0) else None]
    elif fmt in (b"+l", b"+L"):
        child = gen(r, depth + 1, True)
        child_len = child.length if child.length >= 0 else 0
        offs, _ = offsets_bytes(r, end + 1, fmt == b"+L", child_len) if sane else (b"", 0)
        node.buffers = [validity, offs if r.chance(245) else None]
        node.children = [child]
    elif fmt is not None and fmt.startswith(b"+w:"):
        node.buffers = [validity]
        node.children = [gen(r, depth + 1, True)]
    elif fmt == b"+s":
        node.buffers = [validity]
        node.children = [gen(r, depth + 1, r.chance(128)) for _ in range(1 + r.below(3))]
        for i, c in enumerate(node.children):
            c.name = b"c%d" % i
    elif fmt == b"n":
        node.buffers = []
    else:  # unknown or NULL format: a few small buffers and maybe a child
        node.buffers = [r.raw(r.below(16)) for _ in range(r.below(4))]
        if r.chance(60):
            node.children = [gen(r, depth + 1, True)]
    # structural defects
    if r.chance(12) and node.buffers:
        node.buffers = node.buffers[:-1] if r.chance(128) else node.buffers + [r.raw(8)]
    if r.chance(8):
        node.schema_n_children = len(node.children) + (1 if r.chance(128) else -1)
        if node.schema_n_children < 0:
            node.schema_n_children = None
    if r.chance(6) and node.children:
        node.null_child = r.below(len(node.children))
    if r.chance(6) and node.children:
        node.null_children_pointer = True
    if r.chance(6) and node.buffers:
        node.null_buffers_pointer = True
    if depth > 0 and r.chance(8):
        node.released = True
    if depth > 0 and r.chance(6):
        node.schema_released = True
    if r.chance(6):
        node.dictionary = A.Node(b"u", 1, [None, struct.pack("<2i", 0, 1), b"a"])
        node.array_dictionary_only = r.chance(128)
    return node


def as_batch(column: A.Node) -> A.Node:
    rows = column.length if 0 <= column.length <= 64 and column.offset == 0 else 0
    ids = A.Node(b"l", rows, [None, struct.pack(f"<{rows}q", *range(rows))], name=b"id")
    column.name = b"v"
    return A.Node(b"+s", rows, [None], [ids, column])


def is_vector(node: A.Node) -> bool:
    return node.format in (b"+l", b"+L") or (node.format or b"").startswith(b"+w:")


def consumers(node: A.Node):
    vector = is_vector(node)
    yield "info", node, lambda e: _core._testing.arrow_vectors_info(e)
    for subtype in ("float", "double"):
        for dim in (2, 3):
            codec = VectorCodec(subtype, dim)
            yield f"serialize_many {subtype} {dim}", node, codec.serialize_many
            yield f"serialize_into {subtype} {dim}", node, codec.serialize_into
    yield "to_json_many", node, VectorCodec("float", 2).to_json_many
    batch = as_batch(node)
    yield "encode_batch", batch, lambda e: _core.encode_batch(
        e, "id", ["v"], vector_column="v" if vector else None)


def pyarrow_import(node: A.Node):
    """pyarrow's reading of a fresh copy of the structs, fully validated; None when pyarrow
    refuses. Returns (array, holder): free the holder once the array is gone."""
    exp = A.Exported(node)
    try:
        arr = pa.Array._import_from_c(A.ctypes.addressof(exp.array), A.ctypes.addressof(exp.schema))
        arr.validate(full=True)
    except (pa.ArrowException, ValueError, TypeError, NotImplementedError):
        return None, exp
    return arr, exp


def check_output(name: str, node: A.Node, result) -> None:
    arr, holder = pyarrow_import(node)
    try:
        if arr is None:
            return
        rows = arr.to_pylist()
        if name.startswith("serialize_many") or name.startswith("serialize_into"):
            subtype = name.split()[1]
            dim = int(name.split()[2])
            dtype = ">f4" if subtype == "float" else ">f8"
            assert all(row is not None and len(row) == dim for row in rows), name
            # from the values' bits (a float32 NaN's payload survives; via Python floats a
            # signalling NaN would be quieted)
            with np.errstate(invalid="ignore"):
                want = [arr[i].values.to_numpy(zero_copy_only=False).astype(dtype).tobytes()
                        for i in range(len(arr))]
            if name.startswith("serialize_many"):
                got = [bytes(g) for g in result]
            else:  # (one bytearray, stride): row i at buf[i * stride:(i + 1) * stride]
                buf, stride = result
                assert stride == dim * (4 if subtype == "float" else 8), name
                assert len(buf) == stride * len(rows), name
                got = [bytes(buf[i * stride:(i + 1) * stride]) for i in range(len(rows))]
            assert got == want, name
        elif name == "to_json_many":
            assert len(result) == len(rows), name
            for text, row in zip(result, rows):
                assert same(json.loads(text), [float(x) for x in row]), name
        elif name == "info":
            assert sum(d["length"] for d in result) == len(rows), name
        elif name == "encode_batch":
            body = b"".join(result)
            commands = json.loads(b"[" + body[1:] + b"]") if body else []
            assert len(commands) == len(rows), name
            for command, row in zip(commands, rows):
                assert command["Id"] == str(row["id"]) and command["Type"] == "PUT"
                doc = command["Document"]
                assert list(doc) == ["v", "@metadata"] and doc["@metadata"] == {}
                want = row["v"]
                got = doc["v"]
                if isinstance(want, bytes):
                    raise AssertionError("binary accepted as a field")
                if hasattr(want, "isoformat"):
                    continue  # timestamps: their text is tested elsewhere
                assert same(got, want), (got, want)
    finally:
        del arr
        if holder.released["array"] or holder.node.released:
            holder.free()  # pyarrow let go of it (or never took it)


def test_one_input(data: bytes) -> None:
    r = Reader(data)
    node = gen(r, 0, False)
    use_stream = r.chance(24)
    for name, tree, call in consumers(node):
        if use_stream:
            arrays = [A.Exported(tree) for _ in range(1 + r.below(3))]
            stream = A.Stream(arrays, fail_at=r.below(4) if r.chance(40) else None)
            try:
                call(stream)
            except (ValueError, TypeError):
                pass
            assert stream.released == 1, name
            for c in arrays:
                assert c.released["array"] <= 1, name
                c.free()
            continue
        exp = A.Exported(tree)
        refused_root = tree.released or tree.schema_released
        try:
            try:
                result = call(exp)
            except (ValueError, TypeError) as exc:
                if refused_root:
                    assert "already consumed" in str(exc), (name, exc)
                result = None
            if refused_root:
                assert result is None, name
                assert exp.released == {"schema": 0, "array": 0}, (name, exp.released)
                continue
            assert exp.released == {"schema": 1, "array": 1}, (name, exp.released)
            try:
                call(exp)
            except ValueError as exc:
                assert "already consumed" in str(exc), (name, exc)
            else:
                raise AssertionError(f"{name}: consumed capsules were used again")
            if result is not None:
                check_output(name, tree, result)
        finally:
            exp.free()


if __name__ == "__main__":
    import atheris

    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
