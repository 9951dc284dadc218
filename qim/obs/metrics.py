"""Metrics of one node, on that node's own registry (docs/design.md §2; docs/decisions/0020).

Every service process builds its metrics when its node is built, never at import: two
nodes in one process (tests) each count their own, and importing a module registers
nothing. A service's metrics are one small class (a `MetricSet` subclass in the
service's package, e.g. `qim/services/gateway/metrics.py`) created by the node and
passed to the components that count. Names start with `qim_`; labels never carry user,
device or message ids (bounded label values only: opcodes, reasons, codes).
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class MetricSet:
    """Factory and holder of metrics on one `CollectorRegistry`.

    `registry=None` makes a private registry (a component built alone in a unit test);
    a node passes its own. `value(name, labels)` reads one sample (0.0 when absent): the
    form tests and health checks use, e.g. `value("qim_gateway_kicks_total")`.
    """

    def __init__(self, registry: Optional[CollectorRegistry] = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)

    def counter(self, name: str, doc: str, labels: Sequence[str] = ()) -> Counter:
        """A Counter on this registry (`name` without `_total`; prometheus adds it)."""
        return Counter(name, doc, list(labels), registry=self.registry)

    def gauge(self, name: str, doc: str, labels: Sequence[str] = ()) -> Gauge:
        """A Gauge on this registry."""
        return Gauge(name, doc, list(labels), registry=self.registry)

    def histogram(self, name: str, doc: str, labels: Sequence[str] = (),
                  buckets: Optional[Sequence[float]] = None) -> Histogram:
        """A Histogram on this registry (prometheus' default buckets unless given)."""
        if buckets is None:
            return Histogram(name, doc, list(labels), registry=self.registry)
        return Histogram(name, doc, list(labels), registry=self.registry, buckets=list(buckets))

    def value(self, name: str, labels: Optional[dict[str, str]] = None) -> float:
        """The current value of sample `name` (with `labels`), 0.0 when it has none."""
        return self.registry.get_sample_value(name, labels or {}) or 0.0


def invariant_reasons(counters: Iterable[Counter]) -> list[str]:
    """`name=value` of every always-zero counter sample that is not zero (a /healthz
    reason: docs/design.md §2 "503 while an always-zero invariant counter is non-zero")."""
    out = []
    for c in counters:
        for metric in c.collect():
            for sample in metric.samples:
                if sample.name.endswith("_total") and sample.value:
                    out.append(f"{sample.name}={int(sample.value)}")
    return out
