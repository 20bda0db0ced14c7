"""JSON encoding, side by side: bulkwire.dumps, Encoder.encode, orjson, msgspec (if installed)
and json.dumps, interleaved round by round.

    python benchmarks/bench_encode.py [--docs 2000] [--rounds 9] [--workloads small,list,f32,f64]
                                      [--outputs dropped,kept] [--cold]
                                      [--tree NAME=PATH ...]

Workloads: ``small`` (10 fields: str, int, float, None, bool, a list, a nested dict and a
datetime), and 1024-dim documents (a name, a rank, a score, a flag, two tags and the
vector) with the vector as a ``list`` of floats, a float32 ndarray (``f32``) or a float64
ndarray (``f64``).

Each round times every contender once over the same documents, in an order rotated by one
each round, so that load drift falls on all of them alike; a contender's figure is the
median over rounds of its per-round ratio against orjson (above 1: faster than orjson).
Times are the thread's CPU time (user and system, so page faults count), which other
processes on the machine do not inflate as they do wall time. json.dumps runs on a tenth of
the documents and is scaled.

Outputs: ``dropped`` drops each output as it is made, as a bulk insert does; ``kept`` keeps
a round's outputs in a list, freed after the round. Warm (the default): in this process,
after a warm-up pass, so the heap holds the memory the previous round freed. ``--cold``
runs each contender's timed pass in a fresh process instead (one per round and contender),
so kept outputs fault in fresh pages as a first call does.

``--tree NAME=PATH`` (repeatable) measures builds side by side (``_trees.py``): the
contenders are then ``bulkwire.dumps`` of each build, named ``bulkwire@NAME``, and orjson,
each timed pass in a fresh process (the build's package on its path; warm: after an untimed
pass in that process), interleaved as above; each build's speed is also given against each
other build's (the median of the per-round ratios).

Before timing, every contender's output is compared with bulkwire.dumps's for every
document, and each difference is named (orjson writes no space after ',' and ':', float32
with float32's shortest digits, and datetimes in its own format).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Callable

import numpy as np

import _trees
from _common import print_command
from _rounds import rotation
from oracle import entity_default

import bulkwire

try:
    import orjson
except ImportError:  # the bench extra installs it
    orjson = None
try:
    import msgspec
except ImportError:
    msgspec = None

WORKLOADS = ("small", "list", "f32", "f64")
JSON_SHARE = 10  # json.dumps runs on 1/JSON_SHARE of the documents


def make_docs(count: int, dim: int, as_array: bool, dtype: Any = np.float32) -> list:
    """Vector documents: a name, a rank, a score, a flag, two tags and a `dim`-dimension vector
    (an ndarray of `dtype`, or its tolist())."""
    rng = np.random.default_rng(42)
    vectors = rng.random((count, dim), dtype=dtype)
    docs = []
    for i in range(count):
        vec = vectors[i] if as_array else vectors[i].tolist()
        docs.append({"Name": f"document {i}", "Rank": i, "Score": i / 7, "Active": i % 2 == 0,
                     "Tags": ["a", "b"], "Embedding": vec})
    return docs


def workload_docs(workload: str, count: int) -> list:
    """The documents of one workload (the same for every contender and process)."""
    if workload == "small":
        return [{"name": f"s{i}", "a": i, "b": 1.5, "c": None, "d": "x", "e": [1, 2],
                 "f": {"g": 1, "h": "i"}, "t": datetime.datetime(2024, 1, 1), "k": True, "l": -3}
                for i in range(count)]
    return make_docs(count, 1024, as_array=workload != "list",
                     dtype=np.float64 if workload == "f64" else np.float32)


class Contender:
    """One encoder and its timed loops, each calling it as its users would (orjson with its
    option keyword, no Python frame in between)."""

    def __init__(self, encode: Callable[..., bytes], option: Any = None):
        self.encode = encode
        if option is None:
            self.one = encode

            def dropped(docs: list) -> None:
                for d in docs:
                    encode(d)

            def kept(docs: list) -> list:
                return [encode(d) for d in docs]
        else:
            def one(d: Any) -> bytes:
                return encode(d, option=option)
            self.one = one

            def dropped(docs: list) -> None:
                for d in docs:
                    encode(d, option=option)

            def kept(docs: list) -> list:
                return [encode(d, option=option) for d in docs]
        self.dropped, self.kept = dropped, kept


def contenders(workload: str) -> dict[str, Contender]:
    """Name -> contender. orjson serializes datetimes and ndarrays itself."""
    found = {"bulkwire.dumps": Contender(bulkwire.dumps),
             "Encoder.encode": Contender(bulkwire.Encoder().encode)}
    if workload == "f32":  # orjson's float32 text, like for like
        found["dumps shortest"] = Contender(bulkwire.Encoder(float32="shortest").encode)
    if orjson is not None:
        found["orjson"] = Contender(orjson.dumps, orjson.OPT_SERIALIZE_NUMPY)
    if msgspec is not None:
        found["msgspec"] = Contender(msgspec.json.Encoder(enc_hook=entity_default).encode)

    def json_dumps(d: Any) -> bytes:
        return json.dumps(d, default=entity_default).encode()
    found["json.dumps"] = Contender(json_dumps)
    return found


def first_difference(ours: bytes, theirs: bytes) -> str:
    """Where two outputs first differ, with a little context."""
    i = next((k for k, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
    return f"at byte {i}: ...{ours[max(0, i - 12):i + 16]!r} vs ...{theirs[max(0, i - 12):i + 16]!r}"


def how_it_differs(ours: bytes, theirs: bytes) -> str:
    """'byte-identical', or what the difference is."""
    if ours == theirs:
        return "byte-identical"
    if json.dumps(json.loads(theirs)).encode() == ours:
        return "same values; separators only (no space after ',' and ':')"
    mine, other = json.loads(ours), json.loads(theirs)
    notes = []
    for key in mine if isinstance(mine, dict) and isinstance(other, dict) else ():
        a, b = mine.get(key), other.get(key)
        if a == b:
            continue
        if isinstance(a, str) and isinstance(b, str) and a[:19] == b[:19]:
            notes.append(f"datetime text ({key}: {b!r}, bulkwire {a!r})")
        elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and all(
                np.float32(x) == np.float32(y) for x, y in zip(a, b)):
            notes.append(f"float32 digits ({key}: shortest float32 text, bulkwire the widened "
                         f"double's repr)")
        else:
            notes.append(f"value of {key}")
    if not notes:
        return "differs " + first_difference(ours, theirs)
    separators = b", " in ours and b", " not in theirs
    return "; ".join(notes) + ("; separators" if separators else "")


def check_outputs(workload: str, docs: list) -> None:
    """Prints how each contender's output compares with bulkwire.dumps's, over every document."""
    reference = [bulkwire.dumps(d) for d in docs]
    for name, contender in contenders(workload).items():
        verdicts: dict[str, int] = {}
        for d, ours in zip(docs, reference):
            verdict = how_it_differs(ours, contender.one(d))
            verdicts[verdict] = verdicts.get(verdict, 0) + 1
        summary = ", ".join(f"{v} ({n} docs)" if len(verdicts) > 1 else v for v, n in verdicts.items())
        print(f"  output {name:>15}: {summary}")


def timed_pass(contender: Contender, docs: list, keep: bool) -> float:
    """Thread CPU seconds of one pass; outputs kept in a list (freed after timing) or dropped."""
    if keep:
        start = time.thread_time()
        kept = contender.kept(docs)
        seconds = time.thread_time() - start
        del kept
        return seconds
    start = time.thread_time()
    contender.dropped(docs)
    return time.thread_time() - start


def per_doc_seconds(name: str, contender: Contender, docs: list, keep: bool) -> float:
    share = docs[: max(1, len(docs) // JSON_SHARE)] if name == "json.dumps" else docs
    return timed_pass(contender, share, keep) / len(share)


def child(workload: str, name: str, count: int, keep: bool, warm: bool) -> None:
    """One timed pass in this fresh process (``warm``: after an untimed one); prints seconds
    per document and the SHA-256 of the outputs, as JSON."""
    import hashlib

    docs = workload_docs(workload, count)
    contender = contenders(workload)[name]
    if warm:
        per_doc_seconds(name, contender, docs, keep)
    seconds = per_doc_seconds(name, contender, docs, keep)
    digest = hashlib.sha256(b"\n".join(contender.one(d) for d in docs)).hexdigest()
    print(json.dumps({"seconds": seconds, "outputs": digest,
                      "package": _trees.package_folder()}))


def child_pass(workload: str, name: str, count: int, keep: bool, warm: bool = False,
               tree: _trees.Tree | None = None) -> dict:
    """One pass of ``name`` in a fresh process (with ``tree``'s package, if given):
    ``{"seconds": per document, "outputs": their SHA-256, "package": its bulkwire's
    folder}``."""
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", workload, name,
                          str(count), "kept" if keep else "dropped", "warm" if warm else "cold"],
                         check=True, capture_output=True, text=True,
                         env=_trees.environment(tree))
    result = json.loads(out.stdout.strip().splitlines()[-1])
    _trees.check_ran(tree, result["package"])
    return result


def run(workload: str, count: int, rounds: int, keep: bool, cold: bool,
        trees: list[_trees.Tree]) -> None:
    docs = workload_docs(workload, count)
    encoders = contenders(workload)
    builds = {t.contender: t for t in trees}
    names = list(builds) + ["orjson"] * (orjson is not None) if trees else list(encoders)
    if not cold and not trees:
        for name in names:  # warm-up: first-call caches and the heap
            per_doc_seconds(name, encoders[name], docs, keep)
    samples: dict[str, list[float]] = {name: [] for name in names}
    outputs: dict[str, str] = {}
    for _, name in rotation(names, rounds):
        if trees:  # every pass in a process of its own, a build's with its package
            got = child_pass(workload, "bulkwire.dumps" if name in builds else name, count,
                             keep, not cold, builds.get(name))
            seconds, outputs[name] = got["seconds"], got["outputs"]
        elif cold:
            seconds = child_pass(workload, name, count, keep)["seconds"]
        else:
            seconds = per_doc_seconds(name, encoders[name], docs, keep)
        samples[name].append(seconds)
    base = "orjson" if "orjson" in samples else "bulkwire.dumps"
    print(f"  {'contender':>15} {'median us/doc':>14} {'x ' + base + ' (median of rounds)':>30}"
          f"   load {os.getloadavg()[0]:.2f}")
    for name in names:
        ratios = [b / s for b, s in zip(samples[base], samples[name])]
        print(f"  {name:>15} {statistics.median(samples[name]) * 1e6:>14.2f} "
              f"{statistics.median(ratios):>29.2f}x")
    if trees:
        same = len({outputs[t.contender] for t in trees}) == 1
        print(f"  every build's outputs the same (SHA-256): {same}")
        print(_trees.table("  speed (documents per CPU second)",
                           {t.contender: [1 / x for x in samples[t.contender]] for t in trees},
                           trees))


def main() -> None:
    if len(sys.argv) == 7 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] == "kept",
              sys.argv[6] == "warm")
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=2000, help="documents per round")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help="comma-separated, of: " + ", ".join(WORKLOADS))
    parser.add_argument("--outputs", default="dropped,kept",
                        help="dropped, kept or both (comma-separated)")
    parser.add_argument("--cold", action="store_true",
                        help="time each pass in a fresh process (one per round and contender)")
    _trees.add_arguments(parser)
    args = parser.parse_args()
    trees = _trees.trees_of(parser, args)
    workloads = args.workloads.split(",")
    modes = args.outputs.split(",")
    if set(workloads) - set(WORKLOADS) or set(modes) - {"dropped", "kept"}:
        parser.error("unknown workload or outputs mode")
    print_command()
    how = ("cold: a fresh process per pass" if args.cold else "warm: in one process"
           if not trees else "warm: a fresh process per pass, after an untimed one")
    print(f"{args.docs} documents per round, {args.rounds} rounds, contenders interleaved "
          f"(order rotated each round); thread CPU time; "
          f"{how}; "
          f"orjson {getattr(orjson, '__version__', 'missing')}, "
          f"msgspec {getattr(msgspec, '__version__', 'not installed')}")
    for workload in workloads:
        print(f"{workload}:")
        check_outputs(workload, workload_docs(workload, min(args.docs, 200)))
        for mode in modes:
            print(f" outputs {mode}, {'cold' if args.cold else 'warm'}:")
            run(workload, args.docs, args.rounds, mode == "kept", args.cold, trees)


if __name__ == "__main__":
    main()
