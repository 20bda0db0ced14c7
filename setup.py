"""Builds bulkwire._core from two layers of C, zlib and the optional libraries it finds.

csrc/core/ knows no Python: its files, at its top and in its folders (one per concern), are
compiled on its own into a static library with only csrc/core/ and its folders on the include
path (no Python or NumPy headers), so a stray #include <Python.h> there breaks the build.
csrc/py/ is the binding (the CPython and NumPy C APIs), one folder per room; it sees its
folders and csrc/core/'s and is linked with the core library into the extension module.
Headers are included by bare name in both layers: every folder is on the include path.

Compiler and linker flags: CFLAGS and LDFLAGS (as every setuptools build), and
BULKWIRE_CFLAGS / BULKWIRE_LDFLAGS after them (CI uses them for -Werror and the sanitizers).
The library probes use the same flags, so a library found under CFLAGS=-I... LDFLAGS=-L...
is probed where it is built.

The optional libraries (the LIBRARIES table below): ISA-L (faster gzip), libzstd (zstd
bodies and Parquet pages) and OpenSSL (the C sender's TLS). Snappy needs none: bulkwire
decodes it itself (csrc/core/compress/snappy.c). Each is found with pkg-config where
pkg-config knows it, else with the compiler's default paths, and proved by a program that
includes its header and links. The build log says, one line each, what was found and its
version.
  BULKWIRE_WITHOUT=isal,zstd,openssl  builds without the named ones (any subset)
  BULKWIRE_REQUIRE_EXTRAS=1                  fails the build when one is missing
  BULKWIRE_<NAME>=0 / =1                     the same for one library (e.g. BULKWIRE_ZSTD=0)

What was found is written to a generated header (CONFIG_HEADER) that every object depends
on, rewritten only when it changes: installing or removing a library, or changing the
flags, rebuilds everything in the same checkout, with no `rm -rf build`. The extension
reports it at run time: `bulkwire --version`, `bulkwire.show_config()`.
"""
import glob
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from typing import NamedTuple, Optional


def _check_build_requirements() -> None:
    """pyproject.toml's build requirements, checked before they are used: a direct
    `python setup.py ...` does not install them, and an older setuptools fails on the
    license field with an error that does not say so."""
    try:
        import setuptools
        version = tuple(int(part) for part in setuptools.__version__.split(".")[:1])
    except (ImportError, ValueError):
        version = (0,)
    try:
        import numpy  # noqa: F401
        have_numpy = True
    except ImportError:
        have_numpy = False
    if version < (77,) or not have_numpy:
        sys.exit("bulkwire's build needs setuptools 77 or later and NumPy (found "
                 f"setuptools {'.'.join(map(str, version)) if version != (0,) else 'none'}, "
                 f"NumPy {'yes' if have_numpy else 'none'}): run "
                 "pip install --upgrade 'setuptools>=77' wheel numpy, then this command again "
                 "(pip install . installs them by itself)")


_check_build_requirements()

import numpy  # noqa: E402
from setuptools import Extension, setup  # noqa: E402
from setuptools.command.build_ext import build_ext  # noqa: E402

CORE_DIR = os.path.join("csrc", "core")
PY_DIR = os.path.join("csrc", "py")


def _folders(top: str) -> list:
    """The folders of top (one level), sorted."""
    return sorted(os.path.join(top, d) for d in os.listdir(top)
                  if os.path.isdir(os.path.join(top, d)))


# the core's concerns and the binding's rooms, one folder each (docs/architecture.md);
# headers are included by bare name, so every folder is on the include path: the core's
# top (a file there is built too) and its folders, the binding's folders
CORE_FOLDERS = [CORE_DIR, *_folders(CORE_DIR)]
PY_FOLDERS = _folders(PY_DIR)


def _files(folders: list, extension: str) -> list:
    """The files of the folders (not of their subfolders) ending in extension, sorted."""
    return sorted(path for folder in folders
                  for path in glob.glob(os.path.join(folder, "*" + extension)))


CORE_LIBRARY = "bulkwire_core"
CONFIG_DIR = os.path.join("build", "bulkwire_config")
CONFIG_HEADER = os.path.join(CONFIG_DIR, "bw_build_config.h")

extra_compile = ["-std=c11", "-O3", "-Wall", "-Wextra", "-fno-strict-aliasing"]
extra_compile += shlex.split(os.environ.get("BULKWIRE_CFLAGS", ""))
extra_link = shlex.split(os.environ.get("BULKWIRE_LDFLAGS", ""))


class Library(NamedTuple):
    """An optional library: how to find it, prove it, and name it to the user."""
    title: str          # its name for people
    macro: str          # defined (to 1) for the C that uses it
    pkg_config: str     # its pkg-config module
    libs: list          # linker flags where pkg-config does not know it
    program: str        # includes its header, links, prints its version ("" if unknown)
    package: str        # Debian's -dev package
    binding: bool       # the binding layer uses the macro too


_PRINTF = "#include <stdio.h>\n"
LIBRARIES = {
    "isal": Library(
        "ISA-L", "BW_HAVE_ISAL", "libisal", ["-lisal"],
        _PRINTF + "#include <isa-l/igzip_lib.h>\n"
        "#if defined(__has_include)\n#if __has_include(<isa-l.h>)\n#include <isa-l.h>\n#endif\n#endif\n"
        "int main(void) { struct isal_zstream s; isal_deflate_init(&s);\n"
        "#ifdef ISAL_MAJOR_VERSION\n"
        "  printf(\"%d.%d.%d\", ISAL_MAJOR_VERSION, ISAL_MINOR_VERSION, ISAL_PATCH_VERSION);\n"
        "#endif\n  return 0; }\n",
        "libisal-dev", False),
    # the streaming API of libzstd 1.4 or later: ZSTD_compressStream2
    "zstd": Library(
        "libzstd", "BW_HAVE_ZSTD", "libzstd", ["-lzstd"],
        _PRINTF + "#include <zstd.h>\n"
        "int main(void) { ZSTD_CCtx *c = ZSTD_createCCtx(); ZSTD_inBuffer i = {0, 0, 0};\n"
        "  ZSTD_outBuffer o = {0, 0, 0}; ZSTD_compressStream2(c, &o, &i, ZSTD_e_flush);\n"
        "  ZSTD_freeCCtx(c); printf(\"%s\", ZSTD_versionString()); return 0; }\n",
        "libzstd-dev", False),
    # OpenSSL 1.1.1 or later
    "openssl": Library(
        "OpenSSL", "BW_HAVE_OPENSSL", "openssl", ["-lssl", "-lcrypto"],
        _PRINTF + "#include <openssl/ssl.h>\n"
        "#if OPENSSL_VERSION_NUMBER < 0x10101000L\n#error too old\n#endif\n"
        "int main(void) { SSL_CTX_free(SSL_CTX_new(TLS_client_method()));\n"
        "  printf(\"%s\", OPENSSL_VERSION_TEXT); return 0; }\n",
        "libssl-dev", True),
}
#: What bulkwire does itself, with no library to find: snappy (its own decoder reads snappy
#: Parquet pages; it runs no more instructions than libsnappy's on pyarrow's pages, see
#: benchmarks/callgrind_snappy.py). Listed so that --version says so; BULKWIRE_WITHOUT may
#: name it (there is nothing to leave out).
BUILT_IN = {"snappy": "bulkwire's own decoder"}
ZLIB = Library("zlib", "", "zlib", ["-lz"],
               _PRINTF + "#include <zlib.h>\nint main(void) { printf(\"%s\", zlibVersion()); return 0; }\n",
               "zlib1g-dev", False)


class Found(NamedTuple):
    """What the probe of one library found."""
    found: bool
    version: str        # "" when unknown or not found
    how: str            # "pkg-config", "compiler defaults", or why it is not used
    flags: list         # compiler and linker flags it needs


def _env_flags(*names: str) -> list:
    return [flag for name in names for flag in shlex.split(os.environ.get(name, ""))]


def _pkg_config(module: str, *args: str) -> Optional[str]:
    """pkg-config's answer for module, or None where there is no pkg-config or it does not
    know the module."""
    if shutil.which(os.environ.get("PKG_CONFIG", "pkg-config")) is None:
        return None
    try:
        result = subprocess.run([os.environ.get("PKG_CONFIG", "pkg-config"), *args, module],
                                capture_output=True, text=True)
    except OSError:
        return None
    return result.stdout.strip() if result.returncode == 0 else None


def _try_program(program: str, flags: list) -> Optional[str]:
    """What the C program prints when it compiles and links with flags (and the build's
    CFLAGS, LDFLAGS, BULKWIRE_CFLAGS and BULKWIRE_LDFLAGS), "" when it builds but cannot run
    here; None when it does not build."""
    cc = shlex.split(os.environ.get("CC", "cc"))
    with tempfile.TemporaryDirectory() as tmp:
        source, exe = os.path.join(tmp, "probe.c"), os.path.join(tmp, "probe")
        with open(source, "w") as f:
            f.write(program)
        command = [*cc, *_env_flags("CFLAGS", "BULKWIRE_CFLAGS"), source, "-o", exe,
                   *flags, *_env_flags("LDFLAGS", "BULKWIRE_LDFLAGS")]
        try:
            if subprocess.run(command, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode != 0:
                return None
            ran = subprocess.run([exe], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return ""
        return ran.stdout.strip() if ran.returncode == 0 else ""


def probe(library: Library) -> Found:
    """Finds library: with pkg-config's flags where it knows it, else with the compiler's
    default paths; found only when its program builds."""
    pc_flags = _pkg_config(library.pkg_config, "--cflags", "--libs")
    if pc_flags is not None:
        flags = shlex.split(pc_flags)
        printed = _try_program(library.program, flags)
        if printed is not None:
            version = _pkg_config(library.pkg_config, "--modversion") or printed
            return Found(True, version, "pkg-config", flags)
    printed = _try_program(library.program, library.libs)
    if printed is not None:
        return Found(True, printed, "compiler defaults", library.libs)
    return Found(False, "", f"not found (apt-get install {library.package})", [])


def _choices() -> tuple:
    """(the libraries to build without, the libraries whose absence fails the build)."""
    without = {name.strip().lower() for name in os.environ.get("BULKWIRE_WITHOUT", "").split(",")
               if name.strip()}
    unknown = without - set(LIBRARIES) - set(BUILT_IN)
    if unknown:
        sys.exit(f"BULKWIRE_WITHOUT names {', '.join(sorted(unknown))}: the optional libraries "
                 f"are {', '.join([*LIBRARIES, *BUILT_IN])}")
    without -= set(BUILT_IN)
    required = set(LIBRARIES) - without if os.environ.get("BULKWIRE_REQUIRE_EXTRAS") == "1" else set()
    for name in LIBRARIES:
        choice = os.environ.get(f"BULKWIRE_{name.upper()}", "auto")
        if choice == "0":
            without.add(name)
            required.discard(name)
        elif choice == "1":
            required.add(name)
    return without, required


def probe_all() -> dict:
    """The probe of every optional library (and zlib), each said on one line of the log;
    exits when a required one is missing."""
    without, required = _choices()
    found = {"zlib": probe(ZLIB)}
    if not found["zlib"].found:
        sys.exit(f"zlib's headers were not found: {found['zlib'].how}")
    for name, library in LIBRARIES.items():
        if name in without:
            found[name] = Found(False, "", "left out (BULKWIRE_WITHOUT)", [])
        else:
            found[name] = probe(library)
    for name, how in BUILT_IN.items():
        print(f"bulkwire build: {name:10} built in ({how}; no library needed)", flush=True)
    for name, result in found.items():
        title = LIBRARIES[name].title if name in LIBRARIES else ZLIB.title
        state = f"found {result.version or '(version unknown)'} ({result.how})" if result.found \
            else result.how
        print(f"bulkwire build: {title:10} {state}", flush=True)
    missing = [name for name in required if not found[name].found]
    if missing:
        sys.exit("bulkwire build: required but not found: " + ", ".join(
            f"{LIBRARIES[n].title} (apt-get install {LIBRARIES[n].package})" for n in sorted(missing)))
    return found


def _c_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_config_header(found: dict, flags: list) -> None:
    """Writes CONFIG_HEADER (what this build found, and the flags it compiles with), only
    when its text changes: every object depends on it, so a change rebuilds them all."""
    lines = ["/* Generated by setup.py: what this build of bulkwire found. Do not edit. */",
             "#ifndef BW_BUILD_CONFIG_H", "#define BW_BUILD_CONFIG_H",
             f"#define BW_BUILD_FLAGS {_c_string(shlex.join(flags))}",
             "/* BW_BUILD_LIBRARY(name, title, found, version, how, package) */",
             "#define BW_BUILD_LIBRARIES \\"]
    for name, result in found.items():
        package = LIBRARIES[name].package if name in LIBRARIES else ZLIB.package
        title = LIBRARIES[name].title if name in LIBRARIES else ZLIB.title
        lines.append(f"    BW_BUILD_LIBRARY({_c_string(name)}, {_c_string(title)}, "
                     f"{int(result.found)}, {_c_string(result.version)}, "
                     f"{_c_string(result.how)}, {_c_string(package)}) \\")
    for name, how in BUILT_IN.items():
        lines.append(f"    BW_BUILD_LIBRARY({_c_string(name)}, {_c_string(name)}, 1, \"\", "
                     f"{_c_string('built in: ' + how)}, \"\") \\")
    lines += ["", "#endif", ""]
    text = "\n".join(lines)
    try:
        with open(CONFIG_HEADER) as f:
            if f.read() == text:
                return
    except OSError:
        pass
    os.makedirs(CONFIG_DIR, exist_ok=True)
    with open(CONFIG_HEADER, "w") as f:
        f.write(text)


def _split_flags(flags: list) -> tuple:
    """(include dirs, library dirs, libraries, other compile flags, other link flags)."""
    include_dirs, library_dirs, libraries, compile_flags, link_flags = [], [], [], [], []
    for flag in flags:
        if flag.startswith("-I"):
            include_dirs.append(flag[2:])
        elif flag.startswith("-L"):
            library_dirs.append(flag[2:])
        elif flag.startswith("-l"):
            libraries.append(flag[2:])
        elif flag.startswith(("-D", "-f", "-pthread", "-m")):
            compile_flags.append(flag)
        else:
            link_flags.append(flag)
    return include_dirs, library_dirs, libraries, compile_flags, link_flags


found = probe_all()
write_config_header(found, [*_env_flags("CFLAGS", "LDFLAGS"), *extra_compile, *extra_link])

# The core library comes first on the link line, so that the system libraries it needs are
# still wanted when the linker reaches them (linkers that drop unneeded libraries).
libraries = [CORE_LIBRARY]
include_dirs, library_dirs = [], []
core_macros = []
binding_macros = [("NPY_NO_DEPRECATED_API", "NPY_1_22_API_VERSION")]
for name in [*LIBRARIES, "zlib"]:
    if not found[name].found:
        continue
    incs, libdirs, libs, cflags, lflags = _split_flags(found[name].flags)
    include_dirs += [d for d in incs if d not in include_dirs]
    library_dirs += [d for d in libdirs if d not in library_dirs]
    libraries += [lib for lib in libs if lib not in libraries]
    extra_compile += [f for f in cflags if f not in extra_compile]
    extra_link += [f for f in lflags if f not in extra_link]
    if name in LIBRARIES:
        core_macros.append((LIBRARIES[name].macro, "1"))
        if LIBRARIES[name].binding:
            binding_macros.append((LIBRARIES[name].macro, "1"))

core_headers = _files(CORE_FOLDERS, ".h") + [CONFIG_HEADER]
core_library = (CORE_LIBRARY, {
    "sources": _files(CORE_FOLDERS, ".c"),
    "include_dirs": [*CORE_FOLDERS, *include_dirs],  # the seal: no Python, no NumPy
    "macros": core_macros,
    "cflags": extra_compile,
    "obj_deps": {"": core_headers},  # a changed header, or a changed probe, rebuilds every core object
})


class BuildExtWithCore(build_ext):
    """build_ext that first builds the core library and relinks when it changed.

    Plain build_ext links against libraries a build_clib run made but never runs it, so
    `setup.py build_ext --inplace` alone would find no core library, or a stale one.
    """

    def run(self) -> None:
        self.run_command("build_clib")
        super().run()

    def build_extension(self, ext: Extension) -> None:
        clib = self.get_finalized_command("build_clib")
        archive = os.path.join(clib.build_clib, self.compiler.library_filename(CORE_LIBRARY))
        ext.depends = [*ext.depends, archive]
        super().build_extension(ext)


core = Extension(
    "bulkwire._core",
    sources=sorted(glob.glob(os.path.join(PY_DIR, "*", "*.c"))),
    depends=sorted(glob.glob(os.path.join(PY_DIR, "*", "*.h"))) + core_headers,
    include_dirs=[*PY_FOLDERS, *CORE_FOLDERS, CONFIG_DIR, numpy.get_include(), *include_dirs],
    library_dirs=library_dirs,
    libraries=libraries,
    define_macros=binding_macros,
    extra_compile_args=extra_compile,
    extra_link_args=extra_link,
)

setup(ext_modules=[core], libraries=[core_library], cmdclass={"build_ext": BuildExtWithCore})
