"""The cluster mix benchmark's pure parts (loadtest/cluster_mix.py): metastores picked by Zipf's law
(workload.zipf_weights, Chooser(zipf=...)), and Locust's per-request samples cut into windows and
bins (loadtest/samples.py), as its report reads them. Timings are the benchmark's, not tested here."""

import csv
import random
from collections import Counter

from loadtest.samples import Sample, bins, percentile, read_samples, summarize
from loadtest.workload import Chooser, Metastore, zipf_weights


def test_zipf_weights_follow_the_law_dealt_at_random():
    weights = zipf_weights(100, 1.0)
    assert sorted(weights, reverse=True) == [1 / (k + 1) for k in range(100)]
    assert weights != sorted(weights, reverse=True)          # popularity is not the population's order
    assert zipf_weights(100, 1.0) == weights                 # the same every run (a fixed seed)
    steep = sorted(zipf_weights(100, 2.0), reverse=True)
    assert abs(steep[0] / steep[9] - 100) < 1e-9              # rank 1 vs rank 10: 10 ** exponent
    assert set(zipf_weights(10, 0.0)) == {1.0}                # exponent 0: uniform


def test_chooser_picks_metastores_by_zipf():
    metastores = [Metastore(f"m{i}", "t", 30) for i in range(100)]
    weights = zipf_weights(100, 1.0)
    chooser = Chooser(metastores, random.Random(5), session_length=1, zipf=1.0)
    picks = Counter()
    for _ in range(30_000):
        chooser.left = 0                                      # a new metastore every pick
        picks[chooser.metastore().id] += 1
    hottest = max(range(100), key=weights.__getitem__)
    harmonic = sum(1 / (k + 1) for k in range(100))
    assert picks.most_common(1)[0][0] == f"m{hottest}"
    assert abs(picks[f"m{hottest}"] / 30_000 - 1 / harmonic) < 0.015    # ~19 % of picks
    top10 = {f"m{i}" for i in sorted(range(100), key=weights.__getitem__)[-10:]}
    assert abs(sum(picks[m] for m in top10) / 30_000 - sum(1 / (k + 1) for k in range(10)) / harmonic) < 0.02
    # without zipf the size decides, as before
    sized = Chooser([Metastore("big", "t", 10_000), Metastore("small", "t", 1)], random.Random(1), session_length=1)
    assert Counter(sized.metastore().id for _ in range(2000))["big"] > 1800


def test_windows_count_requests_by_when_they_were_answered(tmp_path):
    t0 = 1_000.0
    samples = [Sample(t0 + i * 0.1, "getTable", float(i % 50 + 1)) for i in range(100)]      # answered in [t0, t0+10)
    samples += [Sample(t0 + 9.95, "createTable", 200.0, "503"),                                 # answered at t0+10.15: out
                Sample(t0 - 0.05, "createTable", 100.0),                                        # sent before, answered in
                Sample(t0 + 5, "createTable", 30.0, "stale read")]
    path = tmp_path / "samples.csv"
    with open(path, "w", newline="") as f:                  # the file locustfile.py writes
        out = csv.writer(f)
        out.writerow(("start", "name", "ms", "failure"))
        out.writerows((f"{s.start:.4f}", s.op, f"{s.ms:.2f}", s.failure) for s in samples)
    read = read_samples(path)
    assert read == samples

    window = summarize(read, t0, t0 + 10)
    assert window["requests"] == 102 and window["rps"] == 10.2
    assert window["failures"] == 1 and window["failure_kinds"] == {"stale read": 1}
    assert window["ops"]["getTable"]["requests"] == 100
    assert window["ops"]["getTable"]["p50_ms"] == 25.0 and window["ops"]["getTable"]["p99_ms"] == 50.0
    assert window["ops"]["createTable"] == {"requests": 2, "rps": 0.2, "p50_ms": 30.0, "p99_ms": 100.0, "failures": 1}
    assert summarize(read, t0 + 10, t0 + 11)["failure_kinds"] == {"503": 1}

    per_second = bins(read, t0, t0, t0 + 10)
    assert [b["t"] for b in per_second] == [float(i) for i in range(10)]
    assert sum(b["answered"] for b in per_second) == 102
    assert per_second[5]["failed"] == 1


def test_percentile_is_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0 and percentile(values, 99) == 99.0 and percentile(values, 100) == 100.0
    assert percentile([], 99) is None and percentile([7.0], 99) == 7.0
