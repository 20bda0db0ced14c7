"""Tests of what an optional C library of the build does skip on a build without it, with a
reason naming the library and its package; the skip count is pytest's summary. Tests of an
integration (Dask, Ray, Spark) skip naming the package when it is not installed
(:func:`import_integration`).

Under BULKWIRE_REQUIRE_EXTRAS=1 (CI's full build, which installs every library) a missing
library is not a skip: the build itself fails first (setup.py), and a test run against a
build that lacks it runs the tests and fails them, except for the libraries named in
BULKWIRE_WITHOUT (CI's build without them), which skip."""
from __future__ import annotations

import os

import pytest

from bulkwire import _core

#: each optional library: (is it in this build, its name, its Debian package)
LIBRARIES = {
    "isal": (lambda: bool(_core.HAVE_ISAL), "ISA-L", "libisal-dev"),
    "zstd": (lambda: bool(_core.HAVE_ZSTD and _core.PARQUET_CODECS[6][1]), "libzstd", "libzstd-dev"),
    "openssl": (lambda: _core.TLS_LIBRARY is not None, "OpenSSL", "libssl-dev"),
}


def built_with(name: str) -> bool:
    """Whether this build links the library ``name`` (``"isal"``, ``"zstd"``, ``"openssl"``)."""
    return LIBRARIES[name][0]()


def _left_out_on_purpose(name: str) -> bool:
    without = {n.strip() for n in os.environ.get("BULKWIRE_WITHOUT", "").split(",")}
    return os.environ.get("BULKWIRE_REQUIRE_EXTRAS") != "1" or name in without


def reason(name: str) -> str:
    """The skip reason for a test that needs the library ``name``."""
    _, title, package = LIBRARIES[name]
    return (f"bulkwire was built without {title} (apt-get install {package}, then reinstall "
            f"bulkwire)")


def needs(*names: str) -> pytest.MarkDecorator:
    """A mark: skip the test (or module, as ``pytestmark``) on a build without every one of
    ``names``."""
    missing = [n for n in names if not built_with(n) and _left_out_on_purpose(n)]
    return pytest.mark.skipif(bool(missing), reason="; ".join(reason(n) for n in missing))


#: the Python packages each integration imports (its extra, in test-all but not in the light
#: test extra), by the name of its entry point in the tests
INTEGRATION_PACKAGES = {"dask.to_target": ("pandas", "dask.dataframe", "distributed"),
                        "ray.TargetDatasink": ("ray.data",),
                        "spark.register": ("pyspark",),
                        # the data source's rooms that import PySpark with it
                        "_spark_results.TaskWritten": ("pyspark",),
                        "_spark_files.commit_files": ("pyspark",),
                        "_spark_tasks._write": ("pyspark",)}


def import_integration(entry: str) -> None:
    """Inside a test of the entry point ``entry``: skip it naming the first package of its
    integration that is missing (``pytest.importorskip``: a failure under
    BULKWIRE_REQUIRE_EXTRAS=1); nothing for an entry point of no integration."""
    for package in INTEGRATION_PACKAGES.get(entry, ()):
        pytest.importorskip(package)


def skip_without(name: str) -> None:
    """Inside a test: skip it here on a build without the library ``name``."""
    if not built_with(name) and _left_out_on_purpose(name):
        pytest.skip(reason(name))
