"""The development stack's layout, derived from the service table (qim/topology.py):
which instances run, the port keys each one takes from the PortBook, and the variables
wiring them together. N nodes of any kind are expressed the same way as one.

Instances of a kind are named `<service>`, `<service>2`, `<service>3`, ... (the name is
the node's id in the stack: its log file, its pid and metrics entry in stack.json, its
port keys). Each instance takes one port per listener of its row (key `<name><suffix>`:
"gateway", "gateway_push", "writer2") and one for /metrics (`<name>_metrics`); the keys of
the first instance of a kind are those a single-node stack always had, so a remembered
ports.json keeps its addresses (docs/decisions/0014).

Environment: per instance, every listener variable and QIM_<ENV>_METRICS_LISTEN with
its ports, and QIM_<ENV>_NODE_INDEX for kinds with static assignment (mailbox,
session); shared by all, QIM_<ENV>_ADDRS (the gateways' QIM_GATEWAY_PUSH_ADDR) listing
every node's internal listener, in node order, for the services that dial the kind, and
QIM_<ENV>_NODE_COUNT of each statically assigned kind. A variable of an instance
overrides the shared one of the same name (a gateway listens on its own push address
while mailbox nodes dial the whole list).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from qim.errors import EngineError
from qim.topology import SERVICES, Service, processes


@dataclass(frozen=True)
class Instance:
    """One node of the stack: its row and its 0-based index among the nodes of its kind."""

    service: Service
    index: int

    @property
    def name(self) -> str:
        """The node's id in the stack: "writer", "writer2", ..."""
        return self.service.name if self.index == 0 else f"{self.service.name}{self.index + 1}"

    @property
    def port_keys(self) -> list[str]:
        """PortBook keys: one per listener, then the metrics port."""
        return [self.name + ln.suffix for ln in self.service.listeners] + [f"{self.name}_metrics"]


def kind_of(name: str) -> Service:
    """Instance name -> its row: "writer2" is a writer. EngineError for another name."""
    row = SERVICES.get(name.rstrip("0123456789"))
    if row is None or not row.process:
        raise EngineError(f"{name!r} is not an instance name of any service ({', '.join(SERVICES)})")
    return row


def instances(counts: Mapping[str, int], archive: bool) -> list[Instance]:
    """Every instance in start order: `counts` nodes of each kind ({service: n}, the row's dev_nodes
    (1 but for the ModerationService) when absent; 0 leaves a kind out); archive-only kinds only with `archive`. EngineError for
    an unknown kind or a negative count."""
    unknown = sorted(set(counts) - {s.name for s in processes()})
    if unknown:
        raise EngineError(f"no service {', '.join(unknown)} to run; the services are "
                          f"{', '.join(s.name for s in processes())}")
    out: list[Instance] = []
    for row in processes():
        if row.archive_only and not archive:
            continue
        n = counts.get(row.name, row.dev_nodes)
        if n < 0:
            raise EngineError(f"{row.name}: {n} nodes")
        out.extend(Instance(row, i) for i in range(n))
    return out


def port_keys(layout: list[Instance]) -> list[str]:
    """Every port key of `layout`, in order."""
    return [k for inst in layout for k in inst.port_keys]


def environment(layout: list[Instance], ports: Mapping[str, str]) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """(shared variables, {instance name: its own variables}) for `layout` with `ports`
    ({port key: "host:port"}) as the module doc says."""
    shared: dict[str, str] = {}
    own: dict[str, dict[str, str]] = {}
    by_kind: dict[str, list[Instance]] = {}
    for inst in layout:
        row = inst.service
        by_kind.setdefault(row.name, []).append(inst)
        env = {ln.var: ports[inst.name + ln.suffix] for ln in row.listeners}
        env[row.metrics_var] = ports[f"{inst.name}_metrics"]
        env["QIM_NODE_NAME"] = inst.name  # `node=` in its log lines (qim/obs/logcontext.py)
        if row.node_index:
            env[f"QIM_{row.env}_NODE_INDEX"] = str(inst.index)
        own[inst.name] = env
    for kind, nodes in by_kind.items():
        row = SERVICES[kind]
        listener = row.internal_listener
        if listener is not None:
            shared[row.addrs_var] = ",".join(ports[n.name + listener.suffix] for n in nodes)
        if row.node_index:
            shared[f"QIM_{row.env}_NODE_COUNT"] = str(len(nodes))
    return shared, own
