"""Hypothesis-generated object graphs: bulkwire against the JSON round trip."""
from __future__ import annotations

import datetime
import enum
import json

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import bulkwire
from oracle import oracle_bytes, round_trip


class Shade(enum.Enum):
    DARK = "dark"
    LIGHT = 7


class Size(enum.IntEnum):
    S = 1
    L = 3


class Node:
    def __init__(self, **fields):
        self.__dict__.update(fields)

    def __repr__(self):
        return f"Node({self.__dict__!r})"


text = st.text(st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF,
                             exclude_categories=()), max_size=20)
ints = st.one_of(st.integers(-(2**70), 2**70), st.integers(-10, 10))
floats = st.floats(allow_nan=True, allow_infinity=True, width=64)
keys = st.one_of(text, ints, floats, st.booleans(), st.none())
datetimes = st.datetimes(min_value=datetime.datetime(1, 1, 1), max_value=datetime.datetime.max,
                         timezones=st.one_of(st.none(), st.just(datetime.timezone.utc)))
scalars = st.one_of(st.none(), st.booleans(), ints, floats, text, datetimes, st.timedeltas(),
                    st.sampled_from(list(Shade) + list(Size)))
arrays = hnp.arrays(dtype=st.sampled_from([np.float32, np.float64, np.int32, np.int64, np.uint8,
                                           np.bool_, np.float16, np.dtype(">f4")]),
                    shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4))


def extend(children):
    return st.one_of(
        st.lists(children, max_size=5),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(keys, children, max_size=5),
        st.dictionaries(text, children, min_size=1, max_size=4).map(lambda d: Node(**{
            ("f_" + str(i)): v for i, v in enumerate(d.values())})),
        st.frozensets(st.one_of(ints, text), max_size=4).map(set),
    )


graphs = st.recursive(st.one_of(scalars, arrays), extend, max_leaves=25)


@given(graphs)
def test_dumps_matches_round_trip(value):
    assert bulkwire.dumps(value) == oracle_bytes(value)


@given(graphs)
def test_to_builtins_matches_round_trip(value):
    assert json.dumps(bulkwire.to_builtins(value)) == json.dumps(round_trip(value))


@given(st.recursive(st.one_of(st.none(), st.booleans(), ints, floats, text),
                    lambda c: st.one_of(st.lists(c, max_size=5), st.dictionaries(keys, c, max_size=5)),
                    max_leaves=25))
def test_plain_json_mode_and_non_ascii(value):
    expected = round_trip(value, default=None)
    assert bulkwire.dumps(value, default=None) == json.dumps(expected).encode()
    try:
        want = json.dumps(expected, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return  # lone surrogates cannot be UTF-8; tested separately
    assert bulkwire.dumps(value, default=None, ensure_ascii=False) == want


@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=2, max_side=16),
                  elements=st.floats(width=32, allow_nan=True, allow_infinity=True)))
def test_float32_shortest_round_trips_as_float32(arr):
    parsed = json.loads(bulkwire.dumps(arr, float32="shortest"))
    back = np.array(parsed, dtype=np.float32).reshape(arr.shape)
    assert np.array_equal(back.view(np.uint32)[~np.isnan(arr)], arr.view(np.uint32)[~np.isnan(arr)])
    assert np.array_equal(np.isnan(back), np.isnan(arr))
