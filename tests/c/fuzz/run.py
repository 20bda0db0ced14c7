"""Builds the libFuzzer targets of the C core (fuzz_*.c here) with clang and runs each for a
bounded time from its checked-in seeds.

    python tests/c/fuzz/run.py                    # every target, 20 s each
    python tests/c/fuzz/run.py vint --seconds 300 # one target, longer
    python tests/c/fuzz/run.py --list

A target names the core sources it links in a ``sources:`` comment line (and libraries in a
``libs:`` line); sources are found by name in csrc/core/ and its folders, then csrc/, as
tests/c/run.py finds them. Built with -fsanitize=fuzzer,address,undefined: an out-of-bounds
read, undefined behaviour, an allocation or a resident size past the memory limits
(RSS_LIMIT_MB, MALLOC_LIMIT_MB) or a failed oracle check (abort) stops the run and leaves the
input in the artifacts folder, printed as hex. The seeds are ``corpus/<name>/``; the run
works on a copy, so they never change.
Clang is taken from CLANG, else the first of clang, clang-19 ... clang-14 on PATH; without
it the runner fails (exit 2), it does not skip. ``--jobs N`` fuzzes N targets at once (each
on one core); a target's output goes to a log, printed when it fails, so that outputs never
interleave. Exit status: 0 when every target ran its time clean, 1 otherwise.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from run import BASE_FLAGS, compile_program  # noqa: E402  (the unit test runner's build)

FLAGS = [*BASE_FLAGS, "-g", "-O1", "-fno-omit-frame-pointer",
         "-fsanitize=fuzzer,address,undefined", "-fno-sanitize-recover=undefined"]
#: Memory limits of every run, so that an input making the core allocate far more than its
#: few kilobytes can hold is a finding. -malloc_limit_mb stops at the first single allocation
#: that large, touched or not (libFuzzer's malloc hooks, which need the sanitizer runtime
#: these targets are built with; RLIMIT_AS cannot be used under ASan, whose shadow memory
#: reserves terabytes of address space); -rss_limit_mb at the process's peak resident size
#: (ASan's quarantine and a growing corpus take a target to 500 MB in 20 s). The largest
#: allocation the core may honestly make for a 4 KiB input is a zstd page's output (32,768
#: times its compressed bytes when the frame does not say its size): 128 MiB.
RSS_LIMIT_MB = 2048
MALLOC_LIMIT_MB = 256


def targets() -> list[str]:
    """The target names, sorted."""
    return sorted(p.stem[len("fuzz_"):] for p in HERE.glob("fuzz_*.c"))


def find_clang() -> str:
    """The clang to build with; exits 2 when there is none."""
    names = [os.environ["CLANG"]] if os.environ.get("CLANG") else \
        ["clang"] + [f"clang-{v}" for v in range(19, 13, -1)]
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    print("fuzz: no clang found (apt-get install clang); the C fuzz targets cannot be built",
          file=sys.stderr)
    sys.exit(2)


def build(clang: str, name: str, out: pathlib.Path) -> pathlib.Path | None:
    """Compiles one target; the executable, or None (errors printed)."""
    exe = out / f"fuzz_{name}"
    return exe if compile_program([clang], FLAGS, HERE / f"fuzz_{name}.c", exe) else None


def run(exe: pathlib.Path, name: str, seconds: int, work: pathlib.Path,
        artifacts: pathlib.Path) -> bool:
    """Fuzzes one target for `seconds`; True when it found nothing. Its output is kept in a
    log, whose end is printed when it fails."""
    corpus = work / name
    seeds = HERE / "corpus" / name
    if seeds.is_dir():
        shutil.copytree(seeds, corpus)
    else:
        corpus.mkdir(parents=True)
    prefix = artifacts / f"{name}-"
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.setdefault("ASAN_OPTIONS", "abort_on_error=1:detect_leaks=1")
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    args = [str(exe), f"-max_total_time={seconds}", "-timeout=10",
            f"-rss_limit_mb={RSS_LIMIT_MB}", f"-malloc_limit_mb={MALLOC_LIMIT_MB}",
            "-max_len=4096", "-print_final_stats=1", f"-artifact_prefix={prefix}", str(corpus)]
    log_path = work / f"{name}.log"
    with open(log_path, "wb") as log:
        try:
            rc = subprocess.run(args, env=env, stdout=log, stderr=subprocess.STDOUT,
                                timeout=seconds + 120).returncode
        except subprocess.TimeoutExpired:
            print(f"fuzz {name}: still running {seconds + 120} s after its time was up: a hang; "
                  f"its output:\n{_log_end(log_path)}", flush=True)
            return False
    found = sorted(artifacts.glob(f"{name}-*"))
    if rc != 0 or found:
        print(f"fuzz {name}: FAILED (exit status {rc}); its output:\n{_log_end(log_path)}",
              flush=True)
        for path in found:
            print(f"fuzz {name}: failing input {path.name}: {path.read_bytes().hex()}", flush=True)
        return False
    executed = re.search(r"^stat::number_of_executed_units: *(\d+)", log_path.read_text(
        errors="replace"), re.M)
    inputs = f", {int(executed.group(1)):,} inputs" if executed else ""
    print(f"fuzz {name}: ok ({seconds} s{inputs})", flush=True)
    return True


def _log_end(path: pathlib.Path, lines: int = 150) -> str:
    """The last ``lines`` lines of a target's log, indented."""
    text = path.read_text(errors="replace").splitlines()[-lines:]
    return "\n".join("  | " + line for line in text)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="targets to run (default: all)")
    parser.add_argument("--seconds", type=int, default=20, help="time per target")
    parser.add_argument("--jobs", type=int, default=1,
                        help="targets fuzzed at once, each on its own core (default: 1)")
    parser.add_argument("--list", action="store_true", help="list the targets and exit")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(targets()))
        return 0
    unknown = set(args.names) - set(targets())
    if unknown:
        parser.error(f"no such target: {', '.join(sorted(unknown))}")
    if args.jobs <= 0:
        parser.error("--jobs must be positive")
    clang = find_clang()
    with tempfile.TemporaryDirectory(prefix="bulkwire-cfuzz-") as tmp:
        tmp_path = pathlib.Path(tmp)
        artifacts = tmp_path / "artifacts"
        artifacts.mkdir()
        (tmp_path / "work").mkdir()

        def build_and_run(name: str) -> bool:
            exe = build(clang, name, tmp_path)
            return exe is not None and run(exe, name, args.seconds, tmp_path / "work", artifacts)

        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            verdicts = list(pool.map(build_and_run, args.names or targets()))
    return 0 if all(verdicts) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
