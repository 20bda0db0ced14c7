"""What a load's options cost: rejected rows (``max_errors``, ``rejected``), a run report
(``report=``) and a rate limit far above the achieved rate, each against a load with none of
them; and a load with none of them in two trees (a build before the options and one after).

Two loads: a 256-dim sample (``sample_parquet``) into ``targets.request_file`` with
``threads=1``, and ``id bigint, v int`` rows into a fake CQL node run in another process
(``tests/cql_fake_node.FakeNode``). The bad rows are null ids, one row in 100 spread evenly;
the file with none has the same rows, schema and size (``rejected 1%`` is compared with
``rejected 0%``, which reads it; the other request_file cases read the sample itself).

Two measures, each load in a fresh process:

- instructions per row (``--callgrind``): valgrind's callgrind counts the client process's
  instructions for N and 2N rows; per row = (I(2N) - I(N)) / N, so start-up and imports
  drop out;
- CPU seconds of the load call (``--cpu``): ``getrusage(RUSAGE_SELF)`` user + sys around
  ``load_parquet`` in the child, the cases interleaved, the median of ``--rounds``.

Command (from benchmarks/, with ``before`` a second worktree built in place)::

    python cost_load_options.py --tree before=../../m35before/pkg --tree after=../pkg \\
        --callgrind --cpu --rounds 5

Cases other than ``none`` run in the last tree given only. Ratios are printed against the
``none`` case of the same target (and, for ``none``, against the first tree).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import _trees

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(os.path.dirname(HERE), "tests")

#: case -> (target, file kind, what it adds)
CASES = {
    "rf:none": ("rf", "sample", {}),
    "rf:rejected 0%": ("rf", "clean", {"rejected": True}),
    "rf:rejected 1%": ("rf", "bad", {"rejected": True}),
    "rf:report": ("rf", "sample", {"report": True}),
    "rf:rate 1e9": ("rf", "sample", {"rate": True}),
    "cql:none": ("cql", "clean", {}),
    "cql:nulls=null": ("cql", "clean", {"nulls": "null"}),
    "cql:rejected 0%": ("cql", "clean", {"rejected": True}),
    "cql:rejected 1%": ("cql", "bad", {"rejected": True}),
    "cql:report": ("cql", "clean", {"report": True}),
    "cql:rate 1e9": ("cql", "clean", {"rate": True}),
}


def child(case: str, path: str, work: str, address: str) -> None:
    """One load in this process; prints its CPU seconds and rows as JSON."""
    import bulkwire

    kind, _, extra = CASES[case]
    options: dict = {}
    if kind == "rf":
        target = bulkwire.targets.request_file(os.path.join(work, "out.txt"))
        options["threads"] = 1
    else:
        cql = {"nulls": extra["nulls"]} if "nulls" in extra else {}
        target = bulkwire.targets.cql(address, "ks", "t", **cql)
    if extra.get("rejected"):
        options.update(max_errors="2%", rejected=os.path.join(work, "rejected.parquet"))
    if extra.get("report"):
        options["report"] = os.path.join(work, "report.json")
    if extra.get("rate"):
        options["max_rows_per_second"] = 10**9
    before = resource.getrusage(resource.RUSAGE_SELF)
    result = bulkwire.load_parquet(path, target, **options)
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(json.dumps({"cpu": cpu, "rows": result.rows,
                      "rejected": getattr(result, "rejected_rows", 0)}))


def _default_tree() -> str:
    """Where ``bulkwire`` is imported from here: the checkout's package when it is built in
    place, else the installed one's folder (the children import the tree given them)."""
    import _common  # noqa: F401  (the checkout's build first when there is one)
    import bulkwire

    return os.path.dirname(os.path.dirname(os.path.abspath(bulkwire.__file__)))


def write_files(folder: str, rf_rows: int, cql_rows: int) -> dict:
    """(target, kind, rows) -> path, for N and 2N rows of each target."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    import _common  # noqa: F401  (the checkout's build first when there is one)
    import bulkwire

    files = {}
    for n in (rf_rows, 2 * rf_rows):
        sample = bulkwire.sample_parquet(os.path.join(folder, f"rf_{n}.parquet"), rows=n, dim=256)
        table = pq.read_table(sample)
        groups = pq.ParquetFile(sample).metadata.row_group(0).num_rows
        ids = table.column("id").to_numpy()
        for kind, step in (("clean", 0), ("bad", 100)):
            mask = np.zeros(n, dtype=bool)
            if step:
                mask[step // 2::step] = True
            path = os.path.join(folder, f"rf_{kind}_{n}.parquet")
            pq.write_table(table.set_column(0, "id", pa.array(ids, mask=mask)), path,
                           row_group_size=groups)
            files["rf", kind, n] = path
        files["rf", "sample", n] = sample
    for n in (cql_rows, 2 * cql_rows):
        for kind, step in (("clean", 0), ("bad", 100)):
            mask = np.zeros(n, dtype=bool)
            if step:
                mask[step // 2::step] = True
            path = os.path.join(folder, f"cql_{kind}_{n}.parquet")
            pq.write_table(pa.table({"id": pa.array(np.arange(n, dtype=np.int64), mask=mask),
                                     "v": pa.array(np.arange(n, dtype=np.int32))}), path,
                           row_group_size=10_000)
            files["cql", kind, n] = path
    return files


def start_node() -> tuple[subprocess.Popen, str]:
    """A fake CQL node in its own process; (the process, its address)."""
    code = ("import sys, time\nfrom cql_fake_node import FakeNode\nn = FakeNode(port=0)\n"
            "print(n.address, flush=True)\ntime.sleep(10**6)\n")
    node = subprocess.Popen([sys.executable, "-c", code], cwd=TESTS, stdout=subprocess.PIPE,
                            text=True)
    address = node.stdout.readline().strip()
    return node, address


def command(tree: _trees.Tree, case: str, path: str, work: str,
            address: str) -> tuple[list, dict]:
    env = _trees.environment(tree, PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1")
    return ([sys.executable, "-W", "ignore", os.path.abspath(__file__), "--child", case, path,
             work, address], env)


def run_cpu(tree: _trees.Tree, case: str, path: str, work: str, address: str) -> dict:
    args, env = command(tree, case, path, work, address)
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode:
        raise SystemExit(f"{case} in {tree.path}: {done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_callgrind(tree: _trees.Tree, case: str, path: str, work: str, address: str,
                  out: str | None) -> int:
    args, env = command(tree, case, path, work, address)
    done = subprocess.run(["valgrind", "--tool=callgrind",
                           f"--callgrind-out-file={out or os.devnull}"] + args,
                          env=env, capture_output=True, text=True, timeout=3000)
    if done.returncode:
        raise SystemExit(f"{case} in {tree.path}: {done.stderr[-2000:]}")
    for line in done.stderr.splitlines():
        if "Collected :" in line:
            return int(line.split(":")[-1])
    raise SystemExit(f"no count from callgrind: {done.stderr[-2000:]}")


def load_average() -> str:
    return "%.2f %.2f %.2f" % os.getloadavg()


def cpu_model() -> str:
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def plan(trees: list[_trees.Tree], cases: list[str]) -> list[tuple[str, _trees.Tree, str]]:
    """(tree name, tree, case) to run: ``none`` in every tree, the others in the last."""
    runs = []
    for case in cases:
        names = trees if case.endswith(":none") else trees[-1:]
        runs += [(tree.name, tree, case) for tree in names]
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    _trees.add_arguments(parser, baseline=False)  # none: this checkout's, as 'after'
    parser.add_argument("--cases", default=",".join(CASES),
                        help="comma-separated, of: " + ", ".join(CASES).replace("%", "%%"))
    parser.add_argument("--rf-rows", type=int, default=4000, help="N for request_file")
    parser.add_argument("--cql-rows", type=int, default=20_000, help="N for the CQL node")
    parser.add_argument("--callgrind", action="store_true", help="count instructions per row")
    parser.add_argument("--cpu", action="store_true", help="time the loads' CPU seconds")
    parser.add_argument("--rounds", type=int, default=5, help="CPU rounds (interleaved)")
    parser.add_argument("--keep-profiles", metavar="DIR",
                        help="write the callgrind profiles of the 2N-row loads here")
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    trees = _trees.trees_of(parser, args) or [_trees.Tree("after", _default_tree())]
    cases = [c for c in args.cases.split(",") if c]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        parser.error(f"unknown cases: {unknown}")
    runs = plan(trees, cases)
    print(f"command: python {' '.join(sys.argv)}")
    print(f"CPU: {cpu_model()}; load average at start: {load_average()}")
    print(f"trees: {', '.join(f'{n}={p}' for n, p in trees)}")
    node, address = start_node()
    try:
        with tempfile.TemporaryDirectory(prefix="cost_options_") as folder:
            files = write_files(folder, args.rf_rows, args.cql_rows)
            work = os.path.join(folder, "work")
            os.mkdir(work)

            def path_of(case: str, n: int) -> str:
                kind, rows, _ = CASES[case]
                return files[kind, rows, n]

            def rows_of(case: str) -> int:
                return args.rf_rows if CASES[case][0] == "rf" else args.cql_rows

            if args.callgrind:
                per_row = {}
                for name, tree, case in runs:
                    n = rows_of(case)
                    counts = []
                    for size in (n, 2 * n):
                        out = None
                        if args.keep_profiles and size == 2 * n:
                            os.makedirs(args.keep_profiles, exist_ok=True)
                            label = case.replace(":", "_").replace(" ", "_").replace("%", "pc")
                            out = os.path.join(args.keep_profiles, f"cg.{name}.{label}")
                        counts.append(run_callgrind(tree, case, path_of(case, size), work,
                                                    address, out))
                    per_row[name, case] = (counts[1] - counts[0]) / n
                    print(f"  callgrind {name:>8} {case:<18} I(N)={counts[0]:,} "
                          f"I(2N)={counts[1]:,} per row {per_row[name, case]:,.1f} "
                          f"(load {load_average()})", flush=True)
                report("instructions per row (callgrind, (I(2N) - I(N)) / N)", per_row,
                       trees, cases, "{:,.1f}")
            if args.cpu:
                seconds: dict = {key[0:2]: [] for key in [(n, c) for n, _, c in runs]}
                for r in range(args.rounds):
                    order = runs[r % len(runs):] + runs[:r % len(runs)]  # rotated each round
                    for name, tree, case in order:
                        got = run_cpu(tree, case, path_of(case, 2 * rows_of(case)), work,
                                      address)
                        seconds[name, case].append(got["cpu"])
                    print(f"  cpu round {r + 1}/{args.rounds} done (load {load_average()})",
                          flush=True)
                medians = {key: statistics.median(v) for key, v in seconds.items()}
                report(f"CPU seconds of the load call, 2N rows, median of {args.rounds} "
                       f"interleaved runs, each in a fresh process", medians, trees, cases,
                       "{:.4f}")
    finally:
        node.kill()
        node.wait()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"load average at end: {load_average()}; {when}")


def report(title: str, values: dict, trees: list, cases: list, form: str) -> None:
    """The values, with each case's ratio to its target's ``none`` (same tree) and each
    ``none``'s to the first tree's."""
    print(f"\n{title}")
    last = trees[-1][0]
    for (name, case), value in values.items():
        target = CASES[case][0]
        if case.endswith(":none"):
            base = values.get((trees[0][0], case))
            against = f"{trees[0][0]}"
        elif case.endswith("1%"):
            against = f"{target}:rejected 0%"
            base = values.get((last, against))
        else:
            against = f"{target}:none"
            base = values.get((last, against))
        ratio = f"{value / base:.4f}x {against}" if base else ""
        print(f"  {name:>8} {case:<18} {form.format(value):>14}  {ratio}")


if __name__ == "__main__":
    main()
