"""Every fenced Python example in README.md and docs/*.md runs as written.

Each block is saved as a script of its own and run with ``python example.py`` (a
``DeprecationWarning`` at its own lines an error: examples use the current spellings) in a fresh
process and an empty working directory, as a reader who pastes it would: an example that leans
on a name it does not define, a file it does not create, a server it does not start, or a
``if __name__ == "__main__":`` guard that worker processes need, fails here. Examples that
need a server start bulkwire's loopback server themselves, as a reader would."""
from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

import bulkwire
from _ray_startup import startup_timed_out

ROOT = pathlib.Path(__file__).resolve().parent.parent
# where the bulkwire under test is (the checkout with PYTHONPATH=pkg, or the installed copy)
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(bulkwire.__file__)))
FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```", re.S | re.M)


def markdown_files() -> list[pathlib.Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def examples() -> list[tuple[str, str]]:
    """(file:line, code) of every ```python block."""
    found = []
    for path in markdown_files():
        text = path.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{path.relative_to(ROOT)}:{line}", match.group(1)))
    return found


def test_the_collector_finds_the_examples():
    # a fence the pattern missed would silently go untested
    fences = sum(path.read_text(encoding="utf-8").count("```python") for path in markdown_files())
    assert fences == len(examples()) > 0


#: Packages of the extras the light test extra leaves out (dask, ray, pyspark): an example that
#: imports one skips naming it where it is not installed (a failure under
#: BULKWIRE_REQUIRE_EXTRAS=1).
OPTIONAL_PACKAGES = {"dask", "distributed", "pandas", "ray", "pyspark"}


@pytest.mark.parametrize("where,code", examples(), ids=[where for where, _ in examples()])
def test_example_runs(where, code, tmp_path):
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(filter(None, [PACKAGE_DIR, os.environ.get("PYTHONPATH")])))
    # an example spells everything as it is spelled now: a DeprecationWarning pointing at
    # its own lines (a bulkwire name's former spelling) fails it
    command = [sys.executable, "-W", "error::DeprecationWarning:__main__", "example.py"]
    if "pyspark" in code and os.environ.get("LD_PRELOAD"):
        # the sanitizer build: a script's Spark starts its JVM with the runtimes preloaded,
        # where it does not start; tests/test_spark.py runs the same writes under them
        pytest.skip("a Spark example's JVM does not start under the preloaded sanitizer runtimes")
    if "import ray" in code and os.environ.get("LD_PRELOAD"):
        # the sanitizer build: a Ray worker started with the runtimes preloaded aborts in
        # Ray's own setproctitle (a read past a heap block), and Ray starts it again without
        # end; tests/test_ray_sink.py runs the same writes with Ray's processes outside them
        pytest.skip("a Ray example's workers abort in Ray's own code under the preloaded "
                    "sanitizer runtimes")
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0 and startup_timed_out(done.stderr):  # Ray's, once: _ray_startup
        done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=600)
    if done.returncode != 0:
        missing = re.search(r"ModuleNotFoundError: No module named '([\w.]+)'", done.stderr)
        if missing and missing.group(1).split(".")[0] in OPTIONAL_PACKAGES:
            pytest.importorskip(missing.group(1))  # skips naming it (fails if it is there)
    assert done.returncode == 0, f"{where} failed as a script:\n{done.stdout}\n{done.stderr}"


def test_every_c_source_the_docs_name_exists():
    """A `csrc/...` path in README.md or docs/ names a file that is there (`x.{c,h}` both,
    `x*.c` at least one), so that a move of the C sources cannot leave the docs behind."""
    missing = []
    for path in markdown_files():
        for ref in re.findall(r"csrc/[A-Za-z0-9_./{}*,]+", path.read_text(encoding="utf-8")):
            ref = ref.rstrip(".,")
            if ref.endswith("/"):
                names = [ref]
            elif ref.endswith(".{c,h}"):
                names = [ref[:-6] + ".c", ref[:-6] + ".h"]
            else:
                names = [ref]
            for name in names:
                if not (list(ROOT.glob(name)) if "*" in name else (ROOT / name).exists()):
                    missing.append(f"{path.relative_to(ROOT)}: {name}")
    assert missing == []
