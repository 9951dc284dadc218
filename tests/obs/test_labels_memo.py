"""Memoised labels() of QIM's metrics (qim/obs/metrics.py _LabelsMemo): the same child as
prometheus_client would give for every call, whatever mix of positional, keyword or
non-string values hit the memo first."""

from __future__ import annotations

import pytest

from qim.obs.metrics import MetricSet


def test_every_call_reaches_the_child_prometheus_names():
    m = MetricSet()
    c = m.counter("qim_memo_test", "t", ["a"])
    for call in (lambda: c.labels("1"), lambda: c.labels(a="1"), lambda: c.labels(1), lambda: c.labels(True),
                 lambda: c.labels("1")):
        call().inc()
    assert m.value("qim_memo_test_total", {"a": "1"}) == 4  # "1", a="1", 1 (str(1)), "1" again
    assert m.value("qim_memo_test_total", {"a": "True"}) == 1  # never the memo's "1"
    two = m.counter("qim_memo_two", "t", ["a", "b"])
    two.labels(a="p", b="q").inc()
    two.labels(b="q", a="p").inc()
    two.labels("p", "q").inc()
    assert m.value("qim_memo_two_total", {"a": "p", "b": "q"}) == 3
    with pytest.raises(ValueError):  # prometheus_client's refusal of a mixed call is kept
        two.labels("p", b="q")
