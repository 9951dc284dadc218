"""Metrics of one node, on that node's own registry (docs/design.md §2; docs/decisions/0020).

Every service process builds its metrics when its node is built, never at import: two
nodes in one process (tests) each count their own, and importing a module registers
nothing. A service's metrics are one small class (a `MetricSet` subclass in the
service's package, e.g. `qim/services/gateway/metrics.py`) created by the node and
passed to the components that count. Names start with `qim_`; labels never carry user,
device or message ids (bounded label values only: opcodes, reasons, codes).
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# The send path's stages, each timed where it runs (docs/operations.md "Metrics"): the
# writer's reserve (reserve + record in one call unless split), record (split mode only),
# outbox (enqueue to durable delivery) and commit (COMMITTED marked); fanout (one Outbox
# batch planned, dispatched and delivered); materialize (one fused call of a shard's records);
# push (one PushBatch turned into device frames at the gateway).
SEND_STAGES = ("reserve", "record", "outbox", "commit", "fanout", "materialize", "push")
# seconds: 100 µs .. 10 s, the span between a Redis call and a broker stall
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                   2.5, 5.0, 10.0)


T = TypeVar("T")


class _LabelsMemo:
    """`labels()` answered from a dict of this metric after the first call with the same
    values: prometheus_client's validates, converts and takes a lock on every call
    (labels + inc: 1.8 µs, 1.3 µs memoised, in process), several times per message on
    the send path.
    Children are never removed here (no metric of QIM calls `remove`)."""

    def labels(self: T, *values: object, **named: object) -> T:
        if named and values:  # prometheus_client refuses the mix: let it say so
            return super().labels(*values, **named)  # type: ignore[misc]
        for v in named.values() if named else values:
            if type(v) is not str:  # memoised by exact strings only (True would meet "1"'s child)
                return super().labels(*values, **named)  # type: ignore[misc]
        key: tuple = ((), *named.items()) if named else values
        memo = self.__dict__.get("_qim_children")
        if memo is None:
            memo = self.__dict__["_qim_children"] = {}
        child = memo.get(key)
        if child is None:
            child = memo[key] = super().labels(*values, **named)  # type: ignore[misc]
        return child


class _Counter(_LabelsMemo, Counter):
    pass


class _Gauge(_LabelsMemo, Gauge):
    pass


class _Histogram(_LabelsMemo, Histogram):
    pass


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
        return _Counter(name, doc, list(labels), registry=self.registry)

    def gauge(self, name: str, doc: str, labels: Sequence[str] = ()) -> Gauge:
        """A Gauge on this registry."""
        return _Gauge(name, doc, list(labels), registry=self.registry)

    def histogram(self, name: str, doc: str, labels: Sequence[str] = (),
                  buckets: Optional[Sequence[float]] = None) -> Histogram:
        """A Histogram on this registry (prometheus' default buckets unless given)."""
        if buckets is None:
            return _Histogram(name, doc, list(labels), registry=self.registry)
        return _Histogram(name, doc, list(labels), registry=self.registry, buckets=list(buckets))

    def send_stages(self) -> Histogram:
        """`qim_send_stage_seconds{stage}`: one name in every service, so one dashboard
        panel shows the whole send path; each service observes only its own stages."""
        return self.histogram("qim_send_stage_seconds", f"Send path stage duration ({', '.join(SEND_STAGES)})",
                              ["stage"], LATENCY_BUCKETS)

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
