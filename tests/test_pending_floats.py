"""Float text off the producer thread: a document's list (or tuple) of at least 16 exact floats
is copied as doubles by store() and its text is written when the handed-over buffer is first
read (the body pump, without the GIL). The body must be byte for byte what it is without the
deferral: checked against the JSON round trip, against the writer with the deferral off, and
against the official client's request."""
import json
import math
import threading

import pytest
from hypothesis import given, settings, strategies as st

import bulkwire
from bulkwire import _core
from bulkwire.bulk import BulkWriter
from bulkwire.testing import LoopbackServer
from oracle import round_trip
from test_bulk_writer import expected_command, type_metadata
from test_ravendb_dropin import User, assert_same_request

RUN_MIN = 16  # the shortest list that becomes a pending run
ROOM = 34  # bytes reserved per double: the longest float text and its ", "
TIMEOUT = 30.0


class Ratio(float):
    """A float subclass: json writes float.__repr__ of it, the walker must too."""

    def __repr__(self):
        return "not this"


def body_of(docs, *, defer, buffer_size=1 << 20, default=_core.ENTITY):
    """The whole body of a BulkWriter that stored ``docs`` (dict, id) pairs, and its pieces."""
    writer = BulkWriter(buffer_size=buffer_size, max_buffers=100_000, defer_float_text=defer,
                        default=default)
    for doc, doc_id in docs:
        writer.store(doc, id=doc_id)
    writer.close()
    pieces = [bytes(c) for c in writer.pieces()]
    return b"".join(pieces), pieces


def expected_body(docs):
    return b"[" + b",".join(expected_command(d, i, type_metadata(d)) for d, i in docs) + b"]"


def assert_same_body(docs, buffer_size=1 << 20):
    deferred, _ = body_of(docs, defer=True, buffer_size=buffer_size)
    plain, _ = body_of(docs, defer=False, buffer_size=buffer_size)
    assert deferred == plain
    assert deferred == expected_body(docs)
    return deferred


# ---- property: lists of floats of every shape, through every buffer size ----

_special = st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 0.0, 1e16, 1e-05, 2.0 ** -24,
                            5e-324, 1.7976931348623157e308, 0.1])
_float = st.floats(allow_nan=True, allow_infinity=True) | _special
# what makes a list not a run of exact floats: json writes each as it is
_intruder = (st.booleans() | st.integers(-2 ** 70, 2 ** 70) | _float.map(Ratio) | st.none()
             | st.text(max_size=3))


@st.composite
def _float_list(draw, inner=None):
    n = draw(st.sampled_from([0, 1, 2, RUN_MIN - 1, RUN_MIN, RUN_MIN + 1, 64])
             | st.integers(0, 300))
    values = draw(st.lists(_float, min_size=n, max_size=n))
    if values and draw(st.integers(0, 3)) == 0:  # one element that is no exact float
        values[draw(st.integers(0, len(values) - 1))] = draw(_intruder if inner is None
                                                              else _intruder | inner)
    return tuple(values) if draw(st.integers(0, 4)) == 0 else values


_leaf = _float_list() | _float | st.integers() | st.text(max_size=4)
_value = st.recursive(_leaf, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=4), inner, max_size=3)
                      | _float_list(inner), max_leaves=10)
_document = st.dictionaries(st.text(max_size=6).filter(lambda k: k not in ("Id", "@metadata")),
                            _value, max_size=5)


@settings(max_examples=min(150, settings().max_examples), deadline=None)
@given(st.lists(_document, min_size=1, max_size=6),
       st.sampled_from([1, 64, 700, 4096, 1 << 20]) | st.integers(1, 20_000))
def test_any_float_lists_give_the_oracles_body(docs, buffer_size):
    batch = [(d, f"docs/{i}") for i, d in enumerate(docs)]
    assert_same_body(batch, buffer_size)


@pytest.mark.parametrize("n", [0, 1, RUN_MIN - 1, RUN_MIN, RUN_MIN + 1, 1024, 100_000])
def test_lists_and_tuples_around_the_run_length(n):
    values = [i / 7 - 3 for i in range(n)]
    docs = [({"L": values, "T": tuple(values), "E": [], "O": [0.5]}, "d/1")]
    assert_same_body(docs)


@pytest.mark.parametrize("intruder", [True, False, 1, 2 ** 80, Ratio(0.25), None, "x", [0.5] * 20,
                                      math.nan, math.inf, -math.inf, -0.0])
@pytest.mark.parametrize("where", [0, 1, 17, -1])
def test_one_element_of_another_kind_anywhere(intruder, where):
    values = [i * 0.1 for i in range(40)]
    values[where] = intruder
    assert_same_body([({"v": values}, "d/1"), ({"v": tuple(values)}, "d/2")])


def test_nested_lists_and_lists_in_dicts_in_lists():
    run = [i * 1.5e-3 for i in range(RUN_MIN)]
    doc = {"m": [run, [run, [run, []]], {"a": [{"b": run}], "c": tuple(run)}],
           "matrix": [[float(i * j) for j in range(20)] for i in range(20)]}
    assert_same_body([(doc, "d/1")])


def test_many_runs_in_one_document_across_many_small_buffers():
    doc = {f"k{i}": [i + j / 3 for j in range(RUN_MIN + i % 5)] for i in range(500)}
    assert_same_body([(doc, "d/1"), (doc, "d/2")], buffer_size=4096)


@pytest.mark.parametrize("shift", range(0, 64, 7))
def test_runs_at_the_buffer_threshold(shift):
    """Documents sized so that runs start, end and straddle the 1 MiB threshold."""
    run = [j / 9 for j in range(1000)]  # 34,002 bytes pending
    docs = [({"pad": "p" * (shift + 31 * i), "v": run, "w": run[:RUN_MIN]}, f"d/{i}")
            for i in range(40)]
    _, pieces = body_of(docs, defer=True)
    assert len(pieces) >= 2
    assert_same_body(docs)


def test_a_handed_over_buffer_is_bounded_by_the_room_not_the_text():
    """The threshold counts a pending run at its largest text: a buffer handed over at
    buffer_size never grows past it when its text is written (it shrinks)."""
    buffer_size = 64 << 10
    run = [j / 9 for j in range(100)]
    q = _core.HandoverQueue(1000)
    w = _core.CommandWriter(buffer_size, queue=q, class_info=lambda c: ("x/", {}),
                            defer_float_text=True)
    for i in range(200):
        w.store({"v": run}, f"d/{i}")
    q.put(w.finish())
    q.close_producer()
    document_room = 100 * ROOM + 200
    sizes = []
    while (got := _core.next_piece(q)) is not None:
        piece, consumed = got
        assert piece.nbytes <= buffer_size + document_room
        assert len(piece) == consumed <= piece.nbytes
        sizes.append(consumed)
    # 100 doubles are about 2,000 bytes of text but took 3,402 bytes of room
    assert all(size < 0.75 * buffer_size for size in sizes[:-1])


def test_every_reader_of_a_piece_sees_the_text():
    run = [j / 3 for j in range(50)]
    w = _core.CommandWriter(1 << 20, defer_float_text=True)
    assert w.put("d/1", {"v": run}, {}) is None
    piece = w.finish()
    assert len(piece) == w.bytes - (50 * ROOM + 2) + len(json.dumps(run))  # len settles first
    assert bytes(piece) == bytes(memoryview(piece))
    assert f"{len(piece)} bytes" in repr(piece)
    for first in (bytes, memoryview, repr):  # whichever reader comes first settles it
        w = _core.CommandWriter(1 << 20, defer_float_text=True)
        w.put("d/1", {"v": run}, {})
        piece = w.finish()
        first(piece)
        assert json.loads(bytes(piece))[0]["Document"]["v"] == run


def test_two_threads_reading_one_piece_see_the_same_bytes():
    run = [j / 3 for j in range(5000)]
    for _ in range(20):
        w = _core.CommandWriter(1 << 24, defer_float_text=True)
        for i in range(20):
            w.put(f"d/{i}", {"v": run}, {})
        piece = w.finish()
        seen = []
        threads = [threading.Thread(target=lambda: seen.append(bytes(piece))) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(set(seen)) == 1 and json.loads(seen[0])[19]["Document"]["v"] == run


# ---- errors and rollback: nothing of a failed document stays, in bytes or in runs ----

def test_a_failed_document_leaves_no_run_behind():
    """The second document fails after its run was copied; the third has no run of its
    own and ends where the failed run's room was: its bytes must not be read as a run."""
    run = [j / 7 for j in range(64)]
    ok1 = ({"v": run}, "d/1")
    ok3 = ({"s": "z" * 5000}, "d/3")
    writer = BulkWriter(defer_float_text=True, default=None)
    writer.store(*ok1)
    with pytest.raises(TypeError, match="not JSON serializable"):
        writer.store({"v": run, "bad": object()}, id="d/2")
    writer.store(*ok3)
    writer.close()
    body = b"".join(bytes(c) for c in writer.pieces())
    assert body == expected_body([ok1, ok3])


def test_runs_under_keys_that_json_coerces():
    """A dict with keys that are not str is written through a copy of its values' bytes:
    those values are never left pending."""
    run = [j / 7 for j in range(40)]
    docs = [({"m": {1: run, 2.5: tuple(run), None: [run, run], True: {"x": run}}}, "d/1")]
    assert_same_body(docs)


def test_a_hook_mutating_a_list_before_and_after_it_is_copied():
    """The values are copied when the walker reaches the list, which is when json writes it:
    a change a hook makes later is not seen there (json has already written it), and is seen
    where the list comes again after the hook."""
    vec = []

    def hook(o):
        if o == "append":
            vec.append(1)  # no longer a run of floats
        elif o == "clear":
            vec.clear()
        else:
            vec[:] = [2.5] * 40
        return o

    class Mutate(str):
        pass

    for how in ("append", "clear", "set"):
        doc = {"before": vec, "hook": Mutate(how), "after": vec, "again": (vec,)}
        bodies = []
        for defer in (True, False, None):
            vec[:] = [j / 7 for j in range(32)]
            if defer is None:  # the oracle, with the same hook
                d = round_trip(doc, default=lambda o: hook(str(o)))
                d["@metadata"] = type_metadata(doc)
                bodies.append(b'[{"Id":"d/1","Type":"PUT","Document":' + json.dumps(d).encode()
                              + b"}]")
            else:
                bodies.append(body_of([(doc, "d/1")], defer=defer,
                                      default=lambda o: hook(str(o)))[0])
        assert bodies[0] == bodies[1] == bodies[2]
        assert json.loads(bodies[0])[0]["Document"]["before"] == [j / 7 for j in range(32)]


def test_a_list_changed_by_a_hook_that_runs_before_the_copy():
    """A hook that returns a list it keeps changing on each call: each call's list is copied
    as it is when the walker reaches it."""
    shared = [0.5] * 20

    def hook(o):
        shared.append(0.25)
        return shared if len(shared) % 2 else tuple(shared)

    docs = [({"a": object(), "b": object(), "c": [object(), object()]}, "d/1")]
    deferred, _ = body_of(docs, defer=True, default=hook)
    shared[:] = [0.5] * 20
    plain, _ = body_of(docs, defer=False, default=hook)
    assert deferred == plain


@pytest.mark.parametrize("depth", [2040, 2044, 2045, 2046, 2047, 2048, 2049])
def test_the_nesting_limit_applies_to_runs_as_to_any_array(depth):
    value = [1.5] * RUN_MIN
    for _ in range(depth):
        value = [value]
    outcomes = []
    for defer in (True, False):
        w = _core.CommandWriter(1 << 20, defer_float_text=defer)
        try:
            w.put("d/1", {"v": value}, {})
            outcomes.append(bytes(w.finish()))
        except RecursionError as exc:
            outcomes.append(str(exc))
    assert outcomes[0] == outcomes[1]


def test_defer_float_text_is_checked():
    with pytest.raises(TypeError, match="defer_float_text must be True, False or None"):
        BulkWriter(defer_float_text=1)


@pytest.mark.parametrize("cpus, expected", [(1, False), (2, True), (8, True)])
def test_by_default_the_text_is_deferred_only_with_a_second_cpu(monkeypatch, cpus, expected):
    import bulkwire.compression

    monkeypatch.setattr(bulkwire.compression, "usable_cpus", lambda: cpus)
    assert BulkWriter().defer_float_text is expected
    assert BulkWriter(defer_float_text=not expected).defer_float_text is (not expected)
    with LoopbackServer() as server:
        bulk = bulkwire.BulkInsert(server.url, server.database, timeout=TIMEOUT)
        assert bulk._writer.defer_float_text is expected


# ---- end to end: the pump writes the text, against the official client ----

@pytest.mark.parametrize("compress", [False, "zlib"])
def test_bulk_insert_bodies_are_the_same_with_and_without(compress):
    vec = [j / 1024 - 0.5 for j in range(1024)]
    docs = [{"Name": f"n{i}", "Rank": i, "Vector": [v + i for v in vec]} for i in range(300)]
    bodies = []
    for defer in (True, False):
        with LoopbackServer() as server:
            with bulkwire.BulkInsert(server.url, server.database, compress=compress,
                                     buffer_size=256 << 10, timeout=TIMEOUT,
                                     defer_float_text=defer) as bulk:
                for i, d in enumerate(docs):
                    bulk.store(d, id=f"e/{i}")
            request = server.requests[-1]
            assert request.complete and request.error is None
            assert bulk.stats.body_bytes == len(request.body)
            bodies.append(bytes(request.body))
    assert bodies[0] == bodies[1] == expected_body([(d, f"e/{i}") for i, d in enumerate(docs)])


@settings(max_examples=min(8, settings().max_examples), deadline=None)
@given(st.lists(st.lists(_float.filter(lambda f: math.isfinite(f)), min_size=0, max_size=200),
                min_size=1, max_size=4), st.booleans())
def test_float_lists_send_the_official_clients_request(vectors, compress):
    import bulkwire.compression

    def calls(bulk):
        return [bulk.store(User(f"u{i}", Vector=v, Pair=[v, tuple(v)])) for i, v in enumerate(vectors)]

    # the drop-in takes the default: deferred on any machine, so that this test covers it
    usable_cpus = bulkwire.compression.usable_cpus
    bulkwire.compression.usable_cpus = lambda: 2
    try:
        assert_same_request(calls, compress=compress)
    finally:
        bulkwire.compression.usable_cpus = usable_cpus



def test_a_producer_that_finds_the_queue_full_writes_the_text_itself():
    """With one slot and a slow consumer the queue is full at nearly every hand-over: the
    producer then writes the text of the buffer it hands over (the consumer the others);
    the body is the same whoever wrote which buffer's text."""
    import time

    run = [j / 7 for j in range(300)]
    docs = [({"v": run, "i": i}, f"d/{i}") for i in range(400)]
    writer = BulkWriter(buffer_size=16 << 10, max_buffers=1, defer_float_text=True)
    pieces = []

    def consume():
        for piece in writer.pieces():
            time.sleep(0.002)
            pieces.append(bytes(piece))

    consumer = threading.Thread(target=consume)
    consumer.start()
    for doc, doc_id in docs:
        writer.store(doc, id=doc_id)
    writer.close()
    consumer.join(TIMEOUT)
    assert not consumer.is_alive()
    assert writer.stats.blocked_puts > 0
    assert b"".join(pieces) == expected_body(docs)


# ---- deferral follows the consumer: off while it is behind, on again when it keeps up ----

def test_the_text_is_written_on_the_producer_while_the_consumer_is_behind():
    """A hand-over that finds the queue full (the consumer is behind: the server or the
    network is the bound) turns deferral off for the next documents: their lists are written
    as text at once (counted at their text, not at their room). The first hand-over that finds
    room turns it on again. The body is the same throughout."""
    run = [j / 9 for j in range(100)]
    text = len(json.dumps(run))
    q = _core.HandoverQueue(1)
    w = _core.CommandWriter(1024, queue=q, class_info=lambda c: ("x/", {}),
                            defer_float_text=True)
    allowed = threading.Semaphore(0)
    taken = []
    took = threading.Event()

    def consume():
        while True:
            allowed.acquire()
            got = _core.next_piece(q)
            if got is None:
                return
            taken.append(bytes(got[0]))
            took.set()

    def let_take_after(delay):  # unblocks a producer waiting for room, once it waits
        threading.Timer(delay, allowed.release).start()

    def store(i):
        before = w.bytes
        w.store({"v": run}, f"d/{i}")
        return w.bytes - before

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    first = store(1)                      # hand-over 1 finds room: deferral stays on
    assert first >= 100 * ROOM
    let_take_after(0.2)
    assert store(2) >= 100 * ROOM         # stored deferred; hand-over 2 finds the queue full
    let_take_after(0.2)
    behind = store(3)                     # written as text; hand-over 3 finds it full again
    assert behind < first and behind - text < first - 100 * ROOM
    took.clear()
    allowed.release()                     # the consumer takes piece 3: the queue is empty
    assert took.wait(10)
    assert store(4) == behind             # text again; hand-over 4 finds room
    let_take_after(0.2)
    assert store(5) == first              # deferred again; hand-over 5 waits for piece 4 taken
    for _ in range(10):
        allowed.release()
    q.put(w.finish())
    q.close_producer()
    consumer.join(10)
    assert not consumer.is_alive()
    body = json.loads(b"".join(taken))
    assert [c["Id"] for c in body] == [f"d/{i}" for i in range(1, 6)]
    assert all(c["Document"]["v"] == run for c in body)
    assert b"".join(taken) == b"".join(body_of_writer(defer=False))


def body_of_writer(*, defer):
    """The pieces of the same five documents, with no consumer waiting (nothing behind)."""
    q = _core.HandoverQueue(100)
    w = _core.CommandWriter(1024, queue=q, class_info=lambda c: ("x/", {}),
                            defer_float_text=defer)
    for i in range(1, 6):
        w.store({"v": [j / 9 for j in range(100)]}, f"d/{i}")
    q.put(w.finish())
    q.close_producer()
    pieces = []
    while (got := _core.next_piece(q)) is not None:
        pieces.append(bytes(got[0]))
    return pieces
