"""The command line as a user meets it: usage, help, version, exit codes, and errors that
name what the user typed."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, strategies as st

import bulkwire
from bulkwire import _cli_sample_serve_demo, cli
from _cli_runner import run

PACKAGE_PARENT = os.path.dirname(os.path.dirname(bulkwire.__file__))


def child_env() -> dict:
    # the child imports the same bulkwire as this process (installed, or the in-place build)
    return dict(os.environ, PYTHONPATH=os.pathsep.join([PACKAGE_PARENT,
                                                        os.environ.get("PYTHONPATH", "")]))


def test_no_command_prints_the_usage_and_exits_2(capsys):
    code, out, err = run([], capsys)
    assert code == 2 and out == ""
    assert err.startswith("usage: bulkwire") and "give a command" in err


def test_the_installed_command_without_arguments_exits_2(tmp_path):
    done = subprocess.run([sys.executable, "-m", "bulkwire"], capture_output=True, text=True,
                          env=child_env(), cwd=tmp_path, timeout=60)
    assert done.returncode == 2 and "usage: bulkwire" in done.stderr
    assert os.listdir(tmp_path) == []  # nothing ran


def test_version(capsys):
    code, out, _ = run(["--version"], capsys)
    assert code == 0 and out.splitlines()[0] == f"bulkwire {bulkwire.__version__}"
    from bulkwire.config import config_lines

    assert out.splitlines() == config_lines()  # then what the build has


def test_top_level_help_says_what_each_command_is_for(capsys):
    code, out, _ = run(["-h"], capsys)
    assert code == 0
    assert "RavenDB" in out
    assert "Each subcommand is a function" not in out  # not the module's docstring
    for name in ("sample", "load", "serve", "demo"):
        assert f"    {name}" in out


@pytest.mark.parametrize("command", ["sample", "load", "serve", "demo"])
def test_every_option_has_help_and_defaults_are_shown(command, capsys):
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, type(parser._subparsers._group_actions[0])))
    made = sub.choices[command]
    for action in made._actions:
        assert action.help, f"{command} {action.option_strings or action.dest} has no help"
    code, out, _ = run([command, "-h"], capsys)
    assert code == 0 and out.startswith(f"usage: bulkwire {command}")
    for action in made._actions:
        if (action.default not in (None, False, argparse_suppress()) and action.option_strings
                and action.nargs != 0 and "default" not in action.help):
            assert f"(default: {action.default})" in " ".join(out.split()), action.dest


def subparsers() -> dict:
    """Each subcommand's parser, by name."""
    import argparse

    parser = cli.build_parser()
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


@pytest.mark.parametrize("command", sorted(subparsers()))
def test_help_says_each_default_once_and_a_flag_shows_no_value(command):
    made = subparsers()[command]
    for action in made._actions:
        shown = " ".join(made._get_formatter()._expand_help(action).split()) if action.help else ""
        assert shown.lower().count("default") <= 1, (command, action.option_strings, shown)
        if action.nargs == 0:  # a flag: its default is its destination's, not a value to give
            assert "(default: True)" not in shown and "(default: False)" not in shown, shown


@pytest.mark.parametrize("command, args", [
    ("load", ["x.parquet"]), ("sample", ["x.parquet"]), ("serve", []), ("demo", [])])
def test_an_unknown_option_is_reported_with_the_subcommands_usage(command, args, capsys):
    code, out, err = run([command, *args, "--bogus"], capsys)
    assert code == 2 and out == ""
    assert err.startswith(f"usage: bulkwire {command} "), err
    assert err.rstrip().endswith(f"bulkwire {command}: error: unrecognized arguments: --bogus")


def argparse_suppress():
    import argparse

    return argparse.SUPPRESS


@pytest.fixture
def sample(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    bulkwire.sample_parquet("s.parquet", rows=20, dim=3)
    return "s.parquet"


@pytest.mark.parametrize("args, message", [
    (["load", "s.parquet", "--url", "notaurl", "--database", "db"],
     "argument --url: URL 'notaurl': a server URL starts with http:// or https://"),
    (["load", "s.parquet", "--url", "ftp://host/", "--database", "db"],
     "argument --url: URL 'ftp://host/': a server URL starts with http:// or https://"),
    (["load", "s.parquet", "--url", "http://h:99999", "--database", "db"],
     "argument --url: URL 'http://h:99999': the port must be a number from 1 to 65535"),
    (["load", "s.parquet", "--url", "http://127.0.0.1:9"], "--url needs --database"),
    (["load", "s.parquet", "--database", "db"], "--database needs --url"),
    (["load", "s.parquet", "--batch-rows", "x"], "argument --batch-rows: not an integer: 'x'"),
    (["sample", "t.parquet", "--rows", "-1"], "argument --rows: must not be negative"),
    (["serve", "--port", "70000"], "argument --port: not a TCP port"),
    (["load", "s.parquet", "--url", "https://h", "--database", "db", "--ca", "ca.pem",
      "--insecure"], "--ca and --insecure exclude each other"),
    (["load", "s.parquet", "--url", "https://h", "--database", "db", "--key", "k.pem"],
     "--key needs --certificate"),
])
def test_usage_errors_exit_2_with_the_subcommands_usage(sample, capsys, args, message):
    code, out, err = run(args, capsys)
    assert code == 2, err
    assert err.startswith(f"usage: bulkwire {args[0]} ")
    assert message in err


def test_a_directory_as_input_is_an_input_error(sample, capsys):
    os.mkdir("folder")
    code, _, err = run(["load", "folder"], capsys)
    assert code == 1 and "folder" in err and "directory" in err


def test_take_from_a_missing_file_names_the_option(sample, capsys):
    code, _, err = run(["load", "s.parquet", "--take", "@nofile"], capsys)
    assert code == 1 and "--take @nofile" in err and "'nofile'" in err


def test_out_in_a_missing_directory_names_the_file_the_user_gave(sample, capsys):
    code, _, err = run(["load", "s.parquet", "--out", "/no/dir/x.json"], capsys)
    assert code == 1 and "/no/dir/x.json" in err and ".partial" not in err


def test_a_server_that_is_not_there_is_exit_3(sample, capsys):
    code, _, err = run(["load", "s.parquet", "--url", "http://127.0.0.1:9", "--database", "db"],
                       capsys)
    assert code == 3 and "bulkwire: error:" in err


def test_progress_is_drawn_only_on_a_terminal_unless_forced(sample, capsys):
    code, _, err = run(["load", "s.parquet"], capsys)  # stderr is not a terminal here
    assert code == 0 and err == ""
    code, _, err = run(["load", "s.parquet", "--progress"], capsys)
    assert code == 0 and "20/20 rows" in err
    code, _, err = run(["load", "s.parquet", "--progress", "-q"], capsys)
    assert code == 0 and err == ""


def test_a_file_without_a_vector_column_says_so_and_loads(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    pq.write_table(pa.table({"id": [1, 2], "name": ["a", "b"]}), "plain.parquet")
    code, out, err = run(["load", "plain.parquet"], capsys)
    assert code == 0 and out.startswith("loaded 2 rows")
    assert err.count("\n") == 1 and "no vector column found in plain.parquet" in err
    assert "loaded the other columns" in err
    assert [d["Document"]["name"] for d in json.load(open("plain.bulk.json"))] == ["a", "b"]


def test_sample_writes_where_told_and_warns_before_a_large_file_here(tmp_path, monkeypatch,
                                                                      capsys):
    monkeypatch.chdir(tmp_path)
    os.mkdir("data")
    code, out, err = run(["sample", "data/a.parquet", "--rows", "5", "--dim", "2"], capsys)
    assert code == 0 and os.path.exists("data/a.parquet") and err == ""
    monkeypatch.setattr(_cli_sample_serve_demo, "LARGE_SAMPLE_BYTES", 10)
    code, out, err = run(["sample", "b.parquet", "--rows", "5", "--dim", "2"], capsys)
    assert code == 0 and "warning: writing about" in err and "current directory" in err
    code, out, err = run(["sample", "data/c.parquet", "--rows", "5", "--dim", "2"], capsys)
    assert code == 0 and err == ""  # not the current directory


@pytest.mark.parametrize("command", [["bulkwire", "serve"], ["bulkwire.testing"]])
def test_serve_counts_prints_a_line_per_request_and_stops_on_ctrl_c(tmp_path, command):
    """``bulkwire serve`` and ``python -m bulkwire.testing`` are one command: the same
    defaults (counting only), the same output."""
    server = subprocess.Popen([sys.executable, "-m", *command, "--port", "0",
                               "--database", "shop"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=child_env(), cwd=tmp_path)
    try:
        first = server.stdout.readline()
        if "counting only" not in first:  # stopped first: its stderr ends only when it does
            server.kill()
            pytest.fail(f"first line {first!r}; stderr: {server.stderr.read()}")
        url = first.split(" at ", 1)[1].split(" ", 1)[0]
        with bulkwire.BulkInsert(url, "shop") as bulk:
            for i in range(3):
                bulk.store({"n": i}, id=f"things/{i}")
        line = server.stdout.readline()
        assert line.startswith("bulk insert ") and "3 documents" in line and "answered 201" in line
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=10) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


@pytest.mark.parametrize("args, says", [
    (["--take", "1,-4"], "take[1] = -4 is negative"),
    (["--take", "1,400"], "take[1] = 400 is out of range for 20 rows"),
    (["--take", "1,x"], "take[1] = 'x' is not an integer"),
    (["--take", "@missing"], "cannot read 'missing'"),
    (["--columns", "nothere"], "column 'nothere' is not a column of s.parquet"),
    (["--id-column", "emb"], "column 'emb' has Arrow type"),
])
def test_a_refused_load_leaves_no_output_behind(sample, capsys, args, says):
    """Arguments are checked before the output file is opened: a refused load leaves the
    folder as it was (no <out>.partial, no output)."""
    code, out, err = run(["load", "s.parquet", *args], capsys)
    assert code == 1 and out == "" and says in err, err
    assert os.listdir(".") == ["s.parquet"]


def test_a_load_that_fails_while_writing_leaves_no_output_behind(tmp_path, monkeypatch, capsys):
    """A bad row met while the body is being written, Ctrl-C, a failure while the writer is
    made, or anything else once the output is open: the partial output is removed."""
    from bulkwire.load import _sending, ravendb_target

    monkeypatch.chdir(tmp_path)
    table = pa.table({"id": pa.array([1, 2, None, 4], pa.int64()), "v": [1.0, 2.0, 3.0, 4.0]})
    pq.write_table(table, "bad.parquet")
    code, _, err = run(["load", "bad.parquet", "--batch-rows", "1"], capsys)
    assert code == 1 and "row 2" in err
    assert os.listdir(".") == ["bad.parquet"]

    def interrupt(rows, body):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        bulkwire.load_parquet("bad.parquet", take=[0, 1], batch_rows=1, progress=interrupt)
    assert os.listdir(".") == ["bad.parquet"]
    with monkeypatch.context() as patched:
        patched.setattr(ravendb_target, "BulkWriter", lambda *a, **k: (_ for _ in ()).throw(
            MemoryError("no memory for the writer")))
        with pytest.raises(MemoryError):
            bulkwire.load_parquet("bad.parquet", take=[0, 1])
    assert os.listdir(".") == ["bad.parquet"]
    with monkeypatch.context() as patched:
        patched.setattr(_sending, "_send", lambda *a, **k: (_ for _ in ()).throw(
            RuntimeError("anything")))
        with pytest.raises(RuntimeError):
            bulkwire.load_parquet("bad.parquet")
    assert os.listdir(".") == ["bad.parquet"]


SLOW_SCRIPT = r"""
import sys, time
import pyarrow.parquet
from bulkwire import cli
from bulkwire.load import _progress

def slowly(method):
    def slow(*args, **kwargs):
        time.sleep(0.05)
        return method(*args, **kwargs)
    return slow

# every batch (load) or row group (sample) takes a while: SIGTERM comes in the middle
_progress._Report.__call__ = slowly(_progress._Report.__call__)
pyarrow.parquet.ParquetWriter.write_table = slowly(pyarrow.parquet.ParquetWriter.write_table)
sys.exit(cli.main(sys.argv[1:]))
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("command", [
    ["load", "s.parquet", "--batch-rows", "10", "--out", "out.json"],
    ["sample", "out.parquet", "--rows", "2000", "--dim", "4", "--row-group", "10"],
])
def test_sigterm_in_the_middle_leaves_no_output_and_exits_143(tmp_path, command):
    """SIGTERM while the output is being written (as a supervisor or `timeout` sends it):
    the command stops as on Ctrl-C, removes its partial output, and exits 143."""
    import time

    bulkwire.sample_parquet(tmp_path / "s.parquet", rows=2000, dim=4)
    (tmp_path / "slow.py").write_text(SLOW_SCRIPT)
    child = subprocess.Popen([sys.executable, "slow.py", *command], cwd=tmp_path, env=child_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        partial = tmp_path / {"load": "out.json.partial", "sample": "out.parquet.partial"}[
            command[0]]
        # the load's body (443 kB) stays in the writer's buffer until the end (it hands a
        # buffer over past 1 MiB): its partial file exists from the start and stays empty, so
        # it is caught a few of its 200 slow batches in
        started = partial.exists if command[0] == "load" else (
            lambda: partial.exists() and partial.stat().st_size > 0)
        deadline = time.monotonic() + 60
        while not started():
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(0.3 if command[0] == "load" else 0)
        assert child.poll() is None, child.communicate()
        child.terminate()  # SIGTERM
        out, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 143, err
    assert err == "bulkwire: error: terminated\n" and out == ""
    assert sorted(os.listdir(tmp_path)) == ["s.parquet", "slow.py"]


def test_an_interrupted_sample_leaves_no_file_and_keeps_an_earlier_one(tmp_path, monkeypatch,
                                                                      capsys):
    """Ctrl-C (or any failure) while `bulkwire sample` writes: no file at PATH (the writer
    would have closed a short file with a valid footer), and a file that was there before
    is left as it was."""
    import pyarrow.parquet

    monkeypatch.chdir(tmp_path)
    write_table = pyarrow.parquet.ParquetWriter.write_table
    calls = []

    def interrupted(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return write_table(self, *args, **kwargs)

    monkeypatch.setattr(pyarrow.parquet.ParquetWriter, "write_table", interrupted)
    code, out, err = run(["sample", "a.parquet", "--rows", "100", "--dim", "2",
                          "--row-group", "10"], capsys)
    assert code == 130 and err == "bulkwire: error: interrupted\n"
    assert os.listdir(".") == []
    (tmp_path / "a.parquet").write_bytes(b"earlier")
    calls.clear()
    code, out, err = run(["sample", "a.parquet", "--rows", "100", "--dim", "2",
                          "--row-group", "10"], capsys)
    assert code == 130 and os.listdir(".") == ["a.parquet"]
    assert (tmp_path / "a.parquet").read_bytes() == b"earlier"


def test_samples_with_disjoint_id_starts_load_side_by_side(tmp_path, monkeypatch, capsys):
    from bulkwire.testing import LoopbackServer

    monkeypatch.chdir(tmp_path)
    for name, start in (("a.parquet", 0), ("b.parquet", 7)):
        code, _, err = run(["sample", name, "--rows", "7", "--dim", "2", "--id-start", str(start),
                            "--seed", str(start)], capsys)
        assert code == 0, err
    ids = [pq.read_table(name)["id"].to_pylist() for name in ("a.parquet", "b.parquet")]
    assert ids == [list(range(0, 7)), list(range(7, 14))]
    with LoopbackServer() as server:
        code, _, err = run(["load", "a.parquet", "b.parquet", "--url", server.url,
                            "--database", server.database], capsys)
        assert code == 0, err
    assert len(server.documents) == 14  # no sample replaced the other's documents
    vectors = {row["id"]: row["emb"] for name in ("a.parquet", "b.parquet")
               for row in pq.read_table(name).to_pylist()}
    assert sorted(server.documents) == sorted(f"embeddings/{i}" for i in vectors)


@pytest.mark.parametrize("id_start, error", [
    (2**63 - 5, ValueError), (-2**63 - 1, ValueError), (1.5, TypeError), (True, TypeError)])
def test_sample_parquet_refuses_an_id_start_whose_ids_do_not_fit_int64(tmp_path, id_start, error):
    with pytest.raises(error, match="id_start"):
        bulkwire.sample_parquet(tmp_path / "s.parquet", rows=10, dim=2, id_start=id_start)
    assert os.listdir(tmp_path) == []


def test_zstd_without_a_zstd_backend_names_the_option_not_the_python_argument(sample, capsys,
                                                                              monkeypatch):
    import bulkwire.compression

    monkeypatch.setattr(bulkwire.compression, "zstd_backends", lambda: [])
    with pytest.raises(ValueError, match="^compress='zstd': "):  # the Python API's words
        bulkwire.compression.resolve_compress("zstd")
    code, _, err = run(["load", "s.parquet", "--zstd"], capsys)
    assert code == 2  # a load option the options object refuses: a usage error
    assert "bulkwire load: error: --zstd: bulkwire was built without libzstd" in err, err
    assert "compress=" not in err


def test_an_error_of_the_python_api_names_the_option(sample, capsys):
    import re

    code, _, err = run(["load", "s.parquet", "--collection", ""], capsys)
    assert code == 2 and "bulkwire load: error: --collection must not be empty" in err, err
    assert not re.search(r"(?<![-\w])collection must", err)


@given(data=st.data(),
       value=st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12),
       reason=st.text(min_size=1, max_size=20))
def test_in_cli_words_names_the_option_for_every_argument(data, value, reason):
    name = data.draw(st.sampled_from(sorted(cli.OPTIONS)))
    said = cli.in_cli_words(f"{name}={value!r}: {reason}")
    assert said == f"{cli.OPTIONS[name]} {value}: {reason}"
    assert cli.in_cli_words(f"{name} must be {reason}") == f"{cli.OPTIONS[name]} must be {reason}"
    assert cli.in_cli_words(f"not_an_option_{name}={value!r}: {reason}").startswith("not_an")


def test_a_load_that_fails_on_a_column_type_reports_that_alone(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    pq.write_table(pa.table({"id": [1, 2], "day": pa.array([1, 2], pa.date32())}), "d.parquet")
    code, out, err = run(["load", "d.parquet"], capsys)
    assert code == 1 and out == ""
    assert err.startswith("bulkwire: error: column 'day' has Arrow type date32[day], "), err
    assert "no vector column" not in err and "tdD" not in err
