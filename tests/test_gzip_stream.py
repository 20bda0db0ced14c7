"""The gzip stream of the bulk insert body: one member, sync-flushed pieces, every backend."""
import gzip
import os
import random
import zlib

import pytest

from bulkwire import _core
from bulkwire.bulk import _PythonIsal, compression_backends


def _stream(backend):
    if backend == "python-isal":
        return _PythonIsal()
    return _core.GzipStream(backend=backend)


BACKENDS = compression_backends()


def _json_like_pieces(count, size, seed=7):
    rng = random.Random(seed)
    pieces = []
    for _ in range(count):
        text = ", ".join(repr(rng.random()) for _ in range(size // 20))
        pieces.append(("[" + text + "]").encode())
    return pieces


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_piece_decodes_on_arrival_and_the_whole_is_one_member(backend):
    pieces = _json_like_pieces(6, 200_000) + [os.urandom(50_000), b"x" * 300_000]
    gz = _stream(backend)
    assert gz.backend == backend
    out = []
    decoder = zlib.decompressobj(31)
    for data in pieces:
        piece = gz.compress(data)
        assert piece is not None and len(piece) > 0
        # sync-flushed: everything fed so far comes out of the decoder right now
        assert decoder.decompress(bytes(piece)) == data
        out.append(bytes(piece))
    tail = gz.finish()
    assert len(tail) > 0
    out.append(bytes(tail))
    assert decoder.decompress(tail) == b"" and decoder.eof and decoder.unused_data == b""
    body = b"".join(out)
    assert gzip.decompress(body) == b"".join(pieces)
    whole = zlib.decompressobj(31)
    assert whole.decompress(body) == b"".join(pieces) and whole.eof and not whole.unused_data
    assert gz.total_in == sum(map(len, pieces)) and gz.total_out == len(body)


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_empty_pieces(backend):
    gz = _stream(backend)
    assert gz.compress(b"") is None
    last = gz.finish(b"[1]")
    assert gzip.decompress(bytes(last)) == b"[1]"


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != "python-isal"])
def test_finish_with_data_and_misuse(backend):
    gz = _core.GzipStream(backend=backend)
    a = gz.compress(memoryview(b"abc" * 1000))
    b = gz.finish(bytearray(b"def"))
    assert gzip.decompress(bytes(a) + bytes(b)) == b"abc" * 1000 + b"def"
    with pytest.raises(ValueError, match="finished"):
        gz.compress(b"more")
    with pytest.raises(TypeError):
        _core.GzipStream(backend=backend).compress("text is not bytes")


def test_backend_choice():
    with pytest.raises(ValueError, match="backend"):
        _core.GzipStream(backend="brotli")
    auto = _core.GzipStream()
    assert auto.backend == ("isal" if _core.HAVE_ISAL else "zlib")
    if not _core.HAVE_ISAL:
        with pytest.raises(ValueError, match="libisal"):
            _core.GzipStream(backend="isal")


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != "python-isal"])
def test_fastest_level_ratio_is_sane(backend):
    data = b"".join(_json_like_pieces(2, 500_000, seed=3))
    gz = _core.GzipStream(backend=backend)
    body = bytes(gz.finish(data))
    assert gzip.decompress(body) == data
    assert len(body) < len(data) * 0.7  # float text compresses to well under 70%


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != "python-isal"])
def test_pieces_are_read_only(backend):
    piece = _core.GzipStream(backend=backend).compress(b"hello")
    view = memoryview(piece)
    assert view.readonly
    with pytest.raises(TypeError):
        view[0] = 0
