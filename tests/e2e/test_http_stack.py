"""Every node of a real stack answers /healthz and /metrics on the HTTP seam
(qim/obs/http.py, docs/decisions/0111): the same paths, port, statuses, bodies and
content type as the hand-written listener it replaced (the supervisor, the chart's
probes and Prometheus read them), and each request is counted by route template."""

from __future__ import annotations

import asyncio
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

HEALTHY_WITHIN_S = 60.0  # a busy machine: generous


def _get(url: str) -> tuple[int, str, str]:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.status, r.headers["Content-Type"], r.read().decode()


async def test_every_node_answers_healthz_and_metrics_on_the_seam(stack):
    for name in stack.names:
        deadline = time.monotonic() + HEALTHY_WITHIN_S
        while (seen := await asyncio.to_thread(stack.healthz, name, 5.0)) != (200, "ok\n"):
            assert time.monotonic() < deadline, f"{name} /healthz: {seen}"
            await asyncio.sleep(0.5)
        base = f"http://{stack.metrics[name]}"
        status, ctype, body = await asyncio.to_thread(_get, f"{base}/healthz")
        assert (status, ctype, body) == (200, "text/plain; charset=utf-8", "ok\n"), name
        status, ctype, text = await asyncio.to_thread(_get, f"{base}/metrics")
        assert status == 200 and ctype.startswith("text/plain; version=") and "process_cpu_seconds_total" in text
        counted = {
            (s.labels["route"], s.labels["status"])
            for f in text_string_to_metric_families(text)
            for s in f.samples
            if s.name == "qim_http_requests_total" and s.labels["method"] == "GET"
        }
        assert ("/healthz", "2xx") in counted, (name, counted)
