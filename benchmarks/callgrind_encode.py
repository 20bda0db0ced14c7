"""A fixed encoding workload for instruction counts: run it under callgrind twice, once as
is and once with ``skip`` (builds the documents, encodes nothing), and divide the difference
by the number of documents.

    OPENBLAS_NUM_THREADS=1 PYTHONHASHSEED=0 PYTHONPATH=pkg valgrind --tool=callgrind \\
        --callgrind-out-file=/dev/null python benchmarks/callgrind_encode.py list   # or another kind
    OPENBLAS_NUM_THREADS=1 PYTHONHASHSEED=0 PYTHONPATH=pkg valgrind --tool=callgrind \\
        --callgrind-out-file=/dev/null python benchmarks/callgrind_encode.py list skip

OPENBLAS_NUM_THREADS=1 matters: NumPy's BLAS threads spin while the process starts, and
callgrind counts their instructions too (tens of millions, varying from run to run).

list/ndarray: 1,000 documents of 7 fields, a datetime and a 384-dim float32 vector (as a list
of floats or as an ndarray); small: 10,000 documents of 10 fields, a nested dict, a datetime.
store_small/store_list: the same documents through ``BulkWriter.store`` (ids, metadata and
the command around each document). dim1024_list/dim1024_f32/dim1024_f64: 1,000 of the 1024-dim
documents of bench_encode.py (a name, a rank, a score, a flag, two tags and the vector as a
list of floats, a float32 or a float64 ndarray). vector_ndarray/vector_list: 1,000 768-dim float32 vectors
through ``VectorCodec("float", 768).serialize``. A last argument N changes the count: run
two counts and divide the difference by the difference of the counts, so that one-time
costs (the first call's imports and caches) fall out. ``orjson`` in place of ``skip`` encodes
the small and dim1024 documents with ``orjson.dumps(d, option=OPT_SERIALIZE_NUMPY)`` instead,
the same count for the library the benchmarks compare with.
"""
import argparse
import datetime
import sys

import numpy as np

import bulkwire

KINDS = {"list": 1000, "ndarray": 1000, "small": 10000, "store_small": 10000,
         "store_list": 1000, "vector_ndarray": 1000, "vector_list": 1000,
         "dim1024_list": 1000, "dim1024_f32": 1000, "dim1024_f64": 1000}


def documents(kind: str, count: int) -> list:
    rng = np.random.default_rng(1)
    if kind.startswith("dim1024_"):
        dtype = np.float64 if kind == "dim1024_f64" else np.float32
        vectors = rng.random((count, 1024), dtype=dtype)
        return [{"Name": f"document {i}", "Rank": i, "Score": i / 7, "Active": i % 2 == 0,
                 "Tags": ["a", "b"],
                 "Embedding": vectors[i].tolist() if kind == "dim1024_list" else vectors[i]}
                for i in range(count)]
    if kind.startswith("vector_"):
        rows = rng.random((count, 768), dtype=np.float32)
        return list(rows) if kind == "vector_ndarray" else rows.tolist()
    kind = kind.removeprefix("store_")
    if kind == "small":
        return [{"name": f"s{i}", "a": i, "b": 1.5, "c": None, "d": "x", "e": [1, 2],
                 "f": {"g": 1, "h": "i"}, "t": datetime.datetime(2024, 1, 1), "k": True, "l": -3}
                for i in range(count)]
    docs = []
    for i in range(count):
        v = rng.random(384, dtype=np.float32)
        docs.append({"name": f"doc-{i}", "n": i, "score": 0.5 * i, "ok": True,
                     "when": datetime.datetime(2024, 1, 1, 12, 0, i % 60), "tags": ["a", "b"],
                     "vec": v.tolist() if kind == "list" else v})
    return docs


def main(argv: list) -> int:
    parser = argparse.ArgumentParser(
        description="A fixed encoding workload for instruction counts (see the module's text).")
    parser.add_argument("kind", choices=list(KINDS), help="the documents encoded")
    parser.add_argument("rest", nargs="*", metavar="[skip|orjson] [N]",
                        help="skip: build the documents only; orjson: encode them with orjson; "
                             "N: the number of documents (default: the kind's)")
    options = parser.parse_args(argv)
    rest = list(options.rest)
    count = None
    if rest and rest[-1].isdigit():  # a count of documents other than the kind's
        count = int(rest.pop())
    if rest not in ([], ["skip"], ["orjson"]):
        parser.error(f"after the kind: [skip|orjson] [N], not {' '.join(options.rest)!r}")
    argv = [options.kind, *rest]
    kind = argv[0]
    docs = documents(kind, KINDS[kind] if count is None else count)
    if kind.startswith("vector_"):
        codec = bulkwire.VectorCodec("float", 768)
        encode = codec.serialize
    elif kind.startswith("store_"):
        # the buffers stay in the writer's queue (a few MB): nothing consumes them
        writer = bulkwire.BulkWriter(max_buffers=64)
        ids = [f"things/{i}" for i in range(len(docs))]
        store = writer.store
        encode = None
    elif argv[1:] == ["orjson"]:
        import orjson
        encode = orjson.dumps
        option = orjson.OPT_SERIALIZE_NUMPY
        for d in docs:  # called as its users call it: no Python frame between
            encode(d, option=option)
        print(f"{argv[0]}: {len(docs)} documents encoded by orjson")
        return 0
    else:
        encode = bulkwire.dumps
    if not argv[1:]:
        if encode is not None:
            for d in docs:
                encode(d)
        else:
            for d, i in zip(docs, ids):
                store(d, i)
    print(f"{argv[0]}: {len(docs)} documents{' built only' if argv[1:] else ' encoded'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
