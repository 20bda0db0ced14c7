"""zstd Parquet pages are read page by page on every build: through libzstd where the C core
links it, else through pyarrow's zstd codec (or the ``zstandard`` package), one call per page.
A corrupt zstd page is a MalformedFileError naming the file and the column either way, with
the same message. The tests of the Python decoder itself run on a build without libzstd
(CI's build without the optional libraries); on a build with it they skip, saying so."""
from __future__ import annotations

import sys

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
import pyarrow.parquet as pq  # noqa: E402

import parquet_craft as pc  # noqa: E402
from bulkwire import _core, parquet  # noqa: E402
from bulkwire.config import build_config  # noqa: E402
from bulkwire.errors import MalformedFileError  # noqa: E402
from bulkwire.parquet import PAGES, TableFile, zstd_page_decoder  # noqa: E402

LINKED = bool(_core.PARQUET_CODECS[6][1])
python_decoder_only = pytest.mark.skipif(
    LINKED, reason="libzstd is linked here: the Python zstd decoder is never called (CI's "
                   "build without the optional libraries runs this)")


def _table(rows: int = 2000) -> pa.Table:
    rng = np.random.default_rng(5)
    return pa.table({
        "id": pa.array(np.arange(rows), pa.int64()),
        "f": pa.array(rng.standard_normal(rows).astype("f4")),
        "s": pa.array([f"name-{i % 97}-{'x' * (i % 13)}" for i in range(rows)]),
    })


def _zstd_file(path, table: pa.Table, **options) -> str:
    pq.write_table(table, path, compression="zstd", write_page_index=True, data_page_size=2048,
                   row_group_size=800, write_page_checksum=True, **options)
    return str(path)


@pytest.fixture(autouse=True)
def _decoder_restored():
    """A test that sets its own decoder leaves the usual one behind."""
    yield
    if not LINKED and isinstance(parquet._zstd_decoder, tuple):
        _core.parquet_zstd_decoder(parquet._zstd_decoder[1])


def test_zstd_pages_are_read_page_by_page_on_this_build(tmp_path, monkeypatch):
    """paths says pages for every column, the config names the decoder, rows equal pyarrow's,
    and no row group is read."""
    table = _table()
    path = _zstd_file(tmp_path / "z.parquet", table)
    rows = [1999, 0, 5, 5, 801, 1200, 799]
    with TableFile(path) as f:
        assert set(f.paths.values()) == {PAGES}, f.paths
        monkeypatch.setattr(f._parquet, "read_row_group", None)  # no column may fall back
        got = f.take(rows)
        assert all(s["row_groups"] == 0 and s["pages_read"] > 0 for s in f.stats.values())
    assert got.equals(pq.read_table(path).take(rows))
    backend = build_config().backends["zstd Parquet pages"]
    assert backend == ("libzstd" if LINKED else
                       "page by page through pyarrow's zstd codec (libzstd not linked)")
    assert zstd_page_decoder() == ("libzstd" if LINKED else "pyarrow's zstd codec")


def _corrupt_first_page(path: str) -> None:
    """The first data page of column "f" with its zstd frame cut short by 8 bytes (the page
    header still saying the size the whole frame had)."""
    data = open(path, "rb").read()
    page = pc.read_page(data, pc.data_pages(data, 0, 1)[0])
    with open(path, "wb") as f:
        f.write(pc.replace_page(data, page, page.header, page.body[:-8]))


def test_a_corrupt_zstd_page_is_malformed_naming_the_file(tmp_path):
    """The same message on a build with libzstd and on one without (the Python decoder)."""
    path = _zstd_file(tmp_path / "bad.parquet", _table())
    _corrupt_first_page(path)
    with pytest.raises(MalformedFileError) as caught:
        with TableFile(path) as f:
            f.take([3])
    text = str(caught.value)
    assert f"{path!r} is malformed: column 'f': " in text, text
    assert "zstd page does not decompress to its " in text, text


@python_decoder_only
def test_the_python_decoder_is_called_once_per_page(tmp_path):
    assert zstd_page_decoder() == "pyarrow's zstd codec"
    name, decode = parquet._zstd_decoder
    calls = []

    def counting(data: bytes, size: int):
        calls.append(size)
        return decode(data, size)

    _core.parquet_zstd_decoder(counting)
    path = _zstd_file(tmp_path / "z.parquet", _table(), use_dictionary=False)
    with TableFile(path, columns=["f"]) as f:
        got = f.take([10, 1500])
        pages = f.stats["f"]["pages_read"]
    assert got.column("f").equals(pq.read_table(path).column("f").take([10, 1500]))
    assert len(calls) == pages == 2, (calls, pages)


@python_decoder_only
@pytest.mark.parametrize("answer, error", [
    (lambda data, size: b"\0" * (size - 1), MalformedFileError),   # one byte short
    (lambda data, size: b"\0" * (size + 1), MalformedFileError),   # one byte more
    (lambda data, size: 1 / 0, MalformedFileError),               # the decoder fails
    (lambda data, size: None, MalformedFileError),                # not bytes
    (lambda data, size: (_ for _ in ()).throw(MemoryError()), MemoryError),
])
def test_what_the_python_decoder_returns_is_checked(tmp_path, answer, error):
    assert zstd_page_decoder() == "pyarrow's zstd codec"
    _core.parquet_zstd_decoder(answer)
    path = _zstd_file(tmp_path / "z.parquet", _table(), use_dictionary=False)
    with pytest.raises(error) as caught:
        with TableFile(path, columns=["f"]) as f:
            f.take([10])
    if error is MalformedFileError:
        assert "zstd page does not decompress to its " in str(caught.value)
        assert repr(path) in str(caught.value)


def test_the_zstandard_package_decodes_where_pyarrow_has_no_codec(monkeypatch, tmp_path):
    """Without pyarrow the decoder found is the zstandard package's, and it returns exactly
    what pyarrow's codec returns for each page."""
    zstandard = pytest.importorskip("zstandard")
    codec = pa.Codec("zstd")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    name, decode = parquet._find_zstd_decoder()
    monkeypatch.undo()
    assert name == "the zstandard package"
    for size in (0, 1, 4096, 300_000):
        plain = np.random.default_rng(size).integers(0, 4, size, dtype=np.uint8).tobytes()
        framed = zstandard.ZstdCompressor(write_content_size=False).compress(plain)
        assert bytes(decode(framed, size)) == plain == \
            codec.decompress(framed, decompressed_size=size).to_pybytes()
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "zstandard", None)
    assert parquet._find_zstd_decoder() is None


def test_the_decoder_must_be_callable():
    with pytest.raises(TypeError, match="decode must be callable or None, not int"):
        _core.parquet_zstd_decoder(3)
