"""The document id rule is one rule: every entry point that takes a document id (an entity's
store, an entity's own Id, counters, time series, attachments, an Arrow row with or without
an id prefix, load_arrow, the official client's drop-in) accepts and refuses the same ids,
and that decision is the official ``ravendb`` client's own (its bulk insert's key check),
over ids hypothesis makes up: whitespace of every kind, '|' anywhere, any text."""
from __future__ import annotations

import json
import os
import tempfile

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st
from ravendb.documents.bulk_insert_operation import BulkInsertOperation as ClientOperation

import bulkwire
import bulkwire.ravendb as dropin
from bulkwire import _core, conventions
from bulkwire.bulk import BulkWriter
from bulkwire.testing import LoopbackServer

from ravendb_store import store_on
from test_bulk_commands import Pulse

# characters near the rule's edges: whitespace to str.isspace (ASCII, Latin-1, and the
# three-byte ones), a zero-width space that is not whitespace, '|', and ordinary text
_EDGES = st.sampled_from([" ", "\t", "\n", "\x1c", "\x85", "\xa0", "\u1680", "\u2000",
                          "\u2028", "\u202f", "\u3000", "\u200b", "|", "a", "/", "é", "日", "😀"])
IDS = (st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
       | st.lists(_EDGES, max_size=6).map("".join))


def client_accepts(key: str) -> bool:
    """The official client's decision on a document id given to its bulk insert."""
    try:
        ClientOperation._verify_valid_key(key)
    except (ValueError, RuntimeError):
        return False
    return True


def accepts(call, key: str, refused=(ValueError,)) -> bool:
    """Whether ``call(key)`` accepted the id (a refusal must be one of ``refused``)."""
    try:
        call(key)
    except refused:
        return False
    return True


class Entity:
    def __init__(self, Id):
        self.Id = Id


def _series(writer, key):
    with writer.time_series_for(key, "Heartrate"):
        pass


def _typed_series(writer, key):
    with writer.typed_time_series_for(Pulse, key):
        pass


# bulkwire's own API: each takes the id on a fresh writer
OWN_ENTRY_POINTS = {
    "conventions.check_id": lambda key: conventions.check_id(key),
    "conventions.id_problem": lambda key: (_ for _ in ()).throw(ValueError(key))
    if conventions.id_problem(key) is not None else None,
    "BulkWriter.store(id=)": lambda key: BulkWriter().store({"n": 1}, key),
    "BulkWriter.store(entity's Id)": lambda key: BulkWriter().store(Entity(key)),
    "BulkWriter.store(dict's Id)": lambda key: BulkWriter().store({"Id": key}),
    "BulkWriter.store_many": lambda key: BulkWriter().store_many([{"n": 1}], [key]),
    "BulkWriter.counters_for": lambda key: BulkWriter().counters_for(key),
    "BulkWriter.attachments_for": lambda key: BulkWriter().attachments_for(key),
    "BulkWriter.time_series_for": lambda key: _series(BulkWriter(), key),
    "BulkWriter.typed_time_series_for": lambda key: _typed_series(BulkWriter(), key),
    "BulkInsert.counters_for": lambda key: bulkwire.BulkInsert(
        "http://127.0.0.1:9", "db").counters_for(key),
    "BulkInsert.attachments_for": lambda key: bulkwire.BulkInsert(
        "http://127.0.0.1:9", "db").attachments_for(key),
    "encode_batch (string id column)": lambda key: _core.encode_batch(
        pa.record_batch({"id": pa.array([key], pa.string())}), "id", []),
    "encode_batch (large_string id column)": lambda key: _core.encode_batch(
        pa.record_batch({"id": pa.array([key], pa.large_string())}), "id", []),
}


@pytest.mark.parametrize("entry", sorted(OWN_ENTRY_POINTS))
@settings(max_examples=min(300, settings().max_examples), deadline=None)
@given(key=IDS)
def test_every_entry_point_decides_as_the_official_client(entry, key):
    assert accepts(OWN_ENTRY_POINTS[entry], key) == client_accepts(key), (entry, key)


@settings(max_examples=min(300, settings().max_examples), deadline=None)
@given(key=IDS, cut=st.integers(0, 8))
def test_an_id_prefix_and_the_column_are_judged_as_one_id(key, cut):
    """``id_prefix`` + the id column's value is the id the rule judges, wherever it is cut."""
    cut = min(cut, len(key))
    prefix, rest = key[:cut], key[cut:]
    batch = pa.record_batch({"id": pa.array([rest], pa.string())})
    assert accepts(lambda _: _core.encode_batch(batch, "id", [], id_prefix=prefix), key) \
        == client_accepts(key), (prefix, rest)


@settings(max_examples=min(40, settings().max_examples), deadline=None)
@given(key=IDS)
def test_load_arrow_decides_as_the_official_client(key):
    table = pa.table({"id": pa.array([key], pa.string()), "n": [1]})
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "body.json")
        accepted = accepts(lambda k: bulkwire.load_arrow(table,
                                                         bulkwire.targets.request_file(out, id_prefix="")), key)
        if accepted:
            with open(out, "rb") as f:
                assert json.loads(f.read())[0]["Id"] == key
    assert accepted == client_accepts(key)


def test_the_refusals_name_the_argument_and_the_problem():
    with pytest.raises(ValueError, match=r"^entity's Id ends with '\|' \(the server would "
                                         r"generate the id\): 'users\|'$"):
        BulkWriter().store(Entity("users|"))
    with pytest.raises(ValueError, match=r"^id is only whitespace: '\\u3000'$"):
        BulkWriter().counters_for("\u3000")
    with pytest.raises(ValueError, match=r"^id is not valid UTF-8: '\\ud800'$"):
        BulkWriter().attachments_for("\ud800")
    with pytest.raises(TypeError, match=r"^id must be a str, not int$"):
        BulkWriter().counters_for(5)
    with pytest.raises(ValueError, match=r"column 'id', row 0: id ends with '\|'"):
        _core.encode_batch(pa.record_batch({"id": ["users|"]}), "id", [])
    assert {problem: conventions.ID_PROBLEMS[problem] for problem in
            (conventions.id_problem(k) for k in ("", " ", "a|", "\ud800"))} == \
        conventions.ID_PROBLEMS


# ---- the drop-in: the client's exceptions and words, the one rule's decision ----

@pytest.fixture(scope="module")
def store():
    with LoopbackServer() as server:
        with store_on(server) as store:
            yield store


def _dropin_calls(bulk):
    return {
        "store_as": lambda key: bulk.store_as({"n": 1}, key),
        "store (metadata @id)": lambda key: bulk.store({"n": 1}, {"@id": key}),
        "counters_for": bulk.counters_for,
        "attachments_for": bulk.attachments_for,
        "time_series_for": lambda key: _series(bulk, key),
        "typed_time_series_for": lambda key: _typed_series(bulk, key),
    }


@settings(max_examples=min(60, settings().max_examples), deadline=None)
@given(key=IDS)
def test_the_dropin_decides_as_the_official_client_from_every_method(store, key):
    with dropin.bulk_insert(store) as bulk:
        for name, call in _dropin_calls(bulk).items():
            got = accepts(call, key, refused=(ValueError, RuntimeError))
            assert got == client_accepts(key), (name, key)


def test_the_dropin_refuses_with_the_clients_exceptions_and_words(store):
    with dropin.bulk_insert(store) as bulk:
        calls = _dropin_calls(bulk)
        for name in calls:
            with pytest.raises(RuntimeError, match=r"^Document ids cannot end with '\|', but "
                                                   r"was called with users\|$"):
                calls[name]("users|")
        for key in ("", "  ", None):
            with pytest.raises(ValueError, match=r"^Document id must have a non empty value$"):
                calls["store_as"](key)
            with pytest.raises(ValueError, match=r"^Document id cannot be None or empty\.$"):
                calls["counters_for"](key)
            with pytest.raises(ValueError, match=r"^Document id cannot be None or empty\.$"):
                calls["attachments_for"](key)
            with pytest.raises(ValueError, match=r"^Document id cannot be None or empty$"):
                calls["time_series_for"](key)
