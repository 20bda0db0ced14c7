"""The package's modules import each other without a circle: of any two modules, at most one
depends on the other. Every import counts, those inside functions too (an import deferred
to call time hides a circle from the interpreter, not from the reader), and so do the
imports of subpackages (``bulkwire.testing``, ``bulkwire.load``)."""
from __future__ import annotations

import ast
import pathlib
from typing import Dict, List, Set

ROOT = pathlib.Path(__file__).resolve().parent.parent
PKG = ROOT / "pkg"
EXTENSION = "bulkwire._core"


def modules() -> Dict[str, pathlib.Path]:
    """Dotted module name -> its file, for every Python module of the package."""
    found = {}
    for path in (PKG / "bulkwire").rglob("*.py"):
        parts = path.relative_to(PKG).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported(name: str, path: pathlib.Path, known: Set[str]) -> Set[str]:
    """The package's modules that module ``name`` imports (the extension included)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package, one level up per extra dot
                base = ".".join(package[:len(package) - node.level + 1] + [base]).rstrip(".")
            for alias in node.names:
                module = f"{base}.{alias.name}"
                if module in known:  # from . import x: the module x
                    targets.add(module)
                elif base in known:  # from .x import y: a name of the module x
                    targets.add(base)
    return targets - {name}


def import_graph() -> Dict[str, Set[str]]:
    files = modules()
    known = set(files) | {EXTENSION}
    graph = {name: imported(name, path, known) for name, path in files.items()}
    graph[EXTENSION] = set()
    return graph


def circles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    found: List[List[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_reader_finds_the_imports_it_must():
    """The graph is read right: imports of each form are found, deferred ones included."""
    graph = import_graph()
    assert "bulkwire.conventions" in graph["bulkwire.bulk"]              # from .x import y
    assert EXTENSION in graph["bulkwire.conventions"]                    # from . import _core
    assert "bulkwire.testing.server" in graph["bulkwire.testing.cluster"]  # in a subpackage
    assert "bulkwire.testing" in graph["bulkwire.cli"]                   # inside a function
    assert "bulkwire.cli" in graph["bulkwire.testing.__main__"]          # from ..x import y


def test_the_circle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_two_modules_import_each_other():
    found = circles(import_graph())
    assert found == [], "modules that import each other, directly or through others: " + \
        "; ".join(" <-> ".join(component) for component in found)
