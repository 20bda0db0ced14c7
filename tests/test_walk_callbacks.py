"""Callbacks that run in the middle of a walk and call back into bulkwire.

A ``gc.callbacks`` entry runs at whatever allocation starts a collection (any allocation of a
container, in C as well), a ``weakref`` callback or ``weakref.finalize`` when an object dies
(a hook's result once it has been written, a value a hook removed once its dict is done). Here
such callbacks encode other objects, call the very writer that is in the middle of a store,
mutate the object being walked, or raise. Nothing may crash or corrupt the output: the outer
call gives the bytes of the JSON round trip ``json.dumps(json.loads(json.dumps(x,
default=D)))`` (tests/oracle.py), or raises the round trip's exception; a call into a writer
from inside one of its own calls raises ``RuntimeError`` before anything changes, and the
writer goes on (a later store works, the body is exact).
"""
from __future__ import annotations

import contextlib
import gc
import json
import pathlib
import struct
import sys
import threading
import weakref

from hypothesis import given, settings, strategies as st

import bulkwire
from bulkwire import BulkWriter, VectorCodec
from bulkwire.bulk import collection_name
from bulkwire.testing import LoopbackServer, parse_commands
from oracle import entity_default, oracle_bytes

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "fuzz"))
import fuzz_dumps  # noqa: E402  (its hostile graphs: hooks that mutate what is walked)

REENTRY = "in the middle of"
#: Each example collects at almost every allocation: a third of the profile's examples.
FEWER = settings(max_examples=max(10, settings.default.max_examples // 3))
OTHER = {"other": [1.5, "x\u00e9", {"n": None}], "when": [True, 2 ** 70]}
OTHER_BYTES = oracle_bytes(OTHER)
VECTOR = [1.0, -2.5, 3.25]
VECTOR_BYTES = struct.pack(">3f", *VECTOR)


class CallbackError(Exception):
    """What a hostile callback raises on purpose: the interpreter reports it as unraisable."""


@contextlib.contextmanager
def collecting_at_every_allocation(callback, threshold=1):
    """``callback(phase, info)`` in ``gc.callbacks`` and collections as often as
    ``threshold`` allows, for the ``with`` block; what the interpreter reports as unraisable
    (an exception a callback raised) is collected, not printed."""
    unraisable = []
    previous_hook = sys.unraisablehook
    previous_threshold = gc.get_threshold()
    gc.collect()
    sys.unraisablehook = lambda report: unraisable.append(report.exc_type)
    gc.callbacks.append(callback)
    gc.set_threshold(threshold)
    try:
        yield unraisable
    finally:
        gc.set_threshold(*previous_threshold)
        gc.callbacks.remove(callback)
        sys.unraisablehook = previous_hook


class Inside:
    """Whether the calling thread is inside a call that ``matches``: a profile function
    follows the calls (``sys.setprofile``), so that a callback can tell a call from inside
    that one (which must be refused) from one made just before or after it (which is
    allowed), whatever allocation started the collection."""

    def __init__(self, matches):
        self.matches = matches
        self.depth = 0
        self.thread = threading.get_ident()

    def __bool__(self):
        return self.depth > 0 and threading.get_ident() == self.thread

    def _profile(self, frame, event, arg):
        if event == "c_call" and self.matches(arg):
            self.depth += 1
        elif event in ("c_return", "c_exception") and self.matches(arg):
            self.depth -= 1
        elif event == "call" and self.matches(frame.f_code):
            self.depth += 1
        elif event == "return" and self.matches(frame.f_code):
            self.depth -= 1

    def __enter__(self):
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc):
        sys.setprofile(None)


def writer_store(writer):
    """The C store of ``writer`` (what BulkWriter.store calls): the walk and the hand-over."""
    return lambda called: getattr(called, "__self__", None) is writer._writer and \
        getattr(called, "__name__", None) == "store"


def outcome(action):
    try:
        return action(), None
    except Exception as exc:  # noqa: BLE001 - the exception type is what is compared
        return None, type(exc)


def document_body(doc_id, document):
    """The PUT command BulkWriter.store writes for a dict document (the round trip's)."""
    body = {k: v for k, v in document.items() if k not in ("Id", "@metadata")}
    body["@metadata"] = {"@collection": collection_name(dict), "Raven-Python-Type": "builtins.dict"}
    return b'{"Id":"' + doc_id.encode() + b'","Type":"PUT","Document":' + json.dumps(body).encode() + b"}"


def assert_the_writer_goes_on(writer, stored, doc_id, expected):
    """After a store of ``doc_id`` that gave ``stored`` (an outcome), where the round trip
    gave ``expected`` (the document as a dict, or its exception): a later store works, and
    the body holds exactly the document (when there was one) and the later one."""
    writer.store({"after": 1}, id="after/1")
    writer.close()
    body = b"".join(bytes(piece) for piece in writer.pieces())
    after = document_body("after/1", {"after": 1})
    if expected[1] is not None:
        assert stored == (None, expected[1]) and body == b"[" + after + b"]"
    else:
        assert stored == (doc_id, None)
        assert body == b"[" + document_body(doc_id, expected[0]) + b"," + after + b"]"


class Hostile:
    """What a callback does when it runs: each action of ``actions`` in turn, one per run,
    for at most ``limit`` runs. Failures of what must work are kept in ``problems``; the
    writer's refusals in ``refused``."""

    def __init__(self, actions, writer=None, limit=40):
        self.actions = actions
        self.writer = writer
        self.limit = limit
        self.runs = 0
        self.problems = []
        self.refused = []

    def __call__(self, *args):
        if not self.actions or self.runs >= self.limit:
            return
        action = self.actions[self.runs % len(self.actions)]
        self.runs += 1
        getattr(self, action)()

    def dumps(self):
        if bulkwire.dumps(OTHER) != OTHER_BYTES:
            self.problems.append("dumps")

    def encode(self):
        if bulkwire.Encoder(default=entity_default).encode(OTHER) != OTHER_BYTES:
            self.problems.append("encode")

    def to_builtins(self):
        if bulkwire.to_builtins(OTHER) != json.loads(OTHER_BYTES):
            self.problems.append("to_builtins")

    def vector(self):
        if VectorCodec("float", 3).serialize(VECTOR) != VECTOR_BYTES:
            self.problems.append("vector")

    def other_writer(self):
        writer = BulkWriter()
        writer.store(OTHER, id="other/1")
        writer.close()
        if b"".join(bytes(c) for c in writer.pieces()) != b"[" + document_body("other/1", OTHER) + b"]":
            self.problems.append("other writer")

    def same_writer(self):
        """Every producer call of the writer in the middle of its own call."""
        w = self.writer
        if w is None:
            return
        for call in (lambda: w.store({"inner": 1}, id="inner/1"),
                     lambda: w.store_many([{"inner": 2}], ids=["inner/2"]),
                     lambda: w.store_encoded(b'{"Id":"inner/3","Type":"PUT","Document":{}}', 1),
                     lambda: w.counters_for("inner/4").increment("n"),
                     lambda: w.attachments_for("inner/5").store("a", b"x"),
                     lambda: w.time_series_for("inner/6", "S"),
                     w.close):
            try:
                call()
                self.problems.append("a call from inside a store returned")
            except RuntimeError as exc:
                self.refused.append(str(exc))

    def fail(self):
        raise CallbackError("from a callback")


ACTIONS = ["dumps", "encode", "to_builtins", "vector", "other_writer", "same_writer", "fail"]


def check_refusals(hostile):
    assert hostile.problems == []
    assert all(REENTRY in message for message in hostile.refused), hostile.refused


# ---------------------------------------------------------------- gc callbacks, hypothesis

@FEWER
@given(data=st.binary(max_size=200), actions=st.lists(st.sampled_from(ACTIONS), min_size=1,
                                                      max_size=5),
       threshold=st.integers(1, 12), api=st.sampled_from(["dumps", "encode", "to_builtins"]))
def test_gc_callbacks_calling_bulkwire_during_a_walk_change_no_byte(data, actions, threshold, api):
    """The hostile graphs of the dumps fuzz target (hooks that mutate what is walked), walked
    while gc callbacks encode other objects, store into other writers, or raise at whatever
    allocation starts a collection: the round trip's bytes or its exception."""
    reference_graph, mode, ensure_ascii = fuzz_dumps.build(data)
    reference_default = {0: entity_default, 1: entity_default, 2: fuzz_dumps.callable_default,
                         3: None}[mode]
    reference = outcome(lambda: json.dumps(
        json.loads(json.dumps(reference_graph, default=reference_default)),
        ensure_ascii=ensure_ascii).encode())
    graph, _, _ = fuzz_dumps.build(data)
    ours_default = {0: bulkwire.ENTITY, 1: bulkwire.ENTITY, 2: fuzz_dumps.callable_default,
                    3: None}[mode]
    hostile = Hostile(actions)
    with collecting_at_every_allocation(lambda phase, info: phase == "start" and hostile(),
                                        threshold) as unraisable:
        if api == "dumps":
            ours = outcome(lambda: bulkwire.dumps(graph, default=ours_default,
                                                  ensure_ascii=ensure_ascii))
        elif api == "encode":
            encoder = bulkwire.Encoder(default=ours_default, ensure_ascii=ensure_ascii)
            ours = outcome(lambda: encoder.encode(graph))
        else:
            ours = outcome(lambda: json.dumps(bulkwire.to_builtins(graph, default=ours_default),
                                              ensure_ascii=ensure_ascii).encode())
    assert ours == reference
    check_refusals(hostile)
    assert set(unraisable) <= {CallbackError}


@FEWER
@given(data=st.binary(max_size=200), actions=st.lists(st.sampled_from(ACTIONS), min_size=1,
                                                      max_size=5),
       threshold=st.integers(1, 12), defer=st.booleans(), buffer_size=st.sampled_from([64, 4096]))
def test_gc_callbacks_during_a_store_into_the_same_writer_are_refused(
        data, actions, threshold, defer, buffer_size):
    """BulkWriter.store of the fuzz target's dict documents while gc callbacks call every
    producer method of the same writer: each raises RuntimeError, the document is the round
    trip's, and a later store goes into an exact body."""
    reference_graph, _, _ = fuzz_dumps.build(data)
    if type(reference_graph) is not dict or "Id" in reference_graph or "@metadata" in reference_graph:
        return
    expected = outcome(lambda: json.loads(json.dumps(reference_graph, default=entity_default)))
    graph, _, _ = fuzz_dumps.build(data)
    writer = BulkWriter(buffer_size=buffer_size, max_buffers=100_000, defer_float_text=defer)
    hostile = Hostile(actions, writer)
    with Inside(writer_store(writer)) as inside, collecting_at_every_allocation(
            lambda phase, info: phase == "start" and inside and hostile(),
            threshold) as unraisable:
        stored = outcome(lambda: writer.store(graph, id="docs/1"))
    check_refusals(hostile)
    assert set(unraisable) <= {CallbackError}
    assert_the_writer_goes_on(writer, stored, "docs/1", expected)


# ---------------------------------------------------------------- gc callbacks that mutate

def _tree(draw_values, targets):
    """A document whose dicts and lists are each reachable once (listed in ``targets``)."""
    items = {}
    for i, value in enumerate(draw_values):
        if i % 3 == 0:
            inner = {f"k{j}": v for j, v in enumerate(value)}
        elif i % 3 == 1:
            inner = list(value)
        else:
            inner = fuzz_dumps.Record({"r": list(value)})
            targets.append(inner.__dict__)
            items[f"m{i}"] = inner
            continue
        targets.append(inner)
        items[f"m{i}"] = inner
    return items


_leaf = (st.none() | st.booleans() | st.integers(-10 ** 20, 10 ** 20)
         | st.floats(allow_nan=False) | st.text(max_size=4))


@FEWER
@given(values=st.lists(st.lists(_leaf, max_size=20), min_size=1, max_size=6),
       pick=st.integers(0, 100), op=st.integers(1, 8), threshold=st.integers(1, 8),
       skip=st.integers(0, 30))
def test_a_gc_callback_mutating_what_is_walked_gives_one_of_its_states(values, pick, op,
                                                                        threshold, skip):
    """One gc callback, at the ``skip``-th collection, mutates one dict or list of the
    document. A dict is written as it was when the walk reached it (its items are taken at
    once); a list is read by index, as json reads it, so its first k items are the ones it
    had and the rest those it has after the mutation, for some k. The output is the round
    trip of one of those states (or its exception), never anything else, never a crash."""
    def make():
        targets = []
        return _tree(values, targets), targets

    arg = ("added", [1.5, None])
    index = pick % len(make()[1])
    mutated = make()[1][index]
    fuzz_dumps.mutate(op, mutated, arg)
    states = []
    original = make()[1][index]
    if isinstance(original, list):
        for k in range(len(original) + 1):
            graph, targets = make()
            targets[index][:] = targets[index][:k] + mutated[k:]
            states.append(graph)
    else:
        graph, targets = make()
        fuzz_dumps.mutate(op, targets[index], arg)
        states.append(graph)
    states.append(make()[0])
    possible = {outcome(lambda: oracle_bytes(state)) for state in states}
    for api in ("dumps", "store"):
        graph, targets = make()
        victim = targets[index]
        state = {"seen": 0, "done": False}

        def callback(phase, info):
            if phase == "start" and not state["done"]:
                state["seen"] += 1
                if state["seen"] > skip:
                    state["done"] = True
                    fuzz_dumps.mutate(op, victim, arg)

        writer = BulkWriter(buffer_size=1 << 20)
        with collecting_at_every_allocation(callback, threshold) as unraisable:
            if api == "dumps":
                got = outcome(lambda: bulkwire.dumps(graph))
            else:
                got = outcome(lambda: writer.store(graph, id="d/1"))
        assert unraisable == []
        if api == "dumps":
            assert got in possible
            continue
        writer.close()
        body = b"".join(bytes(c) for c in writer.pieces())
        if got[1] is not None:
            assert got in possible and body == b"[]"
        else:
            documents = {b"[" + document_body("d/1", json.loads(p)) + b"]"
                         for p, error in possible if error is None}
            assert body in documents


# ---------------------------------------------------------------- weakref callbacks

class Finalized:
    """A hook whose result is a fresh container with a finalizer: it runs when the walker
    (or json) drops the result, right after writing it, at the same point on both sides."""

    def __init__(self, payload, action):
        self.payload, self.action = payload, action

    def to_json(self):
        result = fuzz_dumps.Record({"payload": self.payload, "list": [1, [2.5]]})
        weakref.finalize(result, self.action)
        return result


def finalized_default(o):
    """default= for the callable mode: the same result, with the same finalizer."""
    if isinstance(o, Finalized):
        return o.to_json()
    return entity_default(o)


@given(op=st.integers(1, 8), where=st.integers(0, 3), calls=st.sampled_from(
    ["mutate", "dumps", "same_writer", "raise"]), mode=st.sampled_from(["entity", "callable"]))
def test_a_finalizer_run_by_the_walk_acts_where_json_runs_it(op, where, calls, mode):
    """weakref.finalize on a hook's result runs when the result is dropped, right after it
    was written: on both sides at the same point, so a finalizer that mutates the graph (a
    dict or list written later, or the one being written), encodes another object, calls
    the writer in the middle of its store, or raises gives exactly the round trip."""
    log = []

    def make(writer=None):
        later_list = [1, 2, [3]]
        later_dict = {"x": 1, "y": [2]}
        top = {}
        targets = [later_list, later_dict, top, top]

        def action():
            log.append("finalized")
            if calls == "mutate":
                fuzz_dumps.mutate(op, targets[where], ("k", [9.5]))
            elif calls == "dumps":
                if bulkwire.dumps(OTHER) != OTHER_BYTES:
                    log.append("dumps differed")
            elif calls == "same_writer" and writer is not None:
                try:
                    writer.store({"inner": 1}, id="inner/1")
                    log.append("a store from inside a store returned")
                except RuntimeError as exc:
                    log.append("refused" if REENTRY in str(exc) else str(exc))
            elif calls == "raise":
                raise CallbackError("from a finalizer")

        top.update({"a": Finalized([1.25, "p"], action), "l": later_list, "d": later_dict,
                    "b": Finalized({"q": None}, action)})
        return top

    default_ours = bulkwire.ENTITY if mode == "entity" else finalized_default
    unraisable = []
    previous = sys.unraisablehook
    sys.unraisablehook = lambda report: unraisable.append(report.exc_type)
    try:
        reference = outcome(lambda: oracle_bytes(make(), finalized_default))
        reference_log = list(log)
        log.clear()
        ours = outcome(lambda: bulkwire.dumps(make(), default=default_ours))
        ours_log = list(log)
        log.clear()
        writer = BulkWriter(buffer_size=64, max_buffers=10_000)
        stored = outcome(lambda: writer.store(make(writer), id="d/1"))
        store_log = list(log)
    finally:
        sys.unraisablehook = previous
    assert ours == reference and ours_log == reference_log
    assert set(unraisable) <= {CallbackError}
    expected = (json.loads(reference[0]), None) if reference[1] is None else reference
    assert_the_writer_goes_on(writer, stored, "d/1", expected)
    if calls == "same_writer" and reference[1] is None:
        assert store_log == ["finalized", "refused"] * 2


def test_weakref_callbacks_of_values_a_hook_removed_run_when_the_dict_is_done():
    """A hook clears the dict being written: the values it removed die when the dict is
    done, as json's items list releases them; their weakref callbacks, which encode, store
    into the writer in the middle of its store, and mutate a list written later, run then,
    on both sides."""
    log = []

    class Value:
        def __init__(self, name):
            self.name = name

        def to_json(self):
            return self.name

    def make(writer=None):
        later = [1, 2]
        d = {"a": None, "b": Value("b"), "c": Value("c")}
        refs = []

        def died(ref):
            log.append("died")
            later.append(bulkwire.dumps(OTHER).decode())
            if writer is not None:
                try:
                    writer.store({"inner": 1}, id="inner/1")
                    log.append("returned")
                except RuntimeError as exc:
                    log.append("refused" if REENTRY in str(exc) else str(exc))

        refs.extend(weakref.ref(v, died) for v in (d["b"], d["c"]))

        class Clearing:
            def to_json(self):
                log.append("hook")
                d.clear()
                return "cleared"

        d["a"] = Clearing()
        make.refs = refs  # the weakrefs must outlive their referents
        return {"d": d, "later": later}

    reference = oracle_bytes(make())
    reference_log = list(log)
    log.clear()
    assert bulkwire.dumps(make()) == reference and log == reference_log
    log.clear()
    writer = BulkWriter(buffer_size=64, max_buffers=10_000)
    assert writer.store(make(writer), id="d/1") == "d/1"
    assert log == ["hook", "died", "refused", "died", "refused"]
    writer.close()
    body = b"".join(bytes(c) for c in writer.pieces())
    assert body == b"[" + document_body("d/1", json.loads(reference)) + b"]"


# ---------------------------------------------------------------- VectorCodec

class Noisy:
    """A number whose conversion runs Python code that allocates (a collection can start
    there)."""

    def __init__(self, value):
        self.value = value

    def __float__(self):
        _ = [[i] for i in range(4)]
        return self.value


@FEWER
@given(threshold=st.integers(1, 6), actions=st.lists(st.sampled_from(ACTIONS), min_size=1,
                                                     max_size=4),
       mutate=st.booleans(), rows=st.integers(1, 6))
def test_gc_callbacks_during_vector_encoding(threshold, actions, mutate, rows):
    """VectorCodec over lists of float subclasses (a conversion is Python code) while gc
    callbacks encode, store, raise, or shorten the row being read: the rows' bytes, or
    RuntimeError for a row that changed size; nothing else."""
    codec = VectorCodec("float", 3)
    data = [[Noisy(1.0 + r), -2.5, Noisy(3.25)] for r in range(rows)]
    expected = [struct.pack(">3f", *(float(v) for v in row)) for row in data]
    hostile = Hostile(actions)
    victim = data[-1]

    def callback(phase, info):
        if phase != "start":
            return
        if mutate and len(victim) == 3:
            del victim[1:]
        hostile()

    with collecting_at_every_allocation(callback, threshold) as unraisable:
        got = outcome(lambda: codec.serialize_many(data))
    check_refusals(hostile)
    assert set(unraisable) <= {CallbackError}
    if got[1] is not None:  # the row was shortened before (or while) it was read
        assert mutate and got[1] in (RuntimeError, ValueError)
    else:
        assert got[0][:-1] == expected[:-1]
        assert got[0][-1] == expected[-1] and len(victim) in (1, 3)


# ---------------------------------------------------------------- the writer's own steps

def test_a_callback_between_store_encodeds_pieces_lands_nowhere_in_them():
    """store_encoded writes a command split across pieces: a store from a callback run while
    it writes them would go into the middle of that command (an invalid body). The pieces go
    in one C call, which runs no Python code between them (a store from inside it would
    raise); callbacks run before or after it, and the body holds every command whole."""
    writer = BulkWriter(buffer_size=64, max_buffers=10_000)
    writer.store({"a": 0}, id="d/0")
    command = b'{"Id":"e/1","Type":"PUT","Document":{"x": "' + b"y" * 300 + b'"}}'
    pieces = [bytearray(command[:20]), bytearray(command[20:150]), bytearray(command[150:])]
    inner = []

    def callback(phase, info):
        if phase == "start" and len(inner) < 30:
            try:
                writer.store({"inner": len(inner)}, id=f"in/{len(inner)}")
                inner.append("stored")
            except RuntimeError as exc:
                inner.append("refused" if "in the middle of" in str(exc) else str(exc))

    with collecting_at_every_allocation(callback):
        writer.store_encoded(pieces, 1)
    assert inner and set(inner) <= {"stored", "refused"}, inner  # callbacks did run
    writer.close()
    commands = parse_commands(b"".join(bytes(c) for c in writer.pieces()))
    ids = [c["Id"] for c in commands]
    stored_before = inner.index("refused") if "refused" in inner else len(inner)
    assert ids == ["d/0"] + [f"in/{i}" for i in range(stored_before)] + ["e/1"]
    assert commands[-1]["Document"] == {"x": "y" * 300}


def test_a_call_from_inside_every_step_of_a_store_is_refused():
    """Python code runs at several steps of a store before its document is written: the
    entity class's conventions (class_info), the entity's Id and @metadata, a metadata
    mapping, hooks. A call into the same writer from any of them raises RuntimeError, and
    the store it came from completes."""
    writer = BulkWriter(buffer_size=32, max_buffers=10_000,
                        class_info=lambda cls: (poke("class_info") or "things/t-", {}))
    refused = []

    def poke(where):
        try:
            writer.close()
            refused.append(f"{where}: closed")
        except RuntimeError as exc:
            refused.append(where if REENTRY in str(exc) else f"{where}: {exc}")

    class Entity:
        @property
        def Id(self):
            poke("Id")
            return None

        def __init__(self):
            self.Name = "e"

    class Meta(dict):
        def keys(self):
            poke("metadata")
            return super().keys()

    class Hook:
        def to_json(self):
            poke("hook")
            return 1

    got = writer.store({"h": Hook()}, metadata=Meta(tag=1))
    got2 = writer.store(Entity())
    assert got == "things/t-1" and got2 == "things/t-2"
    assert refused == ["class_info", "hook", "class_info", "Id"]
    writer.close()
    ids = [c["Id"] for c in json.loads(b"".join(bytes(c) for c in writer.pieces()))]
    assert ids == ["things/t-1", "things/t-2"]


def test_a_call_from_inside_the_start_of_an_inserts_request_is_refused():
    """The first store opens the operation and the request (Python code and sockets): a
    store from a callback run meanwhile would have started a second request on the same
    body. It raises; one operation, every document of the producer."""
    with LoopbackServer() as server:
        bulk = bulkwire.BulkInsert(server.url, server.database, timeout=10.0)
        inner = []
        opening = Inside(lambda code: code is bulkwire.BulkInsert._open_request.__code__)

        def callback(phase, info):
            if phase == "start" and opening and len(inner) < 5:
                try:
                    bulk.store({"inner": 1}, id=f"inner/{len(inner)}")
                    inner.append("stored")
                except RuntimeError as exc:
                    inner.append("refused" if REENTRY in str(exc) else str(exc))

        with opening, collecting_at_every_allocation(callback, threshold=5):
            bulk.store({"i": 0}, id="d/0")
        bulk.store({"i": 1}, id="d/1")
        bulk.close()
        assert inner and set(inner) == {"refused"}
        assert len(server.operations) == 1 and set(server.documents) == {"d/0", "d/1"}


def test_a_store_from_inside_a_dropin_store_is_refused_without_a_deadlock():
    """bulkwire.ravendb's store asks the store's HiLo for an id (Python code, a request, a
    lock of the client's): a store from a callback run meanwhile would wait on that lock for
    ever. It raises RuntimeError instead; the outer store goes on."""
    import bulkwire.ravendb as dropin
    from ravendb_store import Person, store_on

    with LoopbackServer() as server, store_on(server) as store:
        bulk = dropin.bulk_insert(store)
        inner = []
        # while the store asks HiLo for the id (the client's lock is held in there)
        storing = Inside(lambda code: code is dropin.BulkInsertOperation._get_id.__code__)

        def callback(phase, info):
            if phase == "start" and storing and len(inner) < 5:
                try:
                    bulk.store(Person("inner"))
                    inner.append("stored")
                except RuntimeError as exc:
                    inner.append("refused" if REENTRY in str(exc) else str(exc))

        with storing, collecting_at_every_allocation(callback, threshold=5):
            first = bulk.store(Person("outer"))  # its HiLo range is asked for here
        with bulk:
            pass
    assert inner and set(inner) == {"refused"}
    assert set(server.documents) == {first}
