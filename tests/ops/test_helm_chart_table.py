"""The Helm chart against the service table, without helm (make test; under a second):
deploy/helm/qim/files/services.json is the generated one (qim/dev/helmchart.py), every
process row has its `nodes` entry in values.yaml and in the full CI values files and
nothing else does, and no template names a kind itself: the per-service facts come from
the table only (docs/decisions/0109-oci-image-and-helm-chart.md). helm lint, template and
the schema check run in tests/deploy (make test-deploy)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from qim.dev import helmchart
from qim.topology import SERVICES, processes

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "qim"


def test_committed_services_json_is_the_generated_one():
    assert (CHART / "files" / "services.json").read_text() == helmchart.render(), \
        "deploy/helm/qim/files/services.json is stale: python -m qim.dev.helmchart"


def test_every_process_row_and_nothing_else():
    rows = [s.name for s in processes()]
    table = json.loads((CHART / "files" / "services.json").read_text())
    assert [s["name"] for s in table["services"]] == rows
    assert sorted(table["rollOrder"]) == sorted(rows)
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert sorted(values["nodes"]) == sorted(rows)
    for full in ("one-node.yaml", "several.yaml"):
        assert sorted(yaml.safe_load((CHART / "ci" / full).read_text())["nodes"]) == sorted(rows), full


def test_templates_name_no_kind():
    kinds = "|".join(SERVICES)
    literal = re.compile(rf"""["'`]({kinds})["'`]|\.Values\.(nodes\.)?({kinds})\b|-({kinds})-""")
    for tpl in sorted((CHART / "templates").iterdir()):
        hits = literal.findall(tpl.read_text())
        assert not hits, f"{tpl.name} names a kind {hits}: put the fact in the service table"


def test_stable_identity_follows_the_routing():
    """StatefulSets exactly where peers list a kind by name or it takes a node index;
    the leasing kinds (gateways included) are found in the ShardRegistry."""
    by_name = {e["name"]: e for e in json.loads(helmchart.render())["services"]}
    assert {n for n, e in by_name.items() if e["stable"]} == {"writer", "room"}
    assert by_name["gateway"]["reads"] == ["writer", "room"] and by_name["mailbox"]["reads"] == []
    assert by_name["room"]["nodeIndexVar"] == "QIM_ROOM_NODE_INDEX"
    assert [ln["var"] for ln in by_name["gateway"]["listeners"]] == ["QIM_GATEWAY_LISTEN", "QIM_GATEWAY_PUSH_ADDR"]


def test_main_writes_and_refuses_an_unwritable_path(tmp_path):
    out = tmp_path / "services.json"
    assert helmchart.main([str(out)]) == 0 and out.read_text() == helmchart.render()
    assert helmchart.main([str(tmp_path / "missing" / "x.json")]) == 2


def test_shared_config_is_what_the_configmap_sets():
    keys = set(re.findall(r"^\s+(QIM_[A-Z0-9_]+):", (CHART / "templates" / "config.yaml").read_text(), re.M))
    assert keys == set(helmchart.SHARED_CONFIG)
