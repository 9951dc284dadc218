"""The Helm chart's per-service facts, generated from the service table (qim/topology.py)
and the variable table (qim/config/variables.py): deploy/helm/qim/files/services.json,
which every template of the chart iterates over (docs/operations.md "Running on
Kubernetes"; docs/decisions/0109-oci-image-and-helm-chart.md). The chart has no
per-service list of its own: a new row of the table is a new Deployment or StatefulSet,
Service, PodDisruptionBudget and scrape port after `python -m qim.dev.helmchart`.

One entry per process row, in table order:
- `name`, `entity`, `command` (`qim-<name>`: one image, the service chosen by its
  command, as the systemd template units do), `env` (the `QIM_<ENV>_*` prefix);
- `listeners` [{var, port, name}]: every listener but the optional ones (default
  "unset": the gateway's development `ws://`, refused unless loopback), each bound to
  the pod's IP, which is also the address a node leases under (QIM_NODE_ID defaults to
  service@listen address, so every pod is a distinct node);
- `metricsVar`, `metricsPort`: /metrics and /healthz (HTTPS with the metrics
  certificate, since a pod IP is not loopback);
- `stable`: a StatefulSet (stable pod names) when peers list this kind's addresses
  statically (`addrsVar`: the gateway's rendezvous and modulo routing to writers and
  rooms) or the kind takes a static node index; a Deployment otherwise (mailbox,
  session and gateway nodes are found through the ShardRegistry, fanout and archivers
  dial nobody);
- `nodeIndexVar`/`nodeCountVar` for `node_index` kinds (the StatefulSet ordinal);
- `reads`: the address lists of stable kinds this kind reads (variable table readers);
- `clientCert`: the variables of the client port's certificate (the kinds that read
  them: the gateway), `tokenKeys`: it reads QIM_TOKEN_PUBLIC_KEYS;
- `sharedConfig`: it reads a variable of the chart's shared ConfigMap (SHARED_CONFIG);
- `rpc`: it holds a service certificate (internal mutual TLS); `leases`, `engines`,
  `archiveOnly`, `roll` (rolling-upgrade order: docs/operations.md "Rolling upgrade");
- `startGraceS`, `unhealthyS`: the supervision rule's numbers (qim/dev/healthwatch.py),
  turned into the startup and liveness probes;
- `optional`: the kind may run 0 replicas (its row's `dev_nodes` is 0).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from qim.config.variables import variables
from qim.dev.healthwatch import START_GRACE_S, UNHEALTHY_RESTART_S
from qim.topology import Service, processes, roll_order, speaks_rpc

# the variables of the chart's shared ConfigMap (templates/config.yaml)
SHARED_CONFIG = ("QIM_REDIS_ADDR", "QIM_REDIS_CORE_ADDRS", "QIM_REDIS_MAILBOX_ADDRS", "QIM_KAFKA_BOOTSTRAP",
                 "QIM_MAILBOX_SHARD_COUNT", "QIM_TENANT_ID", "QIM_SCYLLA_ADDRS", "QIM_SCYLLA_KEYSPACE",
                 "QIM_SCYLLA_LOCAL_DC")
_NOBODY = type("_Nobody", (), {"readers": ()})()
OUT = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "qim" / "files" / "services.json"


def _port_name(row: Service, var: str) -> str:
    """A container port name (at most 15 characters, a DNS label): 'rpc', 'client', 'push'."""
    if row.internal_listener is not None and row.internal_listener.var == var:
        return "push" if var.endswith("PUSH_ADDR") else "rpc"
    return "client"


def stable(row: Service) -> bool:
    """True when the kind's pods need stable names (module doc: `stable`): a static node
    index, or an internal listener that peers can only find in their address lists. A
    kind whose nodes hold leases (`leases`) is found in the ShardRegistry instead, under
    the address it registered (mailbox and session owners; gateways, which mailbox and
    session nodes find as live `gateway` nodes: qim/services/mailbox/node.py OwnerTable)."""
    return row.node_index or (row.internal_listener is not None and not row.leases)


def entry(row: Service) -> dict[str, Any]:
    """The chart's facts of one process row (module doc)."""
    table = variables()
    optional = {ln.var for ln in row.listeners if str(table[ln.var].default).startswith("unset")}
    stables = [s for s in processes() if stable(s)]
    out: dict[str, Any] = {
        "name": row.name, "entity": row.entity, "command": f"qim-{row.name}", "env": row.env,
        "listeners": [{"var": ln.var, "port": ln.port, "name": _port_name(row, ln.var)}
                      for ln in row.listeners if ln.var not in optional],
        "metricsVar": row.metrics_var, "metricsPort": row.metrics_port,
        "stable": stable(row),
        "addrsVar": row.addrs_var if stable(row) and row.internal_listener is not None else None,
        "addrsPort": row.internal_listener.port if stable(row) and row.internal_listener else None,
        "nodeIndexVar": f"QIM_{row.env}_NODE_INDEX" if row.node_index else None,
        "nodeCountVar": (f"QIM_{row.env}_NODE_COUNT"
                         if row.node_index and f"QIM_{row.env}_NODE_COUNT" in table else None),
        # a kind's own listener wins over a list of the same name (the gateway's push address)
        "reads": [s.name for s in stables if s.internal_listener is not None
                  and row.name in table[s.addrs_var].readers
                  and s.addrs_var not in {ln.var for ln in row.listeners}],
        # the client port's certificate and the token keys: the kinds the variable table says read them
        "clientCert": ([f"QIM_{row.env}_TLS_CERT", f"QIM_{row.env}_TLS_KEY"]
                       if row.name in table.get(f"QIM_{row.env}_TLS_CERT", _NOBODY).readers else None),
        "tokenKeys": row.name in table["QIM_TOKEN_PUBLIC_KEYS"].readers,
        "rpc": speaks_rpc(row.name), "leases": row.leases, "engines": row.engines,
        # the shared ConfigMap goes to every kind that reads one of its variables (the room
        # reads QIM_REDIS_ADDR without the `engines` column)
        "sharedConfig": any(row.name in table[v].readers for v in SHARED_CONFIG),
        "archiveOnly": row.archive_only, "roll": roll_order().index(row.name),
        "startGraceS": int(START_GRACE_S), "unhealthyS": int(UNHEALTHY_RESTART_S),
        # a kind that needs the operator's outside system first (dev_nodes=0: moderation's
        # receiver, notify's provider credentials, media's S3 store) may run 0 replicas
        "optional": row.dev_nodes == 0,
    }
    return out


def render() -> str:
    """The text of files/services.json: {"generatedFrom", "rollOrder", "services"}."""
    doc = {"generatedFrom": "qim/topology.py by `python -m qim.dev.helmchart`: do not edit",
           "rollOrder": list(roll_order()),
           "services": [entry(row) for row in processes()]}
    return json.dumps(doc, indent=1) + "\n"


def main(argv: list[str]) -> int:
    """`python -m qim.dev.helmchart [OUT]`: write render() to OUT (default the chart's
    files/services.json); exit 0, or 2 with one line when it cannot be written."""
    out = Path(argv[0]) if argv else OUT
    try:
        out.write_text(render())
    except OSError as exc:
        print(f"helmchart: cannot write {out}: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
