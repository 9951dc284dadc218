"""The latency helper of the load generator and `make perf` (qim/cli/loadgen_stats.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from qim.cli.loadgen_stats import HIST_EDGES_MS, Latencies, hist_percentile, percentiles


def test_percentiles_match_numpy_and_grow_past_capacity() -> None:
    lat = Latencies(capacity=16)
    values = [float(v) for v in range(1, 1001)]
    for v in values:
        lat.add(v)
    assert len(lat) == 1000
    assert lat.percentiles() == pytest.approx(list(np.percentile(values, [50, 95, 99, 100])))
    assert lat.summary() == "500.5/950.0/990.0/1000.0"
    d = lat.to_dict()
    assert d["count"] == 1000 and d["max_ms"] == 1000.0 and d["mean_ms"] == 500.5


def test_empty_is_nan_and_none_in_json() -> None:
    lat = Latencies()
    assert math.isnan(lat.p99()) and lat.summary() == "nan/nan/nan/nan"
    assert lat.to_dict() == {"count": 0, "p50_ms": None, "p95_ms": None, "p99_ms": None, "max_ms": None,
                             "mean_ms": None}
    assert all(math.isnan(x) for x in percentiles([], (50, 99)))


def test_histogram_counts_everything_and_its_percentile_bounds_the_true_one() -> None:
    rng = np.random.default_rng(7)
    samples = rng.lognormal(2.0, 1.0, 5000).tolist() + [250_000.0]  # one beyond the last edge
    lat = Latencies(samples)
    counts = lat.histogram()
    assert len(counts) == len(HIST_EDGES_MS) - 1 and sum(counts) == len(samples)
    true = lat.percentiles((50, 99))
    for q, t in zip((50, 99), true):
        got = hist_percentile(counts, q)
        assert t <= got <= t * 1.13  # the bucket's upper edge: at most one bucket (12 %) above
    # two halves added bucket by bucket give the histogram of the whole
    a, b = Latencies(samples[:2500]).histogram(), Latencies(samples[2500:]).histogram()
    assert [x + y for x, y in zip(a, b)] == counts


def test_hist_percentile_rejects_mismatched_counts() -> None:
    with pytest.raises(ValueError, match="buckets"):
        hist_percentile([1, 2, 3], 50)
    assert math.isnan(hist_percentile([0] * (len(HIST_EDGES_MS) - 1), 99))
