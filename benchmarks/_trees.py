"""Builds of bulkwire side by side in one benchmark run: ``--tree NAME=PATH`` (repeatable)
names a folder holding a built ``bulkwire`` package (a checkout's ``pkg`` after ``python
setup.py build_ext --inplace``). The benchmark runs the contender of each tree in a process
of its own, with that folder alone on ``PYTHONPATH``, interleaved round by round with the
others (``_rounds.rotation``), and reports each tree against the ``--baseline`` tree (by
default the first) as the median of the per-round ratios (``_rounds.median_ratio``).

A tree's contender is named ``bulkwire@NAME``. The children import the benchmark script of
this checkout, whatever the tree: code a child runs must work with the trees' API, old and
new (``has_targets`` tells which)::

    python benchmarks/bench_cql_load.py --only bulkwire,ceiling \\
        --tree before=../before/pkg --tree after=pkg
"""
from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import os
from typing import NamedTuple

from _rounds import median_ratio

PREFIX = "bulkwire@"
_BUILT = tuple("_core" + suffix for suffix in importlib.machinery.EXTENSION_SUFFIXES)


class Tree(NamedTuple):
    """A named build: ``path`` is the folder that holds its ``bulkwire`` package."""

    name: str
    path: str

    @property
    def contender(self) -> str:
        """The name of its contender in a benchmark's tables: ``bulkwire@NAME``."""
        return PREFIX + self.name


def add_arguments(parser: argparse.ArgumentParser, baseline: bool = True) -> None:
    """``--tree NAME=PATH`` (repeatable) and, with ``baseline``, ``--baseline NAME``."""
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=PATH",
                        help="a folder holding a built bulkwire package (a checkout's pkg "
                             "built in place), measured as the contender bulkwire@NAME; "
                             "repeat it to compare builds")
    if baseline:
        parser.add_argument("--baseline", metavar="NAME",
                            help="the tree the others are compared with (default: the first)")


def built(path: str) -> bool:
    """Whether ``path`` holds a ``bulkwire`` package with its extension built."""
    package = os.path.join(path, "bulkwire")
    return os.path.isdir(package) and any(name in _BUILT for name in os.listdir(package))


def trees_of(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[Tree]:
    """The trees given, checked (``parser.error`` naming a bad one); ``[]`` when none.

    >>> p = argparse.ArgumentParser(); add_arguments(p)
    >>> trees_of(p, p.parse_args([]))
    []
    """
    trees = []
    for value in args.tree:
        name, sep, path = value.partition("=")
        if not sep or not name or not path or "," in name:
            parser.error(f"--tree {value!r}: give NAME=PATH (a name without commas)")
        if name in {t.name for t in trees}:
            parser.error(f"--tree {name}: named twice")
        path = os.path.abspath(os.path.expanduser(path))
        if not built(path):
            parser.error(f"--tree {name}: {path} holds no bulkwire package with its extension "
                         f"built (python setup.py build_ext --inplace in its checkout)")
        trees.append(Tree(name, path))
    baseline = getattr(args, "baseline", None)
    if baseline is not None:
        if baseline not in {t.name for t in trees}:
            parser.error(f"--baseline {baseline}: no --tree of that name")
        trees.sort(key=lambda t: t.name != baseline)  # the baseline first, the rest in order
    return trees


def environment(tree: Tree | None, **extra: str) -> dict[str, str]:
    """The environment of a child: this one's, with ``tree``'s folder alone on
    ``PYTHONPATH`` (None: unchanged) and ``extra`` set."""
    env = dict(os.environ, **extra)
    if tree is not None:
        env["PYTHONPATH"] = tree.path
    return env


def package_folder() -> str:
    """In a child: the folder holding the ``bulkwire`` imported here (for :func:`check_ran`)."""
    import bulkwire

    return os.path.dirname(os.path.dirname(os.path.abspath(bulkwire.__file__)))


def check_ran(tree: Tree | None, folder: str) -> None:
    """Exits naming ``tree`` when its child imported bulkwire from another ``folder``
    (:func:`package_folder`'s): the child measured another build."""
    if tree is not None and os.path.abspath(folder) != tree.path:
        raise SystemExit(f"{tree.contender}: the child imported bulkwire from {folder}, "
                         f"not from {tree.path}")


def has_targets() -> bool:
    """Whether the bulkwire imported here takes targets as values (``bulkwire.targets``,
    ``bulkwire.load_parquet(path, target)``); older builds spell each target's load apart
    (``bulkwire.cql.load_parquet``, ``load_parquet(path, url=..., out=...)``)."""
    return importlib.util.find_spec("bulkwire.targets") is not None


def against(values: dict[str, list[float]], trees: list[Tree]) -> dict[tuple[str, str], float]:
    """Every tree's figures against every tree's: ``(row, column) ->`` the median of the
    per-round ratios row / column (contender names). ``values`` maps a contender to its
    per-round figures (rates: a ratio above 1 is faster; CPU seconds: above 1 is dearer).

    >>> t = [Tree("a", "/a"), Tree("b", "/b")]
    >>> r = against({"bulkwire@a": [2.0, 2.0, 2.0], "bulkwire@b": [1.0, 4.0, 2.5]}, t)
    >>> r["bulkwire@b", "bulkwire@a"], r["bulkwire@a", "bulkwire@b"]
    (1.25, 0.8)
    """
    return {(row.contender, column.contender):
            median_ratio(values[row.contender], values[column.contender])
            for row in trees for column in trees}


def table(title: str, values: dict[str, list[float]], trees: list[Tree]) -> str:
    """:func:`against` as a table: a row per tree, its ratio to each column's tree, the
    baseline's column first.

    >>> t = [Tree("a", "/a"), Tree("b", "/b")]
    >>> print(table("rows/s", {"bulkwire@a": [2.0, 2.0, 2.0], "bulkwire@b": [1.0, 4.0, 2.5]}, t))
    rows/s, median of the per-round ratios row / column (trees: a=/a, b=/b)
                              bulkwire@a      bulkwire@b
    bulkwire@a                     1.000           0.800
    bulkwire@b                     1.250           1.000
    """
    ratios = against(values, trees)
    width = max(16, *(len(t.contender) + 2 for t in trees))
    lines = [f"{title}, median of the per-round ratios row / column (trees: "
             + ", ".join(f"{t.name}={t.path}" for t in trees) + ")",
             " " * 20 + "".join(f"{t.contender:>{width}}" for t in trees)]
    for row in trees:
        lines.append(f"{row.contender:<20}" + "".join(
            f"{ratios[row.contender, column.contender]:>{width}.3f}" for column in trees))
    return "\n".join(lines)
