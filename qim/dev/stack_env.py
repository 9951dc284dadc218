"""The environment of a development stack's services, before any of them runs: what
`qim-dev stack up` (qim.dev.stack.stack_up) gives every node and each one of them.

The layout and its ports come from qim.dev.stack_layout and qim.dev.stack_ports (a
remembered port another process holds is replaced, said in one line on stderr, and the
deployment name kept: decision 0150); this module adds what makes them a development
stack: the token audience and key (qim.dev.devkeys), short shard leases, the browser origins of the WebSocket listener and of the
MediaService (the web page's, QIM_MEDIA_CORS_ORIGINS),
TLS (docs/decisions/0022: a development CA under DIR/tls, the gateway's client-port
certificate and each internal service its own for mutual TLS) or the plaintext
development flags, and the archive tier's schema (qim.dev.stack_archive).
"""

from __future__ import annotations

import os
import secrets
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

from qim.consts import TOKEN_AUDIENCE_DEFAULT
from qim.dev.certs import CLIENT_PORT, DEV_SERVICES, ensure_dev_pki
from qim.dev.devkeys import dev_token_key
from qim.dev.stack_archive import CLIENT_VARS as ARCHIVE_CLIENT_VARS
from qim.dev.stack_archive import apply_schema, scylla_of
from qim.dev.stack_layout import Instance, environment, instances, port_keys
from qim.dev.stack_ports import PortBook
from qim.topology import GATEWAY

DEV_LEASE_MS, DEV_RENEW_MS = 6000, 1000  # QIM_SHARD_LEASE_MS / QIM_SHARD_RENEW_MS of a development stack
TLS_DIR = "tls"  # the development CA and certificates, under the stack directory
DEPLOYMENT_FILE = "deployment"  # the stack's QIM_DEPLOYMENT, kept when its gateway's port moves (0150)
DEV_WS_ORIGINS = "http://localhost:*,http://127.0.0.1:*"  # pages of the development web client
# the object store's, for `qimctl audit media` (docs/operations.md "Media and object storage")
S3_CLIENT_VARS = ("QIM_S3_ENDPOINT", "QIM_S3_BUCKET", "QIM_S3_REGION", "QIM_S3_ACCESS_KEY", "QIM_S3_SECRET_KEY")
# copied into stack.env so qim-loadgen and qimctl work after sourcing one file
CLIENT_VARS = ("QIM_WRITER_ADDRS", "QIM_REDIS_ADDR", "QIM_REDIS_CORE_ADDRS", "QIM_REDIS_MAILBOX_ADDRS",
               "QIM_KAFKA_BOOTSTRAP",
               "QIM_MAILBOX_SHARD_COUNT", "QIM_TENANT_ID", "QIM_TOKEN_AUDIENCE", *ARCHIVE_CLIENT_VARS,
               *S3_CLIENT_VARS)


@dataclass(frozen=True)
class StackEnv:
    """The planned services: `env` every node gets, `instance_env` each node's own
    (listen addresses, certificates) by instance name, `metrics` instance name ->
    "host:port" of its /metrics and /healthz, in start order."""

    env: dict[str, str]
    instance_env: dict[str, dict[str, str]]
    metrics: dict[str, str]


def plan_stack(dir: Path, engine_env: Mapping[str, str], extra_env: Optional[Mapping[str, str]],
               counts: Mapping[str, int], ports_file: Optional[Path], tls: bool) -> StackEnv:
    """Lay out `counts` nodes of each kind ({service: n}, qim.dev.stack_layout.instances)
    over `engine_env` in the stack directory `dir` (which exists), with `extra_env`
    overriding the development defaults (QIM_TOKEN_PUBLIC_KEYS: a second key for rotation
    tests). Takes the ports (fresh, or remembered in `ports_file`), keeps or generates the
    development token key, makes or reuses the certificates of DIR/tls when `tls`, and
    applies the archive schema when the engines have the archive tier. Starts no service.
    A remembered port in use by another process is replaced by a free one (one line on
    stderr each, moved_line); with `ports_file`, the deployment name is kept in
    DIR/deployment (dev_deployment). EngineError when no free port is left."""
    env = {**engine_env, "QIM_TOKEN_AUDIENCE": TOKEN_AUDIENCE_DEFAULT,
           # shorter leases than production: a killed node's shards move within ~7 s
           # (docs/operations.md "Several nodes of each kind")
           "QIM_SHARD_LEASE_MS": str(DEV_LEASE_MS), "QIM_SHARD_RENEW_MS": str(DEV_RENEW_MS),
           # WebSocket for the browser client: wss:// on the client port (ALPN http/1.1) and a
           # plain ws:// development listener (the gateway row's "_ws" listener); pages served
           # from any local port may connect
           "QIM_GATEWAY_WS_ORIGINS": os.environ.get("QIM_GATEWAY_WS_ORIGINS", DEV_WS_ORIGINS)}
    pki = ensure_dev_pki((dir / TLS_DIR).resolve()) if tls else None
    if pki is not None:
        client_port = pki.files(CLIENT_PORT)
        env.update({"QIM_GATEWAY_TLS_CERT": client_port.cert, "QIM_GATEWAY_TLS_KEY": client_port.key})
    else:
        env.update({"QIM_GATEWAY_PLAINTEXT_DEV": "1", "QIM_INTERNAL_PLAINTEXT_DEV": "1"})
    env.update(extra_env or {})
    scylla = scylla_of(env)  # the archive tier: schema first, then qim-archiver
    layout = instances(counts, archive=scylla is not None)
    book = PortBook(ports_file)
    keys = port_keys(layout)
    book.take(keys)
    first = next((i for i in layout if i.service.name == GATEWAY), None)
    if ports_file is not None and first is not None:  # named by the first gateway's address before a move
        dev_deployment(dir, f"127.0.0.1:{book.ports[first.port_keys[0]]}")
    for key, old, new in book.replace_taken(keys):
        print(moved_line(layout, key, old, new, book.path), file=sys.stderr, flush=True)
    ports = {k: f"127.0.0.1:{book.ports[k]}" for k in keys}
    _, public_key = dev_token_key(dir)
    book.save()
    shared, instance_env = environment(layout, ports)
    env = {**shared, **env, "QIM_TOKEN_PUBLIC_KEYS": env.get("QIM_TOKEN_PUBLIC_KEYS", str(public_key.resolve()))}
    # the writers verify MEDIA bodies with the MediaService's key (decision 0138): one per stack directory
    env.setdefault("QIM_MEDIA_REF_KEY", dev_media_ref_key(dir))
    # the web page (qim-web on QIM_WEB_PORT) uploads and downloads from its own origin (decision 0146)
    env.setdefault("QIM_MEDIA_CORS_ORIGINS", os.environ.get("QIM_MEDIA_CORS_ORIGINS") or dev_web_origins())
    if scylla is not None:
        apply_schema(scylla)
    if pki is not None:
        for inst in layout:  # each service its own certificate, when it speaks internal RPC
            if inst.service.name in DEV_SERVICES:
                instance_env[inst.name].update(pki.service_env(inst.service.name))
    metrics = {inst.name: instance_env[inst.name][inst.service.metrics_var] for inst in layout}
    return StackEnv(env, instance_env, metrics)


def moved_line(layout: list[Instance], key: str, old: int, new: int, path: Optional[Path]) -> str:
    """The line `stack up` prints for a remembered port it replaced: the service instance,
    the variable, the old and the new port ("stack: port 7100 of gateway
    (QIM_GATEWAY_LISTEN) is in use by another process; gateway moves to port 43121
    (remembered in .../ports.json; stack.env follows)")."""
    for inst in layout:
        names = {inst.name + ln.suffix: ln.var for ln in inst.service.listeners}
        names[f"{inst.name}_metrics"] = inst.service.metrics_var
        if key in names:
            return (f"stack: port {old} of {inst.name} ({names[key]}) is in use by another process; "
                    f"{inst.name} moves to port {new} (remembered in {path}; stack.env follows)")
    return f"stack: port {old} ({key}) is in use by another process; it moves to port {new}"


def dev_deployment(dir: Path, gateway_addr: str) -> str:
    """The stack's deployment name (QIM_DEPLOYMENT: what the clients' local stores are kept
    under): DIR/deployment, written the first time with `gateway_addr` (the first
    gateway's remembered address). Kept afterwards, so a gateway moved off a taken port
    (decision 0150) does not orphan the stores named by its old address."""
    path = Path(dir) / DEPLOYMENT_FILE
    if not path.exists():
        path.write_text(gateway_addr + "\n")
    return path.read_text().strip()


def dev_web_origins() -> str:
    """The development web page's origins (qim-web on $QIM_WEB_PORT, else 8088, by both
    loopback names): the MediaService's CORS allowlist in a development stack."""
    port = os.environ.get("QIM_WEB_PORT") or "8088"
    return f"http://127.0.0.1:{port},http://localhost:{port}"


def dev_media_ref_key(dir: Path) -> str:
    """The stack's QIM_MEDIA_REF_KEY (DIR/media_ref.key, 43 random characters made the
    first time, mode 600): kept across `make down && make up`, so MEDIA messages sent
    before a restart still verify."""
    path = Path(dir) / "media_ref.key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(32))
        path.chmod(0o600)
    return path.read_text().strip()
