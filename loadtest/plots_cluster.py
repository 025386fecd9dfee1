"""The multi-node run's pictures (loadtest/multinode.py's JSON): one panel per phase, its timeline.

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
