"""How many rows bulkwire and the official Scylla driver put on a shard that owns them, against
the emulated ScyllaDB cluster of ``bulkwire.testing.scylla`` (no ScyllaDB server: an
emulation of its protocol extensions, not a measure of a real server).

Four clusters: one node of 4 shards (vnodes); two nodes whose table has 8 tablets; three
nodes of 4 shards, RF 3, with vnodes and with 16 tablets. Into each, bulkwire loads ``--rows``
rows (``bulkwire.load_parquet`` of an Arrow table, batches of ``--batch`` rows) and the driver
(``scylla-driver``: a token-aware policy, the INSERT prepared, ``execute_concurrent_with_args``)
``--driver-rows`` rows, each into a fresh cluster. The emulator records where each row
arrived: on an owning shard of one of its replicas (``owned``), else the row is forwarded:
on another shard of a replica (the node passes it between its shards) or on a node that is
no replica (it passes it to the replicas). In tablets mode it also records whether the
row's tablet had already been answered with its ``tablets-routing-v1`` payload when a
forwarded row arrived: the misses before are the price of learning the tablets (a client
cannot know them sooner), those after are rows that were in flight meanwhile or a client
that did not follow the payload. Printed per cluster and client: rows on an owning shard
and their share, the rows forwarded (to another shard, to another node), the misses before
and after their tablet's first payload, and for bulkwire the share after its first batch,
the rows it sent as probes (the rows whose answers teach it the tablets before it sends the
others) and the forwarded rows that were not probes (0 when every row sent after the
tablets were learned went to its owning shard).

    python benchmarks/bench_scylla_routing.py --rows 20000 --driver-rows 4000

Counts, not times: it may run beside other work. Needs pyarrow and scylla-driver (for the
driver's rows; ``--no-driver`` leaves them out).
"""
from __future__ import annotations

import argparse

import _common  # noqa: F401  (the checkout's build first when there is one, else the installed)

#: (name, nodes, shards, rf, tablets)
CLUSTERS = [("1 node x 4 shards, vnodes", 1, 4, 1, 0),
            ("2 nodes x 4 shards, 8 tablets", 2, 4, 1, 8),
            ("3 nodes x 4 shards, RF 3, vnodes", 3, 4, 3, 0),
            ("3 nodes x 4 shards, RF 3, 16 tablets", 3, 4, 3, 16)]


def bulkwire_rows(nodes: int, shards: int, rf: int, tablets: int, rows: int,
                  batch: int) -> dict:
    """Loads ``rows`` rows with bulkwire; the emulator's counts."""
    from bulkwire.testing.scylla import ScyllaCluster, bulkwire_insert

    with ScyllaCluster(nodes, shards, rf=rf, tablets=tablets) as cluster:
        probes: set[int] = set()
        result = bulkwire_insert(cluster, rows, batch, probes=probes)
        assert result.rows == rows and len(cluster.stored) == rows
        after = [owned for key, owned in cluster.owned.items() if key >= batch]
        outside = sum(1 for key, owned in cluster.owned.items() if not owned
                      and key not in probes)
        return dict(cluster.stats, after_first=sum(after), after_rows=len(after),
                    probes=len(probes), outside=outside)


def driver_rows(nodes: int, shards: int, rf: int, tablets: int, rows: int) -> dict:
    """Inserts ``rows`` rows with the official driver; the emulator's counts."""
    from bulkwire.testing.scylla import ScyllaCluster, driver_insert

    with ScyllaCluster(nodes, shards, rf=rf, tablets=tablets) as cluster:
        return driver_insert(cluster, rows)


def share(part: int, whole: int) -> str:
    return f"{part:,}/{whole:,} ({100 * part / whole:.1f}%)" if whole else "0/0"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--driver-rows", type=int, default=4_000)
    parser.add_argument("--batch", type=int, default=1_000)
    parser.add_argument("--no-driver", action="store_true")
    args = parser.parse_args(argv)
    print("emulated ScyllaDB nodes (bulkwire.testing.scylla); rows on an owning shard")
    for name, nodes, shards, rf, tablets in CLUSTERS:
        got = bulkwire_rows(nodes, shards, rf, tablets, args.rows, args.batch)
        print(f"{name}:")
        print(f"  bulkwire  {counts(got, tablets)}; after its first batch "
              f"{share(got['after_first'], got['after_rows'])}; rows sent as probes "
              f"{got['probes']:,}, forwarded rows that were none {got['outside']:,}")
        if not args.no_driver:
            theirs = driver_rows(nodes, shards, rf, tablets, args.driver_rows)
            print(f"  driver    {counts(theirs, tablets)}")


def counts(stats: dict, tablets: int) -> str:
    """The emulator's counts of one load, as a line."""
    line = (f"owned {share(stats['owned'], stats['rows'])}, forwarded {stats['forwarded']:,} "
            f"(other shard {stats['other_shard']:,}, other node {stats['other_node']:,})")
    if tablets:
        line += (f", misses before their tablet's first payload {stats['before_payload']:,},"
                 f" after {stats['after_payload']:,}")
    return line


if __name__ == "__main__":
    main()
