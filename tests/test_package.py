"""The package as a user meets it: optional dependencies that are missing say what to install,
the public namespace holds only the public API, and the sdist holds every file a build needs."""
from __future__ import annotations

import pathlib
import sys

import pytest

import bulkwire

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("module,call,package,extra", [
    ("pyarrow", lambda: bulkwire.take("x.parquet", [0]), "pyarrow", "parquet"),
    ("cassandra", lambda: __import__("bulkwire.cql").cql.install(), "scylla-driver", "cql"),
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

    declared = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert bulkwire.__version__ == declared.group(1)
    assert importlib.metadata.version("bulkwire") == bulkwire.__version__
