"""The load pipeline knows a target only through ``bulkwire.load.targets.TargetDescription``:
a kind of target defined here, in the tests alone, goes through ``load_parquet``'s pipeline
(its batches in order, progress, the summary, worker processes, resume) with no change to
the pipeline. The kind writes each row as a JSON line into files of a folder, one file per
session, renamed into place when the session closes; every row's line is checked against
the source read by pyarrow."""
from __future__ import annotations

import dataclasses
import json
import os
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")

import bulkwire  # noqa: E402
from bulkwire import LoadOptions  # noqa: E402
from bulkwire.errors import ResumeStateError  # noqa: E402
from bulkwire.load import entry  # noqa: E402
from test_datasets import write_parts  # noqa: E402


# ------------------------------------------------------------------------------ the kind

@dataclasses.dataclass(frozen=True)
class LinesPlan:
    read_columns: list
    vector_column: str | None


@dataclasses.dataclass(frozen=True)
class LinesEncoder:
    """A row -> ``{"id", "name", "row", "dim", "collection"}`` as a JSON line; ``row``: the
    row in its file (the pipeline's ``row_base``), ``dim``: the vector dimension the pipeline
    found, ``collection``: the load's option (:class:`bulkwire.LoadOptions`)."""

    plan: LinesPlan
    collection: str

    def __call__(self, batch: Any, dim: int = -1, row_base: int = 0) -> list:
        return [json.dumps({"id": row["id"], "name": row["name"], "row": row_base + i,
                            "dim": dim, "collection": self.collection}).encode() + b"\n"
                for i, row in enumerate(batch.select(["id", "name"]).to_pylist())]


class LinesSession:
    """One session: lines written to ``<folder>/<pid>-<n>.partial``, renamed to ``.jsonl``
    on close, removed on abort. A batch holding the id ``fail_id`` is refused."""

    def __init__(self, folder: str, resumed: bool, fail_id: int | None) -> None:
        prefix = "resumed-" if resumed else ""
        self.path = os.path.join(folder, f"{prefix}{os.getpid()}-{uuid.uuid4().hex}")
        self.file = open(self.path + ".partial", "wb")
        self.fail_id = fail_id
        self.body_bytes = self.wire_bytes = 0

    def store(self, encoded: list, rows: int) -> int:
        assert len(encoded) == rows
        if self.fail_id is not None and any(json.loads(c)["id"] == self.fail_id for c in encoded):
            raise RuntimeError(f"the lines target refuses id {self.fail_id}")
        data = b"".join(encoded)
        self.file.write(data)
        self.body_bytes += len(data)
        self.wire_bytes += len(data)
        return len(data)

    def close(self) -> None:
        self.file.close()
        os.replace(self.path + ".partial", self.path + ".jsonl")

    def abort(self) -> None:
        self.file.close()
        if os.path.exists(self.path + ".partial"):
            os.unlink(self.path + ".partial")


@dataclasses.dataclass(frozen=True)
class LinesTarget:
    """The description: a folder (and, for the tests, an id to refuse)."""

    folder: str
    fail_id: int | None = None
    resumed: bool = False

    units = True

    def plan(self, schema: Any, source: str, options: LoadOptions) -> LinesPlan:
        assert isinstance(options, LoadOptions)
        for name in ("id", "name", "emb"):
            if name not in schema.names:
                raise ValueError(f"{source} has no column {name!r}")
        return LinesPlan(["id", "name", "emb"], "emb")

    def encoder(self, schema: Any, plan: LinesPlan, options: LoadOptions) -> LinesEncoder:
        assert isinstance(options, LoadOptions)
        return LinesEncoder(plan, options.collection)

    def resume_options(self, encode: LinesEncoder, options: LoadOptions) -> dict:
        assert isinstance(options, LoadOptions)
        return {"columns": encode.plan.read_columns, "collection": options.collection}

    def placed(self, path: Any, files: list[str] | None) -> "LinesTarget":
        return self

    def describe(self) -> str:
        return f"lines in {self.folder}"

    def request_per_unit(self, resume: bool) -> bool:
        return resume

    def resuming(self) -> "LinesTarget":
        return dataclasses.replace(self, resumed=True)

    def open(self) -> LinesSession:
        return LinesSession(self.folder, self.resumed, self.fail_id)

    def resume_identity(self) -> dict:
        return {"folder": os.path.abspath(self.folder)}

    def checked_identity(self, recorded: Any) -> dict:
        if not (isinstance(recorded, dict) and set(recorded) == {"folder"}
                and isinstance(recorded["folder"], str)):
            raise ValueError(f"target is {recorded!r}, not a folder")
        return recorded

    def identity_mismatch(self, recorded: dict) -> str:
        return (f"was written by a load into lines in {recorded['folder']}; this load is into "
                f"{self.describe()}")


def plugged(target: LinesTarget):
    """A stand-in for ``entry._target_of`` that names ``target`` whatever the arguments (the
    load's options made of them as the entry makes them)."""
    def target_of(given, options, fields, *rest):
        return target, LoadOptions.of(options, **fields)
    return target_of


@pytest.fixture
def into(monkeypatch):
    """``into(target)``: load_parquet's arguments then name ``target``, as another entry's
    arguments would name its kind."""
    def plug(target: LinesTarget) -> None:
        monkeypatch.setattr(entry, "_target_of", plugged(target))
    return plug


# ------------------------------------------------------------------------------ checks

def expected_lines(tables, collection: str = LoadOptions().collection) -> list[dict]:
    """Each source row's line, from the tables pyarrow wrote (``collection``: the load's)."""
    return [{"id": row["id"], "name": row["name"], "row": i,
             "dim": table.schema.field("emb").type.list_size, "collection": collection}
            for table in tables for i, row in enumerate(table.select(["id", "name"]).to_pylist())]


def written(folder: str) -> list[tuple[str, list[dict]]]:
    """(file name, its lines) of every session that closed."""
    found = []
    for name in sorted(os.listdir(folder)):
        if name.endswith(".jsonl"):
            with open(os.path.join(folder, name), "rb") as f:
                found.append((name, [json.loads(line) for line in f]))
    return found


def lines_of(folder: str) -> list[dict]:
    return sorted((line for _, lines in written(folder) for line in lines),
                  key=lambda line: line["id"])


def unconfirmed_ids(error: BaseException, tables) -> set[int]:
    """The ids of the rows an error names as unconfirmed (file, first row, stop row)."""
    ids = {f"part-{i:03}.parquet": table["id"].to_pylist() for i, table in enumerate(tables)}
    return {i for path, first, stop in error.unconfirmed
            for i in ids[os.path.basename(path)][first:stop]}


# ------------------------------------------------------------------------------ tests

def test_worker_processes_open_their_own_sessions_from_the_description(tmp_path, into):
    """workers=2: the description reaches the spawned workers in their job (pickled), each
    opens its sessions in its own process, and every row arrives once, as the source holds
    it; progress, the result and the summary are the pipeline's."""
    tables = write_parts(str(tmp_path / "d"), [300, 0, 257, 190], row_group=32)
    out = tmp_path / "out"
    out.mkdir()
    into(LinesTarget(str(out)))
    seen = []
    result = bulkwire.load_parquet(str(tmp_path / "d"), workers=2, batch_rows=16,
                                   progress=lambda rows, body: seen.append((rows, body)))
    expected = expected_lines(tables)
    assert lines_of(str(out)) == expected
    pids = {name.split("-")[0] for name, _ in written(str(out))}
    assert len(pids) == 2 and str(os.getpid()) not in pids
    body = sum(os.path.getsize(out / name) for name, _ in written(str(out)))
    assert (result.rows, result.body_bytes, result.wire_bytes, result.workers) == (
        len(expected), body, body, 2)
    assert seen[-1] == (len(expected), body)
    assert result.target == f"lines in {out}"
    assert f"loaded {len(expected):,} rows from " in result.summary()
    assert f"into lines in {out} by 2 worker processes" in result.summary()


@pytest.mark.parametrize("workers", [1, 2])
def test_the_loads_options_reach_the_target_as_one_load_options(tmp_path, into, workers):
    """``options=`` and the keyword arguments that replace its fields become one
    :class:`bulkwire.LoadOptions`, which the description's plan, encoder (in worker processes
    too) and resume options are given; a resume state written with other options is refused,
    naming the option. A bad option is refused by LoadOptions, with its message, before the
    target is asked anything."""
    tables = write_parts(str(tmp_path / "d"), [70, 33], row_group=16)
    out, state = tmp_path / "out", str(tmp_path / "state.json")
    out.mkdir()
    into(LinesTarget(str(out)))
    result = bulkwire.load_parquet(str(tmp_path / "d"), options=LoadOptions(collection="Points"),
                                   collection="Lines", workers=workers, resume=state,
                                   batch_rows=16)
    assert result.rows == 103
    assert lines_of(str(out)) == expected_lines(tables, "Lines")
    with open(state) as f:
        assert json.load(f)["options"] == {"columns": ["id", "name", "emb"], "collection": "Lines"}
    with pytest.raises(ResumeStateError, match="other options \\(collection: 'Lines' then, "
                                               "'Other' now\\)"):
        bulkwire.load_parquet(str(tmp_path / "d"), collection="Other", workers=workers,
                              resume=state)
    with pytest.raises(ValueError) as refused:
        bulkwire.load_parquet(str(tmp_path / "d"), batch_rows=0, workers=workers)
    with pytest.raises(ValueError) as by_options:
        LoadOptions(batch_rows=0)
    assert str(refused.value) == str(by_options.value)
    assert len(lines_of(str(out))) == 103


@pytest.mark.parametrize("workers", [1, 2])
def test_a_failed_load_into_another_kind_resumes_and_every_row_arrives_once(tmp_path, into,
                                                                              workers):
    """A session that fails (in a worker or in this process) stops the load; the error names
    the rows no session confirmed (with workers, a session of the other worker may close
    just before it stops, unreported: its rows are named too), and the state records the
    others. A run with the same state sends only what the state does not record, in
    sessions told that they resume; every row then arrives, and in one process exactly
    once. A state written for another folder is refused, naming both."""
    tables = write_parts(str(tmp_path / "d"), [300, 0, 257, 190], row_group=32)
    expected = expected_lines(tables)
    out, state = tmp_path / "out", str(tmp_path / "state.json")
    out.mkdir()
    into(LinesTarget(str(out), fail_id=0))  # the first row of the first unit
    with pytest.raises(RuntimeError, match="the lines target refuses id 0") as failed:
        bulkwire.load_parquet(str(tmp_path / "d"), workers=workers, resume=state, batch_rows=16)
    confirmed = lines_of(str(out))
    assert all(line in expected for line in confirmed)
    named = unconfirmed_ids(failed.value, tables)
    assert 0 in named and named | {line["id"] for line in confirmed} == set(range(len(expected)))
    if workers == 1:
        assert named.isdisjoint(line["id"] for line in confirmed)

    before = {name for name, _ in written(str(out))}
    into(LinesTarget(str(out)))
    again = bulkwire.load_parquet(str(tmp_path / "d"), workers=workers, resume=state,
                                  batch_rows=16)
    assert again.skipped_rows + again.rows == len(expected)
    assert again.skipped_rows <= len(confirmed)
    everything = lines_of(str(out))
    assert len(everything) == len(confirmed) + again.rows
    assert [line for i, line in enumerate(everything) if i == 0 or line != everything[i - 1]] \
        == expected
    if workers == 1:
        assert again.skipped_rows == len(confirmed) and everything == expected
    new = [(name, lines) for name, lines in written(str(out)) if name not in before]
    assert new and all(name.startswith("resumed-") for name, _ in new)
    assert sum(len(lines) for _, lines in new) == again.rows
    with open(state) as f:
        assert json.load(f)["target"] == {"folder": str(out)}

    other = tmp_path / "other"
    other.mkdir()
    into(LinesTarget(str(other)))
    with pytest.raises(ResumeStateError, match=f"was written by a load into lines in {out}; "
                                               f"this load is into lines in {other}"):
        bulkwire.load_parquet(str(tmp_path / "d"), workers=workers, resume=state)
    assert os.listdir(other) == []


@settings(max_examples=20)
@given(sizes=st.lists(st.integers(0, 120), min_size=1, max_size=4),
       row_group=st.integers(1, 40), batch_rows=st.integers(1, 50), fail=st.integers(0, 10 ** 6))
def test_any_dataset_and_failure_point_resume_to_every_row_once(tmp_path_factory, sizes,
                                                                 row_group, batch_rows, fail):
    """In this process, over datasets of any shape, a session that fails at any row: the
    rows confirmed, plus those the error names as unconfirmed, are the dataset; after a run
    with the same state every row was written exactly once, and the second run sent only
    what the first did not confirm."""
    import unittest.mock

    folder = tmp_path_factory.mktemp("d")
    tables = write_parts(str(folder / "d"), sizes, row_group=row_group)
    expected = expected_lines(tables)
    out, state = folder / "out", str(folder / "state.json")
    out.mkdir()
    fail_id = fail % len(expected) if expected else None
    with unittest.mock.patch.object(entry, "_target_of",
                                    plugged(LinesTarget(str(out), fail_id=fail_id))):
        if fail_id is None:
            first = bulkwire.load_parquet(str(folder / "d"), resume=state, batch_rows=batch_rows)
            assert first.rows == 0
        else:
            with pytest.raises(RuntimeError) as failed:
                bulkwire.load_parquet(str(folder / "d"), resume=state, batch_rows=batch_rows)
            missing = sum(stop - first for _, first, stop in failed.value.unconfirmed)
            assert len(lines_of(str(out))) + missing == len(expected)
    confirmed = len(lines_of(str(out)))
    with unittest.mock.patch.object(entry, "_target_of", plugged(LinesTarget(str(out)))):
        again = bulkwire.load_parquet(str(folder / "d"), resume=state, batch_rows=batch_rows)
    assert (again.skipped_rows, again.rows) == (confirmed, len(expected) - confirmed)
    assert lines_of(str(out)) == expected
