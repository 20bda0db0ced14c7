"""The encoder's fast paths against their references: the dumps entry point (a C function
taking vectorcall arguments) against a Python def of the same signature, the one-pass dict
walk (str keys written straight from the dict, the output rewound on the first key of
another type) and the block string escaper against the JSON round trip and json.dumps."""
from __future__ import annotations

import datetime
import json
import types

import pytest
from hypothesis import given
from hypothesis import strategies as st

import bulkwire
from oracle import entity_default, oracle_bytes


# ---- the entry point ----

def reference_dumps(obj, *, default=bulkwire.ENTITY, ensure_ascii=True, float32="widen"):
    """The signature dumps keeps, as a def: Python words its argument errors."""
    return bulkwire.dumps(obj, default=default, ensure_ascii=ensure_ascii, float32=float32)


def test_dumps_is_the_c_function():
    assert isinstance(bulkwire.dumps, types.BuiltinFunctionType)
    assert bulkwire.dumps is bulkwire.encoding.dumps
    assert bulkwire.dumps.__doc__.startswith(
        "dumps(obj, *, default=ENTITY, ensure_ascii=True, float32='widen') -> bytes")
    assert ">>> dumps(" in bulkwire.dumps.__doc__


ARGUMENT_ERRORS = [
    ((), {}),
    ((1, 2), {}),
    ((1, 2, 3), {}),
    ((1,), {"foo": 2}),
    ((1,), {"obj": 2}),
    ((), {"default": None}),
    ((1,), {"default": None, "sort_keys": True}),
]


@pytest.mark.parametrize("args, kwargs", ARGUMENT_ERRORS)
def test_argument_errors_read_as_for_a_def(args, kwargs):
    with pytest.raises(TypeError) as want:
        reference_dumps(*args, **kwargs)
    with pytest.raises(TypeError) as got:
        bulkwire.dumps(*args, **kwargs)
    assert str(got.value) == str(want.value).replace("reference_dumps", "dumps")


def test_keywords_by_any_str():
    """Keyword names built at run time are equal strings at other addresses."""
    value = {"t": "caf\u00e9", "x": [1.5, datetime.datetime(2024, 1, 2)]}
    names = {"".join(["ensure", "_ascii"]): False, "".join(["float", "32"]): "shortest"}
    assert bulkwire.dumps(value, **names) == json.dumps(
        json.loads(json.dumps(value, default=entity_default)), ensure_ascii=False).encode()
    assert bulkwire.dumps(**{"".join(["o", "bj"]): value}) == oracle_bytes(value)


@pytest.mark.parametrize("kwargs", [{"default": 3}, {"ensure_ascii": 1}, {"float32": "x"}])
def test_option_errors_unchanged(kwargs):
    with pytest.raises((TypeError, ValueError)) as err:
        bulkwire.dumps({}, **kwargs)
    assert list(kwargs)[0] in str(err.value)


# ---- the one-pass dict walk ----

class Boxed:
    """Reaches the entity conventions' __dict__ rule: its walk runs no hook, but it is not
    one of the values written straight from the dict."""

    def __init__(self, value):
        self.value = value


OTHER_KEYS = [1, -7, 2**70, 1.5, float("nan"), float("inf"), True, False, None]
INERT = ["s", "caf\u00e9", "\x00\"\\", 3, 2**80, -0.0, 1e300, None, True, False]
NOT_INERT = [[1, 2.5], (3,), {"n": 1}, {}, [], datetime.datetime(2024, 5, 1), Boxed(2), {1: "x"}]


@pytest.mark.parametrize("position", range(6))
@pytest.mark.parametrize("value_kind", ["inert", "not inert", "mixed"])
@pytest.mark.parametrize("other_key", OTHER_KEYS, ids=repr)
def test_first_non_str_key_at_each_position(position, value_kind, other_key):
    values = {"inert": INERT, "not inert": NOT_INERT, "mixed": INERT[::2] + NOT_INERT[::2]}[value_kind]
    items = [(f"k{i}", values[i % len(values)]) for i in range(6)]
    items.insert(position, (other_key, values[position % len(values)]))
    d = dict(items)
    assert bulkwire.dumps(d) == oracle_bytes(d)
    assert bulkwire.dumps({"outer": d, 5: [d]}) == oracle_bytes({"outer": d, 5: [d]})
    assert bulkwire.dumps([{"a": 1}, d, {"b": d}]) == oracle_bytes([{"a": 1}, d, {"b": d}])


def test_coerced_keys_collide_after_the_rewind():
    """Written members are rewound: a str key equal to a later key's coercion appears once,
    at its first position, with the last value (json.loads keeps it so)."""
    d = {"1": "first", "x": [1], 1: "last", "true": 0, True: 1}
    assert bulkwire.dumps(d) == oracle_bytes(d)


keys = st.one_of(st.text(max_size=6), st.integers(-3, 3), st.sampled_from([1.5, True, False, None]))
leaves = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(),
                   st.text(max_size=24), st.datetimes(), st.builds(Boxed, st.integers()))
graphs = st.recursive(leaves, lambda children: st.one_of(
    st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=6),
    st.dictionaries(st.text(max_size=6), children, max_size=6)), max_leaves=30)


@given(graphs)
def test_dicts_against_the_round_trip(value):
    assert bulkwire.dumps(value) == oracle_bytes(value)
    assert bulkwire.Encoder().encode({"doc": value}) == oracle_bytes({"doc": value})


class Mutator:
    """Changes the dict being walked when the walk reaches it, as a hook may."""

    def __init__(self, target, action):
        self.target, self.action = target, action

    def to_json(self):
        self.action(self.target)
        return "m"


@pytest.mark.parametrize("action", [
    lambda d: d.clear(),
    lambda d: d.update({f"new{i}": i for i in range(20)}),
    lambda d: d.pop("z"),
    lambda d: d.__setitem__("a", "changed"),
    lambda d: d.__setitem__(7, "int key added"),
], ids=["clear", "grow", "pop-later", "set-earlier", "add-int-key"])
@pytest.mark.parametrize("position", [0, 2, 4])
def test_a_hook_changing_the_dict_sees_json_s_snapshot(action, position):
    def build():
        d = {}
        items = [("a", 1), ("b", "two"), ("c", 3.5), ("y", [1]), ("z", {"q": None})]
        for i, (k, v) in enumerate(items):
            if i == position:
                d["m"] = None  # replaced below, once d exists
            d[k] = v
        d["m"] = Mutator(d, action)
        return d
    # json's conventions call to_json through the default hook; the round trip walks its own copy
    assert bulkwire.dumps(build()) == oracle_bytes(build())


def dict_with_holes(size, deleted):
    """A dict whose item table holds the deleted items' empty slots."""
    d = {f"k{i}": i if i % 3 else [i, str(i)] for i in range(size)}
    for i in deleted:
        del d[f"k{i}"]
    return d


@pytest.mark.parametrize("size,deleted", [(1, [0]), (3, [0]), (3, [2]), (8, [1, 2, 3]),
                                          (40, range(0, 40, 2)), (40, range(39))])
def test_dicts_with_deleted_items(size, deleted):
    d = dict_with_holes(size, deleted)
    assert bulkwire.dumps(d) == oracle_bytes(d)
    mixed = {**d, 3: "int key", 2.5: None}  # general keys: another item table
    assert bulkwire.dumps(mixed) == oracle_bytes(mixed)


class Plain:
    def __init__(self, **attrs):
        self.__dict__.update(attrs)


@pytest.mark.parametrize("length", [0, 1, 16, 17])
@pytest.mark.parametrize("action", [
    lambda d: d.clear(),
    lambda d: d["later_list"].append(99),
    lambda d: d["later_dict"].update(added=1),
    lambda d: d.pop("later_list"),
], ids=["clear", "append-to-a-later-list", "grow-a-later-dict", "pop-a-later-list"])
def test_short_containers_and_datetimes_before_and_after_a_hook(length, action):
    """Short lists and dicts of scalars and datetimes are walked straight from the dict; the
    items after the first value that may run code are json's snapshot, whatever it does."""
    def build():
        d = {"list": list(range(length)), "tuple": tuple("x" * length),
             "dict": {f"k{i}": i / 2 for i in range(length)},
             "at": datetime.datetime(2024, 5, 1, 12, 30, 0, 5),
             "entity": Plain(x=1)}
        d["hook"] = Mutator(d, action)
        d.update(later_list=[1, 2], later_dict={"a": None}, at2=datetime.datetime.max)
        return d
    assert bulkwire.dumps(build()) == oracle_bytes(build())


@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_interned_keys_many_times_over(ensure_ascii):
    """Keys written again and again (their text kept between documents, by the key object):
    more distinct keys than are kept, keys made and dropped between calls, keys of 15 and 16
    bytes, keys that need an escape and non-ASCII keys; the first key of an object has no
    separator before it wherever it was kept from."""
    import sys

    fixed = [sys.intern(k) for k in ("a", "k" * 15, "k" * 16, 'q"uote', "tab\t", "\x7f", "é", "ü" * 3)]
    for round_ in range(3):
        made = [sys.intern(f"key{round_}_{i}") for i in range(1500)]  # more than the slots
        docs = [{k: i for k in fixed} for i in range(3)]
        docs += [{k: i, "a": [1, {k: i}]} for i, k in enumerate(made)]
        docs += [{"nested": {k: {k: k}}} for k in fixed]
        for d in docs:
            expected = json.dumps(d, ensure_ascii=ensure_ascii).encode()
            assert bulkwire.dumps(d, ensure_ascii=ensure_ascii) == expected
        del made, docs


# ---- the string escaper ----

@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_every_byte_value_at_every_block_offset(ensure_ascii):
    """Each code point 0..255 at each position of strings spanning one, two and three
    16-byte blocks, so an escape falls at the start, middle and end of a block and in the
    tail after the last whole block."""
    for length in (1, 7, 8, 15, 16, 17, 31, 32, 33, 40):
        for position in range(length):
            batch = []
            for code in range(256):
                chars = ["a"] * length
                chars[position] = chr(code)
                batch.append("".join(chars))
            got = bulkwire.dumps(batch, ensure_ascii=ensure_ascii)
            assert got == json.dumps(batch, ensure_ascii=ensure_ascii).encode(), (length, position)


@pytest.mark.parametrize("ensure_ascii", [True, False])
@given(st.lists(st.sampled_from(["a", "~", " ", '"', "\\", "\x00", "\x1f", "\x7f", "\x80", "\xe9",
                                 "\xff", "\u20ac", "\U0001f600", "\n"]), max_size=70)
       .map("".join))
def test_runs_across_block_boundaries(ensure_ascii, text):
    assert bulkwire.dumps(text, ensure_ascii=ensure_ascii) == \
        json.dumps(text, ensure_ascii=ensure_ascii).encode()
    assert bulkwire.dumps({text: text}, ensure_ascii=ensure_ascii) == \
        json.dumps({text: text}, ensure_ascii=ensure_ascii).encode()


@pytest.mark.parametrize("surrogate", ["\ud800", "\udbff", "\udc00", "\udfff"])
@pytest.mark.parametrize("prefix", ["", "a" * 15, "a" * 16, "\xe9" * 20])
def test_lone_surrogates(surrogate, prefix):
    """ensure_ascii writes them as \\uXXXX; without it they raise UnicodeEncodeError, as
    json.dumps(...).encode() does."""
    text = prefix + surrogate + "z"
    assert bulkwire.dumps(text) == json.dumps(text).encode()
    with pytest.raises(UnicodeEncodeError):
        json.dumps(text, ensure_ascii=False).encode()
    with pytest.raises(UnicodeEncodeError):
        bulkwire.dumps(text, ensure_ascii=False)
