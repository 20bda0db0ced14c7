"""The benchmark scripts the docs quote still run (tiny sizes; nothing here is timed)."""
import json
import os
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
def test_bench_real_server_runs():
    """The real-server benchmark (a RavenDB 4.1 node of its own): every contender, every
    workload's table, every document stored (the script checks the count itself)."""
    out = run_script("bench_real_server.py", "--docs", "20", "--rounds", "1",
                     "--workloads", "dim384,small", "--modes", "plain,gzip")
    assert "server: RavenDB 4.1.0" in out and "load average" in out
    for section in ("dim384, plain", "dim384, gzip", "small, plain", "small, gzip"):
        table = out.split(f"\n{section} (20 documents")[1].split("\n\n")[0].splitlines()[2:5]
        rows = {line.split()[0]: line.split()[1:] for line in table}
        assert set(rows) == {"official", "bulkwire", "replay"}, table
        assert rows["official"][1] == "1.00x"
        assert all(float(values[0].replace(",", "")) > 0 and float(values[2]) >= 0
                   for values in rows.values())


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
