"""Runs the fuzz targets in this folder with atheris, each for a bounded time.

    python fuzz/run.py                      # every target, 30 s each
    python fuzz/run.py dumps --seconds 300  # one target, longer
    python fuzz/run.py --list

A target is a file ``fuzz_<name>.py`` beside this one that defines
``test_one_input(data: bytes)``; it raises only for a real defect (an oracle mismatch, an
exception bulkwire does not document). Its seed corpus is ``corpus/<name>/``; the run starts
from a copy of it, so the checked-in corpus never changes. The target module and the
``bulkwire`` package are instrumented for Python coverage. The C core gets no coverage
feedback here (that needs a clang build), but under the sanitizer build every out-of-bounds
read or undefined behaviour the inputs reach aborts the run.

With the sanitizer runtime preloaded, atheris loses its coverage feedback (the runtime
provides the coverage symbols first), so CI runs in two steps: the normal build with
``--work DIR`` grows each target's corpus under coverage guidance and keeps it in DIR, then
the sanitizer build runs again with ``--work DIR``, starting from what the first step found.

A failing input is written to the artifacts folder and printed as hex, so a CI log is enough
to reproduce it: ``python -c "import fuzz_x; fuzz_x.test_one_input(bytes.fromhex('...'))"``.
``--jobs N`` fuzzes N targets at once (libFuzzer runs on one core); each target's own output
goes to a log that is printed when it fails or hangs, so the outputs never interleave.
Exit status: 0 when every target ran its time without a failure, 1 otherwise.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import faulthandler
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
#: seconds a target may run past its budget (its last input, its exit) before it counts as hung
HANG_GRACE = 120
#: Memory limits of every run, so that an input making bulkwire allocate far more than its
#: few kilobytes can hold is a finding, not a slow run or a killed CI job. -rss_limit_mb
#: stops at the process's peak resident size (the interpreter, pyarrow and the targets' files
#: take about 200 MB); -malloc_limit_mb at the first single allocation that large, touched or
#: not, where libFuzzer's malloc hooks work: with the sanitizer runtime preloaded (the
#: sanitizer step), not in the normal build, where only what is touched counts.
RSS_LIMIT_MB = 1536
MALLOC_LIMIT_MB = 512


def targets() -> list[str]:
    """The names of the targets in this folder, sorted."""
    return sorted(p.stem[len("fuzz_"):] for p in HERE.glob("fuzz_*.py"))


def _child(name: str, libfuzzer_args: list[str]) -> None:
    """In the fuzzing process: instrument, import the target, fuzz. Does not return."""
    import atheris

    sys.path.insert(0, str(HERE))
    with atheris.instrument_imports(include=["bulkwire", f"fuzz_{name}"]):
        module = __import__(f"fuzz_{name}")
    atheris.Setup([sys.argv[0], *libfuzzer_args], module.test_one_input)
    # A process still alive well past its budget prints every thread's Python stack (to
    # stderr, once) before the parent's guard kills it, so that a hang says where it is.
    budget = next((int(a.split("=", 1)[1]) for a in libfuzzer_args
                   if a.startswith("-max_total_time=")), None)
    if budget is not None:
        faulthandler.dump_traceback_later(budget + HANG_GRACE - 30, exit=False)
    atheris.Fuzz()


def _native_stacks(pid: int) -> None:
    """Prints every thread's native stack of a hung process, when gdb is there to read it."""
    gdb = shutil.which("gdb")
    if gdb is None:
        print("  (no gdb here to show the hung process's native stacks)", flush=True)
        return
    try:
        subprocess.run([gdb, "-p", str(pid), "-batch", "-ex", "thread apply all bt 30"],
                       stdin=subprocess.DEVNULL, timeout=60, check=False)
    except subprocess.TimeoutExpired:
        print("  (gdb did not answer within 60 s)", flush=True)


def run_target(name: str, seconds: int, artifacts: pathlib.Path,
               work_dir: pathlib.Path | None = None) -> bool:
    """Fuzzes one target for ``seconds``; True when no failing input was found. The working
    corpus is ``work_dir/<name>`` when given (kept, and reused by the next run), else a
    temporary folder; it starts as a copy of the seeds. The target's output is kept in a log,
    printed (its end) when it fails or hangs."""
    seeds = HERE / "corpus" / name
    work = pathlib.Path(tempfile.mkdtemp(prefix=f"fuzz-{name}-"))
    try:
        corpus = (work_dir / name) if work_dir is not None else work / "corpus"
        if not corpus.is_dir():
            if seeds.is_dir():
                shutil.copytree(seeds, corpus)
            else:
                corpus.mkdir(parents=True)
        prefix = artifacts / f"{name}-"
        args = [f"-max_total_time={seconds}", "-timeout=20", f"-rss_limit_mb={RSS_LIMIT_MB}",
                f"-malloc_limit_mb={MALLOC_LIMIT_MB}",
                "-max_len=4096", "-print_final_stats=1", f"-artifact_prefix={prefix}", str(corpus)]
        started = time.monotonic()
        log_path = work / "output.log"
        with open(log_path, "wb") as log:
            # The wall-clock guard is a backstop for a hang libFuzzer's own -timeout misses.
            child = subprocess.Popen([sys.executable, __file__, "--child", name, "--", *args],
                                     stdout=log, stderr=subprocess.STDOUT)
            try:
                rc = child.wait(timeout=seconds + HANG_GRACE)
            except subprocess.TimeoutExpired:
                print(f"fuzz {name}: still running {HANG_GRACE} s after its time was up: a hang; "
                      f"its output, then its native stacks:\n{_log_end(log_path)}", flush=True)
                _native_stacks(child.pid)
                child.kill()
                child.wait()
                return False
        found = sorted(artifacts.glob(f"{name}-*"))
        elapsed = time.monotonic() - started
        if rc == 0 and not found:
            print(f"fuzz {name}: ok, {elapsed:.0f} s{_inputs_run(log_path)}", flush=True)
            return True
        print(f"fuzz {name}: FAILED (exit status {rc}); its output:\n{_log_end(log_path)}",
              flush=True)
        for path in found:
            print(f"  input {path.name}: {path.read_bytes().hex()}", flush=True)
        return False
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _log_end(path: pathlib.Path, lines: int = 150) -> str:
    """The last ``lines`` lines of a target's log, indented."""
    text = path.read_text(errors="replace").splitlines()[-lines:]
    return "\n".join("  | " + line for line in text)


def _inputs_run(path: pathlib.Path) -> str:
    """", N inputs" from libFuzzer's final statistics in a target's log (empty without them)."""
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("stat::number_of_executed_units:"):
            return f", {int(line.split(':')[-1]):,} inputs"
    return ""


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        _child(argv[1], argv[3:])
        return 0
    parser = argparse.ArgumentParser(prog="fuzz/run.py", description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", metavar="TARGET",
                        help="targets to run (default: all of them)")
    parser.add_argument("--seconds", type=int, default=30, help="time per target (default: 30)")
    parser.add_argument("--artifacts", type=pathlib.Path, default=None,
                        help="where failing inputs go (default: a new temporary folder)")
    parser.add_argument("--work", type=pathlib.Path, default=None, metavar="DIR",
                        help="keep each target's working corpus in DIR/<target> and start "
                             "from it when it exists (default: a temporary copy of the seeds)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="targets fuzzed at once, each on its own core (default: 1)")
    parser.add_argument("--list", action="store_true", help="print the targets and exit")
    options = parser.parse_args(argv)
    known = targets()
    if options.list:
        print("\n".join(known))
        return 0
    unknown = [n for n in options.names if n not in known]
    if unknown:
        parser.error(f"no such target: {', '.join(unknown)} (targets: {', '.join(known)})")
    if options.seconds <= 0:
        parser.error("--seconds must be positive")
    if options.jobs <= 0:
        parser.error("--jobs must be positive")
    artifacts = options.artifacts or pathlib.Path(tempfile.mkdtemp(prefix="fuzz-artifacts-"))
    artifacts.mkdir(parents=True, exist_ok=True)
    names = options.names or known
    with concurrent.futures.ThreadPoolExecutor(options.jobs) as pool:
        verdicts = list(pool.map(lambda n: run_target(n, options.seconds, artifacts,
                                                      options.work), names))
    failed = [n for n, ok in zip(names, verdicts) if not ok]
    if failed:
        print(f"fuzz: {len(failed)} target(s) failed: {', '.join(failed)}; inputs in {artifacts}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
