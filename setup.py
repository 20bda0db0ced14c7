"""Builds bulkwire._core from two layers of C, zlib and (when found) ISA-L.

csrc/core/ knows no Python: it is compiled on its own into a static library with only
csrc/core/ on the include path (no Python or NumPy headers), so a stray #include <Python.h>
there breaks the build. csrc/py/ is the binding (the CPython and NumPy C APIs), one folder per
room; it sees its folders and csrc/core/ and is linked with the core library into the
extension module.

Extra compiler flags come from BULKWIRE_CFLAGS and apply to both layers (CI uses it for
-Werror and for the sanitizer build); BULKWIRE_LDFLAGS is appended to the link line.

ISA-L (bulk insert's faster gzip backend) is linked when Debian's libisal-dev is found:
the header <isa-l/igzip_lib.h> and a test program that links -lisal. BULKWIRE_ISAL=0
builds without it even when present; BULKWIRE_ISAL=1 fails the build when it is absent.
OpenSSL's libssl (bulk insert's TLS, Debian's libssl-dev) is linked the same way, under
BULKWIRE_OPENSSL; without it, TLS goes through Python's ssl module and a slower sender.
libzstd (the zstd body) is linked the same way when Debian's libzstd-dev is found
(<zstd.h>, -lzstd), with BULKWIRE_ZSTD=0/1; without it the zstandard package compresses.
libsnappy (Debian's libsnappy-dev: <snappy-c.h>, -lsnappy) decompresses snappy Parquet pages
for random access, under BULKWIRE_SNAPPY=0/1; without it those pages are read through pyarrow.
"""
import glob
import os
import shlex
import subprocess
import sys
import tempfile

import numpy
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

CORE_DIR = os.path.join("csrc", "core")
PY_DIR = os.path.join("csrc", "py")
# the binding's rooms, one folder each (docs/architecture.md); headers are included by bare
# name, so every folder is on the binding's include path
PY_FOLDERS = sorted(os.path.join(PY_DIR, d) for d in os.listdir(PY_DIR)
                    if os.path.isdir(os.path.join(PY_DIR, d)))
CORE_LIBRARY = "bulkwire_core"

extra_compile = ["-std=c11", "-O3", "-Wall", "-Wextra", "-fno-strict-aliasing"]
extra_compile += shlex.split(os.environ.get("BULKWIRE_CFLAGS", ""))
extra_link = shlex.split(os.environ.get("BULKWIRE_LDFLAGS", ""))


def _links(program: str, libs: list) -> bool:
    """True when the C program compiles and links with libs."""
    cc = os.environ.get("CC", "cc")
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "probe.c")
        with open(source, "w") as f:
            f.write(program)
        try:
            return subprocess.run([*shlex.split(cc), source, "-o", os.path.join(tmp, "probe"), *libs],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
        except OSError:
            return False


def _have_isal() -> bool:
    """True when a C program including <isa-l/igzip_lib.h> compiles and links with -lisal."""
    choice = os.environ.get("BULKWIRE_ISAL", "auto")
    if choice == "0":
        return False
    found = _links("#include <isa-l/igzip_lib.h>\n"
                   "int main(void) { struct isal_zstream s; isal_deflate_init(&s); return 0; }\n",
                   ["-lisal"])
    if choice == "1" and not found:
        sys.exit("BULKWIRE_ISAL=1 but <isa-l/igzip_lib.h>/-lisal were not found (apt-get install libisal-dev)")
    return found


def _have_openssl() -> bool:
    """True when a C program including <openssl/ssl.h> (OpenSSL 1.1.1 or later) compiles and
    links with -lssl -lcrypto."""
    choice = os.environ.get("BULKWIRE_OPENSSL", "auto")
    if choice == "0":
        return False
    found = _links("#include <openssl/ssl.h>\n"
                   "#if OPENSSL_VERSION_NUMBER < 0x10101000L\n#error too old\n#endif\n"
                   "int main(void) { SSL_CTX_free(SSL_CTX_new(TLS_client_method())); return 0; }\n",
                   ["-lssl", "-lcrypto"])
    if choice == "1" and not found:
        sys.exit("BULKWIRE_OPENSSL=1 but <openssl/ssl.h>/-lssl were not found (apt-get install libssl-dev)")
    return found


def _have_zstd() -> bool:
    """True when a C program including <zstd.h> compiles and links with -lzstd (the streaming
    API of libzstd 1.4 or later: ZSTD_compressStream2)."""
    choice = os.environ.get("BULKWIRE_ZSTD", "auto")
    if choice == "0":
        return False
    found = _links("#include <zstd.h>\n"
                   "int main(void) { ZSTD_CCtx *c = ZSTD_createCCtx(); ZSTD_inBuffer i = {0, 0, 0};\n"
                   "  ZSTD_outBuffer o = {0, 0, 0}; ZSTD_compressStream2(c, &o, &i, ZSTD_e_flush);\n"
                   "  ZSTD_freeCCtx(c); return 0; }\n", ["-lzstd"])
    if choice == "1" and not found:
        sys.exit("BULKWIRE_ZSTD=1 but <zstd.h>/-lzstd were not found (apt-get install libzstd-dev)")
    return found


def _have_snappy() -> bool:
    """True when a C program including <snappy-c.h> compiles and links with -lsnappy (Parquet
    pages compressed with snappy are then read page by page; without it they are read a row
    group at a time through pyarrow)."""
    choice = os.environ.get("BULKWIRE_SNAPPY", "auto")
    if choice == "0":
        return False
    found = _links("#include <stddef.h>\n#include <snappy-c.h>\n"
                   "int main(void) { size_t n = 0; return snappy_uncompressed_length(\"\", 0, &n)"
                   " == SNAPPY_OK; }\n", ["-lsnappy"])
    if choice == "1" and not found:
        sys.exit("BULKWIRE_SNAPPY=1 but <snappy-c.h>/-lsnappy were not found (apt-get install libsnappy-dev)")
    return found


# The core library comes first on the link line, so that the system libraries it needs are
# still wanted when the linker reaches them (linkers that drop unneeded libraries).
libraries = [CORE_LIBRARY, "z"]
core_macros = []
if _have_isal():
    libraries.append("isal")
    core_macros.append(("BW_HAVE_ISAL", "1"))
# bulkwire's own TLS client (the body pump sends through it); the binding needs to know too
binding_macros = [("NPY_NO_DEPRECATED_API", "NPY_1_22_API_VERSION")]
if _have_openssl():
    libraries += ["ssl", "crypto"]
    core_macros.append(("BW_HAVE_OPENSSL", "1"))
    binding_macros.append(("BW_HAVE_OPENSSL", "1"))
if _have_zstd():
    libraries.append("zstd")
    core_macros.append(("BW_HAVE_ZSTD", "1"))
if _have_snappy():
    libraries.append("snappy")
    core_macros.append(("BW_HAVE_SNAPPY", "1"))

core_headers = sorted(glob.glob(os.path.join(CORE_DIR, "*.h")))
core_library = (CORE_LIBRARY, {
    "sources": sorted(glob.glob(os.path.join(CORE_DIR, "*.c"))),
    "include_dirs": [CORE_DIR],  # the seal: no Python, no NumPy
    "macros": core_macros,
    "cflags": extra_compile,
    "obj_deps": {"": core_headers},  # a changed header rebuilds every core object
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
    include_dirs=[*PY_FOLDERS, CORE_DIR, numpy.get_include()],
    libraries=libraries,
    define_macros=binding_macros,
    extra_compile_args=extra_compile,
    extra_link_args=extra_link,
)

setup(ext_modules=[core], libraries=[core_library], cmdclass={"build_ext": BuildExtWithCore})
