"""Draws the figures of docs/performance.md from the benchmarks' JSON output (needs
matplotlib, in the ``bench`` extra).

    python benchmarks/bench_load_parquet.py --rows 5000 --runs 3 --json load.json
    python benchmarks/bench_stall_memory.py --json stall.json
    python benchmarks/plot_figures.py --load load.json --stall stall.json --out docs/img

- ``throughput.png``: documents per second of bulkwire and of the baseline (the official
  client's way: a dict per row, the JSON round trip, the command text), plain and gzip, into
  the loopback server, with the ratio over each pair.
- ``stall_memory.png``: the body's live buffers and the process's resident set over time while
  the server stalls, with the bound the queue keeps and the documents stored.
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--load", help="bench_load_parquet.py --json output")
    parser.add_argument("--stall", help="bench_stall_memory.py --json output")
    parser.add_argument("--out", default="docs/img", help="folder for the PNG files (default docs/img)")
    args = parser.parse_args(argv)
    if not (args.load or args.stall):
        parser.error("give --load, --stall or both")
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
    print(f"wrote {', '.join(written)} in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
