"""The service table (qim/topology.py) is the one definition of a service: every
per-service list is derived from it, and each check here fails when a list is edited by
hand instead (docs/decisions/0028-topology-table.md). Pure logic: no engine, no process."""

from __future__ import annotations

import ast
import pathlib
import re
import tomllib

import pytest

import qim.topology as topology
from qim.config import Env
from qim.dev.certs import DEV_SERVICES
from qim.dev.rolling import ROLL_ORDER
from qim.dev.stack_layout import environment, instances, kind_of, port_keys
from qim.errors import EngineError
from qim.net.allow import KNOWN_SERVICES, RPC_ALLOW
from qim.proto.v1 import internal_pb2
from qim.protocol import INTERNAL_CATEGORY, Opcode
from qim.services.gateway.routes import ROUTES
from qim.topology import (
    GATEWAY,
    ROUTINGS,
    SERVICES,
    dials,
    engine_readers,
    load,
    processes,
    roll_order,
    rpc_allow,
    server_of,
    speaks_rpc,
)
from qim.wire.calls import CALLS, calls_of

ROOT = pathlib.Path(__file__).resolve().parents[1]
TABLE_BEGIN, TABLE_END = "<!-- services:begin (tests/test_topology.py) -->", "<!-- services:end -->"


def test_names_are_certificate_identities_and_env_prefixes_are_unique():
    for name, row in SERVICES.items():
        assert name == row.name and re.fullmatch(r"[a-z][a-z0-9-]*", name), name
        assert row.env == name.upper().replace("-", "_")
    ports = [ln.port for row in SERVICES.values() for ln in row.listeners]
    ports += [row.metrics_port for row in processes()]
    assert len(ports) == len(set(ports)), "two listeners share a default port"
    variables = [ln.var for row in SERVICES.values() for ln in row.listeners]
    assert len(variables) == len(set(variables))
    assert all(row.metrics_port for row in processes()), "every process serves /metrics"


def test_the_allow_list_is_the_serves_column():
    assert dict(RPC_ALLOW) == rpc_allow() and KNOWN_SERVICES == frozenset(SERVICES)
    internal = [op for op in Opcode if (op >> 8) == INTERNAL_CATEGORY]
    served = [op for row in SERVICES.values() for op in row.serves]
    assert sorted(served) == sorted(internal), "every internal opcode is served by exactly one row"
    for op in internal:
        assert server_of(op).internal_listener is not None
        assert RPC_ALLOW[op] <= set(SERVICES)


def test_dev_certificates_are_the_services_that_speak_internal_rpc():
    assert set(DEV_SERVICES) == {n for n in SERVICES if speaks_rpc(n)}
    assert {"gateway", "writer", "mailbox", "session", "qimctl"} <= set(DEV_SERVICES)
    assert "fanout" not in DEV_SERVICES  # reads and writes logs only: no identity to prove


def test_console_scripts_are_one_per_process_row():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    services = {k: v for k, v in scripts.items() if v.startswith("qim.app.")}
    expected = {f"qim-{row.name}": f"qim.app.main:{row.name}" for row in processes()}
    paste = "\n".join(f'{k} = "{v}"' for k, v in expected.items())
    assert services == expected, f"[project.scripts] must list exactly:\n{paste}"
    import qim.app.main as app_main

    for row in processes():
        assert getattr(app_main, row.name).args == (row.name,)
    for name in ("qimctl", "nobody"):  # an identity, not a process; no row
        with pytest.raises(AttributeError):
            getattr(app_main, name)


def test_entries_and_configs_resolve_and_agree_with_their_row():
    for row in processes():
        assert row.entry and row.config
        node, config = load(row.entry), load(row.config)
        assert node.service == row.name, f"{row.entry}.service must be {row.name!r}"
        assert callable(config.from_env)
    assert not (ROOT / "qim" / "app" / "writer.py").exists()  # one main() for every process


def test_default_addresses_come_from_the_table():
    env = Env({})
    for row in processes():
        assert env.metrics_listen(row.name) == f"127.0.0.1:{row.metrics_port}"
        for ln in row.listeners:
            assert env.listen(ln.var) == f"127.0.0.1:{ln.port}"
    # a gateway also sends EPHEMERAL_FRAMES to the other gateways' push listeners (decision 0121)
    assert Env({}).peers("gateway") == {"writer": ("127.0.0.1:7101",), "mailbox": ("127.0.0.1:7102",),
                                          "session": ("127.0.0.1:7103",), "room": ("127.0.0.1:7106",),
                                          "gateway": ("127.0.0.1:7104",)}
    # ROOM_PUSH travels back on the gateway's own connection: the RoomWriter dials nobody
    assert Env({}).peers("room") == {} and dials("room") == []
    assert set(Env({}).peers("mailbox")) == {"gateway", "session"} and set(Env({}).peers("session")) == {"gateway"}
    assert [s.name for s in dials("qimctl")] == ["writer"] and dials("fanout") == []


def test_gateway_routes_are_the_declared_calls():
    assert {op: r.backend for op, r in ROUTES.items()} == {c.opcode: c.backend for c in CALLS}
    for op, route in ROUTES.items():
        row = SERVICES[route.backend]
        assert row.gateway is not None and row.gateway.routing in ROUTINGS
        assert GATEWAY in row.serves[route.opcode], f"the gateway may not send {route.opcode!r}"
        assert route.envelope is getattr(internal_pb2, row.gateway.envelope)
        assert {"actor", "upstream"} <= set(route.envelope.DESCRIPTOR.fields_by_name)
        assert route.bulk == calls_of(row.name)[op].bulk and (op >> 8) != INTERNAL_CATEGORY


def test_the_dev_stack_layout_keeps_its_port_keys_and_expresses_n_nodes():
    one = instances({}, archive=True)
    assert [i.name for i in one] == ["writer", "mailbox", "session", "room", "gateway", "fanout", "archiver"]
    # the keys a remembered ports.json holds (docs/decisions/0014): unchanged for one node each
    assert port_keys(one) == ["writer", "writer_metrics", "mailbox", "mailbox_metrics", "session", "session_metrics",
                              "room", "room_metrics",
                              "gateway", "gateway_push", "gateway_ws", "gateway_metrics", "fanout_metrics", "archiver_metrics"]
    assert "archiver" not in [i.name for i in instances({}, archive=False)]
    many = instances({"gateway": 2, "writer": 3, "mailbox": 2, "session": 2, "fanout": 2}, archive=False)
    keys = port_keys(many)
    assert len(keys) == len(set(keys)) and {"gateway2", "gateway2_push", "writer3", "fanout2_metrics"} <= set(keys)
    shared, own = environment(many, {k: f"127.0.0.1:{10000 + i}" for i, k in enumerate(keys)})
    ports = {k: f"127.0.0.1:{10000 + i}" for i, k in enumerate(keys)}
    assert shared["QIM_WRITER_ADDRS"] == ",".join(ports[k] for k in ("writer", "writer2", "writer3"))
    assert shared["QIM_GATEWAY_PUSH_ADDR"] == f"{ports['gateway_push']},{ports['gateway2_push']}"
    # mailbox and session shards are leased from the ShardRegistry: no static index (decisions/0040)
    assert "QIM_MAILBOX_NODE_COUNT" not in shared and "QIM_MAILBOX_NODE_INDEX" not in own["mailbox2"]
    assert own["gateway2"] == {"QIM_GATEWAY_LISTEN": ports["gateway2"], "QIM_GATEWAY_PUSH_ADDR": ports["gateway2_push"],
                               "QIM_GATEWAY_WS_LISTEN": ports["gateway2_ws"],
                               "QIM_GATEWAY_METRICS_LISTEN": ports["gateway2_metrics"],
                               "QIM_NODE_NAME": "gateway2"}  # the node in every log line (qim/obs/logcontext.py)
    assert kind_of("writer3").name == "writer"
    with pytest.raises(EngineError):
        kind_of("qimctl")
    with pytest.raises(EngineError, match="no service rooms"):
        instances({"rooms": 1}, archive=False)


def service_table() -> str:
    """The service table of docs/architecture.md, rendered from the rows."""
    def op(o: int) -> str:
        return Opcode(o).name

    lines = ["| service | entity | listeners (default port) | metrics | serves: internal opcode ← callers | "
             "client opcodes from the gateway (envelope, routing) |", "|---|---|---|---|---|---|"]
    for row in SERVICES.values():
        name = f"`qim-{row.name}`" if row.process else f"`{row.name}` (identity only)"
        listeners = ", ".join(f"`{ln.var}` ({ln.port})" for ln in row.listeners) or "—"
        serves = "; ".join(f"{op(o)} ← {', '.join(sorted(c))}" for o, c in row.serves.items()) or "—"
        gw = "—"
        if row.gateway is not None:
            gw = (f"{', '.join(op(o) for o in calls_of(row.name))} ({row.gateway.envelope}, "
                  f"{row.gateway.routing})")
        lines.append(f"| {name} | {row.entity} | {listeners} | {row.metrics_port or '—'} | {serves} | {gw} |")
    return "\n".join(lines)


def test_the_architecture_doc_shows_the_table_as_it_is():
    text = (ROOT / "docs" / "architecture.md").read_text()
    assert TABLE_BEGIN in text and TABLE_END in text
    shown = text.split(TABLE_BEGIN, 1)[1].split(TABLE_END, 1)[0].strip()
    assert shown == service_table(), f"docs/architecture.md service table must read:\n{service_table()}"


# the service-kind constants of qim/topology.py (GATEWAY, WRITER, ...), by name
KIND_CONSTANTS = {name: value for name, value in vars(topology).items()
                  if name.isupper() and isinstance(value, str) and value in SERVICES}


def _kind(node: ast.expr) -> str | None:
    """The service a collection element names: a string literal ("writer"), a kind
    constant (WRITER) or one read through the module (topology.WRITER)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in SERVICES:
        return node.value
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
    return KIND_CONSTANTS.get(name) if name is not None else None


def _readers_rows(tree: ast.AST) -> set[int]:
    """ids of the `readers` arguments of qim/config/variables.py's `_v(...)` rows: which
    services read a variable is checked against what each configuration reads
    (tests/config/test_variables.py), so it is no hand-kept list."""
    return {id(call.args[3]) for call in ast.walk(tree)
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "_v"
            and len(call.args) > 3}


def hand_lists(root: pathlib.Path) -> list[str]:
    """Tuples, lists and sets naming two or more services outside qim/topology.py, by
    string literal or by kind constant, and dicts keyed by two or more string literals: a
    per-service list kept by hand (derive it from the table instead)."""
    found = []
    for path in sorted((root / "qim").rglob("*.py")):
        if path.name == "topology.py" and path.parent.name == "qim" or "proto" in path.parts:
            continue
        tree = ast.parse(path.read_text(), str(path))
        readers = _readers_rows(tree) if path.name == "variables.py" else set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and id(node) not in readers:
                named = [k for k in map(_kind, node.elts) if k is not None]
            elif isinstance(node, ast.Dict):  # keys by string literal only: {WRITER: writers} maps arguments
                named = [k.value for k in node.keys if isinstance(k, ast.Constant) and k.value in SERVICES]
            else:
                continue
            if len(named) >= 2:
                found.append(f"{path.relative_to(root)}:{node.lineno}: {', '.join(named)}")
    return found


def test_no_per_service_list_is_kept_by_hand(tmp_path):
    assert hand_lists(ROOT) == []
    (tmp_path / "qim" / "dev").mkdir(parents=True)
    (tmp_path / "qim" / "dev" / "certs.py").write_text(
        'DEV_SERVICES = ("gateway", "writer")\nPORTS = {"fanout": 1}\n'
        "from qim.topology import FANOUT, GATEWAY, WRITER\nORDER = (GATEWAY, FANOUT)\nKINDS = [topology.WRITER, ROOM]\n")
    assert hand_lists(tmp_path) == ["qim/dev/certs.py:1: gateway, writer", "qim/dev/certs.py:4: gateway, fanout",
                                    "qim/dev/certs.py:5: writer, room"]


def test_derived_lists_follow_the_table():
    """ROLL_ORDER and the engine readers are the `roll` and `engines` columns: every
    process has one place in the roll, readers before writers."""
    assert ROLL_ORDER == roll_order() and len(set(ROLL_ORDER)) == len(ROLL_ORDER)
    assert set(ROLL_ORDER) == {s.name for s in processes()}
    assert ROLL_ORDER.index(GATEWAY) == 0 and ROLL_ORDER[-1] == "writer"  # every frame's reader first, Outbox writer last
    assert set(engine_readers()) == {"writer", "mailbox", "session", "fanout", "archiver", "gateway", "moderation",
                                   "notify", "media"}


def test_a_new_service_is_one_row(monkeypatch):
    """A RoomWriter row (docs/architecture.md "How to add a service"), with a stand-in
    internal opcode and envelope, and one declared call: every derived list picks it up
    without another edit."""
    import qim.dev.stack_layout as layout
    from qim.proto.v1 import session_pb2
    from qim.services.gateway.routes import build_routes
    from qim.topology import GatewayBackend, Listener, Service
    from qim.wire.calls import Call

    room_call = 0x7F7E  # not a real opcode: the room's own comes with its package
    room = Service("room", "RoomWriter", "ROOM", 9188, "qim.services.room.node:RoomNode", "qim.config.room:RoomConfig",
                   listeners=(Listener("QIM_ROOM_LISTEN", 7188),), serves={room_call: frozenset({GATEWAY})},
                   gateway=GatewayBackend(room_call, "SessionCall", topology.RENDEZVOUS))
    join = Call(Opcode.JOIN_ROOM, session_pb2.PullSessionList, "room", "qim.services.gateway.backends.session:"
                "session_list_key", "join", Opcode.ROOM_JOINED, session_pb2.SessionListBatch)
    table = {**SERVICES, "room": room}
    monkeypatch.setattr(topology, "SERVICES", table)
    monkeypatch.setattr(layout, "SERVICES", table)
    assert topology.rpc_allow()[room_call] == {"gateway"} and topology.speaks_rpc("room")
    assert "room" in [s.name for s in topology.dials("gateway")]
    assert build_routes((join,))[Opcode.JOIN_ROOM].backend == "room"
    nodes = layout.instances({"room": 2}, archive=False)
    assert [i.name for i in nodes if i.service is room] == ["room", "room2"]
    keys = port_keys(nodes)
    shared, own = layout.environment(nodes, {k: f"127.0.0.1:{20000 + i}" for i, k in enumerate(keys)})
    assert shared["QIM_ROOM_ADDRS"].count(",") == 1 and set(own["room2"]) == {"QIM_ROOM_LISTEN", "QIM_ROOM_METRICS_LISTEN",
                                                                                 "QIM_NODE_NAME"}
    assert Env({}).peers("gateway")["room"] == ("127.0.0.1:7188",)
