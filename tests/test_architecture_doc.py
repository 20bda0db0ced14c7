"""docs/architecture.md stays true: it names every C source of both layers, and every C file
it names exists in the layer it is drawn in."""
import fnmatch
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
               for path in sorted(folder.glob("*.c"))
               if not any(fnmatch.fnmatch(path.name, p) for p in patterns)]
    assert not missing, f"docs/architecture.md does not mention: {', '.join(missing)}"


def test_every_c_file_the_doc_names_exists():
    existing = {p.name for folder in LAYERS.values() for p in folder.iterdir()}
    existing |= {p.name for p in (ROOT / "tests" / "c").rglob("*.[ch]")}
    existing.add("Python.h")  # the header the core must not include
    stale = sorted(p for p in named_patterns() if "*" not in p and p not in existing)
    assert not stale, f"docs/architecture.md names files that do not exist: {', '.join(stale)}"


def test_the_layers_are_drawn_where_they_are():
    """A file drawn under csrc/core/ in the diagram is in csrc/core/, likewise csrc/py/."""
    diagram = DOC[DOC.index("```text"):]
    diagram = diagram[:diagram.index("```", 7)]
    core_part = diagram[diagram.index("csrc/core/"):]
    py_part = diagram[diagram.index("csrc/py/"):diagram.index("csrc/core/")]
    for part, layer in ((py_part, "py"), (core_part, "core")):
        for name in re.findall(r"\b([a-z_0-9]+\.c)\b", part):
            assert (LAYERS[layer] / name).exists(), f"{name} is drawn in csrc/{layer}/ but is not there"
