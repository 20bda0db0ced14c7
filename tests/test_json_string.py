"""JSON string text (csrc json_string.c), against json.dumps: the three storage widths of a
str (1, 2 and 4 bytes per character), ensure_ascii on and off, keys and values, and the Arrow
string columns of the batch encoder (UTF-8 in). The C core's own unit test and fuzz target
are tests/c/test_json_string.c and tests/c/fuzz/fuzz_json_string.c."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, strategies as st

import bulkwire
from oracle import round_trip

pa = pytest.importorskip("pyarrow")

# Alphabets that make CPython store the string 1, 2 or 4 bytes per character, each with the
# characters json escapes (quote, backslash, controls, DEL) mixed in.
SPECIAL = st.sampled_from(['"', "\\", "\x00", "\x1f", "\b", "\f", "\n", "\r", "\t", "\x7f", "/"])
LATIN1 = st.text(st.one_of(SPECIAL, st.characters(max_codepoint=0xFF)), max_size=40)
LONE_SURROGATES = st.sampled_from(["\ud800", "\udbff", "\udc00", "\udfff"])
BMP = st.text(st.one_of(SPECIAL, LONE_SURROGATES, st.characters(max_codepoint=0xFFFF)), max_size=40)
ANY = st.text(st.one_of(SPECIAL, LONE_SURROGATES, st.characters()), max_size=40)
NO_SURROGATES = st.text(st.one_of(SPECIAL, st.characters(exclude_categories=["Cs"])), max_size=40)


def test_non_ascii_output_mode():
    value = {"t": "caf\u00e9 \U0001f600 \u20ac", "c": "\x00\n\x7f", "k\u00e9": 1}
    assert bulkwire.dumps(value, ensure_ascii=False) == json.dumps(
        round_trip(value), ensure_ascii=False).encode()
    with pytest.raises(UnicodeEncodeError):
        bulkwire.dumps("\ud800", ensure_ascii=False)


@pytest.mark.parametrize("text", [
    "", "plain", 'q"uote\\back', "\x00\x01\x1f\x7f", "\b\f\n\r\t", "caf\u00e9", "\u20ac\uffff",
    "\U0001f600", "\U0010ffff", "\ud800", "\udfff\ud800", "\ud83d\ude00", "a" * 1000 + "\n",
])
def test_known_strings(text):
    assert bulkwire.dumps(text) == json.dumps(text).encode()
    assert bulkwire.dumps({text: text}) == json.dumps({text: text}).encode()


@pytest.mark.parametrize("alphabet", [LATIN1, BMP, ANY], ids=["ucs1", "ucs2", "ucs4"])
@given(data=st.data())
def test_ensure_ascii_matches_json(alphabet, data):
    text = data.draw(alphabet)
    assert bulkwire.dumps(text) == json.dumps(text).encode()
    assert bulkwire.dumps([text, {text: 1}]) == json.dumps([text, {text: 1}]).encode()


@given(NO_SURROGATES)
def test_utf8_output_matches_json(text):
    assert bulkwire.dumps(text, ensure_ascii=False) == json.dumps(text, ensure_ascii=False).encode()
    assert bulkwire.dumps({text: [text]}, ensure_ascii=False) == \
        json.dumps({text: [text]}, ensure_ascii=False).encode()


@given(st.lists(NO_SURROGATES, min_size=1, max_size=8))
def test_arrow_string_columns_parse_back(texts):
    """The batch encoder escapes UTF-8 column data: every document reads back as the text."""
    table = pa.table({"id": list(range(len(texts))), "s": pa.array(texts, pa.string()),
                      "l": pa.array(texts, pa.large_string())})
    body = b"".join(bulkwire._core.encode_batch(table, "id", ["s", "l"], first=True))
    docs = [c["Document"] for c in json.loads(b"[" + body + b"]")]
    assert [(d["s"], d["l"]) for d in docs] == [(t, t) for t in texts]
