"""The test suite's own rules: every test can fail (it asserts, expects an exception or runs
something that does, and no assertion is true whatever happens), and a test file that needs
an optional test dependency fails the run under BULKWIRE_REQUIRE_EXTRAS=1 (CI, which installs
every one) where a developer without it sees a skip with its reason."""
from __future__ import annotations

import ast
import os
import pathlib
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent

#: Tests whose failure comes from what they run, not from an assert of their own.
RUNS_WHAT_ASSERTS = {
    # each documented example runs as a pasted script: an exception (its own asserts
    # included) fails the test
    "test_docs_examples.py::test_example_runs",
    # fuzz/fuzz_dumps.py's target checks each graph against the round trip and raises
    "test_walker_hostile.py::test_random_hostile_graphs_match_the_round_trip",
}

#: Calls that fail a test by themselves.
FAILING_CALLS = {"raises", "warns", "fail", "deprecated_call"}


def _functions(tree: ast.Module) -> dict[str, ast.AST]:
    """The module's functions by name: module level and in classes."""
    found: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for member in node.body:
                if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    found.setdefault(member.name, member)
    return found


def _suite_functions() -> dict[str, dict[str, ast.AST]]:
    """The functions of every module of the suite (tests/*.py), by module name."""
    return {path.stem: _functions(ast.parse(path.read_text())) for path in HERE.glob("*.py")}


HELPERS = _suite_functions()


def _imported_helpers(tree: ast.Module) -> dict[str, ast.AST]:
    """Functions imported by name from the suite's other modules (helpers, other tests)."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module in HELPERS:
            for alias in node.names:
                function = HELPERS[node.module].get(alias.name)
                if function is not None:
                    found[alias.asname or alias.name] = function
    return found


def _root_name(func: ast.expr) -> str:
    """The name a call starts from: ``f`` of ``f(...)``, ``f.a.b(...)``; its last attribute
    for a call on anything else (``pytest.raises`` gives ``raises``)."""
    node = func
    while isinstance(node, ast.Attribute):
        node = node.value
    if isinstance(node, ast.Name) and node is not func:
        return node.id
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _can_fail(node: ast.AST, functions: dict[str, ast.AST], seen: set[int]) -> bool:
    """Whether running node can fail a test: it asserts, raises or expects an exception,
    itself or through a function it calls that is defined in the suite."""
    seen.add(id(node))
    for sub in ast.walk(node):
        if isinstance(sub, (ast.Assert, ast.Raise)):
            return True
        if isinstance(sub, ast.Call):
            name = sub.func.attr if isinstance(sub.func, ast.Attribute) else getattr(sub.func, "id", "")
            if name in FAILING_CALLS or name.startswith("assert"):
                return True
            for candidate in {name, _root_name(sub.func)}:
                callee = functions.get(candidate)
                if callee is not None and id(callee) not in seen and _can_fail(callee, functions, seen):
                    return True
    return False


def _test_files() -> list[pathlib.Path]:
    return sorted(HERE.glob("test_*.py"))


def test_every_test_can_fail():
    silent = []
    for path in _test_files():
        tree = ast.parse(path.read_text())
        functions = {**_imported_helpers(tree), **_functions(tree)}
        for name, node in _functions(tree).items():
            test_id = f"{path.name}::{name}"
            if name.startswith("test") and test_id not in RUNS_WHAT_ASSERTS and \
                    not _can_fail(node, functions, set()):
                silent.append(test_id)
    assert silent == [], "tests that assert nothing and expect no exception: " + ", ".join(silent)


def _always_true(test: ast.expr) -> bool:
    """An assert condition that holds whatever the code under test does."""
    if isinstance(test, ast.Constant):
        return bool(test.value)
    if isinstance(test, ast.Tuple):  # assert (x, "message"): a non-empty tuple
        return len(test.elts) > 0
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        return any(_always_true(value) for value in test.values)
    return False


def test_no_assertion_is_true_whatever_happens():
    found = [f"{path.name}:{node.lineno}" for path in _test_files()
             for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Assert) and _always_true(node.test)]
    assert found == [], "asserts that cannot fail: " + ", ".join(found)


def test_the_rules_see_what_they_look_for():
    """The checks above find a silent test and an assertion that cannot fail."""
    tree = ast.parse("def helper(x):\n    assert x\n\n"
                     "def test_silent():\n    print(1)\n\n"
                     "def test_through_a_helper():\n    helper(1)\n\n"
                     "def test_expects():\n    with pytest.raises(ValueError):\n        int('x')\n")
    functions = _functions(tree)
    verdicts = {name: _can_fail(node, functions, set()) for name, node in functions.items()
                if name.startswith("test")}
    assert verdicts == {"test_silent": False, "test_through_a_helper": True, "test_expects": True}
    for text, always in [("assert x or True", True), ("assert (x, 'why')", True), ("assert 1", True),
                         ("assert x", False), ("assert x or y", False)]:
        assert _always_true(ast.parse(text).body[0].test) is always, text


# ---- optional test dependencies ----

def _run_pytest(folder: pathlib.Path, require: bool) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "BULKWIRE_REQUIRE_EXTRAS"}
    if require:
        env["BULKWIRE_REQUIRE_EXTRAS"] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                           str(folder)], capture_output=True, text=True, env=env, cwd=folder,
                          timeout=300)


@pytest.fixture
def suite_without_an_extra(tmp_path):
    """A copy of this suite's conftest (and the module it imports) beside a test file that
    skips at import for a missing package, and one whose test skips inside for another."""
    for name in ("conftest.py", "examples_budget.py"):
        (tmp_path / name).write_text((HERE / name).read_text())
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_needs_a_package.py").write_text(
        "import pytest\n"
        "missing = pytest.importorskip('bulkwire_no_such_package')\n\n"
        "def test_uses_it():\n    assert missing\n")
    (tmp_path / "test_needs_one_inside.py").write_text(
        "import pytest\n\n"
        "def test_plain():\n    assert 1 + 1 == 2\n\n"
        "def test_uses_another():\n    pytest.importorskip('bulkwire_no_other_package')\n")
    return tmp_path


def test_a_missing_optional_package_is_a_skip_for_a_developer(suite_without_an_extra):
    result = _run_pytest(suite_without_an_extra, require=False)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "1 passed, 2 skipped" in output
    assert "could not import 'bulkwire_no_such_package'" in output  # the reason is shown
    assert "could not import 'bulkwire_no_other_package'" in output


def test_a_missing_optional_package_fails_the_run_when_extras_are_required(suite_without_an_extra):
    result = _run_pytest(suite_without_an_extra, require=True)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    # the file that skips at import is a collection error naming the package
    assert "ERROR" in output and "test_needs_a_package.py" in output
    assert "BULKWIRE_REQUIRE_EXTRAS=1" in output and "bulkwire_no_such_package" in output
    assert "skipped" not in output.splitlines()[-1]


def test_a_missing_package_inside_a_test_fails_it_when_extras_are_required(suite_without_an_extra):
    (suite_without_an_extra / "test_needs_a_package.py").unlink()
    result = _run_pytest(suite_without_an_extra, require=True)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "1 failed, 1 passed" in output
    assert "bulkwire_no_other_package" in output and "BULKWIRE_REQUIRE_EXTRAS=1" in output


# ---- the installed copy under test ---------------------------------------------------------

def test_a_run_on_the_installed_copy_stops_when_it_imports_another(suite_without_an_extra,
                                                                  tmp_path_factory):
    """BULKWIRE_TEST_INSTALLED=1 (CI's run on the installed wheel): a bulkwire imported from
    anywhere but site-packages (here a stand-in package put first on the path, as the
    checkout's pkg/ would be) stops the run naming it; the installed copy (or, without the
    variable, any copy) lets the same run go on."""
    other = tmp_path_factory.mktemp("elsewhere")
    (other / "bulkwire").mkdir()
    (other / "bulkwire" / "__init__.py").write_text("")
    env = {k: v for k, v in os.environ.items() if k != "BULKWIRE_REQUIRE_EXTRAS"}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               str(suite_without_an_extra / "test_needs_one_inside.py")]

    def run(**changes: str) -> subprocess.CompletedProcess:
        return subprocess.run(command, capture_output=True, text=True, env=dict(env, **changes),
                              cwd=suite_without_an_extra, timeout=300)

    stopped = run(BULKWIRE_TEST_INSTALLED="1", PYTHONPATH=str(other))
    output = stopped.stdout + stopped.stderr
    assert stopped.returncode != 0, output
    assert "BULKWIRE_TEST_INSTALLED=1 but the bulkwire under test is " in output, output
    assert str(other / "bulkwire" / "__init__.py") in output and "site-packages" in output
    went_on = run()  # the bulkwire of this run, wherever it is, and no check
    assert went_on.returncode == 0 and "1 passed, 1 skipped" in went_on.stdout, went_on.stdout
