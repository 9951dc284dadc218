"""Every metric the Grafana dashboard (deploy/grafana/qim-dashboard.json) and the alert
rules (deploy/prometheus/qim-rules.yml) name exists in a live stack's /metrics (the
session stack, after one message went through it, so labelled series exist too), and
the label values they select (opcode names, every send-path stage) are really exported.
Names the stack cannot have: node_exporter's `node_*` and Prometheus' own `up`; the
archiver's (`qim_archiver_*`, the archive tier is not in the session stack) and the
ModerationService's (`qim_moderation_notify_*`) and the NotificationService's
(`qim_notify_*`, its providers' `qim_push_*`), not started by a dev stack, are checked against their MetricSets
instead."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

from prometheus_client import generate_latest

from qim.notify.providers.base import PushMetrics
from qim.obs.metrics import SEND_STAGES
from qim.protocol import Opcode
from qim.services.archiver.metrics import ArchiverMetrics
from qim.services.moderation.notify import NotifyMetrics
from qim.services.notify.metrics import NotifyMetrics as PushNotifyMetrics
from tests.e2e.rawclient import RawClient, wait_for_entries

ROOT = Path(__file__).resolve().parents[2]
EXTERNAL = re.compile(r"^(node_|up$)")
SUFFIXES = ("_bucket", "_count", "_sum")


def _exprs() -> list[str]:
    dash = json.loads((ROOT / "deploy" / "grafana" / "qim-dashboard.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]  # a row panel has none
    rules = (ROOT / "deploy" / "prometheus" / "qim-rules.yml").read_text()
    return exprs + [rules]


def _names(text: str) -> set[str]:
    return set(re.findall(r"\b((?:qim|process|node)_[a-z0-9_]+|up)\b(?=\s*[{\[)>=<!\s]|$)", text))


def _exported(text: str) -> set[str]:
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            name, kind = line.split()[2:4]
            names.add(name)
            if kind == "histogram":
                names.update(name + s for s in SUFFIXES)
            if kind == "counter":
                names.add(name + "_total")
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


async def test_dashboard_and_rule_metrics_exist_in_a_live_stack(stack):
    sender = await RawClient.login(stack, 7_700_001, device=1)
    peer = await RawClient.login(stack, 7_700_002, device=1)
    try:
        op, _ = await sender.send_text(7_700_002, b"metrics")
        assert op == Opcode.SEND_ACK
        assert await wait_for_entries(peer, 1)
    finally:
        await sender.close()
        await peer.close()
    texts = [urllib.request.urlopen(f"http://{addr}/metrics", timeout=5).read().decode()
             for addr in stack.metrics.values()]
    live = set().union(*map(_exported, texts)) | _exported(generate_latest(ArchiverMetrics().registry).decode())
    live |= _exported(generate_latest(NotifyMetrics().registry).decode())
    live |= _exported(generate_latest(PushNotifyMetrics().registry).decode())
    live |= _exported(generate_latest(PushMetrics().registry).decode())
    wanted = set().union(*map(_names, _exprs()))
    assert {"qim_gateway_request_seconds_bucket", "qim_send_stage_seconds_bucket", "qim_mailbox_dispatch_lag"} <= wanted
    missing = sorted(n for n in wanted if not EXTERNAL.match(n) and n not in live)
    assert not missing, f"named by the dashboard or the rules but not exported: {missing}"
    joined = "\n".join(texts)
    assert 'qim_gateway_request_seconds_bucket{le="+Inf",opcode="SEND_MESSAGE"}' in joined
    # every stage of the send path reported by some service (record: split mode only)
    for stage in set(SEND_STAGES) - {"record"}:
        assert f'qim_send_stage_seconds_count{{stage="{stage}"}}' in joined, stage
