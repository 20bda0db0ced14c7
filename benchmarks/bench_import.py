"""Start-up cost: ``import bulkwire`` and ``bulkwire --version`` against ``import orjson``,
each in a fresh process.

    python benchmarks/bench_import.py [--runs 20]

Contenders, each a fresh ``python -c`` process: the interpreter alone (``pass``: the floor
every other one pays too), ``import orjson``, ``import bulkwire``, ``import bulkwire`` and one
``dumps`` of a small dict, and ``bulkwire --version`` (what the console script runs:
``bulkwire.__main__.main`` with that argument). Every run runs each contender once, in an
order rotated by one each run, so that drift in the machine's load lands on all of them
alike. For each: the median over runs of the process's wall time and of its CPU time (user
and system, from the kernel's account of the child), and the median of its per-run excess
over the interpreter alone (what the import itself costs). The 1-minute load average is
printed with the table.

Before timing, each contender's process reports which of the heavy modules it imported
(numpy, pyarrow, http.client, email.parser, ssl); ``import bulkwire`` and ``bulkwire
--version`` should import none of them.
"""
from __future__ import annotations

import argparse
import ast
import os
import statistics
import subprocess
import sys
import time

from _common import PKG, print_command
from _rounds import load_average

HEAVY = ("numpy", "pyarrow", "http.client", "email.parser", "ssl")

CONTENDERS = {
    "python (nothing)": "pass",
    "import orjson": "import orjson",
    "import bulkwire": "import bulkwire",
    "bulkwire + dumps": "import bulkwire; bulkwire.dumps({'a': 1, 'b': [1.5, None]})",
    "bulkwire --version": "import sys; sys.argv = ['bulkwire', '--version']\n"
                          "from bulkwire.__main__ import main\n"
                          "try:\n    main()\nexcept SystemExit:\n    pass",
}


def environment() -> dict:
    """The children find the checkout's bulkwire (its in-place build), as this script does."""
    path = ([PKG] if PKG in sys.path else []) + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(path), OPENBLAS_NUM_THREADS="1")


def one_run(code: str, env: dict) -> tuple:
    """(wall seconds, CPU seconds) of one fresh process running code; its output dropped."""
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    error = child.stderr.read().decode()
    child.stderr.close()
    if child.returncode != 0:
        raise SystemExit(f"{code!r} failed ({child.returncode}):\n{error}")
    return wall, usage.ru_utime + usage.ru_stime


def heavy_modules(code: str, env: dict) -> list:
    """The HEAVY modules a process running code has imported when it ends."""
    probe = code + f"\nimport sys\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)"
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                          check=True)
    return ast.literal_eval(done.stderr.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="processes per contender")
    args = parser.parse_args()
    print_command()
    env = environment()
    names = list(CONTENDERS)
    for name in names:
        print(f"  {name:>20} imports: {', '.join(heavy_modules(CONTENDERS[name], env)) or 'none of ' + ', '.join(HEAVY)}")
    walls: dict = {name: [] for name in names}
    cpus: dict = {name: [] for name in names}
    loads = [load_average()]
    for r in range(args.runs):
        for name in names[r % len(names):] + names[:r % len(names)]:
            wall, cpu = one_run(CONTENDERS[name], env)
            walls[name].append(wall)
            cpus[name].append(cpu)
    loads.append(load_average())
    base = names[0]
    print(f"{args.runs} fresh processes per contender, interleaved (order rotated each run); "
          f"load average {loads[0]} at the start, {loads[1]} at the end")
    print(f"  {'contender':>20} {'wall ms':>8} {'CPU ms':>8} {'wall - python':>14} {'CPU - python':>13}")
    for name in names:
        extra_wall = statistics.median(w - b for w, b in zip(walls[name], walls[base]))
        extra_cpu = statistics.median(c - b for c, b in zip(cpus[name], cpus[base]))
        print(f"  {name:>20} {statistics.median(walls[name]) * 1e3:>8.1f} "
              f"{statistics.median(cpus[name]) * 1e3:>8.1f} {extra_wall * 1e3:>14.1f} "
              f"{extra_cpu * 1e3:>13.1f}")


if __name__ == "__main__":
    main()
