"""`qim-dev stack up|down|status|restart NAME`: the QIM services on top of `qim-dev engines`.

`up` hands the services to the stack's supervisor (qim.dev.supervisor): a service that
dies is restarted with bounded backoff, `status` shows each one's restart counter, and
`down` stops the supervisor first, by its recorded pid.

The stack directory keeps `ports.json` and the development token key
(`dev_token_key.pem`, 0600, and `dev_token_pub.pem`) across `down`/`up`, so the gateway
address and the tokens of one checkout never change by themselves (qim.dev.stack_ports,
qim.dev.devkeys; a remembered port another process holds is replaced, said in one line,
and the deployment name stays: decision 0150), and `tls/`, the development CA and
certificates every port uses (qim.dev.certs; clients trust `tls/ca.crt`, QIM_CA_FILE in
stack.env).

    qim-dev stack up [--gateways N] [--writers N] [--mailbox-nodes N] [--session-nodes N]
                     [--fanout-nodes N] [--archivers N] [--notify-nodes N]

runs N nodes of each kind (1 each by default, as `make up`; qim-notify, the
NotificationService, only with `--notify-nodes N`, sending with the QIM_PUSH_* provider
credentials of the environment: docs/operations.md "Offline push"); their shards and Outbox
partitions are leased from the ShardRegistry (docs/operations.md "Several nodes of each
kind"). `--token-public-keys`, `--token-jwks`, `--token-jwks-refresh-s`: the gateways'
token keys besides the development key (qim/dev/stack_tokens.py). `status` prints each process, then who owns which shards since which
owner_epoch (the registry, as `qimctl shards` prints it).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from qim.dev import progress
from qim.dev.engines import EngineSet, cassandra_wanted, default_dir
from qim.dev.envshow import shown
from qim.dev.rolling import rolling_order
from qim.dev.stack import Stack
from qim.dev.stack_archive import SETTINGS, settings_differ, settings_from
from qim.dev.stack_layout import kind_of
from qim.dev.stack_ports import PORTS_FILE, PortBook
from qim.dev.stack_tokens import add_arguments as add_token_arguments
from qim.dev.stack_tokens import token_settings, tokens_differ
from qim.dev.supervisor import request_restart, supervised_stack_up
from qim.topology import ARCHIVER, FANOUT, GATEWAY, MAILBOX, NOTIFY, SERVICES, SESSION, WRITER

# the send policy (docs/decisions/0099) `stack up` passes from its environment to the
# services, like the archive settings: a running stack with another one (or none) is
# restarted with it, never left answering "already up" without it (its module must be
# importable by the services: PYTHONPATH of `stack up`)
POLICY = "QIM_SEND_POLICY"


def _policy_vars() -> tuple[str, ...]:
    """QIM_SEND_POLICY and every moderation variable of the variables table (the webhook's
    URL, secret, CA, timeout, fail policy, ... and the notifications'): all of them are
    passed and compared like the policy, so changing any restarts the services reading it
    (issue 38; derived from the table, so a new QIM_MODERATION_* / QIM_WEBHOOK_* row is
    covered without a hand list). The NotificationService's QIM_PUSH_* and QIM_NOTIFY_*
    (`--notify-nodes N`, decision 0135) are passed and compared the same way."""
    from qim.config.variables import variables  # the table imports the service rows: at first use

    # the stack's own rows (listeners, metrics addresses, node lists and indexes) are the
    # stack's to set, never a setting passed through
    own = ("_LISTEN", "_ADDRS", "_NODE_INDEX", "_NODE_COUNT")
    return (POLICY, *sorted(n for n in variables() if n.startswith(("QIM_MODERATION_", "QIM_WEBHOOK_", "QIM_PUSH_", "QIM_NOTIFY_"))
                            and not n.endswith(own)))


POLICY_VARS = _policy_vars()


def policy_settings(environ: Mapping[str, str]) -> dict[str, str]:
    """The POLICY_VARS set (non-empty) in `environ`, and every OTEL_* variable set there
    (decision 0140's tracing): what `stack up` passes and records, so a later `stack
    restart NAME` from another shell starts the service with them again (it reads only
    the recorded environment)."""
    return {**{k: environ[k] for k in POLICY_VARS if environ.get(k)},
            **{k: v for k, v in environ.items() if k.startswith("OTEL_") and v}}


def _compared(stack_env: Mapping[str, str], wanted: Mapping[str, str]) -> list[str]:
    """POLICY_VARS and the OTEL_* names either side has: the names policy_differs compares."""
    return [*POLICY_VARS, *sorted({k for k in (*stack_env, *wanted) if k.startswith("OTEL_")})]

# `stack up` flags -> the service whose node count they set (qim/topology.py rows)
NODE_FLAGS = {"gateways": GATEWAY, "writers": WRITER, "mailbox-nodes": MAILBOX, "session-nodes": SESSION,
              "fanout-nodes": FANOUT, "archivers": ARCHIVER, "notify-nodes": NOTIFY}
# kinds that may run 0 nodes: the archiver (no Cassandra) and those started only when asked
OPTIONAL = tuple(n for n, s in SERVICES.items() if s.archive_only or (s.process and s.dev_nodes == 0))


def default_stack_dir() -> Path:
    """`<repo>/.qim/stack`."""
    return default_dir().parent / "stack"


def add_parser(sub) -> None:
    """Register the `stack` subcommand on an argparse subparsers object."""
    p = sub.add_parser("stack", help="run every process of the service table: qim-writer, qim-mailbox, "
                                     "qim-session, qim-room, qim-gateway, qim-fanout (and qim-archiver with "
                                     "a Cassandra engine)")
    p.add_argument("action", choices=["up", "down", "status", "restart", "roll"],
                   help="roll: restart every node one at a time, readers first (qim/dev/rolling.py)")
    p.add_argument("name", nargs="?", help="restart: the service instance (gateway, writer, "
                                           "mailbox, session, fanout, writer2, ...)")
    p.add_argument("--dir", default=None, help=f"stack directory (default {default_stack_dir()})")
    p.add_argument("--engines-dir", default=None, help=f"engine directory (default {default_dir()})")
    for flag, service in NODE_FLAGS.items():
        p.add_argument(f"--{flag}", type=int, default=None, metavar="N",
                       help=f"up: {service} nodes (default: as recorded, else {SERVICES[service].dev_nodes})")
    add_token_arguments(p)  # the gateways' token keys (qim/dev/stack_tokens.py)
    p.add_argument("--unhealthy-restart-s", type=float, default=None, metavar="S",
                   help="up: the supervisor restarts a service whose /healthz failed for longer than S "
                        "seconds (default 30; docs/operations.md \"Supervision\")")


def run(args: argparse.Namespace) -> int:
    """Carry out one stack action; returns the exit code (EngineError propagates)."""
    dir = Path(args.dir) if args.dir else default_stack_dir()
    if args.action != "restart" and args.name:
        print(f"qim-dev: error: `stack {args.action}` takes no service name", file=sys.stderr)
        return 2
    existing = Stack.load(dir)
    if args.action == "up":
        return _up(args, dir, existing)
    if existing is None:
        print(f"no stack recorded in {dir}")
        return 0 if args.action == "down" else 1
    if args.action == "down":
        existing.down()
        print(f"stack in {dir} stopped")
        return 0
    if args.action == "roll":
        for name in rolling_order(existing.names):
            pid = (request_restart(existing, name) if existing.supervised()
                   else existing.restart_service(name))
            existing = Stack.load(dir) or existing
            print(f"{name} restarted: pid={pid} healthz=200", flush=True)
        return 0
    if args.action == "restart":
        if not args.name:
            print(f"qim-dev: error: `stack restart` needs a service name: "
                  f"{', '.join(existing.names)}", file=sys.stderr)
            return 2
        # a supervised stack's services are the supervisor's children: it restarts them
        pid = (request_restart(existing, args.name) if existing.supervised()
               else existing.restart_service(args.name))
        print(f"{args.name} restarted: pid={pid} healthz=200")
        return 0
    return _status(existing)


def _up(args: argparse.Namespace, dir: Path, existing: Stack | None) -> int:
    settings = settings_from(os.environ)  # the archive tier's (docs/decisions/0023): e.g. the demo's short hot window
    settings.update(policy_settings(os.environ))  # the send policy and the moderation settings
    nodes = {service: getattr(args, flag.replace("-", "_")) for flag, service in NODE_FLAGS.items()}
    wanted = {k: v for k, v in nodes.items() if v is not None}
    if args.unhealthy_restart_s is not None and not 0 < args.unhealthy_restart_s < float("inf"):  # nan, inf too
        print(f"qim-dev: error: --unhealthy-restart-s must be a number of seconds > 0, got {args.unhealthy_restart_s}",
              file=sys.stderr)
        return 2
    for service, n in wanted.items():
        if n < (0 if service in OPTIONAL else 1) or n > 16:
            print(f"qim-dev: error: {service} nodes must be {'0' if service in OPTIONAL else '1'}..16, got {n}",
                  file=sys.stderr)
            return 2
    tokens = token_settings(args, dir, existing.env if existing is not None else None)
    same_layout = existing is not None and all(existing.count(s) == n for s, n in wanted.items())
    if (existing is not None and same_layout and all(existing.healthz(s)[0] == 200 for s in existing.names)
            and not settings_differ(existing.env, settings) and not policy_differs(existing.env, settings)
            and not tokens_differ(existing.env, tokens)):
        print(f"stack already up; env file:\n{dir / 'stack.env'}")
        return 0
    progress.enable("stack")  # one stderr line per engine and service ready (docs/decisions/0085)
    if existing is not None:
        print(restart_words(existing, wanted, settings), file=sys.stderr, flush=True)
        existing.down()
    # a remembered port someone else took is replaced once the engines hold theirs
    # (qim.dev.stack_env.plan_stack; decision 0150), one line each on stderr; a corrupt
    # ports.json still stops here, before any engine is started
    PortBook(dir / PORTS_FILE)
    engines = EngineSet.up(args.engines_dir, None, with_cassandra=cassandra_for(args.engines_dir))
    recorded = {kind_of(n).name: 0 for n in existing.names} if existing is not None else {}
    for name in existing.names if existing is not None else ():
        recorded[kind_of(name).name] += 1
    stack = supervised_stack_up(dir, engines.env(), ports_file=dir / PORTS_FILE, extra_env={**settings, **tokens},
                                nodes={**recorded, **wanted}, unhealthy_restart_s=args.unhealthy_restart_s)
    print(shown((dir / "stack.env").read_text()), end="")  # the file keeps the secrets, the terminal does not
    print(f"# services up: {', '.join(f'{k}={v}' for k, v in stack.pids.items())}; "
          f"env file:\n{dir / 'stack.env'}")
    return 0


def _status(existing: Stack) -> int:
    ok = True
    print(f"supervisor pid={existing.supervisor} alive={existing.supervised()} "
          f"log={existing.dir / 'logs' / 'supervisor.log'}")
    for name in existing.names:
        status, body = existing.healthz(name)
        ok &= status == 200
        env = {**existing.env, **existing.instance_env.get(name, {})}
        listeners = kind_of(name).listeners
        listen = env.get(listeners[0].var, "-") if listeners else "-"
        print(f"{name:8} pid={existing.pids.get(name)} alive={existing.alive(name)} "
              f"restarts={existing.restarts.get(name, 0)} "
              f"listen={listen} metrics=http://{existing.metrics[name]} healthz={status} "
              f"{body.strip()[:80]}")
    for line in owners_lines(existing):
        print(line)
    return 0 if ok else 1


def owners_lines(existing: Stack) -> list[str]:
    """Who owns which shards since which owner_epoch (qimctl shards' rendering), or one
    line saying why the registry could not be read."""
    import asyncio

    from qim.cluster.table import counts, read_registry, render
    from qim.consts import OUTBOX_TOPIC
    from qim.errors import EngineError
    from qim.infra.kafka.bridge import topic_partitions
    from qim.topology import leasing

    addr = existing.env.get("QIM_REGISTRY_REDIS_ADDR") or existing.env.get("QIM_REDIS_ADDR", "")
    try:
        partitions = asyncio.run(topic_partitions(existing.env.get("QIM_KAFKA_BOOTSTRAP", ""), OUTBOX_TOPIC))
    except EngineError:
        partitions = 1
    sizes = counts(int(existing.env.get("QIM_MAILBOX_SHARD_COUNT", "64")), partitions)
    try:
        tables = asyncio.run(read_registry(addr, [s.name for s in leasing()], sizes))
    except EngineError as exc:
        return [f"shard registry at {addr} unreadable: {exc}"]
    return ["shard registry:"] + render(tables)


def cassandra_for(engines_dir: Path | str | None) -> bool:
    """Whether `stack up` starts Cassandra with the engines: QIM_DEV_WITH_CASSANDRA when
    set; else what the recorded engines chose (engines made with `engines up
    --without-cassandra` stay without it: the stack runs without the archive tier); else
    yes, as `engines up`. EngineError for a bad QIM_DEV_WITH_CASSANDRA."""
    if os.environ.get("QIM_DEV_WITH_CASSANDRA") is not None:
        return cassandra_wanted(default=True)
    recorded = EngineSet.load(Path(engines_dir or default_dir()))
    return recorded is None or recorded.cassandra is not None


def policy_differs(stack_env: dict[str, str], wanted: dict[str, str]) -> bool:
    """Whether a recorded stack runs another send policy (QIM_SEND_POLICY, "" = none) or
    other moderation settings (any other POLICY_VARS) or other OTEL_* variables than
    `wanted` asks for."""
    return any(stack_env.get(k, "") != wanted.get(k, "") for k in _compared(stack_env, wanted))


def restart_words(existing: Stack, wanted: dict[str, int], settings: dict[str, str]) -> str:
    """The line `stack up` prints before it stops a running stack to start it again: why
    (new node counts, other archive settings, another send policy, other moderation, offline push or
    tracing settings, a service not answering) and what it means
    (every service restarts, clients reconnect; the engines and their data stay). New node
    counts and other archive-tier settings are both named when both changed: `stack up
    --gateways 2` after `make demo` also drops the demo's short hot window (decision 0093)."""
    changed = [f"{s} {existing.count(s)} -> {n}" for s, n in wanted.items() if existing.count(s) != n]
    reasons = ["new node counts (" + ", ".join(changed) + ")"] if changed else []
    if settings_differ(existing.env, settings):
        moved = [f"{k} {existing.env.get(k) or 'default'} -> {settings.get(k) or 'default'}" for k in SETTINGS
                 if existing.env.get(k, "") != settings.get(k, "")]
        reasons.append("other archive-tier settings (" + ", ".join(moved) + ")")
    if existing.env.get(POLICY, "") != settings.get(POLICY, ""):
        reasons.append(f"another send policy ({POLICY} {existing.env.get(POLICY) or 'none'} -> "
                       f"{settings.get(POLICY) or 'none'})")
    moved = [k for k in _compared(existing.env, settings)[1:] if existing.env.get(k, "") != settings.get(k, "")]
    push = ("QIM_PUSH_", "QIM_NOTIFY_")  # qim-notify's (docs/operations.md "Offline push"), not moderation's
    for group, names in (("moderation", [k for k in moved if not k.startswith(("OTEL_", *push))]),
                         ("offline push", [k for k in moved if k.startswith(push)]),
                         ("tracing", [k for k in moved if k.startswith("OTEL_")])):
        if names:  # a secret's value is never printed (OTLP headers carry a collector's credentials)
            reasons.append(f"other {group} settings (" + ", ".join(
                f"{k} changed" if "SECRET" in k or "HEADERS" in k
                else f"{k} {existing.env.get(k) or 'unset'} -> {settings.get(k) or 'unset'}" for k in names) + ")")
    why = " and ".join(reasons) or "other token keys, or a service that did not answer /healthz"
    return (f"stack: restarting every service for {why}: connected clients reconnect by themselves; the engines "
            "and their data stay")
