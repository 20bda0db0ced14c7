"""The benchmark scripts the docs quote still run (tiny sizes; nothing here is timed)."""
import itertools
import json
import os
import re
import subprocess
import sys

import pytest

from build_extras import needs

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def run_script(name: str, *args: str) -> str:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    done = subprocess.run([sys.executable, os.path.join(BENCH, name), *args], cwd=BENCH, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("cold", [[], ["--cold"]])
def test_bench_encode_runs(cold):
    workloads = "small,f32" if not cold else "small"
    out = run_script("bench_encode.py", "--docs", "20", "--rounds", "2", "--workloads", workloads,
                     "--outputs", "dropped,kept", *cold)
    assert "order rotated each round" in out and ("cold" if cold else "warm: in one process") in out
    for workload in workloads.split(","):
        section = out.split(f"\n{workload}:\n")[1].split("\nf32:\n")[0]
        # every contender's output is compared with bulkwire.dumps's, and the result named
        assert "output  bulkwire.dumps: byte-identical" in section
        assert "output  Encoder.encode: byte-identical" in section
        assert "output      json.dumps: byte-identical" in section
        for mode in ("dropped", "kept"):
            table = section.split(f"outputs {mode}")[1].split(" outputs ")[0].splitlines()[2:]
            ratios = {r.split()[0]: r.split()[-1] for r in table}
            assert {"bulkwire.dumps", "Encoder.encode", "json.dumps"} <= set(ratios)
            assert all(v.endswith("x") and float(v[:-1]) > 0 for v in ratios.values())


def _package_folder() -> str:
    """The folder holding the bulkwire under test (the checkout's pkg, or site-packages)."""
    import bulkwire

    return os.path.dirname(os.path.dirname(os.path.abspath(bulkwire.__file__)))


def _two_trees(tmp_path) -> list[str]:
    """``--tree`` arguments naming the build under test twice: as itself, and through a
    folder of its own whose ``bulkwire`` is a link to the same package (so that a child
    that imported another folder's bulkwire than its tree's is caught by the script)."""
    folder = _package_folder()
    other = tmp_path / "linked"
    other.mkdir()
    (other / "bulkwire").symlink_to(os.path.join(folder, "bulkwire"))
    return ["--tree", f"a={folder}", "--tree", f"b={other}"]


def _tree_table(out: str, title: str) -> dict[str, list[float]]:
    """The matrix ``_trees.table`` printed under ``title``: row -> its ratios."""
    lines = out.split(title + ", median of the per-round ratios row / column")[1].splitlines()
    assert lines[1].split() == ["bulkwire@a", "bulkwire@b"]
    rows = {line.split()[0]: [float(x) for x in line.split()[1:]] for line in lines[2:4]}
    assert set(rows) == {"bulkwire@a", "bulkwire@b"}
    assert rows["bulkwire@a"][0] == rows["bulkwire@b"][1] == 1.0
    assert all(x > 0 for row in rows.values() for x in row)
    return rows


def test_bench_encode_compares_trees(tmp_path):
    out = run_script("bench_encode.py", "--docs", "20", "--rounds", "2", "--workloads", "small",
                     "--outputs", "dropped", *_two_trees(tmp_path))
    table = out.split(" outputs dropped, warm:\n")[1].splitlines()[1:]
    names = [line.split()[0] for line in table[:3]]
    assert names[:2] == ["bulkwire@a", "bulkwire@b"] and names[2] in ("orjson", "every")
    assert "every build's outputs the same (SHA-256): True" in out
    _tree_table(out, "speed (documents per CPU second)")


@pytest.mark.parametrize("target", ["file", "server"])
def test_bench_load_parquet_compares_trees(tmp_path, target):
    mode = "gzip" if target == "file" else "plain"
    out = run_script("bench_load_parquet.py", "--rows", "300", "--dim", "8", "--runs", "1",
                     "--target", target, "--modes", mode, "--data-dir", str(tmp_path / "data"),
                     *_two_trees(tmp_path))
    paths = [line.split("|")[1].strip() for line in out.splitlines() if line.startswith("| b")]
    assert paths == ["bulkwire@a", "bulkwire@b", "baseline"]
    assert f"{mode}: every build's body the same" in out
    _tree_table(out, f"{mode}: docs/s")


def test_bench_cql_load_compares_trees(tmp_path, capsys, monkeypatch):
    """Against the fake CQL node (the table's setup, a real node's, left out): each build's
    loader and the ceiling store every row, and the builds are compared."""
    from cql_fake_node import BIGINT, FLOAT_VECTOR, FakeNode

    bench = _bench_module("bench_cql_load")
    monkeypatch.setattr(bench, "truncate", lambda host, port, dim: None)
    columns = [("id", "partition_key", BIGINT), ("emb", "regular", FLOAT_VECTOR % 8)]
    with FakeNode(bench.KEYSPACE, bench.TABLE, columns) as node:
        bench.main(["--port", str(node.port), "--rows", "300", "--dim", "8", "--rounds", "1",
                    "--only", "bulkwire,ceiling", *_two_trees(tmp_path)])
        executes = node.executes
    out = capsys.readouterr().out
    assert executes >= 4 * 300 // 2048 + 3  # the warm-up, each build's load and the ceiling
    rows = [line.split()[0] for line in out.split("contender")[1].splitlines()[1:4]]
    assert rows == ["bulkwire@a", "bulkwire@b", "ceiling"]
    _tree_table(out, "rows/s")
    _tree_table(out, "client CPU per row")


def test_a_tree_without_a_build_is_refused(tmp_path):
    (tmp_path / "bulkwire").mkdir()
    for script in ("bench_encode.py", "bench_load_parquet.py", "bench_cql_load.py"):
        done = subprocess.run([sys.executable, os.path.join(BENCH, script), "--tree",
                               f"x={tmp_path}"], cwd=BENCH, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 2 and "holds no bulkwire package with its extension built" \
            in done.stderr, (script, done.stderr)


def test_trees_doctests():
    import doctest

    assert doctest.testmod(_bench_module("_trees")).failed == 0


def test_bench_import_runs():
    import re

    out = run_script("bench_import.py", "--runs", "1")
    for name in ("python (nothing)", "import orjson", "import bulkwire", "bulkwire + dumps",
                 "bulkwire --version"):  # a row of four times each
        assert re.search(rf"^ +{re.escape(name)}( +-?[0-9.]+){{4}}$", out, re.M), name
    # neither the encoder nor the version report imports the heavy modules (but a build
    # without libzstd, whose report asks pyarrow whether it reads zstd pages)
    from bulkwire import _core

    libzstd = any(name == "ZSTD" and covered
                  for name, covered, _ in _core.PARQUET_CODECS.values())
    for name in ("import bulkwire", "bulkwire + dumps", "bulkwire --version"):
        if name == "bulkwire --version" and not libzstd:
            assert f"{name} imports: numpy, pyarrow" in out, out
        else:
            assert f"{name} imports: none of" in out


def test_bench_output_faults_runs():
    out = run_script("bench_output_faults.py", "--docs", "20", "--runs", "1", "--dim", "8")
    labels = [line.split()[0] for line in out.splitlines() if "faults/doc" in line]
    assert labels == ["kept", "dropped"]


def test_ab_builds_alternates_the_checkouts(tmp_path):
    """ab_builds runs the benchmark from each checkout in turn, round by round, in an order
    that alternates, and stops with a failure when the benchmark fails."""
    for side in ("old", "new"):
        package = tmp_path / side / "pkg" / "bulkwire"
        package.mkdir(parents=True)
        (package / "_core.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
        (tmp_path / side / "bench.py").write_text(
            "import os, sys\nprint('ran in', os.path.basename(os.getcwd()), os.environ['PYTHONPATH'])\n"
            "sys.exit(1 if 'fail' in sys.argv else 0)\n")
    script = os.path.join(BENCH, "ab_builds.py")
    args = [sys.executable, script, "--before", str(tmp_path / "old"), "--after", str(tmp_path / "new"),
            "--rounds", "2", "--out", str(tmp_path / "log.txt"), "--", "bench.py"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = [l for l in done.stdout.splitlines() if l.startswith(("===", "ran"))]
    assert [l.split(" (")[0] for l in lines[::2]] == [
        "=== round 1 before", "=== round 1 after", "=== round 2 after", "=== round 2 before"]
    assert lines[1::2] == ["ran in old pkg", "ran in new pkg", "ran in new pkg", "ran in old pkg"]
    assert (tmp_path / "log.txt").read_text().count("=== round") == 4
    failed = subprocess.run(args[:-1] + ["bench.py", "fail"], capture_output=True, text=True, timeout=60)
    assert failed.returncode == 1 and "the benchmark failed" in failed.stdout


@pytest.mark.parametrize("kind", ["list", "ndarray", "small", "store_small", "store_list",
                                  "vector_ndarray", "vector_list", "dim1024_list", "dim1024_f32",
                                  "dim1024_f64"])
def test_callgrind_encode_runs(kind):
    assert run_script("callgrind_encode.py", kind).startswith(f"{kind}: ")
    assert "built only" in run_script("callgrind_encode.py", kind, "skip")


def test_stall_memory_and_the_figures(tmp_path):
    stall = tmp_path / "stall.json"
    out = run_script("bench_stall_memory.py", "--docs", "400", "--dim", "64",
                     "--stall-after-mb", "0.5", "--stall-seconds", "0.3", "--json", str(stall))
    assert "400 documents arrived" in out and "within the bound" not in out
    import json

    samples = json.loads(stall.read_text())["samples"]
    assert any(s["stalled"] for s in samples)  # the stall happened while sampled
    pytest.importorskip("matplotlib")  # the figures (test-all, not the test extra)
    load = tmp_path / "load.json"
    load.write_text(json.dumps({"args": {"rows": 10, "dim": 4}, "results": [
        {"impl": impl, "mode": mode, "rows": 10, "seconds": seconds}
        for impl, seconds in (("bulkwire", 0.01), ("baseline", 0.2)) for mode in ("plain", "gzip")]}))
    out = run_script("plot_figures.py", "--load", str(load), "--stall", str(stall),
                     "--out", str(tmp_path / "img"))
    for name in ("throughput.png", "stall_memory.png"):
        assert (tmp_path / "img" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@needs("zstd", "isal")  # it compares libzstd's and ISA-L's bodies
def test_bench_zstd_runs():
    out = run_script("bench_zstd.py", "--docs", "30", "--rounds", "1", "--bodies", "384", "small")
    assert out.count("compression alone, body") == 2 and out.count("end to end, body") == 2
    rows = [line.split() for line in out.splitlines()]
    modes = [r[0] for r in rows  # end-to-end rows: mode, then the backend (not a level)
             if r[:1] in (["plain"], ["gzip"], ["zstd"]) and not r[1].lstrip("-").isdigit()]
    assert modes == ["plain", "gzip", "zstd"] * 2
    assert sum(r[:1] == ["gzip-1t"] for r in rows) == 2  # gzip on one thread, each body
    assert "zstd 1" in out and "isal 1" in out


def test_bench_ravendb_dropin_runs():
    out = run_script("bench_ravendb_dropin.py", "--docs", "20", "--rounds", "1", "--dims", "8",
                     "--reference")
    rows = [line.split() for line in out.splitlines() if line.split()[:1] == ["8"]]
    assert [r[1] for r in rows] == ["plain", "gzip"]
    for r in rows:  # before, after docs/s, the median ratio, and the own BulkInsert's docs/s
        assert float(r[2].replace(",", "")) > 0 and r[4].endswith("x") and float(r[-1].replace(",", "")) > 0


def test_bench_output_faults_large_output_runs():
    out = run_script("bench_output_faults.py", "--floats", "20000", "--runs", "3")
    labels = [line.split()[0] for line in out.splitlines() if "faults/call" in line]
    assert sorted(labels) == ["dropped", "kept"]
    assert "load average" in out and "commit" in out


def test_bench_vectors_cold_runs_and_checks_outputs():
    out = run_script("bench_vectors.py", "--only", "cold", "--cold-rounds", "1",
                     "--cold-rows", "50")
    rows = [line for line in out.splitlines() if line.startswith("| ") and "×" in line]
    assert len(rows) == 6  # astype, per-row NumPy, serialize_many/_into/_rows, rows touched
    assert all(row.rstrip().endswith("| equal |") for row in rows), rows
    assert "fresh process per sample" in out and "load average" in out


def test_bench_scale_runs(tmp_path):
    out = run_script("bench_scale.py", "--rows", "300", "--dim", "8", "--files", "2", "--rounds", "1",
                     "--data-dir", str(tmp_path))
    assert "w2 / w1:" in out and "load average" in out


def test_bench_float_text_thread_runs():
    out = run_script("bench_float_text_thread.py", "--docs", "50", "--dim", "32", "--rounds", "2")
    lines = [line for line in out.splitlines() if "text on the sender" in line]
    assert len(lines) == 2 and all("ratio" in line and "load" in line for line in lines)


def test_dictionary_pages_runs(tmp_path):
    out = run_script("dictionary_pages.py", "--rows", "3000", "--dim", "4", "--budget", "0.01",
                     "--data-dir", str(tmp_path))
    report = json.loads(out)
    assert set(report["ms per lookup"]) == {"correlated cached", "uniform cached",
                                            "correlated reopen", "uniform reopen"}
    assert all(ms > 0 for ms in report["ms per lookup"].values())
    assert report["paths"] == ["pages"]  # every column read page by page


@pytest.mark.ravendb_server
def test_bench_real_server_runs(tmp_path):
    """The real-server benchmark (a RavenDB 4.1 node of its own): every contender, every
    workload's table, every document stored (the script checks the count itself)."""
    report = tmp_path / "real.json"
    out = run_script("bench_real_server.py", "--docs", "20", "--rounds", "1",
                     "--workloads", "dim384,small", "--modes", "plain,gzip", "--json", str(report))
    assert "server: RavenDB 4.1.0" in out and "load average" in out
    results = json.loads(report.read_text())["results"]
    assert {(r["workload"], r["mode"], r["contender"]) for r in results} == {
        (w, m, c) for w in ("dim384", "small") for m in ("plain", "gzip")
        for c in ("official", "bulkwire", "replay")}
    for section in ("dim384, plain", "dim384, gzip", "small, plain", "small, gzip"):
        table = out.split(f"\n{section} (20 documents")[1].split("\n\n")[0].splitlines()[2:5]
        rows = {line.split()[0]: line.split()[1:] for line in table}
        assert set(rows) == {"official", "bulkwire", "replay"}, table
        assert rows["official"][1] == "1.00x"
        assert all(float(values[0].replace(",", "")) > 0 and float(values[2]) >= 0
                   for values in rows.values())


def _bench_module(name: str):
    """A benchmark script imported as a module (its folder first on the path, as when run)."""
    import importlib

    if BENCH not in sys.path:
        sys.path.insert(0, BENCH)
    return importlib.import_module(name)


@pytest.mark.parametrize("compress", [False, True])
def test_real_server_replay_pieces_are_the_senders_body(compress):
    """The replay's prebuilt pieces are the pieces bulkwire.BulkInsert sends for the same
    entities (the loopback server records each HTTP chunk's size), and decoded, the commands of
    every entity with its id."""
    import zlib

    import bulkwire
    from bulkwire.testing import LoopbackServer

    bench = _bench_module("bench_real_server")
    items = bench.entities("small", 6000)  # more than one buffer of body
    pieces = bench.prebuilt_pieces(items, compress)
    with LoopbackServer() as server:
        with bulkwire.BulkInsert(server.url, server.database, compress=compress) as bulk:
            for i, item in enumerate(items):
                bulk.store(item, id=f"docs/{i}")
        sent = server.requests[-1]
        assert sent.complete and sent.error is None
        # the same bytes, cut where the replay cuts them; the sender may send two pieces that
        # were ready together (the last data and the gzip trailer) as one HTTP chunk
        assert sum(sent.wire_chunks) == sum(map(len, pieces)) and len(pieces) >= 2
        assert set(itertools.accumulate(sent.wire_chunks)) <= set(
            itertools.accumulate(map(len, pieces)))
        assert len(sent.wire_chunks) >= len(pieces) - 1
    body = b"".join(pieces)
    if compress:
        body = zlib.decompress(body, 31)
    commands = json.loads(body)
    assert [c["Id"] for c in commands] == [f"docs/{i}" for i in range(len(items))]
    assert commands[7]["Document"] == {**vars(items[7]), "@metadata": {
        "@collection": "People", "Raven-Python-Type": "bench_real_server.Person"}}


@pytest.mark.parametrize("args", [("small", "plain", "30"), ("dim384", "gzip", "4", "--runs", "2"),
                                  ("small", "gzip", "5", "official")])
def test_callgrind_client_runs(args):
    """The client-side workload for instruction counts stores every document (it checks the
    loopback server's count itself) and prints its CPU per document (with two runs, of the
    second alone), and its page faults per document over the same runs."""
    out = run_script("callgrind_client.py", *args)
    assert out.startswith(f"{args[0]}, {args[1]}, ") and "the last insert complete" in out
    runs = "(median of 1 run(s) after the first)" if "--runs" in args else "(median of 1 run(s))"
    cpu, faults = out.rstrip().splitlines()[-2:]
    assert cpu.startswith("client CPU per document: ") and cpu.endswith(runs)
    assert re.fullmatch(r"page faults per document: \d+\.\d{3} \(.*median of the same runs\)", faults)
    assert run_script("callgrind_client.py", *args[:3], "skip") == ""


def test_real_server_summary_and_table():
    """The records of one workload: medians per contender, the ratio as the median of the
    per-round ratios to the official client, CPU per 1,000 documents; the table prints them."""
    bench = _bench_module("bench_real_server")
    seconds = {"official": [2.0, 4.0, 3.0], "bulkwire": [1.0, 1.0, 2.0], "replay": [0.5, 1.0, 1.0]}
    cpu = {"official": [1.0, 3.0, 2.0], "bulkwire": [0.1, 0.3, 0.2], "replay": [0.0, 0.0, 0.01]}
    records = bench.summarize("small", "gzip", 500, 1234, seconds, cpu, "1.50")
    by_name = {r["contender"]: r for r in records}
    assert list(by_name) == ["official", "bulkwire", "replay"]
    assert by_name["bulkwire"]["docs_per_s"] == 500 / 1.0
    assert by_name["bulkwire"]["vs_official"] == 2.0  # ratios 2, 4, 1.5
    assert by_name["official"]["vs_official"] == 1.0
    assert abs(by_name["official"]["cpu_s_per_1000_docs"] - 4.0) < 1e-12
    assert json.loads(json.dumps(records)) == records
    text = bench.table(records).splitlines()
    assert text[0] == "small, gzip (500 documents, body 1,234 bytes gzip); load average 1.50"
    assert text[3].split() == ["bulkwire", "500", "2.00x", "0.4000"]


def test_real_server_arguments():
    bench = _bench_module("bench_real_server")
    args = bench.parse_args(["--docs", "30", "--modes", "gzip", "--json", "out.json"])
    assert (args.docs, args.rounds, args.modes, args.workloads, args.json) == (
        30, 5, "gzip", "dim1024,dim384,small", "out.json")
    for bad in (["--modes", "zip"], ["--workloads", "small,dim7"], ["--docs", "0"]):
        with pytest.raises(SystemExit):
            bench.parse_args(bad)


def test_real_server_figure(tmp_path):
    """plot_figures draws real_server.png from bench_real_server.py's JSON."""
    pytest.importorskip("matplotlib")
    results = [{"workload": w, "mode": m, "contender": c, "docs": 10, "body_bytes": 1,
                "load_average": "1.0", "docs_per_s": 1.0, "vs_official": 1.0,
                "cpu_s_per_1000_docs": cpu}
               for w in ("dim1024", "small") for m in ("plain", "gzip")
               for c, cpu in (("official", 0.04), ("bulkwire", 0.002), ("replay", 0.0001))]
    report = tmp_path / "real.json"
    report.write_text(json.dumps({"args": {"docs": 10, "rounds": 1}, "server": "4.1.0",
                                  "results": results}))
    plot = _bench_module("plot_figures")
    groups, cpu = plot.real_server_groups(json.loads(report.read_text()))
    assert groups == [("dim1024", "plain"), ("dim1024", "gzip"), ("small", "plain"), ("small", "gzip")]
    assert cpu[("bulkwire", "small", "gzip")] == 0.002
    out = run_script("plot_figures.py", "--real-server", str(report), "--out", str(tmp_path / "img"))
    assert "real_server.png" in out
    assert (tmp_path / "img" / "real_server.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("workload", ["take", "load"])
def test_profile_reads_runs(tmp_path, workload):
    """profile_reads checks what each repetition returned, and reports per repetition."""
    out = run_script("profile_reads.py", workload, "--repeat", "1", "--data", str(tmp_path))
    assert out.startswith(f"{workload}: 1 repetitions, per repetition wall ")
    assert "CPU" in out and "load average" in out


def test_profile_reads_refuses_a_negative_repeat(tmp_path):
    done = subprocess.run([sys.executable, os.path.join(BENCH, "profile_reads.py"), "take",
                           "--repeat", "-1", "--data", str(tmp_path)], cwd=BENCH,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--repeat must not be negative" in done.stderr


def test_load_big_pages_counts_the_pages_read():
    out = run_script("load_big_pages.py", "--rows", "300", "--rounds", "1",
                     "--case", "256-dim, one 61 MiB page", "--case", "768-dim, 1 MiB pages")
    rows = [line.split() for line in out.splitlines() if line.startswith(("256-dim", "768-dim"))]
    assert len(rows) == 2
    # 300 rows in one page, read once; at 768 dimensions, 1 MiB pages of ~340 rows: one
    assert [row[-5] for row in rows] == ["1", "1"]
    assert all(row[-1].endswith("x") for row in rows)


def test_bench_scylla_routing_runs():
    out = run_script("bench_scylla_routing.py", "--rows", "600", "--driver-rows", "80",
                     "--batch", "200")
    sections = out.split("\n")
    assert sum(line.startswith("  bulkwire  ") for line in sections) == 4
    assert sum(line.startswith("  driver    ") for line in sections) == 4
    # vnodes: every bulkwire row on its shard; tablets: every row after the first batch, and
    # every forwarded row one of the probes
    assert "bulkwire  owned 600/600 (100.0%), forwarded 0 (other shard 0, other node 0)" \
        in sections[2]
    ours = [line for line in sections if line.startswith("  bulkwire  ")]
    assert all("after its first batch 400/400 (100.0%)" in line for line in ours)
    assert all(line.endswith("forwarded rows that were none 0") for line in ours)
    assert sum("misses before their tablet's first payload" in line for line in sections) == 4


def test_cost_load_options_runs():
    cases = ["rf:none", "rf:rejected 0%", "rf:rejected 1%", "cql:none", "cql:report"]
    out = run_script("cost_load_options.py", "--cpu", "--rounds", "1", "--rf-rows", "100",
                     "--cql-rows", "200", "--cases", ",".join(cases))
    table = out.split("CPU seconds of the load call")[1].splitlines()[1:]
    rows = {case: line for case in cases for line in table if f" {case} " in line}
    assert set(rows) == set(cases)
    # each case against its baseline: the 1% file against the clean one, the rest against none
    assert "rf:rejected 1%" in rows and rows["rf:rejected 1%"].endswith("x rf:rejected 0%")
    assert rows["cql:report"].endswith("x cql:none")
    assert "CPU: " in out and "load average at start" in out
