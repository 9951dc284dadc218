"""Latency statistics of the load generator and of `make perf` (numpy; docs/perf-profile.md).

One helper for every latency figure QIM reports: `qim-loadgen rate` (per 5 s segment
and in all), its SDK lane, and qim/dev/perf.py (which reads the rate's JSON report).
Samples are kept in a growing float64 array (amortised O(1) appends, no Python list of
floats) and percentiles come from np.percentile (introselect, linear; no sort of the
samples). `Latencies.histogram()` counts samples in fixed log-spaced buckets
(HIST_EDGES_MS) so reports of different runs or segments can be added together and a
percentile of the sum read back with `hist_percentile` (bucket upper bound: a
conservative figure, never below the true percentile of the samples).
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

QUANTILES = (50.0, 95.0, 99.0, 100.0)  # what `summary()` prints: p50/p95/p99/max
# bucket upper bounds in ms: 0.1 ms .. 100 s, 20 buckets per decade (12 % apart)
HIST_EDGES_MS = np.concatenate(([0.0], np.logspace(-1, 5, 6 * 20 + 1)))


class Latencies:
    """Latency samples in ms (any count), with percentiles and a mergeable histogram."""

    __slots__ = ("_buf", "_n")

    def __init__(self, values: Iterable[float] = (), capacity: int = 1024) -> None:
        self._buf = np.empty(max(16, capacity), dtype=np.float64)
        self._n = 0
        for v in values:
            self.add(v)

    def add(self, ms: float) -> None:
        """Record one sample (ms)."""
        if self._n == self._buf.size:
            self._buf = np.concatenate((self._buf, np.empty(self._buf.size, dtype=np.float64)))
        self._buf[self._n] = ms
        self._n += 1

    def __len__(self) -> int:
        return self._n

    @property
    def values(self) -> np.ndarray:
        """The samples recorded so far (a view; do not keep it across `add`)."""
        return self._buf[:self._n]

    def percentiles(self, qs: Sequence[float] = QUANTILES) -> list[float]:
        """The `qs` percentiles (0..100) of the samples; NaN each when there are none."""
        return percentiles(self.values, qs)

    def p99(self) -> float:
        """The 99th percentile (NaN when empty)."""
        return self.percentiles((99.0,))[0]

    def summary(self) -> str:
        """'p50/p95/p99/max' in ms with one decimal ('nan/nan/nan/nan' when empty)."""
        return "/".join(f"{x:.1f}" for x in self.percentiles())

    def histogram(self) -> list[int]:
        """Sample counts per HIST_EDGES_MS bucket (len(HIST_EDGES_MS) - 1 counts; a
        sample above the last edge is counted in the last bucket)."""
        v = np.clip(self.values, 0.0, HIST_EDGES_MS[-1])
        return np.histogram(v, bins=HIST_EDGES_MS)[0].astype(int).tolist()

    def to_dict(self) -> dict:
        """{"count", "p50_ms", "p95_ms", "p99_ms", "max_ms", "mean_ms"} (None for NaN:
        JSON has no NaN)."""
        p50, p95, p99_, top = self.percentiles()
        mean = float(np.mean(self.values)) if self._n else float("nan")
        return {"count": self._n, **{k: finite_or_none(v) for k, v in
                (("p50_ms", p50), ("p95_ms", p95), ("p99_ms", p99_), ("max_ms", top), ("mean_ms", mean))}}


def percentiles(values, qs: Sequence[float] = QUANTILES) -> list[float]:
    """np.percentile of `values` (any sequence or array of ms) at each of `qs`; NaN each
    when empty."""
    a = np.asarray(values, dtype=np.float64)
    if a.size == 0:
        return [float("nan")] * len(qs)
    return [float(x) for x in np.percentile(a, list(qs))]


def hist_percentile(counts: Sequence[int], q: float, edges=HIST_EDGES_MS) -> float:
    """The `q` percentile (0..100) read from bucket counts: the upper edge of the bucket
    holding the q-th sample (NaN when the counts are all 0). ValueError when the counts
    do not match the edges."""
    c = np.asarray(counts, dtype=np.int64)
    if c.size != len(edges) - 1:
        raise ValueError(f"{c.size} counts for {len(edges) - 1} buckets")
    total = int(c.sum())
    if total == 0:
        return float("nan")
    rank = max(1, int(np.ceil(q / 100.0 * total)))
    return float(edges[int(np.searchsorted(np.cumsum(c), rank)) + 1])


def finite_or_none(x: float):
    """`x` rounded to 0.01 when finite, None otherwise (NaN and inf are not JSON)."""
    return round(float(x), 2) if np.isfinite(x) else None
