"""Targets as values (``bulkwire.targets``): one constructor per kind, each judging its
arguments at once and returning a frozen, picklable description that holds its own options;
an option a kind does not read is refused naming the option and the kind; the registry lists
every kind's options, and builds a description from strings. ``load_parquet`` and
``load_arrow`` take any of them as ``target``; their former spellings still work, warning."""
from __future__ import annotations

import dataclasses
import inspect
import json
import os
import pickle
import warnings

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

import bulkwire  # noqa: E402
from bulkwire import targets  # noqa: E402
from bulkwire.document_options import DOCUMENT_DEFAULTS, DOCUMENT_OPTIONS  # noqa: E402
from bulkwire.load.cql_target import DEFAULT_WINDOW  # noqa: E402
from bulkwire.testing import LoopbackServer  # noqa: E402
from _cli_runner import run as run_cli  # noqa: E402

HERE = __file__


def table(rows: int = 5) -> "pa.Table":
    return pa.table({"id": list(range(rows)),
                     "v": pa.array([[float(i), 0.5] for i in range(rows)], pa.list_(pa.float32()))})


def described(kind: str):
    """A description of ``kind`` that needs no server."""
    return {"ravendb": lambda: targets.ravendb("http://127.0.0.1:1", "db"),
            "request_file": lambda: targets.request_file("x.bulk.json"),
            "cql": lambda: targets.cql("127.0.0.1", "ks", "t")}[kind]()


@pytest.mark.parametrize("kind", ["ravendb", "request_file", "cql"])
def test_a_description_is_frozen_and_pickles_to_an_equal_one(kind):
    target = described(kind)
    assert pickle.loads(pickle.dumps(target)) == target
    field = dataclasses.fields(target)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(target, field, None)
    assert target.kind == kind and targets.KINDS[kind] is getattr(targets, kind)


@pytest.mark.parametrize("kind, option", [("cql", "compress"), ("cql", "collection"),
                                          ("ravendb", "window"), ("request_file", "url"),
                                          ("request_file", "consistency")])
def test_an_option_the_kind_does_not_read_is_refused_naming_it_and_the_kind(kind, option):
    args = {"ravendb": ("http://127.0.0.1:1", "db"), "request_file": (),
            "cql": ("127.0.0.1", "ks", "t")}[kind]
    with pytest.raises(TypeError, match=rf"^{option} is not an option of the {kind} target"):
        targets.KINDS[kind](*args, **{option: 1})


def test_the_document_options_are_the_document_targets_with_one_default_each():
    for kind in ("ravendb", "request_file"):
        listed = {o.name: o.default for o in targets.options(kind)}
        assert {name: listed[name] for name in DOCUMENT_OPTIONS} == DOCUMENT_DEFAULTS
    assert not set(DOCUMENT_OPTIONS) & {o.name for o in targets.options("cql")}
    assert "collection" not in inspect.signature(bulkwire.load_parquet).parameters


def test_options_lists_names_defaults_and_types():
    cql = {o.name: o for o in targets.options("cql")}
    assert list(cql)[:3] == ["hosts", "keyspace", "table"]
    assert cql["hosts"].default is targets.REQUIRED
    assert (cql["window"].default, cql["window"].annotation) == (DEFAULT_WINDOW, int)
    assert (cql["timeout"].default, cql["timeout"].annotation) == (30.0, float)
    with pytest.raises(ValueError, match="unknown target kind 'nosuch'.*cql"):
        targets.options("nosuch")


def test_make_reads_strings_as_the_options_types():
    target = targets.make("cql", hosts="db1, db2:9043", keyspace="ks", table="t", window="4",
                          retries="0", timeout="2.5", tls="false", username="none",
                          address_map=json.dumps({"10.0.0.1": "127.0.0.1:19042"}))
    assert target == targets.cql(["db1", "db2:9043"], "ks", "t", window=4, retries=0,
                                 timeout=2.5, address_map={"10.0.0.1": "127.0.0.1:19042"})
    made = targets.make("request_file", out="o.json", compress="gzip", metadata='{"a": 1}',
                        buffer_size="4096", id_prefix="none")
    assert made == targets.request_file("o.json", compress="gzip", metadata={"a": 1},
                                        buffer_size=4096)
    with pytest.raises(ValueError, match="window must be an int, not 'four'"):
        targets.make("cql", hosts="db", keyspace="ks", table="t", window="four")
    with pytest.raises(ValueError, match="window must be an int 1..32768, not 0"):
        targets.make("cql", hosts="db", keyspace="ks", table="t", window="0")


def test_the_constructors_judge_their_arguments_at_once():
    with pytest.raises(ValueError, match="float32"):
        targets.request_file(float32="long")
    with pytest.raises(ValueError, match="buffer_size"):
        targets.ravendb("http://127.0.0.1:1", "db", buffer_size=0)
    with pytest.raises(ValueError, match="database must be a non-empty str"):
        targets.ravendb("http://127.0.0.1:1", "")
    with pytest.raises(ValueError, match="consistency"):
        targets.cql("db", "ks", "t", consistency="SERIAL")


def test_load_parquet_into_a_request_file_with_its_document_options(tmp_path):
    source = str(tmp_path / "t.parquet")
    pq.write_table(table(), source)
    out = str(tmp_path / "o.bulk.json")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = bulkwire.load_parquet(source, targets.request_file(out, collection="Points"))
    assert result.rows == 5 and result.target == out
    commands = json.loads(open(out, "rb").read())
    assert commands[0]["Id"] == "points/0"
    assert commands[0]["Document"]["@metadata"]["@collection"] == "Points"


def test_the_old_spelling_warns_and_writes_what_the_new_one_writes(tmp_path):
    source = str(tmp_path / "t.parquet")
    pq.write_table(table(), source)
    new = bulkwire.load_parquet(source, target=targets.request_file(
        str(tmp_path / "new.json.gz"), collection="P", compress="gzip"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = bulkwire.load_parquet(source, out=str(tmp_path / "old.json.gz"), collection="P",
                                    compress="gzip")
    messages = [str(w.message) for w in caught]
    assert [w.category for w in caught] == [DeprecationWarning] * 3, messages
    assert all(w.filename == HERE for w in caught)
    assert "bulkwire.targets.request_file" in messages[0]
    assert "collection" in messages[1] and "compress" in messages[2]
    assert open(new.target, "rb").read() == open(old.target, "rb").read()
    assert old.compress == new.compress == "gzip"


def test_the_old_server_spelling_warns_naming_the_ravendb_target():
    with LoopbackServer() as server:
        new = bulkwire.load_arrow(table(), targets.ravendb(server.url, server.database))
        with pytest.warns(DeprecationWarning, match=r"bulkwire\.targets\.ravendb\(url, database"):
            old = bulkwire.load_arrow(table(), url=server.url, database=server.database)
    assert (new.rows, new.body_bytes, new.target) == (old.rows, old.body_bytes, old.target)


def test_a_target_with_an_option_of_another_is_refused_naming_the_option(tmp_path):
    source = str(tmp_path / "t.parquet")
    pq.write_table(table(), source)
    with pytest.raises(TypeError, match="^compress is not an option of the cql target"):
        bulkwire.load_parquet(source, targets.cql("127.0.0.1:1", "ks", "t"), compress="gzip")
    with pytest.raises(TypeError, match=r"collection is an option of the request_file target.*"
                                        r"bulkwire\.targets\.request_file\(\.\.\., collection"):
        bulkwire.load_parquet(source, targets.request_file(), collection="P")
    with pytest.raises(TypeError, match="compress is not an option of the cql target"):
        bulkwire.load_arrow(table(), targets.cql("127.0.0.1:1", "ks", "t"),
                            options=bulkwire.LoadOptions(compress="gzip"))
    with pytest.raises(ValueError, match="target excludes url"):
        bulkwire.load_parquet(source, targets.request_file(), url="http://127.0.0.1:1")


def test_the_old_cql_entries_warn_naming_the_new_spelling(tmp_path):
    import bulkwire.cql

    for entry, data in (("load_parquet", str(tmp_path / "none.parquet")),
                        ("load_arrow", table())):
        with pytest.warns(DeprecationWarning, match=rf"bulkwire\.{entry}\(.*target="
                                                    rf"bulkwire\.targets\.cql"):
            with pytest.raises((TypeError, ValueError, OSError)):
                # judged before anything is read: a window no connection takes
                getattr(bulkwire.cql, entry)(data, "127.0.0.1:1", "ks", "t", window=0)
        with pytest.warns(DeprecationWarning):
            with pytest.raises(TypeError, match="unexpected keyword argument 'compress'"):
                getattr(bulkwire.cql, entry)(data, "127.0.0.1:1", "ks", "t", compress="gzip")


def test_ssl_context_cannot_go_to_worker_processes(tmp_path):
    import ssl

    target = targets.ravendb("https://127.0.0.1:1", "db", ssl_context=ssl.create_default_context())
    with pytest.raises(TypeError, match="ssl_context cannot be sent to worker processes"):
        pickle.dumps(target)


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_cql_loads_failure_is_a_load_error_and_not_a_bulk_inserts():
    from bulkwire.errors import BulkInsertError, ConnectError, LoadError

    port = _closed_port()
    with pytest.raises(ConnectError) as failed:
        bulkwire.load_arrow(table(), targets.cql(f"127.0.0.1:{port}", "ks", "t", timeout=5))
    assert isinstance(failed.value, LoadError)
    assert not isinstance(failed.value, BulkInsertError)
    assert type(pickle.loads(pickle.dumps(failed.value))) is type(failed.value)


def test_a_ravendb_loads_refused_connection_is_a_bulk_insert_error_and_a_connect_error():
    from bulkwire.errors import BulkInsertError, ConnectError, LoadError

    port = _closed_port()
    with pytest.raises(BulkInsertError) as failed:
        bulkwire.load_arrow(table(), targets.ravendb(f"http://127.0.0.1:{port}", "db"))
    assert isinstance(failed.value, ConnectError) and isinstance(failed.value, LoadError)


# ------------------------------------------------------------------------------ the CLI

def test_the_command_line_has_each_kinds_options_from_the_registry(capsys):
    code, out, _ = run_cli(["load", "-h"], capsys)
    assert code == 0
    for kind in targets.KINDS:
        assert kind in out
    for option in ("--target", "--window", "--retries", "--timeout", "--metadata",
                   "--python-type", "--buffer-size"):
        assert option in out, option


def test_the_command_line_writes_a_jsonl_target(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pq.write_table(table(), "t.parquet")
    code, out, err = run_cli(["load", "t.parquet", "--target", "jsonl", "--out", "t.jsonl.gz",
                              "--collection", "P", "--metadata", '{"k": 2}', "-q"], capsys)
    assert code == 0, err
    import gzip

    docs = [json.loads(line) for line in gzip.decompress(open("t.jsonl.gz", "rb").read())
            .splitlines()]
    assert len(docs) == 5 and docs[0]["@metadata"]["k"] == 2
    assert docs[0]["@metadata"]["@collection"] == "P" and "t.jsonl.gz" in out


def test_the_command_line_refuses_an_option_of_another_kind(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pq.write_table(table(), "t.parquet")
    code, _, err = run_cli(["load", "t.parquet", "--window", "4"], capsys)
    assert code == 2 and "--window is not an option of the request_file target" in err
    code, _, err = run_cli(["load", "t.parquet", "--target", "jsonl"], capsys)
    assert code == 2 and "--target jsonl needs --out" in err
    code, _, err = run_cli(["load", "t.parquet", "--target", "cql"], capsys)
    assert code == 2 and "--target cql needs --cql" in err
    code, _, err = run_cli(["load", "t.parquet", "--target", "request_file", "--url",
                            "http://127.0.0.1:1", "--database", "db"], capsys)
    assert code == 2 and "--target request_file excludes --url" in err
    code, _, err = run_cli(["load", "t.parquet", "--cql", "127.0.0.1:1", "--keyspace", "ks",
                            "--table", "t", "--window", "many"], capsys)
    assert code == 2 and "window must be an int, not 'many'" in err
    assert sorted(os.listdir(".")) == ["t.parquet"]


def test_the_command_lines_cql_window_reaches_the_target(tmp_path, capsys, monkeypatch):
    from bulkwire import cli
    from bulkwire.load import entry

    monkeypatch.chdir(tmp_path)
    pq.write_table(table(), "t.parquet")
    seen = []

    def load(path, target, **kwargs):
        seen.append(target)
        raise KeyboardInterrupt

    monkeypatch.setattr(entry, "load_parquet", load)
    monkeypatch.setattr(bulkwire.load, "load_parquet", load)
    code, _, _ = run_cli(["load", "t.parquet", "--cql", "127.0.0.1:1", "--keyspace", "ks",
                          "--table", "t", "--window", "7", "--retries", "0", "--timeout",
                          "2.5"], capsys)
    assert code == cli.EXIT_INTERRUPTED
    assert seen == [targets.cql("127.0.0.1:1", "ks", "t", window=7, retries=0, timeout=2.5)]


def test_the_cql_defaults_and_limits_are_the_connections_own_written_once():
    """The window and retries a CQL target takes by default, and the ranges it accepts, are
    those the C connection uses when run without them: one number each, in the C core, read
    by the target; no other file of the package spells them."""
    import inspect
    import pathlib
    import re

    from bulkwire import _core
    from bulkwire.load import cql_target

    cql = {o.name: o for o in targets.options("cql")}
    assert cql["window"].default == _core.CQL_DEFAULT_WINDOW
    assert cql["retries"].default == _core.CQL_DEFAULT_RETRIES
    assert cql_target.WINDOW_RANGE == (1, _core.CQL_MAX_WINDOW)
    for bad in (0, _core.CQL_MAX_WINDOW + 1):
        with pytest.raises(ValueError, match="window"):
            targets.cql("db1", "ks", "t", window=bad)
    with pytest.raises(ValueError, match="retries"):
        targets.cql("db1", "ks", "t", retries=_core.CQL_MAX_RETRIES + 1)
    package = pathlib.Path(inspect.getfile(cql_target)).parents[1]
    spelled = [f"{path.name}: {line.strip()}" for path in package.rglob("*.py")
               for line in path.read_text().splitlines()
               if re.search(r"\b(window|retries|max_retries)\s*[:=][^=].*\b(2|5|32768)\b", line)
               and "DEFAULT" not in line and "RANGE" not in line]
    assert spelled == []
