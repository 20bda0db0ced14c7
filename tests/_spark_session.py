"""The local Spark the tests start (tests/test_spark.py, and the Spark tests of the
real-server suites): :func:`spark_session`. Imported once pyspark is known to be there."""
from __future__ import annotations

import os
import shutil
import sys

import pytest

import bulkwire
import bulkwire.spark

PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(bulkwire.__file__)))


def preloaded_python(folder) -> str:
    """This interpreter as Spark's Python workers must run it: under the sanitizer build (the
    ASan/UBSan runtimes in LD_PRELOAD, which the JVM must not have), a wrapper in ``folder``
    that puts them back; else the interpreter itself."""
    preload = os.environ.get("LD_PRELOAD")
    if not preload:
        return sys.executable
    python = os.path.join(folder, "python-preloaded")
    with open(python, "w") as script:
        script.write(f'#!/bin/sh\nLD_PRELOAD="{preload}" exec "{sys.executable}" "$@"\n')
    os.chmod(python, 0o755)
    return python


def spark_session(folder, master: str = "local[2]", conf: dict | None = None):
    """A ``master`` (local[2]) SparkSession, with the settings ``conf`` besides, whose
    Python workers run this interpreter on the bulkwire under test (and this folder's
    modules: the tests' mapInArrow functions), reachable on loopback alone, with the
    bulkwire data source registered.

    Under the sanitizer build (the ASan/UBSan runtimes in LD_PRELOAD) the JVM starts
    without them (Java's own signal handling does not run under ASan), and the Python
    workers it starts get them back through a wrapper of this interpreter: the write
    tasks run the instrumented build."""
    if shutil.which("java") is None and os.environ.get("BULKWIRE_REQUIRE_EXTRAS") != "1":
        pytest.skip("Spark needs a Java runtime (apt-get install openjdk-17-jre-headless)")
    from pyspark.sql import SparkSession

    python = preloaded_python(folder)
    here = os.path.dirname(os.path.abspath(__file__))
    search = [PACKAGE_PARENT, here, *(os.path.abspath(p) for p in
                                      os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
    saved = {name: os.environ.get(name) for name in ("LD_PRELOAD", "PYTHONPATH",
                                                     "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    os.environ.pop("LD_PRELOAD", None)
    os.environ.update(PYTHONPATH=os.pathsep.join(dict.fromkeys(search)), PYSPARK_PYTHON=python,
                      PYSPARK_DRIVER_PYTHON=sys.executable)
    try:
        builder = SparkSession.builder
        for key, value in (conf or {}).items():
            builder = builder.config(key, value)
        session = (builder.master(master).appName("bulkwire-tests")
                   .config("spark.driver.host", "127.0.0.1")
                   .config("spark.driver.bindAddress", "127.0.0.1")
                   .config("spark.ui.enabled", "false")
                   .config("spark.sql.shuffle.partitions", "2")
                   .getOrCreate())
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    session.sparkContext.setLogLevel("ERROR")
    bulkwire.spark.register(session)
    return session
