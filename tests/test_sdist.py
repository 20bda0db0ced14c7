"""The package builds: ``python -m build`` makes an sdist and a wheel (with the LICENSE in
its metadata), and the sdist is complete: installed into a fresh virtual environment (which compiles the C core from the sdist alone) and imported there. A source
file missing from the sdist fails the build or the import."""
from __future__ import annotations

import pathlib
import subprocess
import sys
import tarfile
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.packaging


def run(*args: str, cwd: pathlib.Path | None = None) -> str:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{args} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def test_the_sdist_installs_into_a_fresh_venv_and_imports(tmp_path):
    if not (ROOT / ".git").exists():
        pytest.fail("needs the source checkout (an sdist is built from it)")
    dist = tmp_path / "dist"
    # a copy of the tracked tree: a build in the checkout itself would leave files behind
    tree = tmp_path / "tree"
    tree.mkdir()
    archive = run("git", "-C", str(ROOT), "ls-files", "-z")
    files = [name for name in archive.split("\0") if name and (ROOT / name).exists()]
    for name in files:
        target = tree / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((ROOT / name).read_bytes())
    run(sys.executable, "-m", "build", "--outdir", str(dist), str(tree))  # sdist, then a wheel from it
    (sdist,) = dist.glob("bulkwire-*.tar.gz")
    (wheel,) = dist.glob("bulkwire-*.whl")
    with zipfile.ZipFile(wheel) as whl:
        wheel_names = whl.namelist()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in wheel_names), wheel_names
    assert "bulkwire/py.typed" in wheel_names and any(n.startswith("bulkwire/_core.") for n in wheel_names)
    with tarfile.open(sdist) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    for required in ("LICENSE", "CHANGELOG.md", "README.md", "setup.py", "pyproject.toml",
                     "pkg/bulkwire/py.typed", "pkg/bulkwire/_core.pyi"):
        assert required in names, required
    for source in (ROOT / "csrc").rglob("*.[ch]"):
        assert str(source.relative_to(ROOT)) in names, source

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", str(venv))
    python = str(venv / "bin" / "python")
    run(python, "-m", "pip", "install", "-q", str(sdist))
    out = run(python, "-c", "import bulkwire, numpy; print(bulkwire.__version__); "
                            "print(bulkwire.dumps({'v': numpy.ones(2, 'f4')}).decode())",
              cwd=tmp_path)
    version, text = out.splitlines()
    assert text == '{"v": [1.0, 1.0]}'
    meta = run(python, "-c", "import importlib.metadata as m; d = m.distribution('bulkwire'); "
                             "print(d.metadata['License-Expression']); "
                             "print(any(str(f).endswith('LICENSE') for f in d.files))",
               cwd=tmp_path).split()
    assert meta == ["MIT", "True"]
