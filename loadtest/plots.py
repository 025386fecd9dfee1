"""PNG plots and markdown tables from Locust's CSVs and from chaos results (matplotlib, no display)."""

from __future__ import annotations

import csv
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

DOCS_IMG = Path(__file__).resolve().parent.parent / "docs" / "img"


def _float(v: str) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return 0.0


def plot_locust(name: str, prefix: Path, scenario, sizes: list[int]) -> str:
    """Throughput, latency percentiles and failures over time; returns the markdown section."""
    history = [r for r in csv.DictReader(open(f"{prefix}_stats_history.csv")) if r["Name"] == "Aggregated"]
    t0 = _float(history[0]["Timestamp"]) if history else 0
    t = [_float(r["Timestamp"]) - t0 for r in history]
    fig, axes = plt.subplots(3, 1, figsize=(9, 8), sharex=True)
    axes[0].plot(t, [_float(r["Requests/s"]) for r in history])
    axes[0].set_ylabel("requests/s")
    for q in ("50%", "95%", "99%"):
        axes[1].plot(t, [_float(r[q]) for r in history], label=f"p{q[:-1]}")
    axes[1].set_ylabel("latency ms (cumulative)")
    axes[1].legend()
    axes[2].plot(t, [_float(r["Failures/s"]) for r in history], color="red")
    axes[2].set_ylabel("failures/s")
    axes[2].set_xlabel("seconds")
    fig.suptitle(f"Locust scenario {name}")
    fig.tight_layout()
    png = DOCS_IMG / f"locust-{name}-over-time.png"     # beside the docs that show it (loadtest/out is not kept)
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=90)
    plt.close(fig)

    stats = list(csv.DictReader(open(f"{prefix}_stats.csv")))
    rows = ["| op | requests | failures | req/s | p50 ms | p99 ms |", "| --- | --- | --- | --- | --- | --- |"]
    for r in stats:
        rows.append(f"| {r['Name']} | {r['Request Count']} | {r['Failure Count']} | {_float(r['Requests/s']):.1f} "
                    f"| {r['50%']} | {r['99%']} |")
    failures = list(csv.DictReader(open(f"{prefix}_failures.csv"))) if Path(f"{prefix}_failures.csv").exists() else []
    return "\n".join([
        *(["**Short run on a shared 2-core machine: it checks the command works; not a measurement.**", ""]
          if scenario.seconds < 60 else []),
        f"Command: `python -m loadtest run {name}` ({scenario.users} Locust users, {scenario.seconds} s or "
        f"{scenario.max_requests} requests, {scenario.shards} shard actors, {len(sizes)} metastores with "
        f"{sum(sizes)} tables: largest {max(sizes)}, median {sorted(sizes)[len(sizes) // 2]}). The mix is "
        "`loadtest/workload.py` `MIX`: 98% reads (permission checks among them), 2% writes (grants and "
        "Delta commits among them).",
        "",
        *rows,
        "",
        f"Failures: {sum(int(f['Occurrences']) for f in failures)} "
        f"({', '.join(sorted({f['Error'] for f in failures}))[:200] or 'none'}).",
        "",
        f"![throughput, latency and failures over time](img/{png.name})",
    ])


def plot_chaos(result: dict, png: Path) -> None:
    """Throughput, errors and p99 over the run, with the fault marked."""
    rows = result["timeline"]
    step = rows[1][0] - rows[0][0] if len(rows) > 1 else 0.25
    t = [r[0] for r in rows]
    fig, axes = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True)
    axes[0].plot(t, [r[1] / step for r in rows], label="answered/s")
    axes[0].plot(t, [r[2] / step for r in rows], color="red", label="errors/s")
    axes[0].legend()
    axes[1].plot(t, [r[3] for r in rows], color="purple")
    axes[1].set_ylabel("p99 ms")
    axes[1].set_xlabel("seconds (by request start)")
    for ax in axes:
        ax.axvline(result["fault_at"], color="black", linestyle="--")
    fig.suptitle(f"{result['experiment']}: recovery {result['recovery_seconds']} s, "
                 f"invariants {'hold' if result['invariants_hold'] else 'VIOLATED'}", fontsize=10)
    fig.tight_layout()
    fig.savefig(png, dpi=90)
    plt.close(fig)
