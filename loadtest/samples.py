"""Per-request samples (Locust's, as locustfile.py writes them) cut into windows: throughput,
percentiles and failures, overall and per request type, and per-second bins for timelines. Pure.

A request belongs to the window in which it was answered (its start plus its time), so a window's
throughput is what the server answered in it.
"""

from __future__ import annotations

import csv
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Sample:
    start: float        # Unix time the request was sent
    op: str             # Locust's name: the request type (getTable, createTable, ...)
    ms: float           # its time, milliseconds
    failure: str = ""   # "" answered as expected; else what went wrong ("503", "stale read", ...)

    @property
    def done(self) -> float:
        return self.start + self.ms / 1000


def read_samples(path: Path) -> list[Sample]:
    with open(path, newline="") as f:
        return [Sample(float(r["start"]), r["name"], float(r["ms"]), r["failure"]) for r in csv.DictReader(f)]


def percentile(sorted_values: list[float], p: float) -> float | None:
    """The nearest-rank percentile `p` (0-100) of ascending values; None for none."""
    if not sorted_values:
        return None
    return sorted_values[max(0, min(len(sorted_values) - 1, math.ceil(p / 100 * len(sorted_values)) - 1))]


def _figures(samples: list[Sample], seconds: float) -> dict:
    times = sorted(s.ms for s in samples)
    return {"requests": len(samples), "rps": round(len(samples) / seconds, 1) if seconds > 0 else None,
            "p50_ms": percentile(times, 50), "p99_ms": percentile(times, 99),
            "failures": sum(1 for s in samples if s.failure)}


def summarize(samples: list[Sample], t_from: float, t_to: float) -> dict:
    """Figures of the requests answered in [t_from, t_to): all together, and per request type;
    the failures by what they were."""
    inside = [s for s in samples if t_from <= s.done < t_to]
    seconds = t_to - t_from
    ops: dict[str, list[Sample]] = {}
    for s in inside:
        ops.setdefault(s.op, []).append(s)
    return {"seconds": round(seconds, 2), **_figures(inside, seconds),
            "failure_kinds": dict(Counter(s.failure for s in inside if s.failure).most_common()),
            "ops": {op: _figures(ops[op], seconds) for op in sorted(ops)}}


def bins(samples: list[Sample], t0: float, t_from: float, t_to: float, width: float = 1.0) -> list[dict]:
    """Per `width` seconds of [t_from, t_to) (times given relative to `t0`): requests answered,
    failed, and the p99 of those answered in the bin."""
    n = max(0, math.ceil((t_to - t_from) / width))
    slots: list[list[Sample]] = [[] for _ in range(n)]
    for s in samples:
        if t_from <= s.done < t_to:
            slots[min(n - 1, int((s.done - t_from) // width))].append(s)
    return [{"t": round(t_from - t0 + i * width, 2), "answered": len(slot),
             "failed": sum(1 for s in slot if s.failure), "p99_ms": percentile(sorted(s.ms for s in slot), 99)}
            for i, slot in enumerate(slots)]
