"""The cluster runs' pictures: loadtest/multinode.py's phases (one panel each, its timeline), and
loadtest/cluster_mix.py's configurations and node join (`plot_mix`).

Each panel: requests answered per quarter second (ok and failed) and the slowest read in it,
the shard count over time, and the timeline's marks (detected, reassigned, every affected
metastore answering again, shard count restored), seconds after the fault.

    python -m loadtest.multinode --out multinode.json
    python -m loadtest.plots_cluster multinode.json            # docs/img/cluster-timeline.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

DOCS_IMG = Path(__file__).resolve().parent.parent / "docs" / "img"
PHASES = ("kill-node", "kill-raylet", "join", "drain")
TITLES = {"kill-node": "a whole worker killed (SIGKILL: its shards, raylet, agents)",
          "kill-raylet": "a worker's raylet alone killed", "join": "a worker joins",
          "drain": "the joined worker drained (shardcat drain)"}
MARKS = (("detected", "tab:orange"), ("reassigned", "tab:red"), ("first_answer", "tab:green"),
         ("restored", "tab:purple"))


def plot(result: dict, png: Path) -> None:
    phases = {p["phase"]: p for p in result["phases"]}
    shown = [name for name in PHASES if name in phases]
    fig, axes = plt.subplots(len(shown), 1, figsize=(10, 2.6 * len(shown)), squeeze=False)
    for ax, name in zip(axes[:, 0], shown):
        phase = phases[name]
        bins = phase.get("requests_over_time", [])
        t = [b["t"] for b in bins]
        ax.bar(t, [b["ok"] for b in bins], width=0.25, align="edge", color="tab:blue", alpha=0.35,
               label="answered 200 / 0.25 s")
        ax.bar(t, [b["failed"] for b in bins], width=0.25, align="edge", color="red", label="failed / 0.25 s")
        ax.set_ylabel("requests")
        slow = ax.twinx()
        slow.plot(t, [b["slowest_read"] for b in bins], color="black", lw=0.8, label="slowest read (s)")
        series = phase.get("shards_over_time", [])
        if series:
            slow.step([p[0] for p in series], [p[1] for p in series], where="post", color="tab:brown", lw=1.5,
                      label="live shards")
        slow.set_ylabel("seconds / shards")
        for key, colour in MARKS:
            at = phase["timeline"].get(key)
            if at is not None and (key != "first_answer" or name.startswith("kill")):
                ax.axvline(at, color=colour, ls="--", lw=1, label=f"{key.replace('_', ' ')} {at:.1f} s")
        ax.set_xlim(left=-0.5)
        ax.set_title(f"{TITLES[name]}: {len(phase['failed'])} failed of {phase['requests']} requests",
                     fontsize=10)
        handles = ax.get_legend_handles_labels()
        extra = slow.get_legend_handles_labels()
        ax.legend(handles[0] + extra[0], handles[1] + extra[1], fontsize=7, loc="upper right", ncol=3)
    axes[-1, 0].set_xlabel("seconds after the fault")
    fig.suptitle(f"{result['shards']} shards on a 3-node Ray cluster (loopback), a writer and a reader per "
                 "metastore through the router", fontsize=10)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("result", type=Path, help="loadtest/multinode.py's JSON")
    parser.add_argument("--png", type=Path, default=DOCS_IMG / "cluster-timeline.png")
    args = parser.parse_args()
    plot(json.loads(args.result.read_text()), args.png)
    print(args.png)


# ---- the paper mix on 1 and 2 nodes, 1 and 2 databases (loadtest/cluster_mix.py) ---------------------

CORE_GROUPS = (("router", "tab:blue"), ("shards on head", "tab:orange"), ("shards on worker", "tab:red"),
               ("Ray", "tab:gray"), ("PostgreSQL pg-a", "tab:green"), ("PostgreSQL pg-b", "tab:olive"),
               ("Locust", "tab:purple"), ("other", "lightgray"))
JOIN_MARKS = (("shard on the new node serving", "tab:orange"), ("surplus shard retired", "tab:red"),
              ("placement restored", "tab:purple"), ("load balanced", "tab:green"))


def plot_mix(run: dict, png: Path) -> None:
    """Top: each configuration's throughput and p50/p99, and its cores busy by process group.
    Below, the node joining: answered and failed requests per second with their p99, metastores
    (and load share) per node, and cores busy by group, seconds after the join."""
    r = run["result"]
    configs, join = r["configs"], r["join"]
    fig = plt.figure(figsize=(11, 12))
    grid = fig.add_gridspec(4, 2, height_ratios=[1.1, 1, 1, 1])
    labels = [c["config"].replace(" x ", "\n") for c in configs]
    x = list(range(len(configs)))

    ax = fig.add_subplot(grid[0, 0])
    ax.bar(x, [c["rps"] for c in configs], color="tab:blue", alpha=0.6)
    for i, c in enumerate(configs):
        ax.text(i, c["rps"], f"{c['rps']:,.0f}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_ylabel("requests/s answered")
    lat = ax.twinx()
    lat.plot(x, [c["p50_ms"] for c in configs], "o", color="black", label="p50 ms")
    lat.plot(x, [c["p99_ms"] for c in configs], "s", color="tab:red", label="p99 ms")
    lat.set_ylabel("ms")
    lat.set_ylim(bottom=0)
    lat.legend(fontsize=7, loc="lower right")
    ax.set_title("throughput, p50 and p99 per configuration", fontsize=9)

    ax = fig.add_subplot(grid[0, 1])
    bottom = [0.0] * len(configs)
    for group, colour in CORE_GROUPS:
        values = [c["cores"].get(group, 0.0) for c in configs]
        ax.bar(x, values, bottom=bottom, color=colour, label=group)
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.axhline(run["machine"]["cores"], color="black", ls="--", lw=1)
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_ylabel("cores busy (CPU s per s)")
    ax.set_title(f"where the CPU went: {run['machine']['cores']} cores in all (dashed); colours as below",
                 fontsize=9)

    if join:
        axes = [fig.add_subplot(grid[i, :]) for i in (1, 2, 3)]
        b = join["bins"]
        t = [p["t"] for p in b]
        axes[0].bar(t, [p["answered"] - p["failed"] for p in b], width=1.0, align="edge", color="tab:blue",
                    alpha=0.35, label="answered / s")
        axes[0].bar(t, [p["failed"] for p in b], width=1.0, align="edge", color="red", label="failed / s")
        axes[0].set_ylabel("requests / s")
        p99 = axes[0].twinx()
        p99.plot([v + 0.5 for v in t], [p["p99_ms"] for p in b], color="black", lw=0.9, label="p99 ms (per s)")
        p99.set_ylabel("p99 ms")
        p99.set_ylim(bottom=0)
        h1, l1 = axes[0].get_legend_handles_labels()
        h2, l2 = p99.get_legend_handles_labels()
        axes[0].legend(h1 + h2, l1 + l2, fontsize=7, loc="upper right", ncol=3)
        axes[0].set_title(f"a worker node joins under the mix (from 1 node x 2 databases): "
                          f"{join['during']['failures']} failed of {join['during']['requests']:,}", fontsize=9)

        tl = join["timeline"]
        tt = [p["t"] for p in tl]
        for node, colour in (("head", "tab:orange"), ("worker", "tab:red")):
            axes[1].step(tt, [p["metastores"].get(node, 0) for p in tl], where="post", color=colour,
                         label=f"metastores on {node}")
        share = axes[1].twinx()
        for node, colour in (("head", "tab:orange"), ("worker", "tab:red")):
            share.plot(tt, [p["load_share"].get(node, 0.0) for p in tl], color=colour, ls=":",
                       label=f"load share {node}")
        share.set_ylim(0, 1)
        share.set_ylabel("load share")
        axes[1].set_ylabel("metastores")

        ct = join["cores_over_time"]
        if ct:
            tc = [p["t"] for p in ct]
            axes[2].stackplot(tc, *[[p.get(g, 0.0) for p in ct] for g, _ in CORE_GROUPS],
                              colors=[c for _, c in CORE_GROUPS], labels=[g for g, _ in CORE_GROUPS], step="pre")
            axes[2].axhline(run["machine"]["cores"], color="black", ls="--", lw=1)
            axes[2].legend(fontsize=6, loc="upper right", ncol=4)
        axes[2].set_ylabel("cores busy")
        axes[2].set_xlabel("seconds after the node was added")
        lo, hi = (t[0], t[-1] + 1) if t else (0, 1)
        for ax in axes:
            ax.set_xlim(lo, hi)
            ax.axvline(0, color="black", lw=1)
            for key, colour in JOIN_MARKS:
                at = join["marks"].get(key)
                if at is not None:
                    ax.axvline(at, color=colour, ls="--", lw=1)
        marks = [Line2D([], [], color=colour, ls="--", lw=1, label=f"{key} {join['marks'][key]:.1f} s")
                 for key, colour in JOIN_MARKS if join["marks"].get(key) is not None]
        h1, l1 = axes[1].get_legend_handles_labels()
        h2, l2 = share.get_legend_handles_labels()
        axes[1].legend(h1 + h2 + marks, l1 + l2 + [m.get_label() for m in marks], fontsize=7, loc="center left",
                       bbox_to_anchor=(0.0, 0.5), ncol=2)
    fig.suptitle(f"Paper mix over {len(r['sizes'])} metastores, Zipf {r['zipf']}, 2 shards, through the router "
                 f"(Ray nodes and PostgreSQL servers all on one {run['machine']['cores']}-core machine)", fontsize=10)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=100)
    plt.close(fig)
