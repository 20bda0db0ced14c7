"""Builds and runs the C unit tests of the core (tests/c/test_*.c), without Python's headers.

    python tests/c/run.py                  # every test file
    python tests/c/run.py vint float_text  # some of them
    BULKWIRE_C_TEST_FLAGS="-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined" \\
        python tests/c/run.py              # under the sanitizers

Each test file names the core sources it links in a ``sources:`` comment line (or more than
one) and extra libraries in a ``libs:`` line; the sources are looked up by name in csrc/core/
and its folders (one per concern), then csrc/.
A file that needs an optional library's headers names them in a ``requires:`` line (e.g.
``requires: openssl/ssl.h``): where a program including them does not build and link with
the file's ``libs:``, the file is skipped, with a line saying which header is missing, as
setup.py builds without that library there. BULKWIRE_REQUIRE_EXTRAS=1 (CI, which installs
every optional library) makes such a skip a failure.
The include path has csrc/core, its folders and csrc but not Python's: a core file that
includes <Python.h> fails here. Compiled with -std=c11 -Wall -Wextra -Werror (CC, default cc),
plus BULKWIRE_C_TEST_FLAGS. The last lines printed are ``N passed, N failed`` (test functions)
and, when files were skipped, ``N files skipped``; the exit status is 1 when a test failed,
a file did not build or run to its end, or a file was skipped under BULKWIRE_REQUIRE_EXTRAS.
"""
from __future__ import annotations

import os
import pathlib
import re
import shlex
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CORE = ROOT / "csrc" / "core"
#: where sources are looked up by name and headers included by bare name: the core's top, its
#: folders (one per concern), csrc/
SOURCE_DIRS = [CORE, *sorted(p for p in CORE.glob("*") if p.is_dir()), ROOT / "csrc"]
BASE_FLAGS = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-fno-strict-aliasing"]


def test_files(names: list[str]) -> list[pathlib.Path]:
    """The test files to build: all of them, or those whose room names are given."""
    every = sorted(HERE.glob("test_*.c"))
    if not names:
        return every
    chosen = [p for p in every if p.stem[len("test_"):] in names]
    unknown = set(names) - {p.stem[len("test_"):] for p in chosen}
    if unknown:
        sys.exit(f"no C test file for: {', '.join(sorted(unknown))}")
    return chosen


def find_source(name: str) -> pathlib.Path:
    """A core source file by name, in csrc/core/, one of its folders or csrc/."""
    for folder in SOURCE_DIRS:
        if (folder / name).is_file():
            return folder / name
    sys.exit(f"core source {name} not found in csrc/core/, its folders or csrc/")


def declared(test: pathlib.Path, key: str) -> list[str]:
    """The words after ``key:`` in the test file's header comment (a long list may go on in
    more ``key:`` lines)."""
    lines = re.findall(rf"^\s*{key}:(.*)$", test.read_text(), re.M)
    return [word for line in lines for word in line.replace("*/", "").split()]


def compile_program(compiler: list[str], flags: list[str], source: pathlib.Path,
                    exe: pathlib.Path) -> bool:
    """Compiles and links one test or fuzz file with the core sources and libraries it
    declares (flags serve the link too: the sanitizer runtimes). False, with the compiler's
    output printed, when it fails."""
    includes = [f"-I{d}" for d in SOURCE_DIRS] + [f"-I{HERE}"]
    sources = [str(find_source(name)) for name in declared(source, "sources")]
    cmd = [*compiler, *flags, *includes, str(source), *sources, "-o", str(exe),
           *declared(source, "libs")]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        print(f"BUILD FAILED {source.name}\n  {' '.join(cmd)}\n{result.stdout}{result.stderr}",
              flush=True)
    return result.returncode == 0


def missing_headers(test: pathlib.Path, compiler: list[str], out_dir: pathlib.Path) -> list[str]:
    """The headers of the file's ``requires:`` line that a program cannot include and link
    with the file's ``libs:`` here (all of them or none: they are probed together)."""
    headers = declared(test, "requires")
    if not headers:
        return []
    probe = out_dir / f"probe_{test.stem}.c"
    probe.write_text("".join(f"#include <{h}>\n" for h in headers) + "int main(void) { return 0; }\n")
    result = subprocess.run([*compiler, str(probe), "-o", str(out_dir / f"probe_{test.stem}"),
                             *declared(test, "libs")], capture_output=True, text=True)
    return [] if result.returncode == 0 else headers


def build(test: pathlib.Path, compiler: list[str], out_dir: pathlib.Path,
          extra: list[str]) -> pathlib.Path | None:
    """Compiles one test file; the executable, or None."""
    exe = out_dir / test.stem
    return exe if compile_program(compiler, [*BASE_FLAGS, *extra], test, exe) else None


def run(exe: pathlib.Path) -> tuple[int, int]:
    """(passed, failed) of one test binary; a binary that dies counts one failure more."""
    env = dict(os.environ)
    env.setdefault("ASAN_OPTIONS", "abort_on_error=1:detect_leaks=1")
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    env.pop("LD_PRELOAD", None)  # the tests link their own runtime, if any
    try:
        result = subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=300)
    except subprocess.TimeoutExpired:
        print(f"FAIL {exe.name}: still running after 300 s", flush=True)
        return 0, 1
    sys.stdout.write(result.stdout)
    sys.stdout.write(result.stderr)
    found = re.search(r"^result: (\d+) (\d+)$", result.stdout, re.M)
    if found is None:
        print(f"FAIL {exe.name}: exited with status {result.returncode} before its result line",
              flush=True)
        return 0, 1
    passed, failed = int(found.group(1)), int(found.group(2))
    if result.returncode != 0 and failed == 0:
        print(f"FAIL {exe.name}: exit status {result.returncode} after its tests", flush=True)
        failed = 1
    return passed, failed


def main(argv: list[str]) -> int:
    extra = shlex.split(os.environ.get("BULKWIRE_C_TEST_FLAGS", "-O2"))
    compiler = shlex.split(os.environ.get("CC", "cc"))
    require_all = os.environ.get("BULKWIRE_REQUIRE_EXTRAS") == "1"
    passed = failed = skipped = 0
    with tempfile.TemporaryDirectory(prefix="bulkwire-ctests-") as tmp:
        for test in test_files(argv):
            print(f"== {test.name}", flush=True)
            missing = missing_headers(test, compiler, pathlib.Path(tmp))
            if missing:
                headers = " ".join(f"<{h}>" for h in missing)
                if require_all:
                    print(f"FAIL {test.name}: {headers} not found, and BULKWIRE_REQUIRE_EXTRAS=1 "
                          "requires every optional library", flush=True)
                    failed += 1
                else:
                    print(f"SKIP {test.name}: {headers} not found", flush=True)
                    skipped += 1
                continue
            exe = build(test, compiler, pathlib.Path(tmp), extra)
            if exe is None:
                failed += 1
                continue
            p, f = run(exe)
            passed += p
            failed += f
    print(f"{passed} passed, {failed} failed", flush=True)
    if skipped:
        print(f"{skipped} files skipped", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
