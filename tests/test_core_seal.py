"""The seal between the two C layers: csrc/core/ compiles with nothing but its own directories
(its top and its folders, one per concern) on the include path (no Python, no NumPy), as
setup.py builds it, so a stray ``#include <Python.h>`` in the core breaks the build instead of
slipping in. Headers are included by bare name from any folder, so no two files of the core
share a name.

Each core file is compiled with the system C compiler (``-fsyntax-only``); the control shows
that the same command refuses a core file that includes Python.h, and accepts it once
Python's include directory is added, so the refusal is the seal and nothing else.
"""
import os
import pathlib
import shlex
import subprocess
import sysconfig

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORE = ROOT / "csrc" / "core"
#: the core's include path, as setup.py's: its top, then its folders
CORE_FOLDERS = [CORE, *sorted(p for p in CORE.iterdir() if p.is_dir())]
CORE_INCLUDE = [str(p) for p in CORE_FOLDERS]
CORE_SOURCES = sorted((p for folder in CORE_FOLDERS for p in folder.glob("*.c")),
                      key=lambda p: p.name)
CORE_HEADERS = sorted((p for folder in CORE_FOLDERS for p in folder.glob("*.h")),
                      key=lambda p: p.name)


def _compiler() -> list[str]:
    return shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")


def _compile(source: pathlib.Path, *include_dirs: str) -> subprocess.CompletedProcess:
    """Syntax-checks source as C11 with only the given include directories (plus the
    compiler's own system directories)."""
    # the sanitizer run preloads its runtime into every child; the compiler needs none
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    command = [*_compiler(), "-std=c11", "-fsyntax-only", *(f"-I{d}" for d in include_dirs), str(source)]
    return subprocess.run(command, capture_output=True, text=True, env=env, check=False)


def test_core_has_files():
    assert len(CORE_SOURCES) >= 10 and len(CORE_HEADERS) >= 10, sorted(CORE.rglob("*"))


def test_core_files_are_in_its_folders_and_their_names_are_unique():
    """Every C file of the core is at its top or in one of its folders (no deeper: the
    include path has only those), and a bare name names one file."""
    deeper = sorted(str(p.relative_to(CORE)) for p in CORE.rglob("*.[ch]")
                    if p.parent not in CORE_FOLDERS)
    assert not deeper, f"core files below its folders: {deeper}"
    names = [p.name for p in [*CORE_SOURCES, *CORE_HEADERS]]
    assert len(names) == len(set(names)), sorted(n for n in set(names) if names.count(n) > 1)


@pytest.mark.parametrize("source", CORE_SOURCES, ids=lambda p: p.name)
def test_core_source_compiles_without_python(source):
    result = _compile(source, *CORE_INCLUDE)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("header", CORE_HEADERS, ids=lambda p: p.name)
def test_core_header_stands_alone_without_python(header, tmp_path):
    unit = tmp_path / f"only_{header.stem}.c"
    unit.write_text(f'#include "{header.name}"\n')
    result = _compile(unit, *CORE_INCLUDE)
    assert result.returncode == 0, result.stderr


def test_python_include_in_core_breaks_the_compile(tmp_path):
    (original,) = [p for p in CORE_SOURCES if p.name == "vint.c"]
    stray = tmp_path / "vint_with_python.c"
    stray.write_text("#include <Python.h>\n" + original.read_text())

    sealed = _compile(stray, *CORE_INCLUDE)
    assert sealed.returncode != 0
    assert "Python.h" in sealed.stderr, sealed.stderr

    # control: the same file with Python's headers on the path compiles, so it was the seal
    # (the missing include path) that refused it
    paths = sysconfig.get_paths()
    unsealed = _compile(stray, *CORE_INCLUDE, paths["include"], paths["platinclude"])
    assert unsealed.returncode == 0, unsealed.stderr
