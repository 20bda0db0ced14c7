"""What a build has, and that it says so: ``bulkwire.build_config()`` and ``show_config()``
agree with the extension's own flags; ``bulkwire --version`` prints one line per optional
library; setup.py's probes honour BULKWIRE_WITHOUT and the environment's flags, a rebuild
in the same checkout after a library comes or goes links the change (no manual cleaning), and
every C file of the core is built, at csrc/core/'s top and in its folders."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import bulkwire
from bulkwire import _core

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_build_config_agrees_with_the_extensions_flags():
    config = bulkwire.build_config()
    libs = config.libraries
    assert list(libs) == ["zlib", "isal", "zstd", "openssl", "snappy"]
    assert libs["zlib"].found and libs["zlib"].version
    assert libs["isal"].found == bool(_core.HAVE_ISAL)
    assert libs["zstd"].found == bool(_core.HAVE_ZSTD) == _core.PARQUET_CODECS[6][1]
    assert libs["snappy"].found and _core.HAVE_SNAPPY  # built in, every build
    assert libs["snappy"].how.startswith("built in") and not libs["snappy"].package
    assert libs["openssl"].found == (_core.TLS_LIBRARY is not None)
    for info in libs.values():
        assert info.found == bool(info.version) or info.found  # found ones may lack a version
        if not info.found and info.name != "snappy":
            assert info.version == "" and info.package.endswith("-dev")
    assert config.version == bulkwire.__version__


def test_runtime_versions_are_the_libraries_own():
    import zlib

    libs = bulkwire.build_config().libraries
    assert libs["zlib"].version == zlib.ZLIB_RUNTIME_VERSION
    if libs["openssl"].found:
        assert libs["openssl"].version == _core.TLS_LIBRARY


def test_backends_follow_the_build():
    backends = bulkwire.build_config().backends
    from bulkwire.compression import compression_backends

    assert backends["gzip bodies"].split()[0] == compression_backends()[0]
    assert backends["snappy Parquet pages"] == "bulkwire's snappy decoder"
    assert backends["TLS sender"].startswith("C (") == (_core.TLS_LIBRARY is not None)


def test_version_prints_every_library(capsys):
    done = subprocess.run([sys.executable, "-m", "bulkwire", "--version"], capture_output=True,
                          text=True, timeout=120, check=True)
    lines = done.stdout.splitlines()
    assert lines[0] == f"bulkwire {bulkwire.__version__}"
    for info in bulkwire.build_config().libraries.values():
        (line,) = [text for text in lines if text.strip().startswith(info.title + ":")]
        if info.how.startswith("built in"):
            assert "built in" in line
        else:
            assert ("found " + info.version in line) if info.found else (
                info.package in line or "BULKWIRE_WITHOUT" in line)
    bulkwire.show_config()
    assert capsys.readouterr().out.splitlines() == lines


# --- setup.py's probes and rebuilds, in a copy of the tracked tree -----------------------

def _tree(tmp_path: pathlib.Path) -> pathlib.Path:
    if not (ROOT / ".git").exists():
        pytest.fail("needs the source checkout")
    names = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "setup.py", "pyproject.toml",
                            "README.md", "LICENSE", "csrc", "pkg"],
                           capture_output=True, text=True, check=True).stdout.split("\0")
    tree = tmp_path / "tree"
    for name in filter(None, names):
        if (ROOT / name).exists():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tree / name)
    return tree


def _setup(tree: pathlib.Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items()
               if k not in ("LD_PRELOAD", "BULKWIRE_WITHOUT", "BULKWIRE_REQUIRE_EXTRAS")
               and not k.startswith(("BULKWIRE_ISAL", "BULKWIRE_ZSTD", "BULKWIRE_SNAPPY",
                                     "BULKWIRE_OPENSSL"))}
    environ.update(env)
    return subprocess.run([sys.executable, "setup.py", *args], cwd=tree, capture_output=True,
                          text=True, timeout=900, env=environ)


def _linked(tree: pathlib.Path) -> dict:
    code = ("import json, bulkwire; print(json.dumps({n: i.found for n, i in "
            "bulkwire.build_config().libraries.items()}))")
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    env["PYTHONPATH"] = str(tree / "pkg")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env, check=True)
    import json

    return json.loads(done.stdout)


def test_without_names_an_unknown_library(tmp_path):
    tree = _tree(tmp_path)
    done = _setup(tree, "--name", BULKWIRE_WITHOUT="snappy,lz4")
    assert done.returncode != 0
    assert "BULKWIRE_WITHOUT names lz4" in done.stderr and "isal, zstd, openssl, snappy" in done.stderr


def test_the_probes_use_the_environments_linker_flags(tmp_path):
    """LDFLAGS reaches the probes: a flag no linker takes makes every probe fail, zlib's
    first, and the build says so instead of building without it."""
    tree = _tree(tmp_path)
    done = _setup(tree, "--name", LDFLAGS="-Wl,--no-such-linker-option")
    assert done.returncode != 0 and "zlib's headers were not found" in done.stderr


@pytest.mark.packaging
def test_a_rebuild_in_the_same_checkout_follows_the_libraries(tmp_path):
    """Built without libzstd and ISA-L, then again in the same tree without leaving anything
    out: the second build links them (every object depends on the generated config header),
    and a third build with nothing changed compiles nothing."""
    if not (_core.HAVE_ZSTD and _core.HAVE_ISAL):
        pytest.skip("needs libzstd and ISA-L installed (apt-get install libzstd-dev libisal-dev)")
    tree = _tree(tmp_path)
    build = ("build_ext", "--inplace", "-j2")
    first = _setup(tree, *build, BULKWIRE_WITHOUT="zstd,isal,snappy")
    assert first.returncode == 0, first.stderr[-3000:]
    assert "libzstd    left out (BULKWIRE_WITHOUT)" in first.stdout
    found = _linked(tree)
    assert not found["zstd"] and not found["isal"] and found["zlib"] and found["snappy"]
    second = _setup(tree, *build)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "libzstd    found" in second.stdout
    found = _linked(tree)
    assert found["zstd"] and found["isal"]
    third = _setup(tree, *build)
    assert third.returncode == 0 and " -c " not in third.stdout + third.stderr


def test_every_core_file_is_built_at_the_cores_top_and_in_its_folders(tmp_path):
    """setup.py builds the core library from csrc/core/'s files wherever they are, at its top
    or in a folder, found by glob (no list to keep), with every folder on the include path: a
    file added at the top that includes a header of a folder by bare name is built, and so is
    a file added to a folder."""
    tree = _tree(tmp_path)
    core = tree / "csrc" / "core"
    (core / "mem" / "bw_probe_folder.h").write_text("int bw_probe_folder(void);\n")
    (core / "mem" / "bw_probe_folder.c").write_text(
        '#include "bw_probe_folder.h"\nint bw_probe_folder(void) { return 1; }\n')
    (core / "bw_probe_top.c").write_text(
        '#include "bw_probe_folder.h"\n#include "out_buffer.h"\n'
        "int bw_probe_top(void) { return bw_probe_folder(); }\n")
    done = _setup(tree, "build_clib")
    assert done.returncode == 0, done.stderr[-3000:]
    (archive,) = tree.glob("build/*/libbulkwire_core.a")
    members = subprocess.run(["ar", "t", str(archive)], capture_output=True, text=True,
                             check=True).stdout.split()
    sources = sorted(p.stem for p in core.rglob("*.c"))
    assert sorted(pathlib.Path(m).stem for m in members) == sources
    assert "bw_probe_top" in sources and "bw_probe_folder" in sources


def test_setup_py_in_a_fresh_venv_says_what_to_install(tmp_path):
    """`python setup.py build_ext --inplace` in a fresh virtual environment (whose setuptools,
    if any, is older than 77, and which has no NumPy) stops with the command that makes it
    work, not setuptools' error about the license field."""
    import venv

    tree = _tree(tmp_path)
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    environ = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "PYTHONPATH")}
    done = subprocess.run([str(python), "setup.py", "build_ext", "--inplace"], cwd=tree,
                          capture_output=True, text=True, timeout=300, env=environ)
    assert done.returncode != 0
    assert "pip install --upgrade 'setuptools>=77' wheel numpy" in done.stderr, done.stderr
    assert "license" not in done.stderr.lower()


@pytest.fixture
def fresh_warnings(monkeypatch):
    """Each library's warning not yet given in this process."""
    from bulkwire import _fallbacks

    monkeypatch.setattr(_fallbacks, "_warned", set())


def test_gzip_without_isal_warns_once_naming_the_library(monkeypatch, fresh_warnings):
    from bulkwire import compression
    from bulkwire.config import BuildWarning

    monkeypatch.setattr(_core, "HAVE_ISAL", 0)  # as built without ISA-L
    monkeypatch.setitem(sys.modules, "isal", None)  # and without the isal package
    monkeypatch.setitem(sys.modules, "isal.isal_zlib", None)
    with pytest.warns(BuildWarning) as caught:
        assert compression.resolve_compress(True) == "zlib"
    (warning,) = caught
    text = str(warning.message)
    assert "built without ISA-L" in text and "apt-get install libisal-dev" in text
    assert warning.filename == __file__  # points at the caller's line
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert compression.resolve_compress(True) == "zlib"  # once per process


def test_https_without_openssl_warns_once_naming_the_library(monkeypatch, fresh_warnings):
    from bulkwire.config import BuildWarning
    from bulkwire.tls import TlsSettings

    monkeypatch.setattr(_core, "TLS_LIBRARY", None)  # as built without OpenSSL
    with pytest.warns(BuildWarning, match="built without OpenSSL.*apt-get install libssl-dev"):
        settings = TlsSettings()
    assert not settings.native and settings.ssl_context is not None
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        TlsSettings()


def test_zstd_without_any_backend_raises_at_once_naming_both(monkeypatch):
    from bulkwire import compression

    monkeypatch.setattr(_core, "HAVE_ZSTD", 0)
    monkeypatch.setitem(sys.modules, "zstandard", None)
    with pytest.raises(ValueError, match="built without libzstd.*libzstd-dev.*pip install zstandard"):
        compression.resolve_compress("zstd")
