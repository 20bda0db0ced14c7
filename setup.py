"""Builds bulkwire._core from csrc/*.c against the CPython and NumPy C APIs and zlib.

Extra compiler flags come from BULKWIRE_CFLAGS (CI uses it for -Werror and for the
sanitizer build); BULKWIRE_LDFLAGS is appended to the link line.

ISA-L (bulk insert's faster gzip backend) is linked when Debian's libisal-dev is found:
the header <isa-l/igzip_lib.h> and a test program that links -lisal. BULKWIRE_ISAL=0
builds without it even when present; BULKWIRE_ISAL=1 fails the build when it is absent.
"""
import glob
import os
import shlex
import subprocess
import sys
import tempfile

import numpy
from setuptools import Extension, setup

extra_compile = ["-std=c11", "-O3", "-Wall", "-Wextra", "-fno-strict-aliasing"]
extra_compile += shlex.split(os.environ.get("BULKWIRE_CFLAGS", ""))
extra_link = shlex.split(os.environ.get("BULKWIRE_LDFLAGS", ""))


def _have_isal() -> bool:
    """True when a C program including <isa-l/igzip_lib.h> compiles and links with -lisal."""
    choice = os.environ.get("BULKWIRE_ISAL", "auto")
    if choice == "0":
        return False
    cc = os.environ.get("CC", "cc")
    program = ("#include <isa-l/igzip_lib.h>\n"
               "int main(void) { struct isal_zstream s; isal_deflate_init(&s); return 0; }\n")
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "probe.c")
        with open(source, "w") as f:
            f.write(program)
        try:
            found = subprocess.run([*shlex.split(cc), source, "-o", os.path.join(tmp, "probe"), "-lisal"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
        except OSError:
            found = False
    if choice == "1" and not found:
        sys.exit("BULKWIRE_ISAL=1 but <isa-l/igzip_lib.h>/-lisal were not found (apt-get install libisal-dev)")
    return found


libraries = ["z"]
macros = [("NPY_NO_DEPRECATED_API", "NPY_1_22_API_VERSION")]
if _have_isal():
    libraries.append("isal")
    macros.append(("BW_HAVE_ISAL", "1"))

core = Extension(
    "bulkwire._core",
    sources=sorted(glob.glob("csrc/*.c")),
    depends=sorted(glob.glob("csrc/*.h")),
    include_dirs=["csrc", numpy.get_include()],
    libraries=libraries,
    define_macros=macros,
    extra_compile_args=extra_compile,
    extra_link_args=extra_link,
)

setup(ext_modules=[core])
