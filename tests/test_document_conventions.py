"""The document conventions BulkWriter.store applies (in C, next to the walker): ids, the
entity's own Id and @metadata, the metadata merge and the collection defaults, checked
against the rules written in plain Python below; and the full buffers store hands over to
the queue itself."""
import collections.abc
import gc
import json
import re
import threading
import types
import weakref

import pytest
from hypothesis import given, settings, strategies as st

from bulkwire import _core, conventions
from bulkwire.bulk import BulkWriter, collection_name
from bulkwire.errors import BulkInsertAborted
from _leaks import assert_no_growth, ignoring
from oracle import round_trip


# ---- the reference: the rules in plain Python ----

def reference_check_id(value, name):
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    if value == "":
        raise ValueError(f"{name} is empty: {value!r}")
    if value.endswith("|"):
        raise ValueError(f"{name} ends with '|' (the server would generate the id): {value!r}")
    try:
        value.encode()
    except UnicodeEncodeError:
        raise ValueError(f"{name} is not valid UTF-8: {value!r}") from None
    if value.isspace():
        raise ValueError(f"{name} is only whitespace: {value!r}")
    return value


def reference_merge(own, metadata, defaults):
    merged = {}
    for given_metadata, name in ((own, "entity's @metadata"), (metadata, "metadata")):
        if given_metadata is not None:
            if not isinstance(given_metadata, collections.abc.Mapping):
                raise TypeError(f"{name} must be a mapping, not {type(given_metadata).__name__}")
            merged.update(given_metadata)
    return {**merged, **{k: v for k, v in defaults.items() if k not in merged}}


def reference_document(entity, id, metadata, generated):
    """(id, @metadata) as the conventions give them; a generated id is (None, n), the n-th
    of the writer, counted in ``generated`` (a one-item list) before the merge can fail."""
    source = "id"
    if type(entity) is dict:
        own = entity.get("@metadata")
        if id is None:
            id, source = entity.get("Id"), "entity's Id"
    else:
        members = getattr(entity, "__dict__", None)
        own = members.get("@metadata") if members else None
        if id is None:
            id, source = getattr(entity, "Id", None), "entity's Id"
    if id is None:
        generated[0] += 1
        id = (None, generated[0])
    else:
        reference_check_id(id, source)
    cls = type(entity)
    defaults = {"@collection": collection_name(cls),
                "Raven-Python-Type": f"{cls.__module__}.{cls.__name__}"}
    if own is None and metadata is None:
        return id, defaults
    return id, reference_merge(own, metadata, defaults)


def members(entity):
    if hasattr(entity, "to_json"):
        return entity.to_json()
    return dict(entity) if isinstance(entity, dict) else vars(entity)


def command(entity, doc_id, metadata):
    doc = round_trip({k: v for k, v in members(entity).items() if k not in ("Id", "@metadata")})
    doc["@metadata"] = metadata
    return ('{"Id":' + json.dumps(doc_id, ensure_ascii=False) + ',"Type":"PUT","Document":'
            + json.dumps(doc) + "}").encode()


# ---- entities of every shape the rules tell apart ----

class Plain:
    def __init__(self, **members):
        self.__dict__.update(members)


class Slotted:
    __slots__ = ("Name", "Id")

    def __init__(self, Name, Id=None):
        self.Name = Name
        if Id is not None:
            self.Id = Id

    def to_json(self):
        return {"Name": self.Name}


class KeyedDict(dict):
    """A dict subclass: its keys are not where its Id is looked for (its attributes are)."""


class Metadata(collections.abc.Mapping):
    def __init__(self, items):
        self._items = dict(items)

    def __getitem__(self, key):
        return self._items[key]

    def __iter__(self):
        return iter(self._items)

    def __len__(self):
        return len(self._items)


class IdSubclass(str):
    pass


_ids = st.one_of(
    st.none(), st.sampled_from(["", " ", "\u3000\t", "a|", "|", "x", "users/1", "é/2 ", 5, b"b/1",
                                IdSubclass("s/1"), IdSubclass(" "), 1.5]),
    st.text(max_size=5))
_metadata = st.one_of(
    st.none(), st.just(["not", "a", "mapping"]), st.just(7),
    st.dictionaries(st.sampled_from(["@collection", "Raven-Python-Type", "Owner", "n"]),
                    st.one_of(st.text(max_size=3), st.integers(-3, 3)), max_size=3),
    st.builds(Metadata, st.dictionaries(st.sampled_from(["@collection", "Owner"]),
                                        st.text(max_size=3), max_size=2)),
    st.builds(types.MappingProxyType, st.dictionaries(st.sampled_from(["Owner"]), st.just(1))))


@st.composite
def _entities(draw):
    own_id, own_metadata = draw(_ids), draw(_metadata)
    shape = draw(st.sampled_from(["dict", "plain", "slotted", "keyed"]))
    members = {"Name": draw(st.text(max_size=4))}
    if own_id is not None or draw(st.booleans()):
        members["Id"] = own_id
    if own_metadata is not None or draw(st.booleans()):
        members["@metadata"] = own_metadata
    if shape == "dict":
        return members
    if shape == "plain":
        return Plain(**members)
    if shape == "slotted":
        return Slotted(members["Name"], own_id)
    keyed = KeyedDict(members)
    if draw(st.booleans()):
        keyed.Id = own_id
    return keyed


def _outcome(fn):
    try:
        return "ok", fn()
    except (TypeError, ValueError) as exc:
        return type(exc), str(exc)


@settings(deadline=None)
@given(st.lists(st.tuples(_entities(), _ids, _metadata), min_size=1, max_size=6))
def test_store_follows_the_reference_conventions(stores):
    writer = BulkWriter(max_buffers=1000)
    expected, generated = [], [0]
    for entity, id, metadata in stores:
        want = _outcome(lambda: reference_document(entity, id, metadata, generated))
        got = _outcome(lambda: writer.store(entity, id, metadata))
        if want[0] != "ok":
            assert got == want
            continue
        doc_id, doc_metadata = want[1]
        if got[0] is TypeError and "is not JSON serializable" in got[1]:
            # the walker may check a member the body leaves out (a dict subclass's)
            with pytest.raises(TypeError):
                round_trip(members(entity))
            continue
        assert got[0] == "ok", (got, want)
        if isinstance(doc_id, tuple):
            prefix = collection_name(type(entity)).lower() + "/"
            assert re.fullmatch(re.escape(prefix) + r"[0-9a-f]{12}-" + str(doc_id[1]), got[1]), got[1]
            doc_id = got[1]
        assert got[1] == doc_id
        expected.append(command(entity, doc_id, doc_metadata))
    writer.close()
    body = b"".join(bytes(c) for c in writer.pieces())
    assert body == b"[" + b",".join(expected) + b"]"
    assert writer.documents == len(expected)


@pytest.mark.parametrize("value", ["", " ", "\x1c\x1d", "\u3000", "a|", "|", "ok", "é", IdSubclass("s"),
                                   IdSubclass(""), 5, None, b"x", 2.5])
@pytest.mark.parametrize("name", ["id", "entity's Id"])
def test_check_id_is_the_reference_rule(value, name):
    assert _outcome(lambda: conventions.check_id(value, name)) == \
        _outcome(lambda: reference_check_id(value, name))


@pytest.mark.parametrize("own, metadata", [
    (None, None), ({"a": 1}, None), (None, {"@collection": "X"}), ({"a": 1, "b": 2}, {"a": 3}),
    (Metadata({"Owner": "me"}), types.MappingProxyType({"@collection": "Y"})),
    ([("a", 1)], None), (None, 5), ("text", {"a": 1}),
])
def test_merge_metadata_is_the_reference_rule(own, metadata):
    defaults = {"@collection": "Users", "Raven-Python-Type": "app.User"}
    assert _outcome(lambda: conventions.merge_metadata(own, metadata, defaults)) == \
        _outcome(lambda: reference_merge(own, metadata, defaults))
    assert defaults == {"@collection": "Users", "Raven-Python-Type": "app.User"}  # not modified


def test_the_excluded_members_are_the_writers():
    assert conventions.BODY_EXCLUDED_KEYS == ("Id", "@metadata") == _core.BODY_EXCLUDED_KEYS


def test_a_failing_lookup_of_the_entitys_members_raises_and_leaves_nothing():
    class Exploding:
        def __init__(self):
            self.Name = "x"

        @property
        def Id(self):
            raise RuntimeError("no id here")

    writer = BulkWriter()
    with pytest.raises(RuntimeError, match="no id here"):
        writer.store(Exploding())
    assert writer.store(Exploding(), id="e/1") == "e/1"  # the Id is not asked for then
    assert writer.documents == 1


def test_full_buffers_are_handed_over_in_c():
    """store() puts every full buffer on the queue itself: the Python hand-over is not used."""
    writer = BulkWriter(buffer_size=256, max_buffers=2)

    def no_python_hand_over(piece):
        raise AssertionError("a buffer went through Python")
    writer._put = no_python_hand_over
    got = []
    consumer = threading.Thread(target=lambda: got.extend(bytes(c) for c in writer.pieces()))
    consumer.start()
    ids = [writer.store({"n": i, "pad": "x" * 100}) for i in range(200)]
    assert writer._writer.handovers > 50
    writer._put = writer._queue.put
    writer.close()
    consumer.join(30)
    assert [c["Id"] for c in json.loads(b"".join(got))] == ids


def test_a_store_refused_by_a_gone_consumer_raises_the_consumers_failure():
    writer = BulkWriter(buffer_size=64, max_buffers=4)
    writer._queue.close_consumer()  # gone without a word
    with pytest.raises(BulkInsertAborted, match="no longer being read"):
        for i in range(10):
            writer.store({"pad": "x" * 100}, id=f"d/{i}")
    with pytest.raises(BulkInsertAborted, match="no longer being read"):
        writer.store({"a": 1}, id="d/late")


def test_a_class_that_refers_to_its_writer_is_collected():
    """The writer keeps each entity class it met; a cycle through one is still collected."""
    gc.collect()
    writer = BulkWriter()
    Entity = type("Entity", (), {})
    Entity.writer = writer
    entity = Entity()
    entity.Name = "e"
    writer.store(entity, id="e/1")
    alive = weakref.ref(writer)
    del writer, Entity, entity
    gc.collect()
    assert alive() is None


def test_the_conventions_keep_no_memory():
    writer = BulkWriter(buffer_size=4096, max_buffers=2)
    consumer = threading.Thread(target=lambda: [None for _ in writer.pieces()])
    consumer.start()
    entity = Plain(Name="n", Id="p/1", **{"@metadata": {"Owner": "me"}})
    keyed = {"Name": "k", "@metadata": Metadata({"a": 1})}
    assert_no_growth(lambda: writer.store(entity, None, {"x": 1}), "store, merged metadata")
    assert_no_growth(lambda: writer.store(keyed), "store, generated id, Mapping metadata")
    assert_no_growth(ignoring(lambda: writer.store({"Id": " "}), ValueError), "store, blank id")
    assert_no_growth(ignoring(lambda: writer.store({"a": 1}, "a/1", [1]), TypeError),
                     "store, bad metadata")
    writer.close()
    consumer.join(30)
    assert not consumer.is_alive()


def test_ctrl_c_as_the_waiting_buffer_is_taken_still_fails_the_writer():
    """Ctrl-C during a store's wait for room, with the consumer taking a buffer at that very
    moment: the wait ends with the buffer handed over and the interrupt still pending. It
    must count as an interrupted hand-over (the writer fails), not surface after a store that
    seemed to finish and leave the writer taking documents."""
    import _thread
    import time

    writer = BulkWriter(buffer_size=64, max_buffers=1)
    queue = writer._queue

    def consumer():
        deadline = time.monotonic() + 20
        while not (queue.waits and len(queue) == 1) and time.monotonic() < deadline:
            time.sleep(0.001)
        time.sleep(0.03)  # the producer is inside its wait, the GIL released
        _thread.interrupt_main()
        queue.get()  # room: the producer's wait ends with its buffer taken

    thread = threading.Thread(target=consumer)
    thread.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            for i in range(10_000):
                writer.store({"pad": "x" * 100}, id=f"d/{i}")
    finally:
        thread.join(30)
    assert writer.failed  # (a writer still taking documents would wait on the full queue)
    with pytest.raises(BulkInsertAborted, match="incomplete"):
        writer.store({"a": 1}, id="d/late")
