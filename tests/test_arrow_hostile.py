"""Hostile Arrow input through the one import path (csrc/py_arrow.c + bw_arrow_validate) that
serves both consumers: the batch encoder (``_core.encode_batch``) and ``VectorCodec``.

Inputs are hand-made C Data Interface structs (fuzz/arrow_structs.py): every buffer its own
malloc of exactly the bytes given (AddressSanitizer sees a read past it), every release
callback a ctypes function (Python code) that counts its calls. Each defect must raise a
ValueError/TypeError naming the column and the problem, release everything exactly once,
and never read out of bounds. Valid hand-made copies of pyarrow data must encode exactly as
the pyarrow originals do.
"""
from __future__ import annotations

import os
import struct
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fuzz"))
import arrow_structs as A  # noqa: E402

import bulkwire  # noqa: E402
from bulkwire import VectorCodec, _core  # noqa: E402
from bulkwire.conventions import check_id  # noqa: E402

from examples_budget import EXAMPLES  # noqa: E402


def i64(*values: int) -> bytes:
    return struct.pack(f"<{len(values)}q", *values)


def i32(*values: int) -> bytes:
    return struct.pack(f"<{len(values)}i", *values)


def f32(*values: float) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def ids(n: int = 3) -> A.Node:
    return A.Node(b"l", n, [None, i64(*range(n))], name=b"id")


def strings(n: int = 3, offsets=None, data=b"abcdef", name=b"s", **kw) -> A.Node:
    offsets = offsets if offsets is not None else [0, 1, 3, 6][: n + 1]
    return A.Node(b"u", n, [None, i32(*offsets), data], name=name, **kw)


def fsl(n: int = 3, dim: int = 2, values=None, name=b"v", **kw) -> A.Node:
    values = values if values is not None else n * dim
    child = A.Node(b"f", values, [None, f32(*range(values))], name=b"item")
    return A.Node(b"+w:%d" % dim, n, [None], [child], name=name, **kw)


def lst(n: int = 3, offsets=None, values: int = 6, name=b"v", **kw) -> A.Node:
    offsets = offsets if offsets is not None else [0, 2, 4, 6][: n + 1]
    child = A.Node(b"f", values, [None, f32(*range(values))], name=b"item")
    return A.Node(b"+l", n, [None, i32(*offsets)], [child], name=name, **kw)


def batch(*columns: A.Node, n: int = 3, **kw) -> A.Node:
    return A.Node(b"+s", n, [None], [ids(n), *columns], **kw)


def run_encoder(node: A.Node, fields, vector_column=None):
    exp = A.Exported(node)
    try:
        return b"".join(_core.encode_batch(exp, "id", fields, vector_column=vector_column)), exp
    finally:
        exp.free()


def expect_error(call, exp: A.Exported, kind, pattern):
    try:
        with pytest.raises(kind, match=pattern):
            call(exp)
        # released exactly once, whatever failed
        assert exp.released == {"schema": 1, "array": 1}
    finally:
        exp.free()


def encoder_error(node, fields, kind, pattern, vector_column=None):
    expect_error(lambda e: _core.encode_batch(e, "id", fields, vector_column=vector_column),
                 A.Exported(node), kind, pattern)


def codec_error(node, kind, pattern, dim=2):
    expect_error(lambda e: VectorCodec("float", dim).serialize_many(e), A.Exported(node), kind,
                 pattern)


# ------------------------------------------------------------------ the helper is faithful

def test_hand_made_copies_encode_like_pyarrow():
    rb = pa.record_batch({
        "id": pa.array([5, 6, 7, 8], pa.int64()),
        "s": pa.array(["a", None, "ünï", ""]),
        "ls": pa.array(["x", "yy", None, "z"], pa.large_string()),
        "v": pa.array([[1, 2], [3, 4], [5, 6], [7, 8]], pa.list_(pa.float32(), 2)),
        "b": pa.array([True, None, False, True]),
        "t": pa.array([0, 1, None, 3], pa.timestamp("ms")),
        "n": pa.nulls(4),
    })
    fields = ["s", "ls", "v", "b", "t", "n"]
    for piece in (rb, rb.slice(1, 2), rb.slice(4, 0)):
        want = b"".join(_core.encode_batch(piece, "id", fields, vector_column="v"))
        got, exp = run_encoder(A.from_pyarrow(piece), fields, vector_column="v")
        assert got == want
        assert exp.released == {"schema": 1, "array": 1}
    arr = pa.array([[1.5, 2.5], [3.5, 4.5]], pa.list_(pa.float32()))
    exp = A.Exported(A.from_pyarrow(arr.slice(1)))
    try:
        assert VectorCodec("float", 2).serialize_many(exp) == \
            VectorCodec("float", 2).serialize_many(arr.slice(1))
    finally:
        exp.free()


# ------------------------------------------------------------------ defects, both consumers

# (node builder, fields, vector column, error pattern): each is a record batch with a defect
BATCH_DEFECTS = {
    "string offsets decrease": (lambda: batch(strings(offsets=[0, 3, 1, 6])), ["s"], None,
                                r"column 's': offsets decrease at row 1 \(3, then 1\)"),
    "negative string offset": (lambda: batch(strings(offsets=[-2, 1, 3, 6])), ["s"], None,
                               r"column 's': offset -2 of row 0 is negative"),
    "null format of a column": (lambda: batch(A.Node(None, 3, [None, i64(1, 2, 3)], name=b"s")),
                                ["s"], None, r"column 's': the schema has no format string"),
    "null format of the batch": (lambda: A.Node(None, 3, [None], [ids()]), [], None,
                                 r"Arrow array: the schema has no format string"),
    "released column": (lambda: batch(strings(released=True)), ["s"], None,
                        r"column 's': the array was already released"),
    "released column schema": (lambda: batch(strings(schema_released=True)), ["s"], None,
                               r"column 's': the schema was already released"),
    "too few string buffers": (lambda: batch(A.Node(b"u", 3, [None, i32(0, 1, 2, 3)], name=b"s")),
                               ["s"], None, r"column 's': format 'u' needs 3 buffers, the array has 2"),
    "null buffers pointer": (lambda: batch(strings(null_buffers_pointer=True)), ["s"], None,
                             r"column 's': the buffers pointer is NULL"),
    "no values buffer": (lambda: batch(A.Node(b"i", 3, [None, None], name=b"x")), ["x"], None,
                         r"column 'x': no values buffer"),
    "no offsets buffer": (lambda: batch(A.Node(b"u", 3, [None, None, b"abc"], name=b"s")), ["s"],
                          None, r"column 's': no offsets buffer"),
    "no data buffer": (lambda: batch(A.Node(b"u", 3, [None, i32(0, 1, 2, 3), None], name=b"s")),
                       ["s"], None, r"column 's': no data buffer, but the offsets reach 3"),
    "nulls without bitmap": (lambda: batch(strings(null_count=1)), ["s"], None,
                             r"column 's': null_count is 1 but there is no validity bitmap"),
    "null_count above length": (lambda: batch(strings(null_count=7)), ["s"], None,
                                r"column 's': null_count 7 is out of range for length 3"),
    "negative length": (lambda: batch(A.Node(b"l", -1, [None, b""], name=b"x")), ["x"], None,
                        r"column 'x': length -1 and offset 0 are out of range"),
    "offset overflows": (lambda: batch(A.Node(b"l", 3, [None, i64(1, 2, 3)], name=b"x",
                                              offset=2**63 - 2)), ["x"], None,
                         r"column 'x': length 3 and offset 9223372036854775806 are out of range"),
    "more than memory holds": (lambda: batch(A.Node(b"U", 1, [None, i64(0, 1), b"a"], name=b"s",
                                                    offset=2**63 - 2)), ["s"], None,
                               r"column 's': offset 9223372036854775806 \+ length 1 is more than "
                               r"memory can hold"),
    "short column": (lambda: batch(A.Node(b"l", 2, [None, i64(1, 2)], name=b"x")), ["x"], None,
                     r"Arrow record batch: child 'x' has 2 rows, fewer than the 3 the struct spans"),
    "sliced batch past its columns": (lambda: A.Node(b"+s", 3, [None], [A.Node(
                                          b"l", 4, [None, i64(1, 2, 3, 4)], name=b"id")], offset=2),
                                      [], None, r"Arrow record batch: child 'id' has 4 rows, fewer than the 5"),
    "children count mismatch": (lambda: batch(strings(), schema_n_children=3), ["s"], None,
                                r"Arrow record batch: the schema has 3 children, the array 2"),
    "null child": (lambda: batch(strings(), null_child=1), ["s"], None,
                   r"Arrow record batch: child 1 is NULL"),
    "null children pointer": (lambda: batch(strings(), null_children_pointer=True), ["s"], None,
                              r"Arrow record batch: the children pointer is NULL"),
    "dictionary in the array only": (lambda: batch(A.Node(b"i", 3, [None, i32(0, 0, 0)], name=b"x",
                                                          dictionary=strings(1, [0, 1], b"a"),
                                                          array_dictionary_only=True)),
                                     ["x"], None, r"column 'x': the array has a dictionary, the schema none"),
    "list offsets past the child": (lambda: batch(lst(offsets=[0, 2, 4, 9])), ["v"], "v",
                                    r"column 'v': list offsets reach 9, past the 6 values of the child"),
    "list offsets decrease": (lambda: batch(lst(offsets=[0, 4, 2, 6])), ["v"], "v",
                              r"column 'v': offsets decrease at row 1 \(4, then 2\)"),
    "fixed list child too short": (lambda: batch(fsl(values=5)), ["v"], "v",
                                   r"column 'v': 3 rows of 2 values need more than the 5 values"),
    "released vector values": (lambda: batch(A.Node(b"+w:2", 3, [None], [A.Node(
                                   b"f", 6, [None, f32(*range(6))], name=b"item", released=True)],
                                   name=b"v")), ["v"], "v",
                               r"column 'v' > 'item': the array was already released"),
    "vector values with too few buffers": (lambda: batch(A.Node(b"+w:2", 3, [None], [A.Node(
                                               b"f", 6, [None], name=b"item")], name=b"v")),
                                           ["v"], "v", r"column 'v' > 'item': format 'f' needs 2 buffers"),
}


@pytest.mark.parametrize("case", sorted(BATCH_DEFECTS))
def test_batch_defects_raise_naming_the_column(case):
    build, fields, vector_column, pattern = BATCH_DEFECTS[case]
    # MalformedFileError: a ValueError, and the class a malformed file's data raises
    encoder_error(build(), fields, bulkwire.MalformedFileError, "malformed Arrow data: " + pattern,
                  vector_column)


# the same defects in a vector column alone, through VectorCodec
CODEC_DEFECTS = {
    "list offsets past the child": (lambda: lst(offsets=[0, 2, 4, 9]),
                                    r"column 'v': list offsets reach 9, past the 6 values"),
    "list offsets decrease": (lambda: lst(offsets=[0, 4, 2, 6]), r"column 'v': offsets decrease at row 1"),
    "negative list offset": (lambda: lst(offsets=[-2, 0, 2, 4]),
                             r"column 'v': offset -2 of row 0 is negative"),
    "fixed list child too short": (lambda: fsl(values=5), r"column 'v': 3 rows of 2 values need more"),
    "more than memory holds": (lambda: fsl(n=0, offset=2**62),
                               r"column 'v': offset 4611686018427387904 \+ length 0 is more than"),
    "null format": (lambda: A.Node(None, 3, [None], [], name=b"v"), r"column 'v': the schema has no format"),
    "null child format": (lambda: A.Node(b"+w:2", 3, [None], [A.Node(None, 6, [None, f32(*range(6))])]),
                          r"Arrow array > '': the schema has no format string"),
    "no values buffer": (lambda: A.Node(b"+w:2", 3, [None], [A.Node(b"f", 6, [None, None], name=b"item")]),
                         r"Arrow array > 'item': no values buffer"),
    "unnamed, offsets decrease": (lambda: lst(offsets=[0, 4, 2, 6], name=b""),
                                  r"Arrow array: offsets decrease at row 1"),
}


@pytest.mark.parametrize("case", sorted(CODEC_DEFECTS))
def test_vector_codec_defects_raise_naming_the_column(case):
    build, pattern = CODEC_DEFECTS[case]
    codec_error(build(), ValueError, "malformed Arrow data: " + pattern)


def test_one_path_one_message():
    """The batch encoder and VectorCodec report a bad vector column in the same words."""
    messages = []
    for call in (lambda e: _core.encode_batch(e, "id", ["v"], vector_column="v"),
                 lambda e: VectorCodec("float", 2).serialize_many(e)):
        node = batch(lst(offsets=[0, 2, 4, 9])) if len(messages) == 0 else lst(offsets=[0, 2, 4, 9])
        exp = A.Exported(node)
        try:
            with pytest.raises(ValueError) as info:
                call(exp)
            messages.append(str(info.value))
        finally:
            exp.free()
    assert messages[0] == messages[1]


def test_nesting_is_bounded():
    node = A.Node(b"f", 0, [None, b""], name=b"item")
    for _ in range(80):
        node = A.Node(b"+l", 0, [None, i32(0)], [node], name=b"item")
    node.name = b"v"
    encoder_error(A.Node(b"+s", 0, [None], [ids(0), node]), ["v"], ValueError,
                  r"nested more than 64 levels deep", "v")
    codec_error(node, ValueError, r"nested more than 64 levels deep")


def test_stream_arrays_are_validated_and_released():
    good = A.Exported(batch(strings()))
    bad = A.Exported(batch(strings(offsets=[0, 3, 1, 6])))
    stream = A.Stream([good, bad])
    try:
        with pytest.raises(ValueError, match=r"column 's': offsets decrease"):
            _core.encode_batch(stream, "id", ["s"])
        assert stream.released == 1
        assert good.released["array"] == 1 and bad.released["array"] == 1
        assert good.released["schema"] == 1  # the stream's schema (a copy of the first's)
    finally:
        good.free()
        bad.free()
    failing = A.Exported(batch(strings()))
    stream = A.Stream([failing, failing], fail_at=1)
    try:
        with pytest.raises(ValueError, match=r"Arrow stream get_next failed \(error 5\): the producer failed"):
            _core.encode_batch(stream, "id", ["s"])
        assert stream.released == 1 and failing.released["array"] == 1
    finally:
        failing.free()


# ------------------------------------------------------------------ consumed capsules

class Replay:
    """Hands out the same capsules every time: the second consumer gets moved-out structs."""

    def __init__(self, obj):
        self.capsules = obj.__arrow_c_array__()

    def __arrow_c_array__(self, requested_schema=None):
        return self.capsules


def test_consumed_capsules_are_refused():
    rb = pa.record_batch({"id": pa.array([1, 2]), "v": pa.array([[1.0, 2.0]] * 2, pa.list_(pa.float32(), 2))})
    replay = Replay(rb)
    first = _core.encode_batch(replay, "id", ["v"], vector_column="v")
    assert first == _core.encode_batch(rb, "id", ["v"], vector_column="v")
    with pytest.raises(ValueError, match="already consumed"):
        _core.encode_batch(replay, "id", ["v"], vector_column="v")
    column = Replay(rb.column("v"))
    VectorCodec("float", 2).serialize_many(column)
    with pytest.raises(ValueError, match="already consumed"):
        VectorCodec("float", 2).serialize_many(column)
    stream = rb.__arrow_c_stream__()

    class Stream:
        def __arrow_c_stream__(self, requested_schema=None):
            return stream

    _core.encode_batch(Stream(), "id", ["v"], vector_column="v")
    with pytest.raises(ValueError, match="already consumed"):
        _core.encode_batch(Stream(), "id", ["v"], vector_column="v")


def test_released_root_structs_are_refused():
    for defect in ("released", "schema_released"):
        node = batch(strings(), **{defect: True})
        exp = A.Exported(node)
        try:
            with pytest.raises(ValueError, match="already consumed"):
                _core.encode_batch(exp, "id", ["s"])
            with pytest.raises(ValueError, match="already consumed"):
                VectorCodec("float", 2).serialize_many(exp)
        finally:
            exp.free()


# ------------------------------------------------------------------ release with an error pending

def python_work():
    """What a ctypes/cffi producer's release callback may do: run Python."""
    return sum(range(10)), [str(i) for i in range(3)]


@pytest.mark.parametrize("consumer", ["encoder", "codec"])
@pytest.mark.parametrize("failure", ["validation", "type", "row"])
def test_release_running_python_keeps_the_real_error(consumer, failure):
    if failure == "validation":
        node, kind, pattern = lst(offsets=[0, 4, 2, 6]), ValueError, "offsets decrease"
    elif failure == "type":
        node = A.Node(b"+w:2", 3, [None], [A.Node(b"i", 6, [None, i32(*range(6))], name=b"item")],
                      name=b"v")
        kind, pattern = TypeError, "got fixed_size_list<int32, 2>"
    else:
        node = fsl(null_count=1)
        node.buffers[0] = bytes([0b110])  # row 0 null
        kind, pattern = ValueError, "row 0"
    if consumer == "encoder":
        node = batch(node)
        call = lambda e: _core.encode_batch(e, "id", ["v"], vector_column="v")  # noqa: E731
    else:
        call = lambda e: VectorCodec("float", 2).serialize_many(e)  # noqa: E731
    expect_error(call, A.Exported(node, on_release=python_work), kind, pattern)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_release_raising_does_not_replace_the_real_error():
    def boom():
        raise RuntimeError("release failed")

    exp = A.Exported(batch(strings(offsets=[0, 3, 1, 6])), on_release=boom)
    try:
        with pytest.raises(ValueError, match="offsets decrease"):
            _core.encode_batch(exp, "id", ["s"])
        assert exp.released == {"schema": 1, "array": 1}
    finally:
        exp.free()


def test_stream_release_running_python_keeps_the_real_error():
    exported = A.Exported(batch(strings(offsets=[0, 3, 1, 6])), on_release=python_work)
    stream = A.Stream([exported], on_release=python_work)
    try:
        with pytest.raises(ValueError, match="offsets decrease"):
            _core.encode_batch(stream, "id", ["s"])
        assert stream.released == 1 and exported.released == {"schema": 1, "array": 1}
    finally:
        exported.free()


# ------------------------------------------------------------------ ids: one rule

WHITESPACE = [chr(c) for c in range(0x110000) if chr(c).isspace()]


def encoder_accepts(id_value: str, prefix: str) -> bool:
    rb = pa.record_batch({"id": pa.array([id_value])})
    try:
        _core.encode_batch(rb, "id", [], id_prefix=prefix)
    except ValueError as exc:
        assert "column 'id', row 0:" in str(exc)
        return False
    return True


def rule_accepts(full_id: str) -> bool:
    try:
        check_id(full_id)
    except ValueError:
        return False
    return True


def test_every_whitespace_character_makes_a_blank_id():
    for ch in WHITESPACE:
        for id_value, prefix in ((ch, ""), (ch * 3, ""), (ch, " "), ("", ch), (ch + "x", ""),
                                 ("x" + ch, ""), (ch, "p/")):
            assert encoder_accepts(id_value, prefix) == rule_accepts(prefix + id_value), \
                (id_value, prefix)
    # neighbours of whitespace code points that are not whitespace
    for cp in (0x08, 0x0e, 0x1b, 0x21, 0x84, 0x86, 0x9f, 0xa1, 0x167f, 0x1681, 0x1fff, 0x200b,
               0x2027, 0x202a, 0x202e, 0x2030, 0x205e, 0x2060, 0x2fff, 0x3001, 0xfeff):
        assert encoder_accepts(chr(cp), "") and rule_accepts(chr(cp))


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.text(st.sampled_from(WHITESPACE[:8] + WHITESPACE[-8:] + ["a", "|", "é", "\u200b"]),
               max_size=4),
       st.text(st.sampled_from([" ", "\u3000", "p", "/", "|"]), max_size=3))
def test_string_ids_follow_check_id(id_value, prefix):
    assert encoder_accepts(id_value, prefix) == rule_accepts(prefix + id_value)


def test_blank_id_error_names_row_and_column():
    rb = pa.record_batch({"key": pa.array(["a", "b", " \t", "d"])})
    with pytest.raises(ValueError, match=r"column 'key', row 7: id is only whitespace"):
        _core.encode_batch(rb, "key", [], row_base=5)
    with pytest.raises(ValueError, match=r"column 'key', row 2: id is only whitespace"):
        _core.encode_batch(pa.record_batch({"key": pa.array(["a", "b", "\u3000", "d"],
                                                            pa.large_string())}), "key", [])


def test_fields_that_would_repeat_a_member_are_refused():
    rb = pa.record_batch({"id": pa.array([1]), "Id": pa.array(["x"]), "@metadata": pa.array(["m"]),
                          "a": pa.array([2])})
    for fields in (["Id"], ["a", "@metadata"]):
        with pytest.raises(ValueError, match="cannot hold"):
            _core.encode_batch(rb, "id", fields)
    with pytest.raises(ValueError, match=r"fields\[1\] repeats column 'a'"):
        _core.encode_batch(rb, "id", ["a", "a"])


def test_conventions_match_the_bulk_writer():
    """BulkWriter.store uses the same rule: the ids check_id refuses, store refuses."""
    w = bulkwire.BulkWriter()
    for bad in ["", " ", "\u3000\t", "x|", "\x1c"]:
        with pytest.raises(ValueError):
            w.store({"a": 1}, id=bad)
        with pytest.raises(ValueError):
            check_id(bad)
    w.close()
    list(w.pieces())

