"""Draws the figures of docs/performance.md from the benchmarks' JSON output (needs
matplotlib, in the ``bench`` extra).

    python benchmarks/bench_load_parquet.py --rows 5000 --runs 3 --json load.json
    python benchmarks/bench_stall_memory.py --json stall.json
    python benchmarks/plot_figures.py --load load.json --stall stall.json --out docs/img
    python benchmarks/bench_real_server.py --docs 2000 --rounds 3 --json real_server.json
    python benchmarks/plot_figures.py --real-server real_server.json --out docs/img

- ``throughput.png``: documents per second of bulkwire and of the baseline (the official
  client's way: a dict per row, the JSON round trip, the command text), plain and gzip, into
  the loopback server, with the ratio over each pair.
- ``stall_memory.png``: the body's live buffers and the process's resident set over time while
  the server stalls, with the bound the queue keeps and the documents stored.
- ``real_server.png``: client CPU seconds per 1,000 documents of each contender of
  bench_real_server.py (the official client, bulkwire, the replay of a prebuilt body) per
  workload and body, into a real RavenDB node, with the official client's CPU over bulkwire's
  above each pair (a log scale: the contenders are orders of magnitude apart).
"""
from __future__ import annotations

import argparse
import json
import os


def plot_throughput(load: dict, path: str) -> None:
    import matplotlib.pyplot as plt

    results = load["results"]
    modes = [m for m in ("plain", "gzip") if any(r["mode"] == m for r in results)]
    rate = {(r["impl"], r["mode"]): r["rows"] / r["seconds"] for r in results}
    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=110)
    width = 0.38
    for offset, impl, colour in ((-width / 2, "baseline", "#9a9a9a"), (width / 2, "bulkwire", "#1f6fb4")):
        xs = [i + offset for i in range(len(modes))]
        ys = [rate.get((impl, m), 0) for m in modes]
        ax.bar(xs, ys, width, label=impl if impl == "bulkwire" else "official client's way",
               color=colour)
    for i, mode in enumerate(modes):
        ours, theirs = rate.get(("bulkwire", mode)), rate.get(("baseline", mode))
        if ours and theirs:
            ax.annotate(f"{ours / theirs:.1f}x", (i + width / 2, ours), ha="center", va="bottom")
    args = load.get("args", {})
    ax.set_xticks(range(len(modes)), modes)
    ax.set_ylabel("documents / s")
    ax.set_title(f"load_parquet into the loopback server, {args.get('rows', '?'):,} rows x "
                 f"{args.get('dim', '?')} float32" if isinstance(args.get("rows"), int)
                 else "load_parquet into the loopback server")
    ax.legend(frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_stall(stall: dict, path: str) -> None:
    import matplotlib.pyplot as plt

    samples = stall["samples"]
    t = [s["t"] for s in samples]
    mib = 2 ** 20
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    ax.plot(t, [s["rss"] / mib for s in samples], color="#9a9a9a", label="resident set")
    ax.plot(t, [s["buffers"] / mib for s in samples], color="#1f6fb4", label="live body buffers")
    ax.axhline(stall["buffer_bound"] / mib, color="#c0392b", linestyle="--", linewidth=1,
               label="the buffers' bound")
    stalled = [s["t"] for s in samples if s["stalled"]]
    if stalled:
        ax.axvspan(stalled[0], stalled[-1], color="#f4d03f", alpha=0.3, label="server stalled")
    ax.set_xlabel("seconds")
    ax.set_ylabel("MiB")
    ax.set_ylim(bottom=0)
    docs = ax.twinx()
    docs.plot(t, [s["stored"] for s in samples], color="#27ae60", linewidth=1, label="documents stored")
    docs.set_ylabel("documents stored")
    docs.set_ylim(bottom=0)
    lines = ax.get_legend_handles_labels()
    more = docs.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], frameon=False, fontsize="small",
              loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3)
    ax.set_title(f"Bulk insert of {stall['docs']:,} documents ({stall['dim']} dims) "
                 f"while the server stalls")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


REAL_SERVER_CONTENDERS = (("official", "official client", "#9a9a9a"),
                          ("bulkwire", "bulkwire", "#1f6fb4"),
                          ("replay", "replay (the server's ceiling)", "#27ae60"))


def real_server_groups(report: dict) -> tuple[list, dict]:
    """The (workload, body) groups of a bench_real_server.py report in the order measured, and
    each contender's client CPU seconds per 1,000 documents by (contender, workload, body)."""
    groups: list = []
    cpu: dict = {}
    for r in report["results"]:
        group = (r["workload"], r["mode"])
        if group not in groups:
            groups.append(group)
        cpu[(r["contender"], *group)] = r["cpu_s_per_1000_docs"]
    return groups, cpu


def plot_real_server(report: dict, path: str) -> None:
    import matplotlib.pyplot as plt

    groups, cpu = real_server_groups(report)
    fig, ax = plt.subplots(figsize=(7.6, 4.0), dpi=110)
    width = 0.27
    for k, (name, label, colour) in enumerate(REAL_SERVER_CONTENDERS):
        xs = [i + (k - 1) * width for i in range(len(groups))]
        ys = [cpu.get((name, *g), 0) * 1000 for g in groups]  # ms per 1,000 documents
        ax.bar(xs, ys, width, label=label, color=colour)
    for i, group in enumerate(groups):
        ours, theirs = cpu.get(("bulkwire", *group)), cpu.get(("official", *group))
        if ours and theirs:
            ax.annotate(f"{theirs / ours:.0f}x", (i, ours * 1000), ha="center", va="bottom",
                        fontsize="small")
    ax.set_yscale("log")
    ax.set_xticks(range(len(groups)), [f"{w}\n{m}" for w, m in groups])
    ax.set_ylabel("client CPU ms per 1,000 documents")
    docs = report.get("args", {}).get("docs")
    ax.set_title(f"Bulk insert into RavenDB {report.get('server', '')}"
                 + (f", {docs:,} documents per run" if isinstance(docs, int) else ""))
    ax.legend(frameon=False, fontsize="small")
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--load", help="bench_load_parquet.py --json output")
    parser.add_argument("--stall", help="bench_stall_memory.py --json output")
    parser.add_argument("--real-server", help="bench_real_server.py --json output")
    parser.add_argument("--out", default="docs/img", help="folder for the PNG files (default docs/img)")
    args = parser.parse_args(argv)
    if not (args.load or args.stall or args.real_server):
        parser.error("give --load, --stall, --real-server or several")
    import matplotlib

    matplotlib.use("Agg")
    os.makedirs(args.out, exist_ok=True)
    written = []
    if args.load:
        with open(args.load) as f:
            plot_throughput(json.load(f), os.path.join(args.out, "throughput.png"))
        written.append("throughput.png")
    if args.stall:
        with open(args.stall) as f:
            plot_stall(json.load(f), os.path.join(args.out, "stall_memory.png"))
        written.append("stall_memory.png")
    if args.real_server:
        with open(args.real_server) as f:
            plot_real_server(json.load(f), os.path.join(args.out, "real_server.png"))
        written.append("real_server.png")
    print(f"wrote {', '.join(written)} in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
