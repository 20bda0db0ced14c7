"""The official ``ravendb`` client's bulk insert before and after ``bulkwire.ravendb.install()``,
end to end into the loopback server (bulkwire.testing, in its own process).

    python benchmarks/bench_ravendb_dropin.py                     # 10,000 docs, 1024 dims
    python benchmarks/bench_ravendb_dropin.py --docs 1000 --rounds 3 --dims 384

The same user code runs in both: ``with store.bulk_insert(options=BulkInsertOptions(
use_compression=...)) as bulk: bulk.store(entity)`` for every entity; "after" only called
``bulkwire.ravendb.install()`` first. Each measured run is a fresh process; within a round
the two alternate (the order flips every round); the figure is the median of the per-round
ratios (before seconds / after seconds), with each side's median documents/s. Documents are
the reference workload's: ``Embedding(Id, Name, Rank, Vector)``, the vector a list of Python floats
(256 distinct vectors, fixed seed). Every run's received document count is checked.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _common import (child_arguments, loopback_server, print_command,  # noqa: E402
                     run_measured_child, server_summary)
from bench_bulk_insert import make_entities  # noqa: E402  (the reference workload)

SIDES = ("before", "after")
REFERENCE = "own"  # bulkwire's own BulkInsert on the same documents: what "after" can reach


def child(args: argparse.Namespace) -> None:
    entities = make_entities(args.docs, args.dim)
    from ravendb import DocumentStore
    from ravendb.documents.bulk_insert_operation import BulkInsertOptions

    import bulkwire.ravendb
    import bulkwire.transport  # noqa: F401  (imported before the clock, as ravendb's modules are)

    if args.child == REFERENCE:
        start = time.perf_counter()
        with bulkwire.BulkInsert(args.url, "bench", compress=args.mode == "gzip", timeout=120) as own:
            for entity in entities:
                own.store(entity)
        return _report(args, time.perf_counter() - start)
    if args.child == "after":
        bulkwire.ravendb.install()
    store = DocumentStore(urls=[args.url], database="bench")
    store.conventions.disable_topology_updates = True
    store.conventions.disable_topology_cache = True
    store.initialize()
    try:
        start = time.perf_counter()
        with store.bulk_insert(options=BulkInsertOptions(use_compression=args.mode == "gzip")) as bulk:
            for entity in entities:
                bulk.store(entity)
        seconds = time.perf_counter() - start
    finally:
        store.close()
    _report(args, seconds)


def _report(args: argparse.Namespace, seconds: float) -> None:
    summary = server_summary(args.url)
    print(json.dumps({"seconds": seconds, "received": summary["documents"],
                      "wire_bytes": summary["wire_bytes"], "server_error": summary["error"],
                      "encoding": summary["content_encoding"]}))


def run_child(url: str, side: str, mode: str, dim: int, docs: int) -> dict:
    result = run_measured_child(__file__, ["--child", side, "--mode", mode, "--dim", str(dim),
                                           "--docs", str(docs), "--url", url],
                                docs, f"{side} {mode} {dim}")
    if (result["encoding"] == "gzip") != (mode == "gzip"):
        raise SystemExit(f"{side} {mode}: the request's Content-Encoding was {result['encoding']}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--dims", type=int, nargs="+", default=[1024])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--modes", nargs="+", default=["plain", "gzip"], choices=["plain", "gzip"])
    parser.add_argument("--reference", action="store_true",
                        help="also run bulkwire's own BulkInsert in each round (docs/s only)")
    args = child_arguments(parser, SIDES + (REFERENCE,))
    if args.child:
        return child(args)

    print_command()
    with loopback_server() as url:
        from bulkwire import _core
        print(f"official ravendb client's bulk insert, before / after bulkwire.ravendb.install(); "
              f"{args.docs:,} documents, {args.rounds} interleaved rounds, loopback server in its "
              f"own process; ISA-L linked: {bool(_core.HAVE_ISAL)}; load average "
              f"{os.getloadavg()[0]:.2f}")
        print(f"{'dim':>5} {'mode':>5} {'before docs/s':>14} {'after docs/s':>13} "
              f"{'median ratio':>13} {'min':>6} {'max':>6} {'B/doc before':>13} {'after':>7}"
              + (f" {'own BulkInsert docs/s':>22}" if args.reference else ""))
        for dim in args.dims:
            for mode in args.modes:
                results: dict = {side: [] for side in SIDES}
                ratios = []
                for round_ in range(args.rounds):
                    order = SIDES if round_ % 2 == 0 else SIDES[::-1]
                    if args.reference:
                        order = order + (REFERENCE,)
                    got = {side: run_child(url, side, mode, dim, args.docs) for side in order}
                    if args.reference:
                        results.setdefault(REFERENCE, []).append(got[REFERENCE])
                    for side in SIDES:
                        results[side].append(got[side])
                    ratios.append(got["before"]["seconds"] / got["after"]["seconds"])
                rate = {side: statistics.median(args.docs / r["seconds"] for r in results[side])
                        for side in SIDES}
                wire = {side: results[side][-1]["wire_bytes"] / args.docs for side in SIDES}
                print(f"{dim:>5} {mode:>5} {rate['before']:>14,.0f} {rate['after']:>13,.0f} "
                      f"{statistics.median(ratios):>12.1f}x {min(ratios):>5.1f}x {max(ratios):>5.1f}x "
                      f"{wire['before']:>13,.0f} {wire['after']:>7,.0f}"
                      + (f" {statistics.median(args.docs / r['seconds'] for r in results[REFERENCE]):>22,.0f}"
                         if args.reference else ""), flush=True)


if __name__ == "__main__":
    main()
