"""The JSON Lines target (``bulkwire.targets.jsonl``), a kind added by its own module and one
line of the registry: one document per line, the documents a RavenDB load PUTs (compared
with the request body's, document by document), compressed as the file's suffix says,
written whole or not at all, and never resumed."""
from __future__ import annotations

import gzip
import json
import os

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

import bulkwire  # noqa: E402
from bulkwire import targets  # noqa: E402
from bulkwire.errors import RowError  # noqa: E402


def table(rows: int = 30) -> "pa.Table":
    return pa.table({
        "id": list(range(rows)),
        "name": [f"n\u00e9\"{i}\\" if i % 3 else None for i in range(rows)],
        # the text of a command's framing inside a value
        "text": [f'x"}},{{"Id":"y{i}","Type":"PUT","Document":{{' for i in range(rows)],
        "flag": [i % 2 == 0 for i in range(rows)],
        "score": [i / 7 for i in range(rows)],
        "v": pa.array([[float(i) / 3, 0.1] for i in range(rows)], pa.list_(pa.float32())),
    })


def documents_of_request_file(path: str) -> list:
    """The Document of each command of a request body, as bytes re-encoded from JSON (the
    order of keys kept)."""
    return [command["Document"] for command in json.loads(open(path, "rb").read())]


def lines(path: str) -> list:
    data = open(path, "rb").read()
    if path.endswith(".gz"):
        data = gzip.decompress(data)
    elif path.endswith(".zst"):
        zstandard = pytest.importorskip("zstandard")
        data = zstandard.ZstdDecompressor().decompressobj().decompress(data)
    assert data.endswith(b"\n")
    return data.split(b"\n")[:-1]


@pytest.mark.parametrize("options", [{}, {"collection": "Points", "float32": "shortest",
                                          "metadata": {"k": 1}, "python_type": None},
                                     {"id_prefix": "p-"}])
def test_each_line_is_the_document_the_request_file_holds(tmp_path, options):
    source = str(tmp_path / "t.parquet")
    pq.write_table(table(), source, row_group_size=7)
    body = bulkwire.load_parquet(source, targets.request_file(str(tmp_path / "b.json"),
                                                              **options), batch_rows=5)
    out = str(tmp_path / "t.jsonl")
    result = bulkwire.load_parquet(source, targets.jsonl(out, **options), batch_rows=5)
    assert result.rows == body.rows == 30 and result.target == out
    expected = documents_of_request_file(body.target)
    got = [json.loads(line) for line in lines(out)]
    assert len(got) == len(expected) == 30
    for one, other in zip(got, expected):
        assert one == other and list(one) == list(other)  # the same keys, in the same order
    assert result.body_bytes == os.path.getsize(out) == result.wire_bytes


def test_arrow_data_round_trips(tmp_path):
    out = str(tmp_path / "a.jsonl")
    bulkwire.load_arrow(table(4), targets.jsonl(out, collection="C"))
    docs = [json.loads(line) for line in lines(out)]
    assert [d["text"] for d in docs] == [f'x"}},{{"Id":"y{i}","Type":"PUT","Document":{{'
                                         for i in range(4)]
    assert docs[1]["name"] == "n\u00e9\"1\\" and docs[0]["name"] is None
    assert [d["flag"] for d in docs] == [True, False, True, False]
    assert docs[2]["score"] == 2 / 7 and "id" not in docs[2]  # the id is the key, not a field
    assert docs[3]["@metadata"]["@collection"] == "C"


@pytest.mark.parametrize("name, encoding", [("o.jsonl.gz", "gzip"), ("o.jsonl.zst", "zstd"),
                                            ("o.jsonl", False)])
def test_the_suffix_says_the_compression(tmp_path, name, encoding):
    out = str(tmp_path / name)
    plain = str(tmp_path / "plain.jsonl")
    bulkwire.load_arrow(table(), targets.jsonl(plain))
    result = bulkwire.load_arrow(table(), targets.jsonl(out))
    assert result.compress == encoding
    assert lines(out) == lines(plain)
    if encoding:
        assert open(out, "rb").read() != open(plain, "rb").read()
        assert result.wire_bytes == os.path.getsize(out) < result.body_bytes


def test_compress_must_agree_with_the_suffix():
    assert targets.jsonl("x.jsonl.gz", compress="gzip").compress == "gzip"
    with pytest.raises(ValueError, match="the suffix says the compression"):
        targets.jsonl("x.jsonl", compress="gzip")
    with pytest.raises(TypeError, match="buffer_size is not an option of the jsonl target"):
        targets.jsonl("x.jsonl", buffer_size=10)


def test_a_failing_load_leaves_no_file(tmp_path):
    bad = table(10).set_column(0, "id", pa.array([1, 2, 3, None, 5, 6, 7, 8, 9, 10]))
    out = tmp_path / "bad.jsonl.gz"
    with pytest.raises(RowError, match="row 3"):
        bulkwire.load_arrow(bad, targets.jsonl(str(out)), batch_rows=2)
    assert os.listdir(tmp_path) == []

    def interrupt(rows, body):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        bulkwire.load_arrow(table(), targets.jsonl(str(out)), batch_rows=2, progress=interrupt)
    assert os.listdir(tmp_path) == []


def test_it_is_never_resumed_nor_shared_out(tmp_path):
    source = str(tmp_path / "t.parquet")
    pq.write_table(table(), source)
    for option in ({"resume": str(tmp_path / "state.json")}, {"workers": 2}):
        with pytest.raises(ValueError, match="needs a target that confirms each unit of work"):
            bulkwire.load_parquet(source, targets.jsonl(str(tmp_path / "o.jsonl")), **option)
    assert sorted(os.listdir(tmp_path)) == ["t.parquet"]


def test_it_is_a_kind_of_the_registry():
    assert targets.KINDS["jsonl"] is targets.jsonl
    assert [o.name for o in targets.options("jsonl")][:2] == ["path", "compress"]
    made = targets.make("jsonl", path="x.jsonl.zst", collection="P")
    assert made == targets.jsonl("x.jsonl.zst", collection="P") and made.compress == "zstd"
