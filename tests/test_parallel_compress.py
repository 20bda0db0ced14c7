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
    """The pieces a stream gives for body cut at the offsets cuts (the last one ends)."""
    stream = _core.GzipStream(backend=backend, threads=threads)
    assert stream.threads == threads
    return gzip_pieces_from(stream, body, cuts)


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


# ---- the comma coder: float arrays coded without general matching ----

def float_array_body(n, seed=1, separator=", "):
    """JSON float arrays as embedding documents are written (shortest float repr of float32
    values), cut to exactly n bytes."""
    import numpy as np
    rng = np.random.default_rng(seed)
    out = bytearray()
    while len(out) < n:
        vector = rng.standard_normal(256).astype(np.float32)
        out += json.dumps({"Vector": (vector / np.linalg.norm(vector)).tolist()},
                          separators=(separator, ": ")).encode()
    return bytes(out[:n])


def key_heavy_body(n, seed=1):
    """Small JSON documents: the same keys over and over, which only a matcher shortens."""
    rng = __import__("random").Random(seed)
    out = bytearray()
    while len(out) < n:
        out += json.dumps({"Name": f"user {rng.randrange(10**6)}", "Age": rng.randrange(90),
                           "Email": "someone@example.com", "Tags": ["a", "b"]}).encode()
    return bytes(out[:n])


def stream_of(backend, threads, body, piece=MIB):
    stream = _core.GzipStream(backend=backend, threads=threads)
    cuts = list(range(piece, len(body), piece))
    return stream, gzip_pieces_from(stream, body, cuts)


def gzip_pieces_from(stream, body, cuts):
    """The pieces ``stream`` gives for body cut at the offsets cuts (the last one ends the
    member), each with the body offset it ends at."""
    bounds = [0] + sorted(set(c for c in cuts if 0 < c < len(body))) + [len(body)]
    pieces = []
    for i, (start, end) in enumerate(zip(bounds, bounds[1:])):
        last = i == len(bounds) - 2
        piece = stream.finish(body[start:end]) if last else stream.compress(body[start:end])
        pieces.append((bytes(piece) if piece is not None else b"", end))
    assert stream.finished and stream.total_in == len(body)
    assert stream.total_out == sum(len(p) for p, _ in pieces)
    return pieces


@pytest.mark.parametrize("backend", GZIP_BACKENDS)
@pytest.mark.parametrize("separator", [", ", ","])
def test_float_arrays_take_comma_blocks_no_larger_than_matching(backend, separator):
    """On float arrays the sampled block shows general matching finds about nothing more, so
    the blocks after it are comma blocks; the member still inflates to the body piece by
    piece, and is no more than 3% larger than one stream matched throughout."""
    body = float_array_body(6 * MIB, separator=separator)
    stream, pieces = stream_of(backend, 2, body)
    assert_one_member_decodable_on_arrival(pieces, body)
    assert stream.comma_blocks > 0
    serial, serial_pieces = stream_of(backend, 1, body)
    assert serial.comma_blocks == 0
    assert stream.total_out <= serial.total_out * 1.03


@pytest.mark.parametrize("backend", GZIP_BACKENDS)
def test_repeating_keys_stay_matched(backend):
    body = key_heavy_body(6 * MIB)
    stream, pieces = stream_of(backend, 2, body)
    assert_one_member_decodable_on_arrival(pieces, body)
    assert stream.comma_blocks == 0


@pytest.mark.parametrize("backend", GZIP_BACKENDS)
def test_a_body_that_changes_character_is_sampled_again(backend):
    """Float arrays, then small documents: the samples taken every 16 blocks notice the
    change, so the keys are matched again (the member stays near the serial one's size)."""
    body = float_array_body(8 * MIB) + key_heavy_body(24 * MIB)
    stream, pieces = stream_of(backend, 2, body)
    assert_one_member_decodable_on_arrival(pieces, body)
    blocks = -(-len(body) // (MIB // 2))
    assert 0 < stream.comma_blocks < blocks // 2
    serial, _ = stream_of(backend, 1, body)
    assert stream.total_out <= serial.total_out * 1.10


@pytest.mark.parametrize("backend", GZIP_BACKENDS)
@settings(max_examples=min(EXAMPLES, 30), deadline=None)
@given(parts=st.lists(st.tuples(st.sampled_from(["floats", "keys", "noise", "commas"]),
                                st.integers(0, 300 * KIB)), min_size=1, max_size=5),
       cuts=st.lists(st.integers(0, 1500 * KIB), max_size=6), threads=st.integers(2, 3))
def test_mixed_bodies_cut_any_way_inflate_to_the_body(backend, parts, cuts, threads):
    """Comma blocks and matched blocks in any order, primed or not, each piece decodable."""
    rng = __import__("random").Random(len(parts))
    makers = {"floats": float_array_body, "keys": key_heavy_body,
              "noise": lambda n: rng.randbytes(n),
              "commas": lambda n: (b"1," * (n // 2 + 1))[:n]}
    body = b"".join(makers[kind](n) for kind, n in parts)
    stream = _core.GzipStream(backend=backend, threads=threads)
    pieces = gzip_pieces_from(stream, body, cuts)
    assert_one_member_decodable_on_arrival(pieces, body)


def test_blocks_over_16_mib_stay_matched():
    """A comma block's list of back-references grows with the block, so blocks over 16 MiB
    (here 20 MiB: a 40 MiB write on two threads) keep the backend; 8 MiB ones do not."""
    body = float_array_body(40 * MIB)
    whole = _core.GzipStream(backend="zlib", threads=2)
    pieces = gzip_pieces_from(whole, body, [])
    assert whole.comma_blocks == 0
    assert zlib.decompress(b"".join(p for p, _ in pieces), wbits=31) == body
    cut = _core.GzipStream(backend="zlib", threads=2)
    pieces = gzip_pieces_from(cut, body, list(range(16 * MIB, len(body), 16 * MIB)))
    assert cut.comma_blocks > 0
    assert zlib.decompress(b"".join(p for p, _ in pieces), wbits=31) == body
