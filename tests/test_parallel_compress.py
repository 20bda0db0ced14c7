"""Compression on several threads: GzipStream(threads=N) cuts each piece into blocks deflated
at once, each primed with the 32 KiB before it, and still writes ONE gzip member that zlib,
ISA-L (the isal package) and the gzip module inflate to exactly the body, each piece on
arrival; ZstdStream(threads=N) runs libzstd's own workers and still writes ONE frame; the
pump and BulkWriter carry compress_threads through; bad thread counts are refused."""
import gzip
import json
import os
import zlib

import pytest
import zstandard
from hypothesis import given, settings, strategies as st
from isal import isal_zlib

from bulkwire import _core, compression
from bulkwire.bulk import BulkWriter
from build_extras import needs
from bulkwire.testing import ZstdInflater
from test_bulk_pump import dechunk, pump_items

EXAMPLES = settings().max_examples
KIB, MIB = 1 << 10, 1 << 20
GZIP_BACKENDS = ["zlib", pytest.param("isal", marks=needs("isal"))]  # ISA-L: libisal-dev at build


def text_body(n, seed=1):
    """Float text with repeats, cut to exactly n bytes."""
    rng = __import__("random").Random(seed)
    out = bytearray()
    while len(out) < n:
        out += json.dumps([round(rng.uniform(-1, 1), rng.randrange(2, 9)) for _ in range(64)]).encode()
    return bytes(out[:n])


def gzip_pieces(backend, threads, body, cuts):
    """The pieces a stream gives for body cut at the sorted offsets cuts (the last one ends)."""
    stream = _core.GzipStream(backend=backend, threads=threads)
    assert stream.threads == threads
    bounds = [0] + sorted(set(c for c in cuts if 0 < c < len(body))) + [len(body)]
    pieces = []
    for i, (start, end) in enumerate(zip(bounds, bounds[1:] or [0])):
        last = i == len(bounds) - 2
        piece = stream.finish(body[start:end]) if last else stream.compress(body[start:end])
        pieces.append((bytes(piece) if piece is not None else b"", end))
    if len(bounds) == 1:  # an empty body: only the end
        pieces.append((bytes(stream.finish()), 0))
    assert stream.finished and stream.total_in == len(body)
    assert stream.total_out == sum(len(p) for p, _ in pieces)
    return pieces


def assert_one_member_decodable_on_arrival(pieces, body):
    d = zlib.decompressobj(wbits=31)
    got = b""
    for piece, end in pieces:
        got += d.decompress(piece)
        assert got == body[:end]
    assert d.eof and d.unused_data == b""
    wire = b"".join(p for p, _ in pieces)
    assert zlib.decompress(wire, wbits=31) == body
    assert gzip.decompress(wire) == body
    assert isal_zlib.decompress(wire, wbits=31) == body


@pytest.mark.parametrize("backend", GZIP_BACKENDS)
@pytest.mark.parametrize("threads", [2, 3, 4])
@pytest.mark.parametrize("size", [0, 1, 32 * KIB - 1, 32 * KIB, 32 * KIB + 1, 64 * KIB,
                                  64 * KIB + 1, MIB - 1, MIB, MIB + 1, 2 * MIB + 3])
def test_boundaries_inflate_to_the_body(backend, threads, size):
    body = text_body(size)
    assert_one_member_decodable_on_arrival(gzip_pieces(backend, threads, body, []), body)
    cuts = list(range(32 * KIB, size, 32 * KIB)) if size < MIB + 2 else [MIB, 32 * KIB]
    assert_one_member_decodable_on_arrival(gzip_pieces(backend, threads, body, cuts), body)


@pytest.mark.parametrize("backend", GZIP_BACKENDS)
@settings(max_examples=min(EXAMPLES, 40), deadline=None)
@given(size=st.integers(0, 600 * KIB), cuts=st.lists(st.integers(0, 600 * KIB), max_size=6),
       threads=st.integers(2, 4), seed=st.integers(0, 3))
def test_any_body_cut_any_way_inflates_to_the_body(backend, size, cuts, threads, seed):
    body = text_body(size, seed)
    assert_one_member_decodable_on_arrival(gzip_pieces(backend, threads, body, cuts), body)


@pytest.mark.parametrize("backend", GZIP_BACKENDS)
def test_blocks_cost_little_against_the_serial_stream(backend):
    """Each block is primed with the input before it: the member is hardly larger than the
    serial one (blocks deflated apart would lose every match across a boundary)."""
    body = text_body(4 * MIB)
    serial = sum(len(p) for p, _ in gzip_pieces(backend, 1, body, range(MIB, 4 * MIB, MIB)))
    parallel = sum(len(p) for p, _ in gzip_pieces(backend, 4, body, range(MIB, 4 * MIB, MIB)))
    assert parallel < serial * 1.02


@needs("isal")
def test_the_pump_sends_the_parallel_member_in_order():
    payloads = [text_body(MIB + 17 * i, seed=i) for i in range(5)]
    items = [_core._testing.make_piece(p) for p in payloads]
    gz = _core.GzipStream(backend="isal", threads=3)
    (outcome, buffers, body, pieces, wire_bytes), wire = pump_items(items, gz)
    assert outcome == 0 and buffers == 5 and body == sum(map(len, payloads))
    parts = dechunk(wire)
    assert all(parts) and wire_bytes == sum(map(len, parts))
    d = zlib.decompressobj(wbits=31)
    got = b""
    for part, end in zip(parts, [sum(map(len, payloads[:i + 1])) for i in range(5)]):
        got += d.decompress(part)
        assert got == b"".join(payloads)[:end]  # each piece decodes on arrival
    assert d.eof and got == b"".join(payloads)


@needs("zstd")
@pytest.mark.parametrize("threads", [2, 3])
def test_zstd_workers_write_one_frame(threads):
    body = text_body(3 * MIB + 11)
    stream = _core.ZstdStream(threads=threads)
    d = zstandard.ZstdDecompressor().decompressobj()
    got = b""
    for start in range(0, len(body), MIB):
        part = body[start:start + MIB]
        last = start + MIB >= len(body)
        piece = bytes(stream.finish(part) if last else stream.compress(part))
        got += d.decompress(piece)
        assert got == body[:start + len(part)]  # each piece decodes on arrival
    assert d.eof and d.unused_data == b"" and got == body  # one frame, nothing after it
    wire_stream = _core.ZstdStream(threads=threads)
    wire = bytes(wire_stream.finish(body))
    assert zstandard.get_frame_parameters(wire).has_checksum
    inflater = ZstdInflater()  # the loopback server's own decoder
    assert b"".join(inflater.feed(wire)) == body


@pytest.mark.parametrize("compress", ["zlib", pytest.param("isal", marks=needs("isal")),
                                      pytest.param("zstd", marks=needs("zstd"))])
@pytest.mark.parametrize("threads", [1, 2])
def test_writer_bodies_decode_to_the_plain_body(compress, threads):
    def body_of(**kwargs):
        w = BulkWriter(buffer_size=64 * KIB, max_buffers=64, **kwargs)  # no consumer yet
        for i in range(3000):
            w.store({"Name": f"n{i}", "Vector": [i / 7, -i / 3, 1e-7 * i]}, id=f"e/{i}")
        w.close()
        return b"".join(bytes(p) for p in w.pieces())

    plain = body_of()
    wire = body_of(compress=compress, compress_threads=threads)
    if compress == "zstd":
        d = zstandard.ZstdDecompressor().decompressobj()
        assert d.decompress(wire) == plain and d.eof and d.unused_data == b""
    else:
        assert zlib.decompress(wire, wbits=31) == plain


def test_compress_threads_default_and_refusals():
    cpus = len(os.sched_getaffinity(0))
    assert compression.default_compress_threads() == max(1, min(cpus, compression.DEFAULT_THREADS_MAX))
    assert BulkWriter(compress="zlib").compress_threads is None
    assert BulkWriter(compress="zlib", compress_threads=3).compress_threads == 3
    for bad in (0, -1, _core.GZIP_THREADS_MAX + 1):
        with pytest.raises(ValueError, match="compress_threads"):
            BulkWriter(compress="zlib", compress_threads=bad)
    for bad in (1.5, "2", True):
        with pytest.raises(TypeError, match="compress_threads"):
            BulkWriter(compress="zlib", compress_threads=bad)
    with pytest.raises(ValueError, match="threads"):
        _core.GzipStream(threads=0)
    assert compression.body_compressor("zlib", None).threads == compression.default_compress_threads()


@needs("isal", "zstd")
def test_compress_threads_of_the_linked_libraries():
    with pytest.raises(ValueError, match="threads"):
        _core.ZstdStream(threads=_core.GZIP_THREADS_MAX + 1)
    assert compression.body_compressor("isal", 2).threads == 2
    assert compression.body_compressor("zstd", None).threads == 1
    assert compression.body_compressor("zstd", 2).threads == 2
