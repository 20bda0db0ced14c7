"""The C body pump (``_core.pump_body``): the sender's loop without the GIL. Checked on a
socketpair against an HTTP chunked-body decoder written here, and through BulkInsert with
the pump on and off (the pieces path that TLS sockets take)."""
import gzip
import json
import select
import socket
import threading
import time
import zlib

import pytest
from hypothesis import given, settings, strategies as st

import bulkwire
from bulkwire import _core
import bulkwire.testing
from bulkwire.bulk import BulkWriter
from bulkwire.testing import LoopbackServer

TIMEOUT = 30


def read_all(sock):
    data = bytearray()
    while True:
        got = sock.recv(1 << 16)
        if not got:
            return bytes(data)
        data.extend(got)


def dechunk(wire):
    """The pieces of an HTTP/1.1 chunked body; asserts it is well formed and terminated."""
    pieces, pos = [], 0
    while True:
        end = wire.index(b"\r\n", pos)
        size = int(wire[pos:end], 16)
        pos = end + 2
        if size == 0:
            assert wire[pos:] == b"\r\n", "terminating chunk without trailers"
            return pieces
        pieces.append(wire[pos:pos + size])
        assert wire[pos + size:pos + size + 2] == b"\r\n"
        pos += size + 2


def pump_items(items, gz=None, close_consumer=False, maxsize=4):
    """Runs pump_body over items put by a producer thread; returns (result, wire)."""
    a, b = socket.socketpair()
    a.settimeout(TIMEOUT)
    q = _core.HandoverQueue(maxsize)
    wire = {}
    reader = threading.Thread(target=lambda: wire.setdefault("bytes", read_all(b)))
    reader.start()

    def produce():
        for item in items:
            if not q.put(item):
                return
        if close_consumer:
            q.close_consumer()
        else:
            q.close_producer()

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        result = _core.pump_body(q, a.fileno(), gz, TIMEOUT)
    finally:
        producer.join(TIMEOUT)
        a.shutdown(socket.SHUT_WR)
        reader.join(TIMEOUT)
        a.close()
        b.close()
    return result, wire["bytes"]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=3000), min_size=1, max_size=12),
       st.sampled_from(["piece", "bytes", "mixed"]))
def test_plain_pump_sends_each_item_as_one_chunk(payloads, kind):
    items = [(_core._testing.make_piece(p) if kind == "piece" or (kind == "mixed" and i % 2) else p)
             for i, p in enumerate(payloads)]
    (outcome, buffers, body, pieces, wire_bytes), wire = pump_items(items)
    assert outcome == _core.PUMP_DONE
    assert dechunk(wire) == payloads
    assert (buffers, body, pieces, wire_bytes) == (len(payloads), sum(map(len, payloads)),
                                                   len(payloads), sum(map(len, payloads)))


@pytest.mark.parametrize("backend", ["zlib"] + (["isal"] if _core.HAVE_ISAL else []))
@settings(max_examples=15, deadline=None)
@given(payloads=st.lists(st.binary(min_size=1, max_size=5000), min_size=1, max_size=8))
def test_gzip_pump_sends_one_member_each_piece_decodable_on_arrival(backend, payloads):
    items = [_core._testing.make_piece(p) for p in payloads]
    gz = _core.GzipStream(backend=backend)
    (outcome, buffers, body, pieces, wire_bytes), wire = pump_items(items, gz)
    assert outcome == _core.PUMP_DONE
    parts = dechunk(wire)
    assert all(parts) and pieces == len(parts) and wire_bytes == sum(map(len, parts))
    assert gzip.decompress(b"".join(parts)) == b"".join(payloads)
    d = zlib.decompressobj(31)
    decoded = [d.decompress(p) for p in parts]
    # sync-flushed: every input buffer is whole once its piece (or the trailer) arrived
    assert b"".join(decoded[:len(payloads)]) == b"".join(payloads)
    assert d.eof
    assert body == sum(map(len, payloads)) and buffers == len(payloads)


def test_pump_reports_a_closed_consumer_and_frees_what_it_held():
    live = _core._testing.piece_memory()[2]
    result, _ = pump_items([_core._testing.make_piece(b"x" * 1000) for _ in range(3)],
                           close_consumer=True)
    assert result.outcome == _core.PUMP_CLOSED
    assert _core._testing.piece_memory()[2] == live


def test_pump_stops_when_the_peer_answered_or_hung_up():
    """A response (or a hang-up) before the end of the body: nothing more is sent and the
    caller is told (it then reads the response)."""
    a, b = socket.socketpair()
    b.sendall(b"HTTP/1.1 500 Internal Server Error\r\n\r\n")
    q = _core.HandoverQueue(2)
    q.put(b"data")
    q.close_producer()
    assert _core.pump_body(q, a.fileno(), None, 5).outcome == _core.PUMP_ANSWERED
    b.setblocking(False)
    with pytest.raises(BlockingIOError):
        b.recv(100)  # nothing was sent
    a.close()
    b.close()


def _stream(backend):
    if backend == "zstd":
        return _core.ZstdStream()
    return _core.GzipStream(backend=backend) if backend else None


def _decoded(backend, pieces):
    if backend == "zstd":
        return b"".join(bulkwire.testing.ZstdInflater(backend="zstd").feed(b"".join(pieces)))
    return gzip.decompress(b"".join(pieces)) if backend else b"".join(pieces)


@pytest.mark.parametrize("peer_closes", [False, True])
@pytest.mark.parametrize("backend", [None, "zlib", *(["zstd"] if _core.HAVE_ZSTD else [])])
def test_an_answer_after_the_last_data_byte_is_the_answer_to_the_whole_body(backend, peer_closes):
    """The pump has sent the body's last buffer, and the producer has not said yet that it
    was the last, when the server answers (as a server that answers once it has parsed the
    closing ']' does): PUMP_ANSWERED_AT_END, not an early answer; the rest (the compressed stream's end,
    the terminating chunk) still goes out, and a failure to send it (the server closed its
    side) is not an error: the answer is in."""
    a, b = socket.socketpair()
    a.settimeout(TIMEOUT)
    b.settimeout(TIMEOUT)
    q = _core.HandoverQueue(2)
    result = {}
    pump = threading.Thread(target=lambda: result.setdefault(
        "r", _core.pump_body(q, a.fileno(), _stream(backend), TIMEOUT)))
    pump.start()
    body = b'[{"Id":"a/1"}]'
    q.put(_core._testing.make_piece(body))
    wire = bytearray()
    while b"\r\n" not in wire or len(wire) < wire.index(b"\r\n") + 2 + int(wire[:wire.index(b"\r\n")], 16):
        # the size line and the whole piece (its CRLF comes later); a peer that closes
        # leaves them unread, so that its close resets the connection
        wire = bytearray(b.recv(1 << 16, socket.MSG_PEEK)) if peer_closes else wire + b.recv(1 << 16)
    answer = b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"
    b.sendall(answer)
    if peer_closes:
        b.close()  # unread bytes: a reset, the pump's next write fails
    assert select.select([a], [], [], TIMEOUT)[0]  # the answer is there before the end
    q.close_producer()
    pump.join(TIMEOUT)
    outcome, buffers, body_bytes, pieces, wire_bytes = result["r"]
    assert outcome == _core.PUMP_ANSWERED_AT_END and buffers == 1 and body_bytes == len(body)
    assert a.recv(1 << 10) == answer  # still there to be read
    if not peer_closes:
        a.shutdown(socket.SHUT_WR)
        wire += read_all(b)
        sent = dechunk(bytes(wire))  # terminated, well formed
        assert _decoded(backend, sent) == body
        assert pieces == len(sent) == (2 if backend else 1)  # compressed: the end alone, after
        b.close()
    else:  # the write of the rest failed (compressed: its piece was not counted), ignored
        assert pieces == 1
    a.close()


def test_pump_send_error_raises_oserror():
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    q = _core.HandoverQueue(2)
    big = _core._testing.make_piece(b"z" * (4 << 20))
    q.put(big)
    q.close_producer()
    threading.Timer(0.2, b.close).start()  # the peer goes away in the middle of the send
    with pytest.raises((BrokenPipeError, ConnectionResetError)):
        _core.pump_body(q, a.fileno(), None, 5)
    a.close()


def test_pump_send_timeout_raises_timeout_error():
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    a.settimeout(0.2)  # non-blocking descriptor, as Python sockets with a timeout are
    q = _core.HandoverQueue(2)
    q.put(_core._testing.make_piece(b"z" * (4 << 20)))
    q.close_producer()
    with pytest.raises(TimeoutError, match="timed out"):
        _core.pump_body(q, a.fileno(), None, 0.2)
    a.close()
    b.close()


def test_a_timeout_of_weeks_is_not_cut_short():
    """A timeout longer than poll() takes in milliseconds (about 24.8 days) waits as long as
    poll() can: 4294968 s is 2**32 ms and 704 ms more, which cut to a C int would be 704 ms."""
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    a.setblocking(False)
    q = _core.HandoverQueue(2)
    data = b"w" * (4 << 20)
    q.put(_core._testing.make_piece(data))
    q.close_producer()
    wire = {}

    def read_late():
        time.sleep(1.5)  # longer than the cut timeout would wait
        wire["bytes"] = read_all(b)

    reader = threading.Thread(target=read_late)
    reader.start()
    try:
        outcome, buffers, body, pieces, sent = _core.pump_body(q, a.fileno(), None, 4294968)
    finally:
        a.shutdown(socket.SHUT_WR)
        reader.join(TIMEOUT)
        a.close()
        b.close()
    assert (outcome, buffers, body) == (_core.PUMP_DONE, 1, len(data))
    assert b"".join(dechunk(wire["bytes"])) == data


def test_pump_bad_arguments():
    q = _core.HandoverQueue(2)
    with pytest.raises(TypeError):
        _core.pump_body(object(), 0)
    with pytest.raises(ValueError, match="fd"):
        _core.pump_body(q, -1)
    with pytest.raises(TypeError, match="gzip"):
        _core.pump_body(q, 0, gzip="zlib")
    with pytest.raises(ValueError, match="timeout"):
        _core.pump_body(q, 0, None, 0)


@pytest.mark.parametrize("use_pump", [True, False])
@pytest.mark.parametrize("compress", [False, True])
def test_bulk_insert_with_and_without_the_pump(monkeypatch, use_pump, compress):
    """Both consumer paths (the pump on plain sockets, pieces() elsewhere)
    deliver the same documents."""
    if not use_pump:
        monkeypatch.setattr(BulkWriter, "_can_pump", property(lambda self: False))
    with LoopbackServer() as server:
        with bulkwire.BulkInsert(server.url, server.database, compress=compress, buffer_size=4096,
                                 timeout=TIMEOUT) as bulk:
            for i in range(500):
                bulk.store({"i": i, "pad": "p" * 50}, id=f"p/{i}")
        stats = bulk.stats
        request = server.requests[-1]
    assert len(server.documents) == 500 and server.documents["p/499"]["i"] == 499
    assert stats.wire_bytes == sum(request.wire_chunks) and stats.pieces == len(request.wire_chunks)
    assert stats.buffers > 10 and stats.documents == 500
    assert (request.headers.get("Content-Encoding") == "gzip") == compress
    json.loads(bytes(request.body))


class _Piece(bytearray):
    """A bytes-like the pump cannot read without the GIL (and that can be weakly referenced)."""


def test_pump_releases_other_bytes_likes_promptly():
    """Bytes-likes other than Pieces are released with the GIL; the pump must not pile them
    up (each may pin a large buffer): at any moment only the queue's items, the one being
    sent and at most one more are alive."""
    import weakref

    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8192)
    a.settimeout(TIMEOUT)
    q = _core.HandoverQueue(2)
    refs = []
    most_alive = [0]
    done = threading.Event()

    def read_slowly():
        while not done.is_set():
            data = b.recv(20000)
            if not data:
                return
            most_alive[0] = max(most_alive[0], sum(r() is not None for r in refs))
            time.sleep(0.002)

    def produce():
        for i in range(40):
            piece = _Piece(bytes([65 + i % 26]) * 50_000)
            refs.append(weakref.ref(piece))
            if not q.put(piece):
                return
            del piece
        q.close_producer()

    reader = threading.Thread(target=read_slowly)
    producer = threading.Thread(target=produce)
    reader.start()
    producer.start()
    result = _core.pump_body(q, a.fileno(), None, TIMEOUT)
    producer.join(TIMEOUT)
    done.set()
    a.close()
    reader.join(TIMEOUT)
    b.close()
    assert (result.outcome, result.buffers) == (_core.PUMP_DONE, 40)
    assert most_alive[0] <= 2 + 1 + 2  # queue + in flight + one held + the producer's newest
    assert all(r() is None for r in refs)


@pytest.mark.parametrize("backend", [None, "zlib"] + (["isal"] if _core.HAVE_ISAL else []))
@settings(max_examples=25, deadline=None)
@given(payloads=st.lists(st.binary(min_size=1, max_size=4000), min_size=1, max_size=7))
def test_pump_and_next_piece_cut_the_same_pieces(backend, payloads):
    """The two consumers (the C pump, and next_piece behind BulkWriter.pieces()) follow one
    rule: with everything queued and the producer closed first, their pieces are byte for
    byte the same."""
    def queued():
        q = _core.HandoverQueue(len(payloads))
        for p in payloads:
            q.put(_core._testing.make_piece(p))
        q.close_producer()
        return q

    q = queued()
    gz = _core.GzipStream(backend=backend) if backend else None
    pieces = []
    while (got := _core.next_piece(q, gz)) is not None:
        piece, consumed = got
        if piece is not None and len(piece):
            pieces.append(bytes(piece))

    a, b = socket.socketpair()
    a.settimeout(TIMEOUT)
    wire = {}
    reader = threading.Thread(target=lambda: wire.setdefault("bytes", read_all(b)))
    reader.start()
    result = _core.pump_body(queued(), a.fileno(), _core.GzipStream(backend=backend) if backend else None,
                             TIMEOUT)
    a.shutdown(socket.SHUT_WR)
    reader.join(TIMEOUT)
    a.close()
    b.close()
    assert result.outcome == _core.PUMP_DONE
    assert dechunk(wire["bytes"]) == pieces
    # one framing: the chunks C frames for senders without the pump (TLS) are the pump's bytes
    assert wire["bytes"] == b"".join(map(_core.http_chunk, pieces)) + _core.HTTP_LAST_CHUNK
    if backend:
        assert gzip.decompress(b"".join(pieces)) == b"".join(payloads)
    else:
        assert pieces == payloads


@pytest.mark.parametrize("size", [1, 15, 16, 255, 256, 4095, 4096, 65536])
def test_http_chunk_frames_one_whole_chunk(size):
    data = bytes(range(256)) * (size // 256 + 1)
    data = data[:size]
    assert _core.http_chunk(data) == b"%x\r\n" % size + data + b"\r\n"
    assert _core.http_chunk(memoryview(data)) == _core.http_chunk(_core._testing.make_piece(data))
    assert dechunk(_core.http_chunk(data) + _core.HTTP_LAST_CHUNK) == [data]
    assert _core.HTTP_LAST_CHUNK == b"0\r\n\r\n"


def test_http_chunk_refuses_what_is_not_one_chunk():
    with pytest.raises(ValueError, match="cannot be empty"):
        _core.http_chunk(b"")  # the empty chunk would end the body
    with pytest.raises(TypeError):
        _core.http_chunk("text")


def test_an_empty_body_is_framed_alike_by_both_senders():
    (outcome, *_), wire = pump_items([])
    assert outcome == _core.PUMP_DONE and wire == _core.HTTP_LAST_CHUNK


@pytest.mark.parametrize("compress", [False, "zlib"])
def test_http_chunks_of_a_writer_are_its_pieces_framed_and_end_only_when_whole(compress):
    w = BulkWriter(compress=compress, buffer_size=256, max_buffers=100)
    for i in range(30):
        w.store({"i": i, "pad": "p" * 40}, id=f"h/{i}")
    w.close()
    wire = b"".join(w.http_chunks())
    body = b"".join(dechunk(wire))
    assert json.loads(gzip.decompress(body) if compress else body)[29]["Id"] == "h/29"
    assert w.stats.wire_bytes == len(body) and w.stats.pieces == len(dechunk(wire)) > 1

    cut = BulkWriter(compress=compress, buffer_size=256, max_buffers=100)
    cut.store({"i": 1}, id="h/1")
    cut.fail(RuntimeError("the sender cannot go on"))
    sent = []
    with pytest.raises(bulkwire.BulkInsertAborted, match="cut short"):
        for chunk in cut.http_chunks():
            sent.append(chunk)
    assert _core.HTTP_LAST_CHUNK not in sent  # a body cut short never looks complete
