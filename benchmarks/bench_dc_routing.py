"""The same file loaded into a real two-data-centre Cassandra 5.0 cluster routed three ways:
as bulkwire routes it, and as if the keyspace were replicated by SimpleStrategy.

The cluster: four nodes started here (``tests/servers/cassandra``, in a network namespace of
this process, GossipingPropertyFileSnitch: ``dc1`` on the first two addresses, ``dc2`` on the
last two), stopped on the way out. The keyspace: ``--replication`` (default
``{'dc1': 2, 'dc2': 2}``, NetworkTopologyStrategy), the table ``(id bigint PRIMARY KEY, emb
vector<float, DIM>)``, the file ``--rows`` rows of ``--dim`` float32 values. Every load:
``bulkwire.load_parquet`` at ``--consistency`` (default ``LOCAL_QUORUM``), ``local_dc='dc1'``,
the contact point the first node, in a fresh process (its wall and CPU seconds timed there).

- ``nts``: bulkwire's route: each row to the first replica of its token in dc1;
- ``simple``: the replicas computed as SimpleStrategy places them (the first nodes clockwise,
  as many as the factors' total, whatever their data centre), then bulkwire's rule (the first
  of them in dc1, else the first node of dc1 clockwise at a LOCAL_ level);
- ``simple-blind``: the same replicas, the first of them taken whatever its data centre (a
  token-aware client that ignores data centres).

The two wrong routes are forced in the loading process only (the benchmark replaces the
placement's replicas there); the library has no option for them. Each round loads the file
once per route, the order rotating; the table is truncated before each load. Rows per node:
the writes each node coordinated during the load (``system_views.coordinator_write_latency``,
read before and after), per data centre their sum. Printed: per route the medians of rows/s
and client CPU µs per row, the rows per node and per data centre (of the last round), and the
medians of the per-round ratios of each route's rows/s and CPU per row to ``nts``'s.

    python benchmarks/bench_dc_routing.py --rows 100000 --dim 128 --rounds 3

Needs root (the network namespace), Java 17 and the Cassandra jars (fetched once by
``tests/servers/cassandra``), numpy, pyarrow and scylla-driver. The nodes and the client share
the machine's cores: on a machine of few cores the client's CPU slows the nodes too.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import _common  # noqa: F401  (the checkout's build first when there is one, else the installed)
from _rounds import load_average, rotation
from bench_cql_load import write_file

KEYSPACE, TABLE = "bench_dcs", "vectors"
DCS = ["dc1", "dc1", "dc2", "dc2"]
ROUTES = ["nts", "simple", "simple-blind"]


def force_route(route: str) -> None:
    """In this process, loads route as ``route`` says (``nts``: as bulkwire does)."""
    if route == "nts":
        return
    from bulkwire.cql_placement import Placement
    from bulkwire.load.cql_target import CqlDescription

    placement_of = CqlDescription.placement

    def simple_placement(self, conn, contact):
        found, placement, local_dc = placement_of(self, conn, contact)
        placement.replicas_at = placement._simple(sum(placement.replication.factors.values()))
        return found, placement, local_dc

    CqlDescription.placement = simple_placement
    if route == "simple-blind":
        route_of = Placement.route

        def blind(self, local_dc, down=(), local_only=False):
            return route_of(self, None, down, False)

        Placement.route = blind


def child(route: str, path: str, host: str, consistency: str, window: int) -> None:
    """One timed load; prints JSON {rows, wall, cpu}."""
    import pyarrow.parquet  # noqa: F401  (imported before the clock, as every route's is)

    import bulkwire
    from bulkwire import targets

    force_route(route)
    started, cpu = time.perf_counter(), time.process_time()
    result = bulkwire.load_parquet(path, targets.cql(host, KEYSPACE, TABLE, local_dc="dc1",
                                                     consistency=consistency, window=window))
    print(json.dumps({"rows": result.rows, "wall": time.perf_counter() - started,
                      "cpu": time.process_time() - cpu}))


def coordinated(nodes) -> dict[str, int]:
    """The writes into the table each node has coordinated since it started."""
    from test_real_cassandra_dcs import coordinated_in

    return coordinated_in(nodes, KEYSPACE, TABLE)


def run(route: str, path: str, nodes, args: argparse.Namespace) -> dict:
    """One load routed as ``route``, in a fresh process: rows, wall, cpu, per-node writes."""
    from servers.cassandra import connect

    with connect([nodes[0].address], timeout=120.0) as s:
        s.execute(f"TRUNCATE {KEYSPACE}.{TABLE}")
    before = coordinated(nodes)
    done = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", route, "--path", path,
         "--host", nodes[0].address, "--consistency", args.consistency,
         "--window", str(args.window)], capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        sys.exit(f"the {route} load failed:\n{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    after = coordinated(nodes)
    result["nodes"] = {a: after[a] - before[a] for a in after}
    if result["rows"] != args.rows:
        sys.exit(f"the {route} load stored {result['rows']} rows of {args.rows}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replication", default="'dc1': 2, 'dc2': 2")
    parser.add_argument("--consistency", default="LOCAL_QUORUM")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--window", type=int, default=8, help="requests in flight per node")
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", help="comma-separated routes (default: all)")
    for hidden in ("--child", "--path", "--host"):  # a load in a process of its own
        parser.add_argument(hidden, help=argparse.SUPPRESS)
    args = parser.parse_args()
    names = args.only.split(",") if args.only else ROUTES
    if args.child:
        return child(args.child, args.path, args.host, args.consistency, args.window)
    if set(names) - set(ROUTES):
        parser.error(f"unknown routes: {', '.join(sorted(set(names) - set(ROUTES)))}")
    from servers.cassandra import connect, running

    folder = tempfile.mkdtemp(prefix="bench-dcs-")
    path = os.path.join(folder, "vectors.parquet")
    write_file(path, args.rows, args.dim)
    runs: dict[str, list[dict]] = {name: [] for name in names}
    loads = []
    began = time.monotonic()
    with running(4, first=75, datacenters=DCS) as nodes:
        print(f"4 nodes up in {time.monotonic() - began:.0f} s", flush=True)
        with connect([nodes[0].address], timeout=120.0) as s:
            s.execute(f"CREATE KEYSPACE {KEYSPACE} WITH replication = "
                      f"{{'class': 'NetworkTopologyStrategy', {args.replication}}}")
            s.execute(f"CREATE TABLE {KEYSPACE}.{TABLE} (id bigint PRIMARY KEY, "
                      f"emb vector<float, {args.dim}>)")
        run(names[0], path, nodes, args)  # untimed: the nodes' JIT warmed up
        for round_index, name in rotation(names, args.rounds):
            loads.append(load_average())
            result = run(name, path, nodes, args)
            runs[name].append(result)
            print(f"round {round_index + 1} {name}: {args.rows / result['wall']:,.0f} rows/s, "
                  f"{1e6 * result['cpu'] / args.rows:.1f} µs CPU/row, "
                  f"coordinated {result['nodes']}", flush=True)
        addresses = [n.address for n in nodes]
    print(f"\n{args.rows:,} rows x {args.dim} floats, replication {{{args.replication}}}, "
          f"{args.consistency}, local_dc dc1, window {args.window}, {args.rounds} rounds; "
          f"load average {min(loads)}..{max(loads)}, {os.cpu_count()} cores shared by the "
          f"4 nodes and the client")
    base = runs.get("nts")
    for name in names:
        rates = [args.rows / r["wall"] for r in runs[name]]
        cpus = [1e6 * r["cpu"] / args.rows for r in runs[name]]
        last = runs[name][-1]["nodes"]
        per_dc = {dc: sum(last[a] for a, d in zip(addresses, DCS) if d == dc)
                  for dc in sorted(set(DCS))}
        line = (f"{name:13} {statistics.median(rates):8,.0f} rows/s  "
                f"{statistics.median(cpus):6.1f} µs CPU/row  per DC {per_dc}  "
                f"per node {[last[a] for a in addresses]}")
        if base is not None and name != "nts":
            rate_ratio = statistics.median(
                (args.rows / r["wall"]) / (args.rows / b["wall"]) for r, b in zip(runs[name], base))
            cpu_ratio = statistics.median(r["cpu"] / b["cpu"] for r, b in zip(runs[name], base))
            line += f"  vs nts: rows/s x{rate_ratio:.3f}, CPU/row x{cpu_ratio:.3f}"
        print(line)


if __name__ == "__main__":
    main()
