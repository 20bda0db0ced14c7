"""Every benchmark command quoted in README.md and docs/ parses with the script as it is now:
a figure's command that the script no longer takes cannot reproduce the figure.

Each quoted command runs in a subprocess with ``argparse`` stopped right after parsing: the
script's own parser reads the quoted arguments (unknown flags, bad choices and bad values
fail as they would for a reader), and nothing is measured. A command through
``ab_builds.py`` is checked twice: ``ab_builds.py``'s own arguments, and the benchmark after
its ``--``.
"""
from __future__ import annotations

import pathlib
import re
import shlex
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SCRIPT = re.compile(r"^benchmarks/[A-Za-z0-9_]+\.py$")
SHELL_ENDS = {"|", "||", "&&", ";", ">", ">>", "2>", "2>&1", "&"}

# Runs the script at argv[1] as __main__ with argv[2:], and stops once its parser has read
# them: exit 0 and "parsed" on stdout, or argparse's own exit 2 and message.
PARSE_ONLY = r"""
import argparse, runpy, sys
class Parsed(BaseException):
    pass
inside = []
original_args, original_known = argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args
def parse_args(self, *a, **k):
    inside.append(1)
    original_args(self, *a, **k)
    raise Parsed
def parse_known_args(self, *a, **k):
    result = original_known(self, *a, **k)
    if not inside:
        raise Parsed
    return result
argparse.ArgumentParser.parse_args = parse_args
argparse.ArgumentParser.parse_known_args = parse_known_args
script = sys.argv[1]
sys.argv = sys.argv[1:]
sys.path.insert(0, script.rsplit("/", 1)[0])
try:
    runpy.run_path(script, run_name="__main__")
except Parsed:
    print("parsed")
    sys.exit(0)
print("the script ended without parsing its arguments")
sys.exit(3)
"""


def _runs_a_benchmark(command: str) -> bool:
    return "benchmarks/" in command and bool(
        re.search(r"(^|\s)(python3?|--)\s+\S*benchmarks/", command))


def _command_lines(text: str) -> list[str]:
    """Commands that run a benchmark script: lines of code blocks and indented blocks
    (continuations joined), and inline code spans of the prose (a span may wrap over lines)."""
    lines, joined = [], ""
    prose: list[str] = []
    fenced = False
    for raw in text.splitlines():
        if raw.strip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced and not raw.startswith("    "):
            prose.append(raw)
            if not joined:
                continue
        line = raw.strip()
        if joined:
            line = joined + " " + line
            joined = ""
        if line.endswith("\\"):
            joined = line[:-1].rstrip()
            continue
        if _runs_a_benchmark(line) and "`" not in line:
            lines.append(line)
    for paragraph in "\n".join(prose).split("\n\n"):
        for span in re.findall(r"`([^`]+)`", " ".join(paragraph.split())):
            if _runs_a_benchmark(span):
                lines.append(span)
    return lines


def _invocations(line: str) -> list[list[str]]:
    """The benchmark invocations of one command line: [script, *args] for each script run
    (``ab_builds.py``'s and its benchmark's)."""
    words = shlex.split(line, comments=True)
    for i, word in enumerate(words):
        if word in SHELL_ENDS or word.startswith((">", "2>")):
            words = words[:i]
            break
    found = []
    starts = [i for i, word in enumerate(words) if SCRIPT.match(word)]
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(words)
        args = words[start + 1:end]
        if args[-1:] == ["--"]:
            args = args[:-1]
        found.append([words[start], *args])
    return found


def _quoted_commands() -> list[tuple[str, list[str]]]:
    commands = []
    for doc in DOCS:
        for line in _command_lines(doc.read_text()):
            for invocation in _invocations(line):
                commands.append((f"{doc.relative_to(ROOT)}: {shlex.join(invocation)}", invocation))
    return commands


COMMANDS = _quoted_commands()


def test_commands_are_found():
    """The extraction itself works: the docs quote dozens of benchmark commands, among them
    ab_builds runs whose benchmark is checked on its own."""
    assert len(COMMANDS) >= 40
    scripts = {invocation[0] for _, invocation in COMMANDS}
    assert {"benchmarks/ab_builds.py", "benchmarks/bench_encode.py",
            "benchmarks/random_access.py"} <= scripts
    assert _invocations("python benchmarks/ab_builds.py --before ../b --rounds 2 -- "
                        "benchmarks/x.py --docs 5 > out.txt") == [
        ["benchmarks/ab_builds.py", "--before", "../b", "--rounds", "2"],
        ["benchmarks/x.py", "--docs", "5"]]


@pytest.mark.parametrize("where,invocation", [pytest.param(w, i, id=w) for w, i in COMMANDS])
def test_a_quoted_command_parses(where, invocation):
    script = ROOT / invocation[0]
    assert script.exists(), f"{where}: no such script"
    done = subprocess.run([sys.executable, "-c", PARSE_ONLY, str(script), *invocation[1:]],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip().endswith("parsed"), (
        f"{where}\n{done.stdout}\n{done.stderr}")


def test_a_command_the_script_does_not_take_is_caught():
    """The check can fail: an unknown flag is refused by the script's parser."""
    script = ROOT / "benchmarks" / "bench_encode.py"
    done = subprocess.run([sys.executable, "-c", PARSE_ONLY, str(script), "--no-such-flag"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "unrecognized arguments: --no-such-flag" in done.stderr


def _anchor(heading: str) -> str:
    """The anchor a Markdown renderer gives a heading (GitHub's rule: lower case, spaces to
    hyphens, punctuation dropped)."""
    text = heading.strip().lstrip("#").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def test_links_between_docs_reach_a_heading():
    """A link to another document's section (``file.md#anchor``) names a heading that is
    there: sections moved between documents leave no dangling link."""
    anchors = {doc.name: {_anchor(line.lstrip("#")) for line in doc.read_text().splitlines()
                          if line.startswith("#")} for doc in DOCS}
    dangling = []
    for doc in DOCS:
        for target, anchor in re.findall(r"\]\(([\w\-]+\.md)#([^)]+)\)", doc.read_text()):
            if target in anchors and anchor not in anchors[target]:
                dangling.append(f"{doc.name}: {target}#{anchor}")
            if target not in anchors:
                dangling.append(f"{doc.name}: {target} (no such document)")
        for anchor in re.findall(r"\]\(#([^)]+)\)", doc.read_text()):
            if anchor not in anchors[doc.name]:
                dangling.append(f"{doc.name}: #{anchor}")
    assert dangling == []
    assert _anchor("## Past one core: parallel loads") == "past-one-core-parallel-loads"
