"""Builds bulkwire._core from csrc/*.c against the CPython and NumPy C APIs and zlib.

Extra compiler flags come from BULKWIRE_CFLAGS (CI uses it for -Werror and for the
sanitizer build); BULKWIRE_LDFLAGS is appended to the link line.
"""
import glob
import os
import shlex

import numpy
from setuptools import Extension, setup

extra_compile = ["-std=c11", "-O3", "-Wall", "-Wextra", "-fno-strict-aliasing"]
extra_compile += shlex.split(os.environ.get("BULKWIRE_CFLAGS", ""))
extra_link = shlex.split(os.environ.get("BULKWIRE_LDFLAGS", ""))

core = Extension(
    "bulkwire._core",
    sources=sorted(glob.glob("csrc/*.c")),
    depends=sorted(glob.glob("csrc/*.h")),
    include_dirs=["csrc", numpy.get_include()],
    libraries=["z"],
    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_22_API_VERSION")],
    extra_compile_args=extra_compile,
    extra_link_args=extra_link,
)

setup(ext_modules=[core])
