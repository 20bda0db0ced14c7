"""Dependencies run one way. The package's modules import each other without a circle: of any
two modules, at most one depends on the other. Every import counts, those inside functions
too (an import deferred to call time hides a circle from the interpreter, not from the
reader), and so do the imports of subpackages (``bulkwire.testing``, ``bulkwire.load``).
Likewise the binding's C files (csrc/py/) call each other's functions without a circle, but
for the walker, whose recursion over nested values is one circle by design."""
from __future__ import annotations

import ast
import pathlib
import re
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
    assert "bulkwire.conventions" in graph["bulkwire._bulk_writer"]      # from .x import y
    assert EXTENSION in graph["bulkwire.conventions"]                    # from . import _core
    assert "bulkwire.testing.server" in graph["bulkwire.testing.cluster"]  # in a subpackage
    assert "bulkwire.testing" in graph["bulkwire._cli_sample_serve_demo"]  # inside a function
    assert "bulkwire.cli" in graph["bulkwire.testing.__main__"]          # from ..x import y


def test_the_circle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_two_modules_import_each_other():
    found = circles(import_graph())
    assert found == [], "modules that import each other, directly or through others: " + \
        "; ".join(" <-> ".join(component) for component in found)


# ---- the load pipeline and its targets ----

#: The modules of the load that serve every target: the pipeline.
GENERIC_LOAD = ["bulkwire.load.entry", "bulkwire.load.pipeline", "bulkwire.load.workers",
                "bulkwire.load.resume", "bulkwire.load.datasets", "bulkwire.load.interface",
                "bulkwire.load._result", "bulkwire.load._progress", "bulkwire.load._sending"]
#: The modules of one target (or of one kind's protocol): the RavenDB bulk insert, its HTTP
#: transport and cluster topology, the CQL driver drop-in and statements, the kinds' own
#: modules, and the documents' plan.
TARGET_MODULES = ["bulkwire.bulk", "bulkwire._bulk_writer", "bulkwire.bulk_commands",
                  "bulkwire.topology", "bulkwire.transport", "bulkwire._transport_requests",
                  "bulkwire._transport_answer", "bulkwire._transport_errors",
                  "bulkwire.server_features",
                  "bulkwire.ravendb", "bulkwire.cql", "bulkwire.cql_statements",
                  "bulkwire.cql_placement", "bulkwire.load.targets",
                  "bulkwire.load.ravendb_target", "bulkwire.load.cql_target",
                  "bulkwire.load._cql_options", "bulkwire.load._cql_rows",
                  "bulkwire.load._cql_session", "bulkwire.load.cql_shards",
                  "bulkwire.load.jsonl_target", "bulkwire.load.plan"]


def test_the_generic_load_modules_import_no_targets_module():
    """The pipeline knows a target only through the interface (bulkwire.load.interface) and
    the registry of kinds (bulkwire.targets, which imports the kinds by name): a new kind
    is new modules and a line in the registry, and no change to the pipeline."""
    graph = import_graph()
    for name in GENERIC_LOAD:
        assert name in graph, name
        reached = sorted(graph[name] & set(TARGET_MODULES))
        assert reached == [], f"{name} imports {', '.join(reached)}"
    assert "bulkwire.targets" in graph["bulkwire.load.entry"]  # how it names the default


def test_the_target_rule_sees_what_it_must():
    graph = import_graph()
    assert "bulkwire.bulk" in graph["bulkwire.load.ravendb_target"]
    assert "bulkwire.load.interface" in graph["bulkwire.load.cql_target"]


# ---- the binding's C files ----

#: a function defined at the start of a line: its name, then its parameters and a body
C_DEFINITION = re.compile(r"^[A-Za-z][^;{}()]*?\b(bw_\w+)\([^;]*?\)\s*\{", re.M)
C_COMMENT = re.compile(r"/\*.*?\*/", re.S)
#: the walker: a value's conventions (entity) and NumPy object arrays hold values it walks
WALKER = ["py_encode_entity", "py_encode_numpy", "py_encode_walk"]


def call_graph() -> Dict[str, Set[str]]:
    """Binding file (its stem) -> the binding files whose bw_* functions it calls."""
    files = sorted((ROOT / "csrc" / "py").rglob("*.c"))
    texts = {path.stem: C_COMMENT.sub("", path.read_text(encoding="utf-8")) for path in files}
    defined = {name: stem for stem, text in texts.items() for name in C_DEFINITION.findall(text)}
    return {stem: {defined[name] for name in set(re.findall(r"\b(bw_\w+)\s*\(", text))
                   if defined.get(name, stem) != stem}
            for stem, text in texts.items()}


def test_the_call_reader_finds_the_calls_it_must():
    graph = call_graph()
    assert "py_encode_vector_memory" in graph["py_encode_vector_batch"]
    assert "py_encode_vector_memory" in graph["py_encode_vector_json"]
    assert "py_arrow" in graph["py_encode_batch"]
    assert "py_encode_walk" in graph["py_encoder"]


def test_no_two_binding_files_call_each_other_but_the_walkers():
    assert circles(call_graph()) == [WALKER], \
        "binding files that call each other, directly or through others (beyond the walker)"
