"""Runs one benchmark against two builds of bulkwire, alternating round by round.

    python benchmarks/ab_builds.py --before ../old-checkout --rounds 3 -- \\
        benchmarks/bench_encode.py --docs 2000 --rounds 5 --workloads small

Each checkout needs its extension built in place (``python setup.py build_ext --inplace``).
The benchmark script runs from each checkout in turn (before, after; then after, before; ...),
in a fresh process, with ``PYTHONPATH=pkg`` and OpenBLAS on one thread, so both builds see the
same machine state as nearly as a shared machine allows; the script's own ratios against
its baselines (measured in the same process) are then comparable across builds. Every
round's output is printed under a ``=== round N before|after`` header (and written to
``--out``), for the reader to take per-round ratios and their median.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=pathlib.Path, required=True,
                        help="the checkout to compare against (its _core built in place)")
    parser.add_argument("--after", type=pathlib.Path, default=HERE.parent,
                        help="the checkout under test (default: this one)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default: 3)")
    parser.add_argument("--out", type=pathlib.Path, help="also write the outputs here")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="-- then the benchmark script (a path inside the checkout) and its arguments")
    options = parser.parse_args(argv)
    command = options.command[1:] if options.command[:1] == ["--"] else options.command
    if not command:
        parser.error("give the benchmark to run after --")
    if options.rounds < 1:
        parser.error("--rounds must be at least 1")
    for side in (options.before, options.after):
        if not any((side / "pkg" / "bulkwire").glob("_core.*.so")):
            parser.error(f"{side} has no built extension: run python setup.py build_ext --inplace there")
    log = open(options.out, "w") if options.out else None
    try:
        for round_number in range(1, options.rounds + 1):
            sides = (("before", options.before), ("after", options.after))
            # The order alternates too, so that neither build always runs first after a pause.
            for name, side in (sides if round_number % 2 else sides[::-1]):
                header = f"=== round {round_number} {name} ({side})"
                env = dict(os.environ, PYTHONPATH="pkg", OPENBLAS_NUM_THREADS="1")
                done = subprocess.run([sys.executable, *command], cwd=side, env=env,
                                      capture_output=True, text=True)
                text = f"{header}\n{done.stdout}{done.stderr}"
                print(text, flush=True)
                if log:
                    log.write(text + "\n")
                    log.flush()
                if done.returncode != 0:
                    print(f"{header}: the benchmark failed (exit status {done.returncode})")
                    return 1
    finally:
        if log:
            log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
