"""BulkWriter: exact command bytes (checked against the JSON round-trip oracle), buffer
ownership, the size threshold, errors that leave nothing behind, ids and metadata."""
import dataclasses
import datetime
import enum
import gc
import json
import sys
import threading

import numpy as np
import pytest

from bulkwire import _core
from bulkwire.bulk import BulkInsertError, BulkWriter, collection_name
from oracle import round_trip


class User:
    def __init__(self, name, age, Id=None):
        self.Id = Id
        self.name = name
        self.age = age


@dataclasses.dataclass
class Company:
    Name: str
    Founded: datetime.datetime
    Tags: set
    Rank: int = 1


class Color(enum.Enum):
    RED = "red"


def expected_command(entity, doc_id, metadata):
    """The command as the oracle writes it: json.dumps of the round trip, Id left out,
    @metadata appended last; the envelope without spaces."""
    doc = round_trip(entity)
    doc = {k: v for k, v in doc.items() if k not in ("Id", "@metadata")}
    doc["@metadata"] = metadata
    # the id as the official client writes it: raw UTF-8, JSON-escaped only where JSON must be
    return ('{"Id":' + json.dumps(doc_id, ensure_ascii=False) + ',"Type":"PUT","Document":'
            + json.dumps(doc) + "}").encode()


def type_metadata(entity):
    cls = type(entity)
    return {"@collection": collection_name(cls), "Raven-Python-Type": f"{cls.__module__}.{cls.__name__}"}


def drain(writer):
    """Consume on another thread as a transport would; returns the piece objects."""
    got = []
    t = threading.Thread(target=lambda: got.extend(writer.pieces()))
    t.start()
    return got, t


ENTITIES = [
    ({"Name": "a", "Score": 0.1, "Tags": ["x", "y"]}, "docs/1"),
    ({"Id": "docs/own", "Nested": {"k": [1, 2.5, None, True]}}, None),
    ({}, "docs/empty"),
    ({"only": "Id skipped", "Id": None}, "docs/given"),
    (User("Zoë \u2603 \"quoted\"", 42, Id="users/1"), None),
    (User("no id", 1), "users/explicit"),
    (Company("ACME", datetime.datetime(2024, 5, 1, 12, 30), {3}, 2), "companies/1"),
    ({"when": datetime.timedelta(days=2, seconds=5), "c": Color.RED, 1: "int key"}, "misc/1"),
    ({"vec": np.arange(4, dtype=np.float32) / 3, "f64": np.float64(1e16)}, "vectors/1"),
    ({"text": "\u00e9\U0001f600\n\t"}, "unicode/\u00e9\"1"),
]


def test_commands_are_exactly_the_oracles_in_order():
    writer = BulkWriter(buffer_size=64, max_buffers=1000)  # many buffers
    expected = []
    for entity, doc_id in ENTITIES:
        returned = writer.store(entity, id=doc_id)
        if doc_id is None:
            doc_id = entity["Id"] if isinstance(entity, dict) else entity.Id
        assert returned == doc_id
        expected.append(expected_command(entity, doc_id, type_metadata(entity)))
    writer.close()
    body = b"".join(bytes(c) for c in writer.pieces())
    assert body == b"[" + b",".join(expected) + b"]"
    assert [c["Id"] for c in json.loads(body)] == [json.loads(e)["Id"] for e in expected]


def test_metadata_is_merged_not_mutated_and_comes_last():
    user_md = {"Owner": "me", "@collection": "People"}
    snapshot = dict(user_md)
    writer = BulkWriter()
    writer.store(User("a", 1), id="u/1", metadata=user_md)
    writer.store({"x": 1, "@metadata": {"@flags": "x"}}, id="d/1", metadata={"More": 2})
    writer.close()
    commands = json.loads(b"".join(bytes(c) for c in writer.pieces()))
    assert user_md == snapshot
    doc = commands[0]["Document"]
    assert list(doc)[-1] == "@metadata"
    assert doc["@metadata"] == {"Owner": "me", "@collection": "People",
                                "Raven-Python-Type": f"{__name__}.User"}
    assert "Id" not in doc
    assert commands[1]["Document"] == {"x": 1, "@metadata": {
        "@flags": "x", "More": 2, "@collection": "dicts", "Raven-Python-Type": "builtins.dict"}}


def test_generated_ids_follow_the_documented_scheme():
    writer = BulkWriter()
    a = writer.store(User("a", 1))
    b = writer.store(User("b", 2))
    c = writer.store({"k": 1})
    prefix, _, rest = a.partition("/")
    assert prefix == "users"
    token, _, n = rest.rpartition("-")
    assert len(token) == 12 and int(token, 16) >= 0 and n == "1"
    assert b == f"users/{token}-2" and c == f"dicts/{token}-3"
    assert BulkWriter().store({"k": 1}) != c  # another writer, another token


def test_ownership_buffers_move_once_and_never_change():
    """Every handed-over buffer is a distinct object with its own memory, unchanged at the
    end; the reassembled stream is exactly the stored commands in order."""
    writer = BulkWriter(buffer_size=1000, max_buffers=4)
    seen = []  # (piece, bytes at arrival)

    def consumer():
        for piece in writer.pieces():
            seen.append((piece, bytes(piece)))

    t = threading.Thread(target=consumer)
    t.start()
    expected = []
    try:
        for i in range(3000):
            entity = {"Name": f"n{i}", "Values": [i / 7, -i, i * 1e-3], "Flag": i % 2 == 0}
            writer.store(entity, id=f"docs/{i}")
            expected.append(expected_command(entity, f"docs/{i}", type_metadata(entity)))
        writer.close()
    finally:
        t.join(30)
    assert not t.is_alive()
    assert len(seen) > 50
    assert len({id(c) for c, _ in seen}) == len(seen)  # all alive, so ids are distinct objects
    assert len({c.address for c, _ in seen}) == len(seen)  # and distinct memory
    for piece, at_arrival in seen:
        assert bytes(piece) == at_arrival
        assert isinstance(piece, _core.Piece) and memoryview(piece).readonly
    assert b"".join(snapshot for _, snapshot in seen) == b"[" + b",".join(expected) + b"]"
    # flush on size alone: every buffer but the last went over the threshold, by at most
    # the one command that took it over
    for piece, _ in seen[:-1]:
        assert len(piece) > 1000
        assert len(piece) - 1000 < max(len(e) for e in expected) + 1


def test_an_unencodable_document_leaves_nothing_behind():
    writer = BulkWriter(buffer_size=1 << 20)
    writer.store({"a": 1}, id="ok/1")
    before = (writer._writer.buffered, writer.documents)
    for bad in ({"x": datetime.date(2024, 1, 1)}, {"nested": [1, {2, frozenset()}]}, [1, 2], 17,
                {"deep": [object()]}):
        with pytest.raises(TypeError):
            writer.store(bad, id="bad/1")
        assert (writer._writer.buffered, writer.documents) == before
    cyclic = {"self": None}
    cyclic["self"] = cyclic
    with pytest.raises(ValueError, match="Circular"):
        writer.store(cyclic, id="bad/2")
    assert (writer._writer.buffered, writer.documents) == before
    writer.store({"b": 2}, id="ok/2")
    writer.close()
    commands = json.loads(b"".join(bytes(c) for c in writer.pieces()))
    assert [c["Id"] for c in commands] == ["ok/1", "ok/2"]


@pytest.mark.parametrize("bad_id, error, match", [
    ("", ValueError, "is empty"),
    ("   ", ValueError, "is only whitespace"),
    ("users|", ValueError, r"ends with '\|'"),
    (5, TypeError, "id must be a str"),
    (b"bytes", TypeError, "id must be a str"),
])
def test_bad_ids(bad_id, error, match):
    writer = BulkWriter()
    with pytest.raises(error, match=match):
        writer.store({"a": 1}, id=bad_id)
    with pytest.raises(error, match=match.replace("id must", "entity's Id must")):
        writer.store({"a": 1, "Id": bad_id})
    assert writer.documents == 0


@pytest.mark.parametrize("kwargs, error, match", [
    ({"buffer_size": 0}, ValueError, "buffer_size must be positive"),
    ({"buffer_size": -5}, ValueError, "buffer_size must be positive"),
    ({"max_buffers": 0}, ValueError, "max_buffers must be positive"),
    ({"buffer_size": 1.5}, TypeError, "buffer_size must be an int"),
    ({"max_buffers": "8"}, TypeError, "max_buffers must be an int"),
    ({"compress": "lz4"}, ValueError, "compress must be"),
])
def test_bad_options(kwargs, error, match):
    with pytest.raises(error, match=match):
        BulkWriter(**kwargs)


def test_bad_metadata():
    writer = BulkWriter()
    with pytest.raises(TypeError, match="metadata must be a mapping"):
        writer.store({"a": 1}, id="a/1", metadata=["not", "a", "mapping"])


def test_store_many_and_store_after_close():
    writer = BulkWriter()
    assert writer.store_many([{"a": i} for i in range(3)], ids=["a/0", "a/1", "a/2"]) == ["a/0", "a/1", "a/2"]
    with pytest.raises(ValueError, match="ids has 1 items"):
        writer.store_many([{"a": 1}, {"a": 2}], ids=["x/1"])
    writer.close()
    with pytest.raises(ValueError, match="closed"):
        writer.store({"a": 1}, id="late/1")


def test_consumer_failure_raises_at_the_next_store_and_at_close():
    writer = BulkWriter(buffer_size=100, max_buffers=1)
    writer.fail(BulkInsertError("the server said no"))
    with pytest.raises(BulkInsertError, match="the server said no"):
        for i in range(100):
            writer.store({"a": "x" * 50}, id=f"a/{i}")
    with pytest.raises(BulkInsertError, match="the server said no"):
        writer.close()


def test_empty_body_is_an_empty_array():
    writer = BulkWriter()
    writer.close()
    assert b"".join(bytes(c) for c in writer.pieces()) == b"[]"


def test_no_reference_leaks_over_repeated_stores():
    writer = BulkWriter(buffer_size=4096, max_buffers=10_000)
    entity = {"Name": "n", "Vec": [0.25] * 16, "Obj": User("u", 3)}
    metadata = {"Owner": "me"}
    doc_id = "docs/leak"
    refs = lambda: (sys.getrefcount(entity), sys.getrefcount(metadata), sys.getrefcount(doc_id))  # noqa: E731
    for _ in range(10):
        writer.store(entity, id=doc_id, metadata=metadata)
    gc.collect()
    before = refs()
    for _ in range(2000):
        writer.store(entity, id=doc_id, metadata=metadata)
        with pytest.raises(TypeError):
            writer.store({"bad": object()}, id=doc_id)
    gc.collect()
    assert refs() == before
    writer.close()
    live_before = _core._testing.piece_memory()[2]
    got = list(writer.pieces())
    assert len(got) > 10
    del got
    gc.collect()
    assert _core._testing.piece_memory()[2] < live_before


@pytest.mark.parametrize("name, plural", [
    ("User", "Users"), ("Company", "Companies"), ("Address", "Addresses"), ("Box", "Boxes"),
    ("Person", "People"), ("Child", "Children"), ("Category", "Categories"), ("Day", "Days"),
    ("Leaf", "Leaves"), ("Bus", "Buses"), ("Match", "Matches"), ("Hero", "Heroes"),
    ("Photo", "Photos"), ("Quiz", "Quizzes"), ("Key", "Keys"), ("Analysis", "Analyses"),
    ("Status", "Statuses"), ("Index", "Indexes"), ("Mouse", "Mice"), ("Knife", "Knives"),
    ("Datum", "Data"), ("Series", "Series"), ("Sheep", "Sheep"), ("Man", "Men"),
    ("OrderLine", "OrderLines"), ("BlogPost", "BlogPosts"), ("MyClass", "MyClasses"),
    ("Category2", "Category2s"), ("dict", "dicts"), ("VectorDoc", "VectorDocs"),
])
def test_collection_names_match_the_official_conventions(name, plural):
    # the table is what ravendb 7.2.7's DocumentConventions.default_get_collection_name
    # gives for these class names (checked by hand; importing ravendb here takes seconds)
    assert collection_name(type(name, (), {})) == plural


# ---- property: any JSON-like document frames exactly as the oracle says ----

from hypothesis import given, settings, strategies as st  # noqa: E402

_floats = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([2.0 ** -24, 1e16, 1e-05, -0.0])
_scalars = st.none() | st.booleans() | st.integers() | _floats | st.text(max_size=12)
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=12)
_documents = st.dictionaries(st.text(max_size=8), _values, max_size=6)
_ids = st.text(min_size=1, max_size=20).filter(lambda s: not s.isspace() and not s.endswith("|"))


@settings(max_examples=min(100, settings().max_examples))
@given(st.lists(st.tuples(_documents, _ids), min_size=1, max_size=8), st.integers(1, 300))
def test_any_documents_frame_exactly_as_the_oracle(batch, buffer_size):
    writer = BulkWriter(buffer_size=buffer_size, max_buffers=1000)
    expected = []
    for doc, doc_id in batch:
        writer.store(doc, id=doc_id)
        expected.append(expected_command(doc, doc_id, type_metadata(doc)))
    writer.close()
    pieces = list(writer.pieces())
    assert b"".join(bytes(c) for c in pieces) == b"[" + b",".join(expected) + b"]"
    assert all(len(c) > buffer_size for c in pieces[:-1])


def _fill_until_handover(writer, payload, start=0):
    """put() commands until the writer hands a buffer over; returns (piece, next index)."""
    i = start
    while True:
        piece = writer.put(f"docs/{i}", {"v": payload}, {})
        i += 1
        if piece is not None:
            return piece, i


@pytest.fixture
def no_pool_holds():
    """The holds of the body buffer pool (a sender thread kept from an earlier insert holds
    it) ended for the test and taken again after it."""
    holds = _core._testing.pool_holds()
    for _ in range(holds):
        _core.release_buffer_pool()
    yield
    for _ in range(holds):
        _core.hold_buffer_pool()


def test_buffer_pool_reuses_sent_buffers_and_stays_bounded(no_pool_holds):
    """A buffer the consumer is done with goes back to the pool and becomes the writer's next
    buffer; the pool keeps at most 12 and is emptied when the last writer goes away; the bytes
    of a reused buffer are entirely the new commands'."""
    gc.collect()
    assert _core._testing.pool_memory() == (0, 0, 0)  # no writer leaked by another test
    writer = _core.CommandWriter(buffer_size=64 * 1024)
    payload = "x" * 1000
    first, i = _fill_until_handover(writer, payload)
    first_text = bytes(first)
    del first  # the consumer drops it: its memory is kept for the writer
    buffers, nbytes, writers = _core._testing.pool_memory()
    assert writers == 1 and buffers == 1 and nbytes >= 64 * 1024
    second, i = _fill_until_handover(writer, "y" * 1000, i)  # the writer took it back...
    assert _core._testing.pool_memory()[0] == 0
    body = bytes(second)
    assert body.startswith(b',{"Id":"docs/') and b"x" not in body  # ...and overwrote it all
    json.loads(b"[" + body[1:] + b"]")
    assert first_text.startswith(b'[{"Id":"docs/0"')
    pieces = [_fill_until_handover(writer, payload)[0] for _ in range(15)]
    del pieces, second
    assert _core._testing.pool_memory()[0] == 12  # bounded: the other 4 were freed
    del writer
    gc.collect()
    assert _core._testing.pool_memory() == (0, 0, 0)  # no writer left: nothing is kept


def test_buffer_pool_frees_buffers_released_after_the_last_writer(no_pool_holds):
    gc.collect()
    assert _core._testing.pool_memory()[2] == 0
    writer = _core.CommandWriter(buffer_size=4096)
    piece, _ = _fill_until_handover(writer, "z" * 100)
    live = _core._testing.piece_memory()[2]
    del writer
    gc.collect()
    del piece  # outlived its writer: freed, not pooled
    assert _core._testing.piece_memory()[2] == live - 1
    assert _core._testing.pool_memory() == (0, 0, 0)


def test_a_hold_keeps_the_buffer_pool_without_a_writer(no_pool_holds):
    """A hold keeps released buffers with no writer alive; its end frees them; a writer that
    ends while a hold is there frees nothing."""
    gc.collect()
    _core.hold_buffer_pool()
    try:
        writer = _core.CommandWriter(buffer_size=4096)
        piece, _ = _fill_until_handover(writer, "z" * 100)
        del writer
        gc.collect()
        del piece  # released after its writer: kept, the pool being held
        buffers, nbytes, writers = _core._testing.pool_memory()
        assert buffers == 1 and nbytes >= 4096 and writers == 0
    finally:
        _core.release_buffer_pool()
    assert _core._testing.pool_memory() == (0, 0, 0)
    _core.release_buffer_pool()  # more ends than starts: no underflow
    assert _core._testing.pool_holds() == 0


class _Plain:
    def __init__(self, i):
        self.Name = f"n{i}"
        self.Rank = i


_metadata_text = st.text(alphabet=st.characters(codec="utf-8"), max_size=12)


@settings(max_examples=60, deadline=None)
@given(defaults=st.dictionaries(_metadata_text, _metadata_text | st.integers() | st.none()
                                | st.lists(st.floats(allow_nan=False), max_size=3), max_size=4),
       stored=st.integers(1, 4))
def test_class_metadata_is_written_as_the_walker_writes_it(defaults, stored):
    """A class's @metadata defaults, whatever they hold (the text written once for a dict of
    strings, walked per command otherwise), give each command the bytes put() writes when it
    walks the same dict; the per-call metadata is merged over them as before."""
    writer = BulkWriter(class_info=lambda cls: ("plain/", defaults))
    reference = _core.CommandWriter(1 << 20)
    for i in range(stored):
        metadata = {"More": i} if i == 2 else None
        writer.store(_Plain(i), id=f"p/{i}", metadata=metadata)
        merged = defaults if metadata is None else {  # the call's first, then the defaults
            **metadata, **{k: v for k, v in defaults.items() if k not in metadata}}
        reference.put(f"p/{i}", {"Name": f"n{i}", "Rank": i}, merged)
    writer.close()
    body = b"".join(bytes(c) for c in writer.pieces())
    assert body == bytes(reference.finish())


def test_class_metadata_is_the_answer_class_info_gave_once():
    """class_info is asked once per class: a later change to the dict it answered does not
    reach the commands of that class."""
    shared = {"@collection": "Plains"}
    asked = []
    writer = BulkWriter(class_info=lambda cls: (asked.append(cls) or "plain/", shared))
    writer.store(_Plain(1), id="p/1")
    shared["@collection"] = "Changed"
    shared["Extra"] = "x"
    writer.store(_Plain(2), id="p/2")
    writer.close()
    commands = json.loads(b"".join(bytes(c) for c in writer.pieces()))
    assert asked == [_Plain]
    assert [c["Document"]["@metadata"] for c in commands] == [{"@collection": "Plains"}] * 2


# ---- store is the C writer's method, with the Python method's arguments and refusals ----

class _Inside:
    """What BulkWriter's Python ``store`` reaches of its writer, standing in for one, so that
    calling that function shows the words Python gives for its signature."""

    class _writer:  # noqa: N801 - the attribute's name
        store = staticmethod(lambda entity, id, metadata: id)  # noqa: A002


def _bind_error(call):
    try:
        call()
    except TypeError as exc:
        return str(exc)
    return None


@settings(max_examples=200, deadline=None)
@given(positional=st.integers(0, 5),
       keywords=st.lists(st.sampled_from(["entity", "id", "metadata", "ids", "Entity"]),
                         unique=True, max_size=4))
def test_store_binds_its_arguments_as_the_python_method_did(positional, keywords):
    """Any mix of positional and keyword arguments: the same TypeError words as the Python
    function ``BulkWriter.store(self, entity, id=None, metadata=None)``, or a stored
    document."""
    values = {"entity": {"n": 1}, "id": "docs/1", "metadata": {"m": 1}}
    args = [values[name] for name in ("entity", "id", "metadata")][:positional]
    args += [None] * (positional - len(args))
    kwargs = {name: values.get(name, 0) for name in keywords}
    writer = BulkWriter()
    expected = _bind_error(lambda: BulkWriter.store(_Inside(), *args, **kwargs))
    got = _bind_error(lambda: writer.store(*args, **kwargs))
    assert got == expected
    writer.close()
    assert writer.documents == (0 if expected is not None else 1)


def test_store_is_the_c_writers_own_method():
    """No Python frame per document: a writer's store, and a started BulkInsert's, is the C
    writer's method; a subclass that defines its own store keeps it."""
    writer = BulkWriter()
    assert writer.store == writer._writer.store
    assert type(writer.store).__name__ == "builtin_function_or_method"

    class Own(BulkWriter):
        def store(self, entity, id=None, metadata=None):  # noqa: A002
            return "own/" + super().store(entity, id, metadata)

    own = Own()
    assert own.store({"n": 1}, "d/1") == "own/d/1"
    own.close()
    assert json.loads(b"".join(bytes(c) for c in own.pieces()))[0]["Id"] == "d/1"


def test_store_refuses_after_close_and_after_a_failure_with_the_same_words():
    """The checks that were the Python method's, now the C method's: a closed writer raises
    ValueError, a failed one its failure again (a copy, each time, the cause kept)."""
    writer = BulkWriter()
    writer.close()
    with pytest.raises(ValueError, match=r"^store\(\) on a closed bulk insert$"):
        writer.store({"n": 1}, id="d/1")
    failed = BulkWriter()
    cause = OSError("reset")
    error = BulkInsertError("the server went away")
    error.__cause__ = cause
    failed.fail(error)
    raised = []
    for _ in range(2):
        with pytest.raises(BulkInsertError, match="^the server went away$") as info:
            failed.store({"n": 1}, id="d/1")
        raised.append(info.value)
    assert raised[0] is not raised[1] and raised[0] is not error
    assert all(r.__cause__ is cause for r in raised)
    other = BulkWriter()
    other.fail(RuntimeError("x"))
    with pytest.raises(BulkInsertError, match=r"^the bulk insert failed: RuntimeError\('x'\)$"):
        other.store({"n": 1})
