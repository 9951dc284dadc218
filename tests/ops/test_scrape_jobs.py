"""deploy/prometheus/prometheus.yml has a job for every row of the service table with a
metrics port (qim-room was missing: issue 33 item 10), each target on that row's port,
and is exactly what tools/gen_prometheus.py renders from the table (qim/obs/scrape.py)."""

from __future__ import annotations

from pathlib import Path

import yaml

from qim.obs.scrape import render
from qim.topology import SERVICES

PROM = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "prometheus.yml"


def test_every_row_with_a_metrics_port_has_a_job_on_that_port():
    jobs = {j["job_name"]: j for j in yaml.safe_load(PROM.read_text())["scrape_configs"]}
    rows = [s for s in SERVICES.values() if s.metrics_port is not None]
    assert rows and any(s.name == "room" for s in rows)
    for row in rows:
        job = jobs.get(f"qim-{row.name}")
        assert job is not None, f"no scrape job qim-{row.name} in {PROM.name}"
        targets = [t for c in job["static_configs"] for t in c["targets"]]
        assert targets and all(t.endswith(f":{row.metrics_port}") for t in targets), (row.name, targets)
        assert job["scheme"] == "https" and job["tls_config"]["min_version"] == "TLS13"
    extra = {n for n in jobs if n.startswith("qim-")} - {f"qim-{s.name}" for s in rows}
    assert not extra, f"jobs for no service of the table: {extra}"


def test_the_file_is_generated_from_the_table():
    assert PROM.read_text() == render(), "deploy/prometheus/prometheus.yml is stale: python tools/gen_prometheus.py"
