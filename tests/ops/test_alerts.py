"""Prometheus alert rules and scrape setup under deploy/prometheus/: `promtool check
rules`, `promtool test rules` on the cases of qim-rules.test.yml (each alert fires on
the series that should raise it, stays quiet on its healthy twin) and `promtool check
config` on the example scrape setup (its certificate paths pointed at real files).
promtool is Debian's prometheus package (`make test-tools`)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from qim.dev.certs import ensure_dev_pki

PROM = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
PROMTOOL = shutil.which("promtool")


def _promtool(*args: str, cwd: Path = PROM) -> subprocess.CompletedProcess:
    if PROMTOOL is None:
        pytest.fail("promtool is missing (Debian package prometheus: make test-tools)", pytrace=False)
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_rules_are_valid():
    r = _promtool("check", "rules", "qim-rules.yml")
    assert r.returncode == 0 and "SUCCESS: 10 rules found" in r.stdout, r.stdout + r.stderr


def test_rule_cases_pass():
    r = _promtool("test", "rules", "qim-rules.test.yml")
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr


def test_every_alert_has_a_case():
    rules = (PROM / "qim-rules.yml").read_text()
    cases = (PROM / "qim-rules.test.yml").read_text()
    alerts = [line.split(":", 1)[1].strip() for line in rules.splitlines() if line.strip().startswith("- alert:")]
    assert len(alerts) == 10
    assert all(f"alertname: {a}" in cases for a in alerts), alerts


def test_scrape_setup_is_valid(tmp_path):
    pki = ensure_dev_pki(tmp_path / "pki")
    files = pki.files("qimctl")
    text = (PROM / "prometheus.yml").read_text()
    text = (text.replace("/etc/prometheus/qim/internal-ca.crt", files.ca)
            .replace("/etc/prometheus/qim/prometheus.crt", files.cert)
            .replace("/etc/prometheus/qim/prometheus.key", files.key))
    (tmp_path / "prometheus.yml").write_text(text)
    shutil.copy(PROM / "qim-rules.yml", tmp_path / "qim-rules.yml")
    r = _promtool("check", "config", "prometheus.yml", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
