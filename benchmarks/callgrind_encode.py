"""A fixed encoding workload for instruction counts: run it under callgrind twice, once as
is and once with ``skip`` (builds the documents, encodes nothing), and divide the difference
by the number of documents.

    PYTHONHASHSEED=0 PYTHONPATH=pkg valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        python benchmarks/callgrind_encode.py list          # list, ndarray or small
    PYTHONHASHSEED=0 PYTHONPATH=pkg valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        python benchmarks/callgrind_encode.py list skip

list/ndarray: 1,000 documents of 7 fields, a datetime and a 384-dim float32 vector (as a list
of floats or as an ndarray); small: 10,000 documents of 10 fields, a nested dict, a datetime.
"""
import datetime
import sys

import numpy as np

import bulkwire

KINDS = {"list": 1000, "ndarray": 1000, "small": 10000}


def documents(kind: str) -> list:
    rng = np.random.default_rng(1)
    if kind == "small":
        return [{"name": f"s{i}", "a": i, "b": 1.5, "c": None, "d": "x", "e": [1, 2],
                 "f": {"g": 1, "h": "i"}, "t": datetime.datetime(2024, 1, 1), "k": True, "l": -3}
                for i in range(KINDS[kind])]
    docs = []
    for i in range(KINDS[kind]):
        v = rng.random(384, dtype=np.float32)
        docs.append({"name": f"doc-{i}", "n": i, "score": 0.5 * i, "ok": True,
                     "when": datetime.datetime(2024, 1, 1, 12, 0, i % 60), "tags": ["a", "b"],
                     "vec": v.tolist() if kind == "list" else v})
    return docs


def main(argv: list) -> int:
    if not argv or argv[0] not in KINDS or argv[1:] not in ([], ["skip"]):
        print(f"usage: callgrind_encode.py {{{','.join(KINDS)}}} [skip]", file=sys.stderr)
        return 2
    docs = documents(argv[0])
    if not argv[1:]:
        for d in docs:
            bulkwire.dumps(d)
    print(f"{argv[0]}: {len(docs)} documents{' built only' if argv[1:] else ' encoded'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
