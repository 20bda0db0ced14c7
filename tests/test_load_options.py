"""The load options are one object, ``bulkwire.LoadOptions``: load_parquet, load_arrow, the
Dask and Ray sinks and ``bulkwire load`` take the same options with the same defaults (the
CLI's are read from the class), and refuse the same bad values with the same exception and
message, before anything is read or sent."""
from __future__ import annotations

import dataclasses
import pickle

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bulkwire
from bulkwire import LoadOptions, compression
from bulkwire.cli import LOAD_OPTION_ARGUMENTS, build_parser, main
from bulkwire.load_options import DOCUMENT_OPTIONS, FLOAT32_MODES
from build_extras import import_integration

URL = "http://127.0.0.1:9"
#: The options the load itself reads (the others are the document targets').
LOAD_FIELDS = [f.name for f in dataclasses.fields(LoadOptions) if f.name not in DOCUMENT_OPTIONS]

BAD = [
    ({"collection": ""}, ValueError, "collection must not be empty"),
    ({"collection": 5}, TypeError, "collection must be a str, not int"),
    ({"id_column": ""}, ValueError, "id_column must not be empty"),
    ({"id_column": None}, TypeError, "id_column must be a str, not NoneType"),
    ({"id_prefix": 5}, TypeError, "id_prefix must be a str or None, not int"),
    ({"vector_column": ""}, ValueError, "vector_column must not be empty"),
    ({"columns": "name"}, TypeError, "columns must be a sequence of column names, not str"),
    ({"columns": ["id", ""]}, ValueError, "columns[1] is an empty column name"),
    ({"columns": [b"id"]}, TypeError, "columns[0] must be a str, not bytes"),
    ({"compress": "lz4"}, ValueError, "compress must be False, True or one of"),
    ({"compress": 1}, TypeError, "compress must be a bool, None or a str, not int"),
    ({"float32": "round"}, ValueError, "float32 must be 'widen' or 'shortest', not 'round'"),
    ({"metadata": [("a", 1)]}, TypeError, "metadata must be a mapping or None, not list"),
    ({"python_type": 5}, TypeError, "python_type must be a str or None, not int"),
    ({"buffer_size": 0}, ValueError, "buffer_size must be a positive int, not 0"),
    ({"buffer_size": True}, ValueError, "buffer_size must be a positive int, not True"),
    ({"batch_rows": -1}, ValueError, "batch_rows must be a positive int or None, not -1"),
    ({"batch_rows": 1.5}, ValueError, "batch_rows must be a positive int or None, not 1.5"),
    ({"colection": "x"}, TypeError, "unexpected keyword argument 'colection' (not a load option)"),
]


def table():
    return pa.table({"id": [1, 2], "v": pa.array([[0.5], [1.0]], pa.list_(pa.float32()))})


def split(fields):
    """``fields`` as (the document options, which go to the target, the others, which go
    to the load)."""
    document = {name: value for name, value in fields.items() if name in DOCUMENT_OPTIONS}
    return document, {name: value for name, value in fields.items() if name not in document}


def _dask(fields):
    import bulkwire.dask
    import dask.dataframe as dd
    import pandas as pd

    ddf = dd.from_pandas(pd.DataFrame({"id": [1, 2]}), npartitions=1)
    document, load = split(fields)
    return bulkwire.dask.to_target(ddf, bulkwire.targets.ravendb(URL, "db", **document), **load)


def _ray(fields):
    import bulkwire.ray

    document, load = split(fields)
    return bulkwire.ray.TargetDatasink(bulkwire.targets.ravendb(URL, "db", **document), **load)


def entry_points(tmp_path):
    src = str(tmp_path / "t.parquet")
    pq.write_table(table(), src)
    out = str(tmp_path / "out.json")

    def load(entry, data, kind, *where):
        def call(fields):
            document, load = split(fields)
            return entry(data, getattr(bulkwire.targets, kind)(*where, **document), **load)
        return call

    return {
        "LoadOptions.of": lambda fields: LoadOptions.of(**fields),
        "load_parquet": load(bulkwire.load_parquet, src, "request_file", out),
        "load_parquet(ravendb)": load(bulkwire.load_parquet, src, "ravendb", URL, "db"),
        "load_arrow": load(bulkwire.load_arrow, table(), "request_file", out),
        "dask.to_target": _dask,
        "ray.TargetDatasink": _ray,
    }


ENTRY_POINTS = ["LoadOptions.of", "load_parquet", "load_parquet(ravendb)", "load_arrow",
                "dask.to_target", "ray.TargetDatasink"]


@pytest.mark.parametrize("entry", ENTRY_POINTS)
@pytest.mark.parametrize("fields, error, message", BAD, ids=lambda v: repr(v)[:40])
def test_every_entry_point_refuses_a_bad_option_alike(fields, error, message, entry, tmp_path):
    """Each entry point on its own: one whose integration is not installed skips naming the
    package, the others still run."""
    calls = entry_points(tmp_path)
    assert list(calls) == ENTRY_POINTS
    import_integration(entry)
    with pytest.raises(error) as info:
        calls[entry](fields)
    assert str(info.value).startswith(message), (entry, str(info.value))
    assert not (tmp_path / "out.json").exists()  # refused before any output was opened


def test_the_clis_defaults_and_choices_are_the_options():
    args = build_parser().parse_args(["load", "data.parquet"])
    defaults = LoadOptions()
    for name in LOAD_OPTION_ARGUMENTS:
        assert getattr(args, name) == getattr(defaults, name), name
    load = build_parser()._subparsers._group_actions[0].choices["load"]
    choices = {a.dest: a.choices for a in load._actions if a.choices}
    assert tuple(choices["float32"]) == FLOAT32_MODES
    assert tuple(choices["compress"]) == compression.COMPRESS_NAMES
    # every argument the CLI passes on is a field of the options
    assert set(LOAD_OPTION_ARGUMENTS) <= {f.name for f in dataclasses.fields(LoadOptions)}


@pytest.mark.parametrize("flags, message", [  # the options' message, in the CLI's words
    (["--collection", ""], "--collection must not be empty"),
    (["--id-column", ""], "--id-column must not be empty"),
    (["--vector-column", ""], "--vector-column must not be empty"),
])
def test_the_cli_refuses_a_bad_option_as_usage_with_the_options_message(flags, message, tmp_path,
                                                                       capsys):
    src = str(tmp_path / "t.parquet")
    pq.write_table(table(), src)
    with pytest.raises(SystemExit) as info:
        main(["load", src, "--out", str(tmp_path / "o.json")] + flags)
    assert info.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "o.json").exists()


def test_options_and_keyword_arguments_write_the_same_body(tmp_path):
    """The load's options as an object, as keyword arguments, or both (the keywords win),
    into targets of the same document options: the same body."""
    document = dict(collection="Points", float32="shortest", id_prefix="p/",
                    metadata={"Owner": "me"}, buffer_size=64)
    options = LoadOptions(columns=["id", "v"], vector_column="v", batch_rows=1)
    by_object, by_keywords, mixed = (str(tmp_path / n) for n in ("a.json", "b.json", "c.json"))
    bulkwire.load_arrow(table(), bulkwire.targets.request_file(by_object, **document),
                        options=options)
    bulkwire.load_arrow(table(), bulkwire.targets.request_file(by_keywords, **document),
                        **{name: getattr(options, name) for name in LOAD_FIELDS})
    bulkwire.load_arrow(table(), bulkwire.targets.request_file(mixed, **document),
                        options=LoadOptions(columns=["id"], batch_rows=2),
                        columns=["id", "v"], vector_column="v", batch_rows=1)
    bodies = {open(p, "rb").read() for p in (by_object, by_keywords, mixed)}
    assert len(bodies) == 1 and b'"@collection": "Points"' in bodies.pop()


def test_the_options_are_frozen_canonical_and_pickle_as_they_are():
    options = LoadOptions(columns=["a", "b"], compress=True)
    assert options.columns == ("a", "b") and options.compress == "gzip"
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.collection = "x"
    assert pickle.loads(pickle.dumps(options)) == options
    assert options.replace(float32="shortest") == LoadOptions(columns=("a", "b"), compress="gzip",
                                                              float32="shortest")
    with pytest.raises(TypeError, match="options must be a LoadOptions, not dict"):
        LoadOptions.of({"collection": "x"})
