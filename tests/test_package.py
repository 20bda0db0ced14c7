"""The package as a user meets it: optional dependencies that are missing say what to install,
the public namespace holds only the public API, every module's docstring examples run, the
type stub of the extension module matches it, and the sdist holds every file a build needs."""
from __future__ import annotations

import doctest
import importlib
import pathlib
import os
import pkgutil
import subprocess
import sys
import warnings

import pytest

import bulkwire
from build_extras import INTEGRATION_PACKAGES, import_integration, needs

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("module,call,package,extra", [
    ("pyarrow", lambda: bulkwire.take("x.parquet", [0]), "pyarrow", "parquet"),
    ("cassandra", lambda: __import__("bulkwire.cql").cql.install(), "scylla-driver", "cql"),
    ("ravendb", lambda: __import__("bulkwire.ravendb").ravendb.install(), "ravendb", "ravendb"),
    ("ravendb", lambda: __import__("bulkwire.ravendb").ravendb.uninstall(), "ravendb", "ravendb"),
])
def test_a_missing_optional_dependency_names_what_to_install(monkeypatch, module, call,
                                                               package, extra):
    monkeypatch.setitem(sys.modules, module, None)  # import raises ImportError
    for name in [m for m in sys.modules if m.startswith(module + ".")]:
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ImportError) as raised:
        call()
    message = str(raised.value)
    assert f"pip install {package}" in message
    assert f"pip install '.[{extra}]'" in message            # works from a checkout
    assert f"pip install 'bulkwire[{extra}]'" in message     # from an index


def test_the_namespace_holds_only_public_names():
    assert "annotations" not in dir(bulkwire)
    assert all(not name.startswith("_") or name.startswith("__") for name in bulkwire.__all__)
    missing = [name for name in bulkwire.__all__ if not hasattr(bulkwire, name)]
    assert missing == []


def test_the_version_is_the_distributions():
    import importlib.metadata
    import re

    pyproject = (ROOT / "pyproject.toml").read_text()
    # written once: the distribution's version is read from bulkwire._version, which the
    # package imports
    assert re.search(r'^version = "', pyproject, re.M) is None
    assert re.search(r'^dynamic = \["version"\]$', pyproject, re.M)
    assert re.search(r'^version = \{ attr = "bulkwire._version.__version__" \}$', pyproject,
                     re.M)
    written = re.findall(r'^__version__ = "([^"]+)"$', (ROOT / "pkg" / "bulkwire" / "_version.py")
                         .read_text(), re.M)
    assert "__version__ = " not in (ROOT / "pkg" / "bulkwire" / "__init__.py").read_text()
    assert written == [bulkwire.__version__]
    assert importlib.metadata.version("bulkwire") == bulkwire.__version__


def package_modules() -> list[str]:
    """Every module of the package, found from its files (a module added later is included
    without a change here): the package itself, its Python modules, those of its
    subpackages (``bulkwire.load``), and the extension."""
    names = [found.name for found in pkgutil.walk_packages(bulkwire.__path__, "bulkwire.")]
    folder = ROOT / "pkg" / "bulkwire"
    files = {".".join(("bulkwire", *path.relative_to(folder).with_suffix("").parts))
             for path in folder.rglob("*.py")}
    files = {name.removesuffix(".__init__") for name in files} - {"bulkwire"}
    assert files <= set(names)
    assert "bulkwire._core" in names
    return ["bulkwire", *sorted(names)]


#: modules kept only to warn that they moved
DEPRECATED_MODULES = {"bulkwire.testing_pki"}
#: objects kept only for their former spelling: the examples they hold use it, and warn
DEPRECATED_OBJECTS = {"bulkwire.ray.BulkInsertDatasink"}


@pytest.mark.parametrize("name", package_modules())
def test_the_docstring_examples_of_every_module_run(name):
    """Each module is imported (an import that fails fails here, naming the module) and
    every example its docstrings hold runs as doctest runs it. Examples that need a server
    or a cluster are marked ``+SKIP`` where they stand; a module without examples passes.
    The module of an engine's integration (``bulkwire.ray``) skips naming the engine's package
    when it is not installed (the light ``test`` extra)."""
    for entry in INTEGRATION_PACKAGES:
        if name == "bulkwire." + entry.split(".")[0]:
            import_integration(entry)
    with warnings.catch_warnings():
        if name in DEPRECATED_MODULES:  # its import warns (tests/test_loopback_server.py)
            warnings.simplefilter("ignore", DeprecationWarning)
        module = importlib.import_module(name)
    tests = doctest.DocTestFinder().find(module, name)
    report: list[str] = []
    runner = doctest.DocTestRunner(verbose=False)
    for test in tests:
        if test.name not in DEPRECATED_OBJECTS:
            runner.run(test, out=report.append)
            continue
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            runner.run(test, out=report.append)
        if any(not example.options.get(doctest.SKIP) for example in test.examples):
            assert any(issubclass(w.category, DeprecationWarning)
                       and " is deprecated: use " in str(w.message) for w in caught), test.name
    assert runner.failures == 0, "".join(report)
    source = getattr(module, "__file__", "") or ""
    if source.endswith(".py") and ">>> " in pathlib.Path(source).read_text():
        # examples written in the module are found: none is lost to the finder
        assert any(test.examples for test in tests), f"{name} holds examples doctest did not find"


#: mypy's configuration for stubtest: the stub is the subject. The package's Python modules
#: are analysed only as the stub's package; their own type errors are not checked here.
STUBTEST_CONFIG = """\
[mypy]
ignore_missing_imports = True
[mypy-bulkwire.*]
ignore_errors = True
[mypy-bulkwire._core]
ignore_errors = False
"""


@needs("isal", "zstd", "openssl")  # the stub describes the full build (TlsContext, ZstdStream)
def test_the_type_stub_matches_the_extension_module(tmp_path):
    """pkg/bulkwire/_core.pyi against the built module, by ``python -m mypy.stubtest``: every
    export of the module is in the stub and nothing else is, each of the same kind (class,
    function, constant), classes that cannot be subclassed are final, and parameters agree
    wherever the module states them."""
    pytest.importorskip("mypy.stubtest")
    (tmp_path / "mypy.ini").write_text(STUBTEST_CONFIG)
    env = dict(os.environ, MYPY_CACHE_DIR=str(tmp_path / "cache"))
    package_root = pathlib.Path(bulkwire.__file__).resolve().parent.parent
    if package_root == ROOT / "pkg":  # the checkout (PYTHONPATH=pkg), not an installed copy
        env["MYPYPATH"] = str(package_root)
        # the child runs elsewhere: a relative PYTHONPATH would find another copy, or none
        env["PYTHONPATH"] = os.pathsep.join(
            [str(package_root)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    result = subprocess.run([sys.executable, "-m", "mypy.stubtest", "bulkwire._core",
                             "--mypy-config-file", str(tmp_path / "mypy.ini")],
                            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_test_hooks_live_outside_the_extension_modules_api():
    """The extension's only private name is ``_testing``, the module object of the test hooks
    (float text in bulk, vints, the Arrow view, memory accounting): none of them is a name
    of ``bulkwire._core`` itself, nor of its stub."""
    import types

    from bulkwire import _core
    from bulkwire._core import _testing

    private = sorted(name for name in vars(_core) if name.startswith("_")
                     and not (name.startswith("__") and name.endswith("__")))
    assert private == ["_testing"]
    assert isinstance(_testing, types.ModuleType) and _testing.__name__ == "bulkwire._core._testing"
    hooks = {name for name in vars(_testing) if not name.startswith("__")}
    assert hooks == {"format_doubles", "format_floats32", "vint_pack", "vint_unpack",
                     "arrow_vectors_info", "piece_memory", "pool_memory", "reset_piece_peak",
                     "make_piece", "batch_text_memory", "parquet_page_buffers", "raise_status",
                     "pool_holds"}
    stub = (ROOT / "pkg" / "bulkwire" / "_core.pyi").read_text()
    assert not [hook for hook in hooks if hook in stub]


_HEAP_TYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE


def test_the_extension_types_are_heap_types_of_the_module():
    """Every type bulkwire._core defines is a heap type of the module (made from a spec
    when the module is executed), named after it; those made only by the module's own calls
    refuse to be instantiated, the others are made by calling them."""
    from bulkwire import _core

    types = {name: value for name, value in vars(_core).items()
             if isinstance(value, type) and not issubclass(value, BaseException)}
    types["EntityConventions"] = type(bulkwire.ENTITY)
    assert {"Encoder", "VectorCodec", "CommandWriter", "Piece", "CqlConnection"} <= set(types)
    for name, cls in types.items():
        assert cls.__flags__ & _HEAP_TYPE, f"{name} is a static type"
        assert (cls.__module__, cls.__qualname__) == ("bulkwire._core", name)
    for name in ("Piece", "PreparedBatch", "VectorRows", "TlsConnection", "EntityConventions"):
        if name in types:
            with pytest.raises(TypeError, match="cannot create"):
                types[name]()
    assert repr(_core.VectorCodec("float", 3)) == "VectorCodec('float', 3)"


def test_the_module_executed_again_raises_its_own_classes():
    """Multi-phase initialisation: a second import after the module left sys.modules makes a
    new module object, whose state holds the exception classes the C code raises."""
    code = (
        "import sys, bulkwire\n"
        "from bulkwire import _core, errors\n"
        "first = _core\n"
        "del sys.modules['bulkwire._core']\n"
        "import bulkwire._core as again\n"
        "assert again is not first and again.Encoder is not first.Encoder\n"
        "try:\n"
        "    again.parquet_index_locations(b'not parquet', 1, 1)\n"
        "except errors.MalformedFileError:\n"
        "    pass\n"
        "assert again.dumps({'a': [1]}) == b'{\"a\": [1]}'\n"
        "print('ok')\n")
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(bulkwire.__file__).parent.parent))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, timeout=120)
    assert result.stdout.strip() == "ok", result.stderr
