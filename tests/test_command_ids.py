"""A command's id is written as the official client writes it: raw UTF-8, with only what JSON
must escape escaped. Differential against the client itself, through bulkwire's own
BulkInsert, the drop-in, and load_parquet's file sink."""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from ravendb import DocumentStore
from ravendb.json.metadata_as_dictionary import MetadataAsDictionary

import bulkwire
import bulkwire.ravendb
from bulkwire.testing import LoopbackServer

IDS = ["things/é", "naïve/☃", "music/𝄞", "日本/1", "plain/1", "emoji/😀-é"]


def official_body(ids: list) -> bytes:
    with LoopbackServer() as server:
        store = DocumentStore(urls=[server.url], database="db").initialize()
        try:
            with store.bulk_insert() as bulk:
                for i, doc_id in enumerate(ids):
                    bulk.store_as({"n": i}, doc_id, MetadataAsDictionary())
        finally:
            store.close()
        return bytes(server.requests[-1].body)


def test_bulk_insert_writes_ids_as_the_official_client():
    expected = official_body(IDS)
    assert "things/é".encode() in expected  # the reference writes raw UTF-8
    with LoopbackServer() as server:
        with bulkwire.BulkInsert(server.url, "db") as bulk:
            for i, doc_id in enumerate(IDS):
                bulk.store({"n": i}, id=doc_id)
        assert bytes(server.requests[-1].body) == expected


def test_the_drop_in_writes_ids_as_the_official_client():
    expected = official_body(IDS)
    bulkwire.ravendb.install()
    try:
        assert official_body(IDS) == expected
    finally:
        bulkwire.ravendb.uninstall()


@pytest.mark.parametrize("doc_id", ['quote"d', "back\\slash", "tab\tnew\nline"])
def test_ids_json_must_escape_are_escaped(doc_id):
    # the client writes these raw (invalid or different JSON); bulkwire writes valid JSON
    w = bulkwire.BulkWriter()
    w.store({"n": 1}, id=doc_id)
    w.close()
    body = b"".join(bytes(c) for c in w.pieces())
    assert json.loads(body)[0]["Id"] == doc_id
    assert body.startswith(b'[{"Id":' + json.dumps(doc_id, ensure_ascii=False).encode() + b",")


def test_load_parquet_writes_string_ids_as_store_does(tmp_path):
    ids = ["é", "☃-1", "𝄞"]
    pq.write_table(pa.table({"id": ids, "n": [0, 1, 2]}), tmp_path / "t.parquet")
    bulkwire.load_parquet(tmp_path / "t.parquet",
                          bulkwire.targets.request_file(tmp_path / "t.json", id_prefix="ü/", collection="Things", python_type="builtins.dict"))
    w = bulkwire.BulkWriter()
    for i, doc_id in enumerate(ids):
        w.store({"n": i}, id="ü/" + doc_id, metadata={"@collection": "Things"})
    w.close()
    assert (tmp_path / "t.json").read_bytes() == b"".join(bytes(c) for c in w.pieces())
