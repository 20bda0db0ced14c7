"""Counters, time series (plain and typed) and attachments in bulkwire's own bulk insert API.

The backbone is differential: the official ``ravendb`` client and bulkwire make the same calls
against the loopback server, and the request bodies must be byte-identical, plain and gzip
(the gzip stream as it came off the wire). Then what the official client gets wrong (it is
patched or avoided only where its bytes are not valid JSON or do not mean the given name),
hostile arguments, the lifecycle (after close, after a failure, an open time series), memory
bounds of huge attachments and Ctrl-C while an attachment is handed over.
"""
from __future__ import annotations

import contextlib
import gc
import json
import os
import pathlib
import re
import threading
import time
from datetime import date, datetime, timedelta, timezone
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bulkwire
from bulkwire import BulkInsert, BulkWriter, _core, conventions
from bulkwire.errors import BulkInsertAborted, BulkInsertError
from bulkwire.testing import LoopbackServer, parse_commands

ravendb = pytest.importorskip("ravendb")  # in the test extra: installed wherever tests run
from ravendb import DocumentStore  # noqa: E402
from ravendb.documents.bulk_insert_operation import BulkInsertOperation, BulkInsertOptions  # noqa: E402
from ravendb.documents.session.time_series import ITimeSeriesValuesBindable  # noqa: E402
from ravendb.tools.utils import Utils  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
from examples_budget import EXAMPLES  # noqa: E402
from _producer_threads import interrupt_when_queue_waits, refused_on_another_thread  # noqa: E402
DIFF_EXAMPLES = max(10, EXAMPLES // 6)  # each example makes four requests
SLOW = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                      HealthCheck.function_scoped_fixture])


def body_of(writer: BulkWriter) -> bytes:
    return b"".join(bytes(piece) for piece in writer.pieces())


def finished_body(calls) -> bytes:
    w = BulkWriter()
    calls(w)
    w.close()
    return body_of(w)


# ---- the official client as the reference ----

class _NeverEmpty(bytearray):
    def __bool__(self):
        return True


@contextlib.contextmanager
def official_client_fixed():
    """The reference with two defects of the official client (7.2.7) fixed, where its body is
    not JSON and bulkwire's is:

    - a time series command that is the first command of the body is not remembered as
      written, so the next command comes without its ',';
    - when the last operation left its buffer just handed over (empty), the closing ']' is
      never written.
    """
    append_internal = BulkInsertOperation.TimeSeriesBulkInsertBase._append_internal
    exit_ = BulkInsertOperation.__exit__

    def fixed_append_internal(self, timestamp, values, tag):
        append_internal(self, timestamp, values, tag)
        self._operation._first = False

    def fixed_exit(self, exc_type, exc, tb):
        if not self._current_data_buffer and self._operation_id != -1:
            self._current_data_buffer = _NeverEmpty()
        return exit_(self, exc_type, exc, tb)

    with mock.patch.object(BulkInsertOperation.TimeSeriesBulkInsertBase, "_append_internal",
                           fixed_append_internal), \
            mock.patch.object(BulkInsertOperation, "__exit__", fixed_exit):
        yield


def run_official(server, calls, *, compress=False, buffer_size=None):
    before = len(server.requests)
    store = DocumentStore(urls=[server.url], database=server.database)
    store.conventions.disable_topology_updates = True
    store.initialize()
    try:
        with official_client_fixed():
            with store.bulk_insert(options=BulkInsertOptions(use_compression=compress)) as bulk:
                if buffer_size is not None:
                    bulk._max_size_in_buffer = buffer_size
                calls(bulk, official=True)
    finally:
        store.close()
    return finished_request(server, before)


def run_bulkwire(server, calls, *, compress=False, buffer_size=None):
    before = len(server.requests)
    options = {} if buffer_size is None else {"buffer_size": buffer_size}
    with BulkInsert(server.url, server.database, compress="zlib" if compress else False,
                    **options) as bulk:
        calls(bulk, official=False)
    return finished_request(server, before)


def finished_request(server, before):
    """The request a run made (None when it made none: nothing was written)."""
    if len(server.requests) == before:
        return None
    (request,) = server.requests[before:]
    assert request.complete and request.status == 201, request.error
    return request


def buffers_of(request):
    """The body as the client cut it into buffers: each buffer is one HTTP chunk (plain) or
    one sync-flushed piece of the gzip stream. The official client's gzip stream ends with an
    extra empty final block (bulkwire ends it with the last buffer), hence the filter."""
    return [chunk for chunk in request.decoded_chunks if chunk]


def assert_same_bodies(calls, *, buffer_size=None, same_buffers=True):
    with LoopbackServer() as server:
        for compress in (False, True):
            ours = run_bulkwire(server, calls, compress=compress, buffer_size=buffer_size)
            theirs = run_official(server, calls, compress=compress, buffer_size=buffer_size)
            if ours is None or theirs is None:
                assert ours is theirs is None
                return []
            assert bytes(ours.body) == bytes(theirs.body)
            if same_buffers:
                assert buffers_of(ours) == buffers_of(theirs)
        assert not server.unexpected_errors
        return parse_commands(ours.body)


class Pulse(ITimeSeriesValuesBindable):
    """A typed time series entry for both clients (bulkwire reads get_time_series_mapping)."""

    def __init__(self, rate: float = None, oxygen: float = None):
        self.rate = rate
        self.oxygen = oxygen

    def get_time_series_mapping(self):
        return {0: ("rate", None), 1: ("oxygen", "SpO2")}


# Names the official client writes as JSON meaning that very name: it escapes '"' only (and
# not after a backslash), so backslashes and control characters are left to their own test.
names = st.text(st.characters(blacklist_categories=("Cs", "Cc")).filter(lambda c: c != "\\"),
                min_size=1, max_size=12)
document_ids = st.sampled_from(["docs/1", "docs/2", "DOCS/1", "users/ü-1", "a\"b", "x"])
# a PUT's id: ASCII (bulkwire escapes a document id as json.dumps does, the client leaves
# non-ASCII raw; both mean the same id)
put_ids = st.sampled_from(["docs/1", "docs/2", "users/7", "q\"uote"])
timestamps = st.one_of(
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)),
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30),
                 timezones=st.sampled_from([timezone.utc, timezone(timedelta(hours=5, minutes=30)),
                                            timezone(timedelta(hours=-11))])))
values = st.one_of(st.integers(-2**70, 2**70), st.floats(allow_nan=False, allow_infinity=False),
                   st.none())
tags = st.one_of(st.none(), names)
small_bytes = st.binary(max_size=300)

operations = st.one_of(
    st.tuples(st.just("store"), put_ids, st.dictionaries(names, st.integers(), max_size=3)),
    st.tuples(st.just("counters"), document_ids,
              st.lists(st.tuples(names, st.integers(-2**63, 2**63 - 1)), min_size=1, max_size=5)),
    st.tuples(st.just("series"), document_ids, names,
              st.lists(st.tuples(timestamps, st.lists(values, min_size=1, max_size=4), tags), max_size=5)),
    st.tuples(st.just("typed"), document_ids, names,
              st.lists(st.tuples(timestamps, st.floats(allow_nan=False, allow_infinity=False),
                                 tags), max_size=3)),
    st.tuples(st.just("attachment"), document_ids, names.filter(lambda n: not n.isspace()), small_bytes,
              st.one_of(st.none(), st.just(""), names)),
)


class Item:
    """A document class (the clients' conventions differ for plain dicts: the official one
    gives a dict no @collection)."""

    def __init__(self, fields):
        self.Kind = "item"  # the client cannot store an object without attributes
        self.__dict__.update(fields)


def increment_all(bulk, id: str, deltas) -> None:
    """``(name, delta)`` pairs incremented on the counters of ``id`` (either client)."""
    counters = bulk.counters_for(id)
    for name, delta in deltas:
        counters.increment(name, delta)


def append_all(bulk, id: str, name: str, entries, single) -> None:
    """``(timestamp, values, tag)`` entries appended to the time series ``name`` of ``id``
    (either client); those for which ``single(values, tag)`` holds by ``append_single``."""
    with bulk.time_series_for(id, name) as series:
        for when, values, tag in entries:
            if single(values, tag):
                series.append_single(when, values[0], tag)
            else:
                series.append(when, values, tag)


def play(ops):
    """The calls of a sequence of operations, for either client."""
    def calls(bulk, official):
        for op in ops:
            kind = op[0]
            if kind == "store":
                _, key, doc = op
                if official:
                    bulk.store_as(Item(doc), key)
                else:
                    bulk.store(Item(doc), id=key)
            elif kind == "counters":
                increment_all(bulk, op[1], op[2])
            elif kind == "series":
                append_all(bulk, op[1], op[2], op[3],
                           lambda values, tag: len(values) == 1 and tag is None)
            elif kind == "typed":
                with bulk.typed_time_series_for(Pulse, op[1], op[2]) as ts:
                    for when, rate, tag in op[3]:
                        ts.append_single(when, Pulse(rate, None), tag)
            else:
                _, key, name, data, content_type = op
                bulk.attachments_for(key).store(name, data, content_type)
    return calls


@settings(SLOW, max_examples=DIFF_EXAMPLES)
@given(st.lists(operations, min_size=1, max_size=12))
def test_any_sequence_gives_the_official_clients_bytes_plain_and_gzip(ops):
    assert_same_bodies(play(ops))


@settings(SLOW, max_examples=DIFF_EXAMPLES)
@given(st.lists(operations.filter(lambda op: op[0] != "store"), min_size=1, max_size=12),
       st.sampled_from([64, 200, 1000]))
def test_buffers_are_cut_where_the_official_client_cuts_them(ops, buffer_size):
    """With small buffers, every buffer (a sync flush of the gzip stream) ends where the
    client's does: after each increment, entry, attachment command and attachment smaller
    than the buffer. (A document's buffer ends after the document; the client's, after the
    next command's start: documents are left out here.)"""
    ops = [op for op in ops if op[0] != "attachment" or len(op[3]) < buffer_size]
    assert_same_bodies(play(ops), buffer_size=buffer_size)


def test_long_runs_are_split_into_commands_of_1024_operations():
    def calls(bulk, official):
        counters = bulk.counters_for("docs/1")
        for i in range(2500):
            counters.increment(f"c{i % 7}", i)
        bulk.counters_for("Docs/1").increment("same document, other case")
        with bulk.time_series_for("docs/1", "HeartRate") as ts:
            for i in range(2100):
                ts.append_single(datetime(2024, 1, 1) + timedelta(seconds=i), i / 3)
        bulk.counters_for("docs/1").increment("after")
    commands = assert_same_bodies(calls)
    assert [c["Type"] for c in commands] == ["Counters"] * 3 + ["TimeSeriesBulkInsert"] * 3 + ["Counters"]
    assert [len(c["Counters"]["Operations"]) for c in commands[:3]] == [1024, 1024, 453]
    assert [len(c["TimeSeries"]["Appends"]) for c in commands[3:6]] == [1024, 1024, 52]


def test_mixed_sequence_arrives_and_is_recorded():
    def calls(bulk, official):
        (bulk.store_as if official else bulk.store)(Item({"Name": "ü"}), "users/1")
        bulk.counters_for("users/1").increment("likes", 2)
        bulk.counters_for("users/1").increment("likes")
        with bulk.time_series_for("users/1", "Heart€") as ts:
            ts.append(datetime(2024, 5, 1, 8, 30), [61, 0.5], "watch")
        with bulk.typed_time_series_for(Pulse, "users/1", "Pulses") as ts:
            ts.append_single(datetime(2024, 5, 1, tzinfo=timezone.utc), Pulse(70.0, 98.5))
        bulk.attachments_for("users/1").store("photo.png", b"\x89PNG\r\n\x1a\n\x00", "image/png")
        bulk.attachments_for("users/1").store("notes", bytearray(b"{not json]"))
    with LoopbackServer() as server:
        run_bulkwire(server, calls)
        assert server.documents["users/1"]["Name"] == "ü"
        assert server.counters == {"users/1": {"likes": 3}}
        assert server.time_series == {
            ("users/1", "Heart€"): [(1714552200000, [61, 0.5], "watch")],
            ("users/1", "Pulses"): [(1714521600000, [70.0, 98.5], None)]}
        assert server.attachments == {("users/1", "photo.png"): ("image/png", b"\x89PNG\r\n\x1a\n\x00"),
                                      ("users/1", "notes"): (None, b"{not json]")}
    assert_same_bodies(calls)


def test_typed_series_name_defaults_to_the_collection_name():
    assert finished_body(lambda w: w.typed_time_series_for(Pulse, "a").close()) == b"[]"

    class Entry:
        timestamp, value, tag = datetime(2024, 1, 1), Pulse(1.0, None), "t"

    def calls(w):
        with w.typed_time_series_for(Pulse, "a") as ts:
            ts.append_entry(Entry())
    (command,) = json.loads(finished_body(calls))
    assert command["TimeSeries"]["Name"] == "Pulses"
    assert command["TimeSeries"]["Appends"] == [[1704067200000, 2, 1.0, None, "t"]]


# ---- timestamps and values, exactly as the client computes and writes them ----

class SubDatetime(datetime):
    pass


@settings(SLOW, max_examples=EXAMPLES)
@given(st.one_of(timestamps, st.builds(
    lambda d: SubDatetime(d.year, d.month, d.day, d.hour, d.minute, d.second, d.microsecond, d.tzinfo),
    timestamps)))
def test_timestamps_are_the_clients_unix_milliseconds(when):
    w = BulkWriter()
    with w.time_series_for("a", "s") as ts:
        ts.append_single(when, 1)
    w.close()
    (command,) = json.loads(body_of(w))
    assert command["TimeSeries"]["Appends"][0][0] == Utils.get_unix_time_in_ms(when)


@pytest.mark.parametrize("when", [datetime.min, datetime.max, datetime(1970, 1, 1),
                                  datetime(1969, 12, 31, 23, 59, 59, 999999),
                                  datetime(2255, 6, 5, 23, 47, 34, 740992),  # 2**53 us
                                  datetime(2255, 6, 5, 23, 47, 34, 740993),
                                  datetime.max.replace(tzinfo=timezone(timedelta(hours=-23))),
                                  datetime.min.replace(tzinfo=timezone(timedelta(hours=23)))])
def test_timestamps_at_the_edges(when):
    test_timestamps_are_the_clients_unix_milliseconds.hypothesis.inner_test(when)


@settings(SLOW, max_examples=EXAMPLES)
@given(st.lists(values, min_size=1, max_size=6), tags)
def test_values_are_written_as_the_client_writes_them(vals, tag):
    w = BulkWriter()
    with w.time_series_for("a", "s") as ts:
        ts.append(datetime(2024, 1, 1), vals, tag)
    w.close()
    text = ",".join("null" if v is None else str(v) for v in vals)
    tail = "" if tag is None else "," + json.dumps(tag, ensure_ascii=False)
    expected = f"[1704067200000,{len(vals)},{text}{tail}]"
    assert expected.encode() in body_of(w)


# ---- where the client's bytes are wrong, bulkwire's are JSON meaning the given text ----

@settings(SLOW, max_examples=EXAMPLES)
@given(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=10).filter(
    lambda n: conventions.id_problem(n) is None))  # the name is the document id too
def test_any_name_arrives_as_given(name):
    def calls(w):
        w.counters_for(name).increment(name, 1)
        with w.time_series_for(name, name) as ts:
            ts.append_single(datetime(2024, 1, 1), 1.5, name)
        w.attachments_for(name).store(name, b"\\\"", name)
    commands = parse_commands(finished_body(calls))
    assert commands[0]["Id"] == commands[0]["Counters"]["DocumentId"] == name
    assert commands[0]["Counters"]["Operations"][0]["CounterName"] == name
    assert commands[1]["TimeSeries"]["Name"] == name and commands[1]["TimeSeries"]["Appends"][0][-1] == name
    assert commands[2]["Name"] == commands[2]["ContentType"] == name and commands[2]["Bytes"] == b"\\\""


def test_backslashes_and_control_characters_are_escaped():
    body = finished_body(lambda w: w.counters_for("a\\b").increment("x\ny\"", 1))
    assert b'"Id":"a\\\\b"' in body and b'"CounterName":"x\\ny\\""' in body
    assert json.loads(body)[0]["Counters"]["Operations"][0]["CounterName"] == "x\ny\""


def test_a_series_first_in_the_body_is_followed_by_a_comma():
    def calls(w):
        with w.time_series_for("a", "s") as ts:
            ts.append_single(datetime(2024, 1, 1), 1)
        w.counters_for("a").increment("c")
        w.store({}, id="b")
    assert [c["Type"] for c in json.loads(finished_body(calls))] == [
        "TimeSeriesBulkInsert", "Counters", "PUT"]


# ---- hostile arguments: a clear error, and nothing of the call in the body ----

def _good(w):
    w.counters_for("docs/1").increment("c", 1)


BAD_CALLS = {
    "counter id int": (lambda w: w.counters_for(7), TypeError, "id must be a str"),
    "counter id blank": (lambda w: w.counters_for("  "), ValueError, "id"),
    "counter name None": (lambda w: w.counters_for("a").increment(None), TypeError, "name must be a str"),
    "counter name surrogate": (lambda w: w.counters_for("a").increment("\ud800"), ValueError, "surrogate"),
    "delta float": (lambda w: w.counters_for("a").increment("c", 1.5), TypeError, "delta must be an int"),
    "delta bool": (lambda w: w.counters_for("a").increment("c", True), TypeError, "delta must be an int"),
    "delta huge": (lambda w: w.counters_for("a").increment("c", 2**63), OverflowError, "64 bits"),
    "series name empty": (lambda w: w.time_series_for("a", ""), ValueError, "name must not be empty"),
    "attachment str": (lambda w: w.attachments_for("a").store("n", "text"), TypeError, "not str"),
    "attachment int": (lambda w: w.attachments_for("a").store("n", 5), TypeError, "bytes-like"),
    "attachment strided": (lambda w: w.attachments_for("a").store("n", memoryview(b"abcdef")[::2]),
                           BufferError, None),
    "content type int": (lambda w: w.attachments_for("a").store("n", b"x", 3), TypeError, "content_type"),
    "attachment name None": (lambda w: w.attachments_for("a").store(None, b"x"), TypeError, "name"),
}


def _in_series(append, exc, fragment):
    def call(w):
        with w.time_series_for("docs/9", "s") as ts:
            append(ts)
    return call, exc, fragment


SERIES_CASES = {
    "timestamp date": _in_series(lambda ts: ts.append_single(date(2024, 1, 1), 1), TypeError, "datetime"),
    "timestamp str": _in_series(lambda ts: ts.append_single("2024-01-01", 1), TypeError, "datetime"),
    "value nan": _in_series(lambda ts: ts.append_single(datetime(2024, 1, 1), float("nan")), ValueError, "finite"),
    "value inf": _in_series(lambda ts: ts.append(datetime(2024, 1, 1), [1, float("-inf")]), ValueError,
                            r"values\[1\]"),
    "value bool": _in_series(lambda ts: ts.append_single(datetime(2024, 1, 1), True), TypeError, "values"),
    "value str": _in_series(lambda ts: ts.append(datetime(2024, 1, 1), [1, "2"]), TypeError, r"values\[1\]"),
    "values empty": _in_series(lambda ts: ts.append(datetime(2024, 1, 1), []), ValueError, "at least one"),
    "values dict": _in_series(lambda ts: ts.append(datetime(2024, 1, 1), {1: 2}), TypeError, "list or tuple"),
    "tag int": _in_series(lambda ts: ts.append_single(datetime(2024, 1, 1), 1, 5), TypeError, "tag"),
    "timestamp raising": _in_series(
        lambda ts: ts.append_single(datetime(2024, 1, 1, tzinfo=type("Bad", (timezone.__base__,), {
            "utcoffset": lambda self, dt: 1 / 0})()), 1), ZeroDivisionError, None),
}
BAD_CALLS.update(SERIES_CASES)


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_a_bad_call_raises_and_leaves_the_body_as_it_was(case):
    call, exc, fragment = BAD_CALLS[case]
    in_series = case in SERIES_CASES

    def calls(w):
        _good(w)
        with pytest.raises(exc, match=fragment):
            call(w)
        if w._series is not None:
            w._series.close()
        w.counters_for("docs/1").increment("c", 2)

    def without_the_bad_call(w):
        _good(w)
        if in_series:  # opening a series ends the counters command, as the client does
            w.time_series_for("docs/9", "s").close()
        w.counters_for("docs/1").increment("c", 2)
    assert finished_body(calls) == finished_body(without_the_bad_call)


def test_a_typed_series_needs_its_mapping():
    w = BulkWriter()
    with w.typed_time_series_for(Pulse, "a") as ts:
        with pytest.raises(TypeError, match="must be a Pulse"):
            ts.append_single(datetime(2024, 1, 1), 1.0)
        with pytest.raises(TypeError, match="append_single"):
            ts.append(datetime(2024, 1, 1), [1.0])
    with pytest.raises(TypeError, match="get_time_series_mapping"):
        with w.typed_time_series_for(int, "a") as ts:
            ts.append_single(datetime(2024, 1, 1), 1)
    w.close()
    assert body_of(w) == b"[]"


# ---- lifecycle ----

def test_an_open_series_takes_nothing_else():
    w = BulkWriter()
    ts = w.time_series_for("a", "s")
    for call in (lambda: w.store({}, id="x"), lambda: w.counters_for("a").increment("c"),
                 lambda: w.attachments_for("a").store("n", b""), lambda: w.time_series_for("b", "t"),
                 lambda: w.store_encoded(b'{"Id":"y","Type":"PUT","Document":{}}', 1)):
        with pytest.raises(RuntimeError, match="time series"):
            call()
    ts.append_single(datetime(2024, 1, 1), 1)
    ts.close()
    ts.close()
    with pytest.raises(ValueError, match="after it was closed"):
        ts.append_single(datetime(2024, 1, 1), 2)
    w.store({}, id="x")
    w.close()
    assert [c["Type"] for c in json.loads(body_of(w))] == ["TimeSeriesBulkInsert", "PUT"]


def test_a_call_back_from_a_timestamps_tzinfo_is_refused():
    """utcoffset() is Python code run in the middle of an append: closing the series (or
    appending) from it would have the entry written into a closed command."""
    w = BulkWriter()
    ts = w.time_series_for("a", "s")

    class Meddling(timezone.__base__):
        def utcoffset(self, dt):
            ts.close()
            return timedelta(0)

    with pytest.raises(RuntimeError, match="in the middle of another call"):
        ts.append_single(datetime(2024, 1, 1, tzinfo=Meddling()), 1)
    ts.append_single(datetime(2024, 1, 1), 2)
    ts.close()
    w.close()
    (command,) = json.loads(body_of(w))
    assert command["TimeSeries"]["Appends"] == [[1704067200000, 1, 2]]


class _ShoutingId(str):
    def lower(self):
        raise AssertionError("str.lower is the rule, not an override")


def test_counter_ids_are_compared_with_str_lower():
    body = finished_body(lambda w: (w.counters_for("Doc/1").increment("a"),
                                    w.counters_for(_ShoutingId("doc/1")).increment("b")))
    (command,) = json.loads(body)
    assert [op["CounterName"] for op in command["Counters"]["Operations"]] == ["a", "b"]


def test_close_with_an_open_series_fails_the_insert():
    w = BulkWriter()
    ts = w.time_series_for("a", "s")
    ts.append_single(datetime(2024, 1, 1), 1)
    with pytest.raises(RuntimeError, match="time series 's' of 'a' is open"):
        w.close()
    assert w.failed and not w.complete
    with pytest.raises(BulkInsertAborted):
        w.close()
    with pytest.raises(BulkInsertAborted):
        list(w.pieces())


def test_bulk_insert_with_an_open_series_never_returns_normally():
    with LoopbackServer() as server:
        bulk = BulkInsert(server.url, server.database)
        bulk.counters_for("a").increment("c")
        bulk.time_series_for("a", "s").append_single(datetime(2024, 1, 1), 1)
        with pytest.raises(RuntimeError):
            bulk.close()
        with pytest.raises(BulkInsertError):
            bulk.close()
        assert server.counters == {} and all(not r.succeeded for r in server.requests)


def test_commands_after_close_and_after_a_failure():
    w = BulkWriter()
    w.close()
    for call in (lambda: w.counters_for("a").increment("c"), lambda: w.time_series_for("a", "s"),
                 lambda: w.attachments_for("a").store("n", b"x")):
        with pytest.raises(ValueError, match="closed"):
            call()
    w = BulkWriter()
    w.fail(BulkInsertError("the server went away"))
    for call in (lambda: w.counters_for("a").increment("c"), lambda: w.time_series_for("a", "s"),
                 lambda: w.attachments_for("a").store("n", b"x")):
        with pytest.raises(BulkInsertError, match="went away"):
            call()


def test_commands_come_from_the_producer_thread_only():
    w = BulkWriter()
    w.counters_for("a").increment("c")
    errors = refused_on_another_thread([lambda: w.counters_for("a").increment("c"),
                                        lambda: w.time_series_for("a", "s"),
                                        lambda: w.attachments_for("a").store("n", b"x")])
    assert len(errors) == 3 and all("one thread" in e for e in errors)
    w.close()
    assert len(json.loads(body_of(w))) == 1


def test_a_server_failure_raises_at_the_next_command():
    with LoopbackServer() as server:
        server.fail_after_bytes = 1
        bulk = BulkInsert(server.url, server.database, buffer_size=100)
        with pytest.raises(BulkInsertError):
            for i in range(100_000):
                bulk.counters_for(f"docs/{i}").increment("c")
        with pytest.raises(BulkInsertError):
            bulk.attachments_for("a").store("n", b"x")
        with pytest.raises(BulkInsertError):
            bulk.close()


# ---- huge attachments: bounded memory, no copy of bytes ----

def _drain_slowly(writer, sink):
    def run():
        for piece in writer.pieces():
            sink.append(len(piece))
            del piece
            time.sleep(0.0002)
    t = threading.Thread(target=run)
    t.start()
    return t


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "memoryview"])
def test_a_huge_attachment_keeps_memory_bounded(kind):
    """bytes go out as they are (no copy); a mutable buffer is copied a buffer at a time. The
    writer's buffers (Pieces once handed over) never hold much more than the queue's worth."""
    size, buffer_size, max_buffers = 48 << 20, 1 << 16, 4
    data = {"bytes": lambda: os.urandom(1024) * (size // 1024),
            "bytearray": lambda: bytearray(os.urandom(1024) * (size // 1024)),
            "memoryview": lambda: memoryview(bytearray(size)).cast("B")}[kind]()
    gc.collect()
    live_before = _core._testing.piece_memory()[0]
    _core._testing.reset_piece_peak()
    w = BulkWriter(buffer_size=buffer_size, max_buffers=max_buffers)
    sink: list = []
    t = _drain_slowly(w, sink)
    w.counters_for("a").increment("c")
    w.attachments_for("a").store("big", data)
    w.counters_for("a").increment("c")
    w.close()
    t.join(60)
    peak = _core._testing.piece_memory()[1]
    assert sum(sink) == w.stats.body_bytes > size
    assert peak - live_before < (max_buffers + 3) * 2 * buffer_size, peak - live_before


def test_a_huge_attachment_arrives_whole():
    data = os.urandom(3 << 20)
    with LoopbackServer() as server:
        for compress in (False, True):
            with BulkInsert(server.url, server.database, buffer_size=1 << 16,
                            compress="zlib" if compress else False) as bulk:
                bulk.attachments_for("a").store("big", data, "application/x")
                bulk.attachments_for("a").store("copy", bytearray(data))
                bulk.store({"after": True}, id="a")
            assert server.attachments[("a", "big")] == ("application/x", data)
            assert server.attachments[("a", "copy")] == (None, data)
            assert server.documents["a"]["after"] is True

    def calls(bulk, official):
        bulk.attachments_for("a").store("big", data, "application/x")
        bulk.counters_for("a").increment("n")
    # bytes larger than a buffer go out as their own piece, where the client copies them
    # into its buffer: the same body, cut differently
    assert_same_bodies(calls, same_buffers=False)


@pytest.mark.parametrize("kind", ["bytearray", "bytes"])
def test_ctrl_c_while_an_attachment_is_handed_over_fails_the_writer(kind):
    w = BulkWriter(buffer_size=1000, max_buffers=2)  # no consumer: the third buffer blocks
    if kind == "bytes":  # the queue full already: bytes wait behind their command's buffer
        w.attachments_for("a").store("first", bytearray(2500))

    timer = interrupt_when_queue_waits(w)
    with pytest.raises(KeyboardInterrupt):
        w.attachments_for("a").store("big", bytearray(100_000) if kind == "bytearray" else bytes(100_000))
    timer.join(30)
    assert w.failed
    with pytest.raises(BulkInsertAborted, match="interrupted"):
        w.counters_for("a").increment("c")
    with pytest.raises(BulkInsertAborted):
        w.close()


# ---- the examples of docs/bulk_insert.md run as they are ----

def doc_examples():
    text = (ROOT / "docs" / "bulk_insert.md").read_text()
    section = text[text.index("## Counters, time series and attachments"):]
    section = section[:section.index("\n## ", 5)]
    return re.findall(r"```python\n(.*?)```", section, re.S)


@pytest.mark.parametrize("index", range(4))
def test_the_docs_examples_run(index):
    examples = doc_examples()
    assert len(examples) == 4
    exec(compile(examples[index], f"bulk_insert.md example {index}", "exec"), {})


def test_a_typed_series_class_is_not_kept_alive():
    """The attribute names of a class's mapping are cached weakly: a cache holding the class
    kept everything its methods' globals held (a BulkInsert, its buffers) for good."""
    import weakref
    namespace: dict = {}
    exec("class Sample:\n"
         "    def __init__(self, v=None):\n        self.v = v\n"
         "    def get_time_series_mapping(self):\n        return {0: ('v', None)}\n", namespace)
    w = namespace["w"] = BulkWriter()
    with w.typed_time_series_for(namespace["Sample"], "a") as ts:
        ts.append_single(datetime(2024, 1, 1), namespace["Sample"](1.0))
    w.close()
    gone = weakref.ref(w)
    del w, ts, namespace  # the class's methods still hold the namespace, and so the writer
    gc.collect()
    assert gone() is None
