"""``compress`` is one vocabulary: every entry point (BulkWriter, BulkInsert, load_parquet,
load_arrow, the CLI, the Dask and Ray sinks, the drop-in) takes the same values with the same
meaning (the same backend, the same Content-Encoding of what it writes), refuses the same
values with the same exception and message naming the argument, and warns of the same
deprecated names. The reference is ``bulkwire.compression.parse_compress``."""
from __future__ import annotations

import gzip
import os
import warnings

import pyarrow as pa
import pytest

import bulkwire
from bulkwire import compression
from bulkwire.bulk import BulkWriter
from bulkwire.cli import build_parser, in_cli_words, main
from bulkwire.testing import LoopbackServer
from build_extras import import_integration

VALID = [False, None, True, "gzip", "zstd", "isal", "python-isal", "zlib", "python-zstd"]
DEPRECATED = ["auto"]
INVALID = ["lz4", "GZIP", "", "fast", "deflate", 1, 0, 1.5, b"gzip", ["gzip"]]

MAGIC = {None: b"[", "gzip": b"\x1f\x8b", "zstd": b"\x28\xb5\x2f\xfd"}


def reference(value):
    """(backend, None) or (None, (exception type, message)) as parse_compress decides."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return compression.parse_compress(value), None
    except (TypeError, ValueError) as exc:
        return None, (type(exc), str(exc))


def decided(call):
    """What ``call()`` did: (its answer, None) or (None, (exception type, message))."""
    try:
        return call(), None
    except (TypeError, ValueError) as exc:
        return None, (type(exc), str(exc))


def table():
    return pa.table({"id": [1, 2, 3], "v": pa.array([[0.5], [1.0], [2.0]], pa.list_(pa.float32()))})


def _loaded_encoding(result, out):
    """(backend of the result's compress, the Content-Encoding the written body has)."""
    with open(out, "rb") as f:
        head = f.read(4)
    encoding = next(e for e, magic in MAGIC.items() if head.startswith(magic))
    backend = compression.parse_compress(result.compress)
    assert compression.compress_encoding(result.compress) == encoding
    return backend


def via_bulk_writer(value, tmp_path):
    return BulkWriter(compress=value).compression


def via_bulk_insert(value, tmp_path):
    return bulkwire.BulkInsert("http://127.0.0.1:9", "db", compress=value)._writer.compression


def via_load_parquet(value, tmp_path):
    import pyarrow.parquet as pq

    src, out = str(tmp_path / "t.parquet"), str(tmp_path / "t.body")
    pq.write_table(table(), src)
    return _loaded_encoding(bulkwire.load_parquet(src,
                                                  bulkwire.targets.request_file(out, compress=value)), out)


def via_load_arrow(value, tmp_path):
    out = str(tmp_path / "a.body")
    return _loaded_encoding(bulkwire.load_arrow(table(),
                                                bulkwire.targets.request_file(out, compress=value)), out)


def via_dask(value, tmp_path):
    import bulkwire.dask
    import dask.dataframe as dd
    import pandas as pd

    frame = pd.DataFrame({"id": [1, 2, 3], "n": [1.0, 2.0, 3.0]})
    with LoopbackServer() as server:
        target = bulkwire.targets.ravendb(server.url, server.database, compress=value)
        result = bulkwire.dask.to_target(dd.from_pandas(frame, npartitions=1), target,
                                         compute_kwargs={"scheduler": "sync"})
        encoding = server.requests[-1].headers.get("Content-Encoding")
    assert encoding == compression.compress_encoding(result.compress)
    return compression.parse_compress(result.compress)


def via_ray(value, tmp_path):
    import bulkwire.ray

    sink = bulkwire.ray.TargetDatasink(
        bulkwire.targets.ravendb("http://127.0.0.1:9", "db", compress=value))
    return compression.parse_compress(sink.config.compress)


ENTRY_POINTS = {"BulkWriter": via_bulk_writer, "BulkInsert": via_bulk_insert,
                "load_parquet": via_load_parquet, "load_arrow": via_load_arrow,
                "dask.to_target": via_dask, "ray.TargetDatasink": via_ray}


# a backend this build or machine lacks is refused alike everywhere (the reference says so)
@pytest.mark.parametrize("value", VALID + INVALID, ids=repr)
@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_every_entry_point_reads_compress_as_parse_compress(entry, value, tmp_path):
    import_integration(entry)
    got = decided(lambda: ENTRY_POINTS[entry](value, tmp_path))
    assert got == reference(value), entry
    if got[1] is not None:
        assert "compress" in got[1][1]  # the message names the argument


@pytest.mark.parametrize("value", DEPRECATED)
@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_a_deprecated_name_keeps_its_meaning_and_warns(entry, value, tmp_path):
    import_integration(entry)
    with pytest.warns(DeprecationWarning, match=rf"compress={value!r} is deprecated"):
        got = ENTRY_POINTS[entry](value, tmp_path)
    assert got == compression.parse_compress(compression.DEPRECATED_COMPRESS_NAMES[value])


def test_true_and_gzip_are_one_backend_everywhere():
    assert compression.parse_compress(True) == compression.parse_compress("gzip") == \
        compression.default_gzip_backend() == compression.native_backend()


@pytest.mark.parametrize("value", [False, True, None])
def test_the_dropins_use_compression_reads_as_compress(value):
    from ravendb import DocumentStore
    from ravendb.documents.bulk_insert_operation import BulkInsertOptions

    import bulkwire.ravendb as dropin

    store = DocumentStore(urls=["http://127.0.0.1:9"], database="db")
    operation = dropin.BulkInsertOperation("db", store, BulkInsertOptions(use_compression=value))
    assert operation._insert._writer.compression == compression.parse_compress(bool(value))


# ---- the CLI: its choices are the vocabulary's names, its flags their shortcuts ----

def _load_action(dest):
    load = build_parser()._subparsers._group_actions[0].choices["load"]
    return [a for a in load._actions if a.dest == dest]


def test_the_clis_choices_are_the_vocabularys_names():
    actions = {a.option_strings[0]: a for a in _load_action("compress")}
    assert tuple(actions["--compress"].choices) == compression.COMPRESS_NAMES
    assert actions["--compress"].default is False
    assert (actions["--gzip"].const, actions["--zstd"].const) == ("gzip", "zstd")


@pytest.mark.parametrize("flags, value", [([], False), (["--gzip"], "gzip"), (["--zstd"], "zstd")]
                         + [(["--compress", name], name) for name in compression.COMPRESS_NAMES])
def test_the_cli_writes_what_load_parquet_writes(flags, value, tmp_path, capsys):
    import pyarrow.parquet as pq

    src = str(tmp_path / "t.parquet")
    pq.write_table(table(), src)
    expected = decided(lambda: via_load_parquet(value, tmp_path))
    if expected[1] is not None:  # a backend this machine lacks: a usage error, the same words
        with pytest.raises(SystemExit) as info:
            main(["load", src, "--out", str(tmp_path / "cli.body"), "-q"] + flags)
        err = capsys.readouterr().err
        assert info.value.code == 2 and in_cli_words(expected[1][1]) in err
        assert ("--compress " + value if flags[:1] == ["--compress"] and value not in ("gzip", "zstd")
                else flags[0]) in err  # the option as it was given
        return
    code = main(["load", src, "--out", str(tmp_path / "cli.body"), "-q"] + flags)
    assert code == 0
    with open(tmp_path / "cli.body", "rb") as f:
        head = f.read(4)
    assert head.startswith(MAGIC[compression.compress_encoding(value)])


@pytest.mark.parametrize("flags", [["--compress", "lz4"], ["--compress", "auto"],
                                   ["--gzip", "--zstd"], ["--compress", "zlib", "--gzip"]])
def test_the_cli_refuses_other_values_as_usage(flags, tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["load", str(tmp_path / "t.parquet")] + flags)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--compress" in err or "--gzip" in err or "--zstd" in err


def test_naming_an_encoding_does_not_need_its_backend():
    """Without the zstandard package, "python-zstd" still names the zstd encoding (the
    documented example), while compressing with it is refused naming the package."""
    import subprocess
    import sys
    import textwrap

    import bulkwire

    package_parent = os.path.dirname(os.path.dirname(bulkwire.__file__))  # the one under test
    code = textwrap.dedent("""
        import sys
        sys.modules["zstandard"] = None  # import zstandard raises ImportError
        from bulkwire import compression
        assert "python-zstd" not in compression.zstd_backends()
        assert compression.compress_encoding("python-zstd") == "zstd"
        assert compression.compress_encoding("zstd") == "zstd"
        assert compression.compress_encoding(True) == "gzip"
        try:
            compression.parse_compress("python-zstd")
        except ValueError as exc:
            assert "zstandard" in str(exc), exc
        else:
            raise AssertionError("python-zstd compressed without its package")
        for bad, kind in (("lz4", ValueError), (3, TypeError)):
            try:
                compression.compress_encoding(bad)
            except kind:
                pass
            else:
                raise AssertionError(f"{bad!r} named an encoding")
        print("ok")
    """)
    env = dict(os.environ, PYTHONPATH=package_parent)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.stdout == "ok\n", done.stderr[-2000:]
