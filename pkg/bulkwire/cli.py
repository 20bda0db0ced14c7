"""The ``bulkwire`` command line. Each subcommand is a function taking parsed arguments."""
from __future__ import annotations

import argparse
import sys
import time
from typing import Sequence


def _sample_documents(count: int, dim: int, seed: int) -> list:
    import numpy as np

    rng = np.random.default_rng(seed)
    vectors = rng.random((count, dim), dtype=np.float32)
    return [{"Name": f"doc-{i}", "Rank": i, "Score": float(i) / 3, "Active": i % 2 == 0,
             "Embedding": vectors[i]} for i in range(count)]


def cmd_demo(args: argparse.Namespace) -> int:
    """Encode a generated sample of documents and report what it did and how fast."""
    from . import dumps

    docs = _sample_documents(args.docs, args.dim, args.seed)
    start = time.perf_counter()
    total = sum(len(dumps(d, float32=args.float32)) for d in docs)
    seconds = time.perf_counter() - start
    print(f"encoded {len(docs):,} documents with {args.dim}-dim float32 vectors "
          f"(float32={args.float32}): {total:,} bytes in {seconds:.3f} s, "
          f"{len(docs) / seconds:,.0f} documents/s, {total / seconds / 1e6:,.1f} MB/s")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bulkwire", description=__doc__)
    sub = parser.add_subparsers(dest="command")
    demo = sub.add_parser("demo", help="encode a generated sample of documents")
    demo.add_argument("--docs", type=int, default=10_000, help="documents (default 10000)")
    demo.add_argument("--dim", type=int, default=1024, help="vector dimension (default 1024)")
    demo.add_argument("--seed", type=int, default=42)
    demo.add_argument("--float32", choices=["widen", "shortest"], default="widen")
    demo.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``bulkwire`` and ``python -m bulkwire``.

    >>> main(["demo", "--docs", "10", "--dim", "4"])  # doctest: +ELLIPSIS
    encoded 10 documents ...
    0
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args(["demo", *(argv or [])])
    for name in ("docs", "dim"):
        if getattr(args, name, 1) <= 0:
            parser.error(f"--{name} must be positive")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
