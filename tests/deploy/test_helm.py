"""The Helm chart (deploy/helm/qim): `helm lint --strict` and `helm template` with three
values files (one node of each kind; several; the archive tier), the rendered manifests
validated by kubecheck (strict decoding into k8s.io/api types plus checks the types
cannot express; docs/decisions/0109-oci-image-and-helm-chart.md), and what they must say
per row of the service table; bad values fail rendering with a message naming them."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from qim.config.variables import variables
from qim.dev.helmchart import stable
from qim.topology import processes, roll_order, service

from .conftest import ROOT, tool

CHART = ROOT / "deploy" / "helm" / "qim"
VALUES = ["one-node.yaml", "several.yaml", "archive.yaml"]


def helm(*args: str) -> subprocess.CompletedProcess:
    """helm with the chart's arguments; the completed process (text)."""
    return subprocess.run([tool("helm"), *args], capture_output=True, text=True, timeout=120)


def render(values: str, *extra: str) -> subprocess.CompletedProcess:
    """`helm template rel CHART -f ci/<values>` in namespace qim."""
    return helm("template", "rel", str(CHART), "--namespace", "qim", "-f", str(CHART / "ci" / values), *extra)


def kubecheck(text: str) -> subprocess.CompletedProcess:
    """kubecheck over rendered manifests on stdin."""
    return subprocess.run([tool("kubecheck")], input=text, capture_output=True, text=True, timeout=60)


def effective(values: str) -> dict:
    """values.yaml overlaid with ci/<values> (the nodes entries, as helm merges them)."""
    base = yaml.safe_load((CHART / "values.yaml").read_text())
    over = yaml.safe_load((CHART / "ci" / values).read_text())
    for kind, node in (over.get("nodes") or {}).items():
        base["nodes"][kind] = {**base["nodes"][kind], **node}
    base["archive"] = {**base["archive"], **(over.get("archive") or {})}
    return base


@pytest.mark.parametrize("values", VALUES)
def test_lint_template_and_schema(values):
    lint = helm("lint", "--strict", str(CHART), "-f", str(CHART / "ci" / values))
    assert lint.returncode == 0, lint.stdout + lint.stderr
    out = render(values)
    assert out.returncode == 0, out.stderr
    checked = kubecheck(out.stdout)
    assert checked.returncode == 0, checked.stderr
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    want = effective(values)
    workloads = {d["metadata"]["name"]: d for d in docs if d["kind"] in ("Deployment", "StatefulSet")}
    kinds = [s for s in processes() if not s.archive_only or want["archive"]["enabled"]]
    # every row of the table the values run, and nothing else
    assert sorted(workloads) == sorted(f"rel-{s.name}" for s in kinds)
    (config,) = [d for d in docs if d["kind"] == "ConfigMap"]
    pdbs = {d["metadata"]["name"] for d in docs if d["kind"] == "PodDisruptionBudget"}
    assert pdbs == set(workloads)
    for row in kinds:
        w = workloads[f"rel-{row.name}"]
        assert w["kind"] == ("StatefulSet" if stable(row) else "Deployment"), row.name
        assert w["spec"]["replicas"] == want["nodes"][row.name]["replicas"]
        pod = w["spec"]["template"]["spec"]
        (c,) = pod["containers"]
        assert c["command"] == [f"qim-{row.name}"]
        assert c["securityContext"]["readOnlyRootFilesystem"] is True and pod["securityContext"]["runAsNonRoot"]
        assert c["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics", "scheme": "HTTPS"}
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        assert ports["metrics"] == row.metrics_port
        env = {e["name"]: e.get("value") for e in c["env"]}
        assert env[row.metrics_var] == f"$(POD_IP):{row.metrics_port}"
        # every variable the row reads without a default (the variable table) reaches it
        given = set(env) | (set(config["data"]) if c.get("envFrom") else set())
        required = {v.name for v in variables().values() if row.name in v.readers and v.default == "required"}
        assert required <= given, (row.name, required - given)
        if row.name == "gateway":
            writers = env["QIM_WRITER_ADDRS"].split(",")
            assert writers == [f"rel-writer-{i}.rel-writer.qim.svc.cluster.local:7101"
                               for i in range(want["nodes"]["writer"]["replicas"])]
            assert env["QIM_TOKEN_PUBLIC_KEYS"].startswith("/etc/qim/tokens/")
        if row.name == "room":
            rooms = want["nodes"]["room"]["replicas"]
            assert len(env["QIM_ROOM_ADDRS"].split(",")) == rooms
            assert w["spec"]["serviceName"] == "rel-room"



def test_values_reach_the_manifests():
    docs = [d for d in yaml.safe_load_all(render("several.yaml").stdout) if d]
    by = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    image = {n: w["spec"]["template"]["spec"]["containers"][0]["image"]
             for (k, n), w in by.items() if k in ("Deployment", "StatefulSet")}
    # a kind pinned mid-upgrade, the rest on the release's tag
    assert image["rel-gateway"] == "registry.example.net/qim/qim:0.1.1"
    assert image["rel-writer"] == "registry.example.net/qim/qim:0.1.0"
    assert "rel-archiver" not in image
    assert by[("ConfigMap", "rel-engines")]["data"]["QIM_MAILBOX_SHARD_COUNT"] == "128"
    assert sorted(by[("Secret", "qim-token-keys")]["data"]) == ["k1.pem", "k2.pem"]
    gw = by[("Deployment", "rel-gateway")]["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in gw["env"]}
    assert env["QIM_AUTH_TIMEOUT_MS"] == "5000" and env["QIM_SHARD_LEASE_MS"] == "10000"
    room = by[("StatefulSet", "rel-room")]["spec"]["template"]["spec"]["containers"][0]
    assert any(e["name"] == "QIM_ROOM_NODE_INDEX" for e in room["env"])
    archive = [d for d in yaml.safe_load_all(render("archive.yaml").stdout) if d]
    arch = {(d["kind"], d["metadata"]["name"]): d for d in archive}
    assert arch[("ConfigMap", "rel-engines")]["data"]["QIM_SCYLLA_ADDRS"].startswith("scylla-0")
    assert arch[("Deployment", "rel-archiver")]["spec"]["template"]["spec"]["containers"][0]["image"] == \
        "registry.example.net/qim/qim@sha256:" + "0" * 64


@pytest.mark.parametrize("extra, message", [
    (["--set", "image.repository="], "image.repository is required"),
    (["--set", "nodes.bogus.replicas=1"], "nodes.bogus: no such process kind"),
    (["--set", "engines.mailboxShardCount=100"], "must be a power of two"),
    (["--set", "archive.enabled=true", "--set", "archive.scyllaAddrs="], "archive.scyllaAddrs is required"),
    (["--set", "nodes.writer.replicas=0"], "nodes.writer.replicas must be at least 1"),
    (["--set", "tokens.files=null"], "tokens.files"),
])
def test_bad_values_fail_with_a_message(extra, message):
    out = render("one-node.yaml", *extra)
    assert out.returncode != 0 and message in out.stderr, out.stderr


def test_kubecheck_refuses_what_the_api_would():
    good = render("one-node.yaml").stdout
    assert kubecheck(good).returncode == 0
    typo = good.replace("  replicas: 1\n", "  replica: 1\n", 1)
    bad = kubecheck(typo)
    assert bad.returncode == 1 and 'unknown field "spec.replica"' in bad.stderr, bad.stderr
    wrong_port = good.replace("port: metrics, scheme: HTTPS", "port: metricz, scheme: HTTPS", 1)
    bad = kubecheck(wrong_port)
    assert bad.returncode == 1 and "probe port metricz is no container port" in bad.stderr, bad.stderr
    unknown = kubecheck("apiVersion: v1\nkind: Pod2\nmetadata: {name: x}\n")
    assert unknown.returncode == 1 and "Pod2" in unknown.stderr


@pytest.mark.parametrize("values, archive", [("several.yaml", False), ("archive.yaml", True)])
def test_notes_give_the_roll_order_of_the_kinds_run(values, archive):
    out = helm("install", "--dry-run=client", "rel", str(CHART), "--namespace", "qim", "-f", str(CHART / "ci" / values))
    assert out.returncode == 0, out.stderr
    order = [k for k in roll_order() if archive or not service(k).archive_only]
    assert " -> ".join(order) in out.stdout and "Service rel-gateway-client" in out.stdout, out.stdout
