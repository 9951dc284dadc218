"""The NotificationService's row of the Grafana dashboard (deploy/grafana/qim-dashboard.json;
docs/decisions/0135, 0145): a row panel, then panels of the alerts by provider and
outcome, the silent updates, the lag (what QimNotifyLagging watches), retries and badge
waits. The alert panels' outcome selectors together show every outcome the service
exports (qim/services/notify/metrics.py) exactly once, so what the row shows adds up to
what was due (sent + failed + unregistered + suppressed = due), and select no outcome
the service does not export. That every metric named exists is tests/ops/test_metric_names.py's
check; that QimNotifyLagging fires is tests/ops/test_alerts.py's."""

from __future__ import annotations

import json
import re
from pathlib import Path

from qim.services.notify.metrics import ALERT_OUTCOMES

ROOT = Path(__file__).resolve().parents[2]


def _row() -> list[dict]:
    """The panels under the NotificationService row (up to the next row or the end)."""
    panels = json.loads((ROOT / "deploy" / "grafana" / "qim-dashboard.json").read_text())["panels"]
    starts = [i for i, p in enumerate(panels) if p["type"] == "row" and "NotificationService" in p["title"]]
    assert len(starts) == 1, "one NotificationService row"
    out = []
    for p in panels[starts[0] + 1:]:
        if p["type"] == "row":
            break
        out.append(p)
    return out


def test_the_notify_row_shows_alerts_silent_updates_lag_and_retries():
    exprs = " ".join(t["expr"] for p in _row() for t in p["targets"])
    for name in ("qim_notify_alerts_total", "qim_notify_silent_total", "qim_notify_lag_records",
                 "qim_notify_retries_total", "qim_notify_queue_depth"):
        assert name in exprs, name
    assert re.search(r"by \(provider, outcome\) \(rate\(qim_notify_alerts_total", exprs), "alerts by provider and outcome"


def test_the_alert_panels_show_every_outcome_once_and_no_other():
    shown: list[str] = []
    for p in _row():
        for t in p["targets"]:
            if "qim_notify_alerts_total" not in t["expr"]:
                continue
            selector = re.search(r'qim_notify_alerts_total\{outcome=~"([^"]+)"\}', t["expr"])
            assert selector, f"an alert panel selects its outcomes: {t['expr']}"
            pattern = re.compile(f"^(?:{selector.group(1)})$")
            shown += [o for o in ALERT_OUTCOMES if pattern.match(o)]
            assert any(pattern.match(o) for o in ALERT_OUTCOMES), f"selects no exported outcome: {t['expr']}"
    assert sorted(shown) == sorted(ALERT_OUTCOMES), f"every outcome shown exactly once: {sorted(shown)}"
