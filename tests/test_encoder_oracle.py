"""Differential suite: bulkwire.dumps / to_builtins against the JSON round trip,
``json.dumps(json.loads(json.dumps(x, default=...)))``, byte for byte (tests/oracle.py)."""
from __future__ import annotations

import collections
import dataclasses
import datetime
import decimal
import enum
import json
import math
import uuid

import numpy as np
import pytest

import bulkwire
from oracle import NOT_SERIALIZABLE, entity_default, oracle_bytes, oracle_error, round_trip


def check(x, default=entity_default, our_default=bulkwire.ENTITY):
    expected = oracle_bytes(x, default)
    assert bulkwire.dumps(x, default=our_default) == expected
    assert bulkwire.Encoder(default=our_default).encode(x) == expected
    got = bulkwire.to_builtins(x, default=our_default)
    want = round_trip(x, default)
    # NaN != NaN: compare through the canonical bytes as well as by value
    assert json.dumps(got) == json.dumps(want)


def check_error(x, default=entity_default, our_default=bulkwire.ENTITY):
    expected = oracle_error(x, default)
    with pytest.raises(type(expected)) as info:
        bulkwire.dumps(x, default=our_default)
    assert str(info.value) == str(expected)


# ---------------------------------------------------------------- entity types
class Color(enum.Enum):
    RED = "red"
    BLUE = 2
    NESTED = (1, "x")


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 10


class Perm(enum.IntFlag):
    R = 4
    W = 2


class Mood(str, enum.Enum):
    HAPPY = "happy"
    SAD = "s\u00e4d"


class Plain:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class WithToJson:
    def __init__(self):
        self.hidden = "dict loses"

    def to_json(self):
        return {"via": "to_json", "n": 1}


class ToJsonNotCallable:
    to_json = 5

    def __init__(self):
        self.a = 1


class Empty:
    pass


class Slotted:
    __slots__ = ("a",)

    def __init__(self):
        self.a = 1


@dataclasses.dataclass
class Point:
    x: float
    y: float
    tags: list


Pair = collections.namedtuple("Pair", "left right")


class MyStr(str):
    def __str__(self):
        return "never used"


class MyInt(int):
    def __repr__(self):
        return "never used"


class MyFloat(float):
    def __repr__(self):
        return "never used"


class MyDict(dict):
    pass


class MyList(list):
    pass


UTC = datetime.timezone.utc

CASES = {
    "scalars": [None, True, False, 0, -1, 1, 2**63, -(2**63) - 1, 10**300, 0.0, -0.0, 1.5],
    "floats": [1e16, 1e15, 1e-5, 1e-4, 123456789.123, 5e-324, 1.7976931348623157e308,
               float("nan"), float("inf"), float("-inf"), 0.1, 1 / 3],
    "strings": ["", "plain", 'q"uote', "back\\slash", "\n\r\t\b\f", "\x00\x01\x1f\x7f",
                "caf\u00e9", "\u20ac\u4e2d", "\U0001f600 astral", "\ud800 lone", "\udfff",
                "\ud83d\ude00", "mix \u0080\u00ff\u0100\uffff\U00010000\U0010ffff"],
    "nested": {"a": [1, {"b": (2, 3)}, [], {}], "c": {"d": {"e": [None]}}},
    "tuple_set": {"t": (1, 2), "s": {3}, "empty_set": set(), "pair": Pair(1, "r")},
    "keys": {1: "int", 2.5: "float", True: "bool", None: "none", "s": "str",
             float("nan"): 1, float("inf"): 2, -0.0: 3, 10**30: 4, Level.HIGH: 5,
             MyStr("k"): 6, MyFloat(0.5): 7},
    "collisions": [{1: "a", "1": "b"}, {"1": "a", 1: "b", "x": 0}, {True: 1, "true": 2},
                   {1.0: "f", "1.0": "s"}, {None: 1, "null": 2, "z": [{1: 2, "1": 3}]}],
    "subclasses": [MyStr("raw"), MyInt(7), MyFloat(2.5), MyDict(a=1), MyList([1, 2]),
                   Mood.HAPPY, Mood.SAD, Level.LOW, Perm.R | Perm.W, Perm.W],
    "enums": [Color.RED, Color.BLUE, Color.NESTED, {"c": Color.RED}],
    "objects": [Plain(a=1, b=Plain(c=[1, 2], d={"k": Color.BLUE})), WithToJson(),
                Point(1.0, 2.5, ["t"]), ToJsonNotCallable(), [Plain(x=Plain(y=Plain(z=1)))]],
    "datetimes": [datetime.datetime(2024, 5, 1, 12, 30, 45, 123456),
                  datetime.datetime(2024, 5, 1), datetime.datetime.max, datetime.datetime.min,
                  datetime.datetime(999, 1, 2, 3, 4, 5), datetime.datetime(2024, 5, 1, tzinfo=UTC),
                  datetime.datetime.max.replace(tzinfo=UTC),
                  datetime.datetime(2020, 2, 29, 23, 59, 59, 999999,
                                    tzinfo=datetime.timezone(datetime.timedelta(hours=-5)))],
    "timedeltas": [datetime.timedelta(0), datetime.timedelta(seconds=1.5),
                   datetime.timedelta(days=2, hours=3, minutes=4, seconds=5, microseconds=60),
                   datetime.timedelta(seconds=-1), datetime.timedelta(days=-3, hours=5),
                   datetime.timedelta(microseconds=1), datetime.timedelta.max,
                   datetime.timedelta.min],
    "numpy": [np.arange(5, dtype=np.float32) / 3, np.arange(6, dtype=np.float64).reshape(2, 3) / 7,
              np.array([1, -2, 3], dtype=np.int8), np.array([2**64 - 1], dtype=np.uint64),
              np.array([True, False]), np.zeros((2, 0)), np.zeros((0,)), np.array(3.5),
              np.float32(0.1), np.int64(-5), np.uint8(200), np.bool_(True), np.float16(0.1),
              np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2],
              np.arange(4, dtype=">f4"), np.arange(4, dtype=">i8"),
              np.array([np.nan, np.inf, -np.inf, -0.0], dtype=np.float32),
              np.array([1, "x", None, {"a": 1}], dtype=object),
              np.array(["ab", "c"]), np.array([1 + 2j]) if False else np.array([1.5, 2.5], dtype=np.float16),
              np.datetime64("2024-01-02T03:04:05.123456"), np.array(["2024-01-02T01:02:03"], dtype="datetime64[us]"),
              np.frombuffer(b"\x00" + np.arange(3, dtype=np.float64).tobytes(), dtype=np.float64, offset=1)],
    "shared": None,  # filled below
    "order": {"z": 1, "a": 2, "m": 3, "b": 4},
    "embedding": {"name": "doc", "n": 3, "ok": True, "vec": [float(i) / 7 for i in range(100)],
                  "v32": np.random.default_rng(1).random(64, dtype=np.float32)},
}
_shared = [1, 2]
_shared_obj = Plain(a=1)
CASES["shared"] = {"first": _shared, "second": _shared, "objs": [_shared_obj, _shared_obj]}


@pytest.mark.parametrize("name", sorted(CASES))
def test_case_matches_round_trip(name):
    value = CASES[name]
    check(value)
    if isinstance(value, list):
        for item in value:
            check(item)


@pytest.mark.parametrize("value", [
    1.5, 0.0, float("nan"), "x", [1, "a"], {"a": None}, {1: 2}, MyStr("s"), MyInt(3), Level.LOW,
])
def test_plain_json_mode(value):
    check(value, default=None, our_default=None)


def test_custom_hook_result_is_walked_again():
    def hook(o):
        if isinstance(o, complex):
            return {"re": o.real, "im": o.imag, "tags": {1, 2} if False else [1]}
        if isinstance(o, decimal.Decimal):
            return str(o)
        raise TypeError(f"no {type(o).__name__}")

    check({"c": 1 + 2j, "d": decimal.Decimal("1.10")}, default=hook, our_default=hook)
    check_error({"u": uuid.UUID(int=1)}, default=hook, our_default=hook)


def test_hook_that_returns_another_object_needing_the_hook():
    def hook(o):
        if isinstance(o, complex):
            return decimal.Decimal(1)
        if isinstance(o, decimal.Decimal):
            return "dec"
        raise TypeError("x")
    check([1j, 2j], default=hook, our_default=hook)


@pytest.mark.parametrize("value", [
    datetime.date(2024, 1, 1), datetime.time(1, 2), b"bytes", bytearray(b"x"),
    decimal.Decimal("1.5"), uuid.UUID(int=5), frozenset({1}), Empty(), Slotted(), 1 + 2j,
    [1, {"deep": Empty()}], object(), np.array(["2024-01-02"], dtype="datetime64[D]"),
    np.longdouble(1.5) if False else np.array([1j]),
])
def test_unsupported_values_raise_like_oracle(value):
    check_error(value)


@pytest.mark.parametrize("value", [b"x", datetime.date(2024, 1, 1), np.arange(3), Color.RED, {1, 2}])
def test_plain_json_mode_rejects_what_json_rejects(value):
    check_error(value, default=None, our_default=None)


def test_bad_key_type_message():
    check_error({(1, 2): "tuple key"})
    check_error({"ok": {frozenset(): 1}})


def _cycle_cases():
    d = {}
    d["self"] = d
    lst = []
    lst.append([lst])
    obj = Plain()
    obj.me = obj
    class SelfJson:
        def to_json(self):
            return self
    class Loop:
        def to_json(self):
            return {"again": self}
    indirect = Plain(a=None)
    indirect.a = {"back": [indirect]}
    return [d, lst, obj, SelfJson(), Loop(), indirect, {"x": [d]}]


@pytest.mark.parametrize("index", range(7))
def test_cycles_raise_value_error(index):
    value = _cycle_cases()[index]
    check_error(value)
    with pytest.raises(ValueError, match="^Circular reference detected$"):
        bulkwire.dumps(value)


def test_custom_hook_returning_its_argument_is_a_cycle():
    with pytest.raises(ValueError, match="Circular reference detected"):
        bulkwire.dumps(Empty(), default=lambda o: o)


def test_same_object_side_by_side_is_not_a_cycle():
    inner = {"k": [1, 2]}
    value = [inner, inner, (inner, inner)]
    check(value)
    assert bulkwire.dumps(value).count(b'"k"') == 4


def test_depth_limit_is_a_recursion_error():
    limit = bulkwire.MAX_DEPTH
    ok = []
    for _ in range(limit - 1):
        ok = [ok]
    assert bulkwire.dumps(ok) == b"[" * (limit - 1) + b"[]" + b"]" * (limit - 1)
    deep = [ok]
    deep = [deep]
    with pytest.raises(RecursionError):
        bulkwire.dumps(deep)
    d = {}
    for _ in range(limit + 5):
        d = {"k": d}
    with pytest.raises(RecursionError):
        bulkwire.dumps(d)


def test_thousand_levels_of_entities_work():
    node = Plain(leaf=1)
    for _ in range(1000):
        node = Plain(child=node)
    assert bulkwire.dumps(node) == b'{"child": ' * 1000 + b'{"leaf": 1}' + b"}" * 1000


def test_float32_shortest_option():
    arr = np.array([0.1, 1 / 3, 1e-8, 3e38, 16777216.0, 0.0, -0.0, np.nan, np.inf],
                   dtype=np.float32)
    out = bulkwire.dumps({"v": arr}, float32="shortest")
    parsed = json.loads(out)["v"]
    assert np.array_equal(np.array(parsed, dtype=np.float32), arr, equal_nan=True)
    assert out.startswith(b'{"v": [0.1, 0.33333334, 1e-08, 3e+38, 16777216.0, 0.0, -0.0, NaN, Infinity]')
    widened = bulkwire.dumps({"v": arr})
    assert widened == oracle_bytes({"v": arr})
    assert len(out) < len(widened)


def test_nan_and_signed_zero_survive():
    assert bulkwire.dumps([math.nan, -math.inf, math.inf, -0.0]) == b"[NaN, -Infinity, Infinity, -0.0]"


class Mutator:
    """A value whose to_json hook changes the container it sits in, mid-walk."""

    def __init__(self, target, change):
        self.target = target
        self.change = change

    def to_json(self):
        self.change(self.target)
        return "m"


def mutated_dict(change):
    d = {}
    d["a"] = Mutator(d, change)
    d["b"] = 2
    return d


def mutated_list(change):
    lst = []
    lst.append(Mutator(lst, change))
    lst.append(1)
    return lst


@pytest.mark.parametrize("make,change", [
    (mutated_dict, lambda d: d.clear()),
    (mutated_dict, lambda d: d.update(c=3)),
    (mutated_dict, lambda d: d.pop("b")),
    (mutated_list, lambda lst: lst.clear()),
    (mutated_list, lambda lst: lst.append(2)),
    (mutated_list, lambda lst: lst.pop()),
    (mutated_list, lambda lst: lst.insert(0, 0) if len(lst) < 4 else None),  # visited again
], ids=["dict-clear", "dict-add", "dict-remove", "list-clear", "list-append", "list-pop",
        "list-insert"])
def test_a_container_mutated_by_a_hook_mid_walk_encodes_as_json_does(make, change):
    """What json does when a hook changes the container being walked (a CPython detail: it
    walks a dict's items as they were, a list as it is at each index); each side gets a
    fresh graph, since the hook changes it."""
    assert bulkwire.dumps(make(change)) == oracle_bytes(make(change))
    assert bulkwire.Encoder().encode(make(change)) == oracle_bytes(make(change))


def test_hook_that_encodes_reentrantly():
    """A hook may call dumps itself (nested encodes must not share the scratch buffer)."""
    def ours(o):
        return bulkwire.dumps({"inner": [1.5, "x"] * 50}).decode()

    def reference(o):
        return json.dumps({"inner": [1.5, "x"] * 50})

    value = {"a": [1j, {"b": 2j}], "pad": "y" * 5000}
    assert bulkwire.dumps(value, default=ours) == oracle_bytes(value, reference)


def test_encoder_options_are_validated():
    with pytest.raises(ValueError, match="float32 must be 'widen' or 'shortest'"):
        bulkwire.dumps(1, float32="half")
    with pytest.raises(TypeError, match="ensure_ascii must be True or False"):
        bulkwire.Encoder(ensure_ascii="yes")
    with pytest.raises(TypeError, match="default must be None, bulkwire.ENTITY or a callable"):
        bulkwire.Encoder(default=42)
    enc = bulkwire.Encoder(default=None, ensure_ascii=False, float32="shortest")
    assert (enc.default, enc.ensure_ascii, enc.float32) == (None, False, "shortest")
    assert bulkwire.Encoder().default is bulkwire.ENTITY
    assert repr(bulkwire.ENTITY) == "bulkwire.ENTITY"


@pytest.mark.parametrize("dtype", ["f4", "f8", "f2", "i2", "i4", "i8", "u2", "u4", "u8"])
def test_byte_swapped_arrays_match_native(dtype):
    native = (np.arange(-6, 6).reshape(3, 4) * 1.37).astype("<" + dtype)
    swapped = native.astype(">" + dtype)
    for mode in ("widen", "shortest"):
        assert bulkwire.dumps(swapped, float32=mode) == bulkwire.dumps(native, float32=mode)
    check(swapped[:, ::-2])


class _FloatSub(float):
    pass


@pytest.mark.parametrize("seq", [
    [0.5, 1.25, -3.0],
    [0.1, 2, 0.2, None, 1e300, [0.3, 0.4], 5e-324, "x", float("inf"), -0.0],
    [1, 0.5, 0.25],                      # the run starts after the first item
    [0.5, 0.25, 7],                      # and ends on the last but one
    [_FloatSub(1.5), 2.5, _FloatSub(3.5), 4.5, 5.5],  # subclasses interrupt the run
    (0.5, 1.5, (2.5, 3.5), 4.5),
    collections.namedtuple("P", "x y z")(0.5, 1.5, 2.5),
    [float(i) / 7 for i in range(1000)],
    [[0.1] * 3] * 3,
])
def test_runs_of_floats_in_sequences(seq):
    check(seq)
    check({"v": seq, "after": 1})
