"""docs/architecture.md stays true: it names every C source of both layers, every C file it
names exists in the layer (and the binding's folder) it is drawn in, and every file of the core
has its own unit test file that builds it."""
import fnmatch
import importlib.util
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "architecture.md").read_text()
LAYERS = {"core": ROOT / "csrc" / "core", "py": ROOT / "csrc" / "py"}


def named_patterns():
    """File names and globs the doc mentions: `x.c`, `x.{c,h}`, `py_encode_vector*.c`."""
    names = set()
    for stem, exts in re.findall(r"\b([A-Za-z_0-9*]+)\.(\{c,h\}|c|h)\b", DOC):
        for ext in ("c", "h") if exts == "{c,h}" else (exts,):
            names.add(f"{stem}.{ext}")
    return names


def test_every_c_source_is_in_the_doc():
    patterns = named_patterns()
    missing = [f"{layer}/{path.name}" for layer, folder in LAYERS.items()
               for path in sorted(folder.rglob("*.c"))
               if not any(fnmatch.fnmatch(path.name, p) for p in patterns)]
    assert not missing, f"docs/architecture.md does not mention: {', '.join(missing)}"


def test_every_c_file_the_doc_names_exists():
    existing = {p.name for folder in LAYERS.values() for p in folder.rglob("*") if p.is_file()}
    existing |= {p.name for p in (ROOT / "tests" / "c").rglob("*.[ch]")}
    existing.add("Python.h")  # the header the core must not include
    stale = sorted(p for p in named_patterns() if "*" not in p and p not in existing)
    assert not stale, f"docs/architecture.md names files that do not exist: {', '.join(stale)}"


def check_drawn(part: str, layer: str) -> None:
    """The diagram's part of one layer: a file drawn before its first folder heading
    (``  json/``) is at the layer's top; one drawn under a heading is in that folder (a file of
    another folder named there is named with its folder: ``compress/snappy.c``); every folder
    of the layer is drawn."""
    sections = re.split(r"^  ([a-z_]+)/", part, flags=re.M)
    drawn = sections[1::2]
    for folder, text in zip(["", *drawn], sections[0::2]):
        for name in re.findall(r"(?<![/\w])([a-z_0-9]+\.[ch])\b", text):
            where = f"csrc/{layer}/{folder + '/' if folder else ''}"
            assert (LAYERS[layer] / folder / name).exists(), \
                f"{name} is drawn in {where} but is not there"
    folders = sorted(p.name for p in LAYERS[layer].iterdir() if p.is_dir())
    assert sorted(drawn) == folders, \
        f"csrc/{layer}/ has folders {folders}; the diagram draws {drawn}"


def test_the_layers_are_drawn_where_they_are():
    """A file drawn under a folder heading of csrc/py/ or csrc/core/ (``  bulk/``) is in that
    folder, one drawn before the layer's first heading at its top, and every folder of each
    layer is drawn."""
    diagram = DOC[DOC.index("```text"):]
    diagram = diagram[:diagram.index("```", 7)]
    check_drawn(diagram[diagram.index("csrc/core/"):], "core")
    check_drawn(diagram[diagram.index("csrc/py/"):diagram.index("csrc/core/")], "py")
    assert not list(LAYERS["py"].glob("*.[ch]")), "every binding file lives in a folder of csrc/py/"


def c_test_runner():
    """tests/c/run.py as a module: its reading of a test file's ``sources:`` line."""
    spec = importlib.util.spec_from_file_location("c_test_runner", ROOT / "tests" / "c" / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_core_file_has_a_unit_test_file_that_builds_it():
    """csrc/core/x.c (at its top or in any of its folders) is tested by tests/c/test_x.c, which
    links it (its ``sources:`` line) or includes it (to reach its static functions)."""
    runner = c_test_runner()
    missing = []
    for source in sorted(LAYERS["core"].rglob("*.c")):
        test = ROOT / "tests" / "c" / f"test_{source.stem}.c"
        if not test.exists():
            missing.append(f"{source.name}: no {test.relative_to(ROOT)}")
            continue
        included = re.search(rf'^#include "{re.escape(source.name)}"$', test.read_text(), re.M)
        if source.name not in runner.declared(test, "sources") and not included:
            missing.append(f"{source.name}: {test.name} neither links nor includes it")
    assert not missing, "core files without their unit tests:\n" + "\n".join(missing)
