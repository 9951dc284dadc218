"""`qim-dev stack up|down|status|restart NAME`: the QIM services on top of `qim-dev engines`.

The stack directory keeps `ports.json` and the development token key
(`dev_token_key.pem`, 0600, and `dev_token_pub.pem`) across `down`/`up`, so the gateway
address and the tokens of one checkout never change by themselves (qim.dev.stack_ports,
qim.dev.devkeys), and `tls/`, the development CA and certificates every port uses
(qim.dev.certs; clients trust `tls/ca.crt`, QIM_CA_FILE in stack.env).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from qim.dev.engines import EngineSet, cassandra_wanted, default_dir
from qim.dev.stack import Stack, stack_up
from qim.dev.stack_archive import settings_differ, settings_from
from qim.dev.stack_layout import kind_of
from qim.dev.stack_ports import PORTS_FILE, PortBook


def default_stack_dir() -> Path:
    """`<repo>/.qim/stack`."""
    return default_dir().parent / "stack"


def add_parser(sub) -> None:
    """Register the `stack` subcommand on an argparse subparsers object."""
    p = sub.add_parser("stack", help="run qim-writer, qim-mailbox, qim-session, qim-gateway, "
                                     "qim-fanout (and qim-archiver with a Cassandra engine)")
    p.add_argument("action", choices=["up", "down", "status", "restart"])
    p.add_argument("name", nargs="?", help="restart: the service instance (gateway, writer, "
                                           "mailbox, session, fanout, writer2, ...)")
    p.add_argument("--dir", default=None, help=f"stack directory (default {default_stack_dir()})")
    p.add_argument("--engines-dir", default=None, help=f"engine directory (default {default_dir()})")


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
    if args.action == "restart":
        if not args.name:
            print(f"qim-dev: error: `stack restart` needs a service name: "
                  f"{', '.join(existing.names)}", file=sys.stderr)
            return 2
        pid = existing.restart_service(args.name)
        print(f"{args.name} restarted: pid={pid} healthz=200")
        return 0
    return _status(existing)


def _up(args: argparse.Namespace, dir: Path, existing: Stack | None) -> int:
    settings = settings_from(os.environ)  # the archive tier's (docs/decisions/0023): e.g. the demo's short hot window
    if (existing is not None and all(existing.healthz(s)[0] == 200 for s in existing.names)
            and not settings_differ(existing.env, settings)):
        print(f"stack already up; env file:\n{dir / 'stack.env'}")
        return 0
    if existing is not None:
        existing.down()
    # a remembered port someone else took fails here, before any engine is started
    book = PortBook(dir / PORTS_FILE)
    book.check_free(sorted(book.remembered))
    engines = EngineSet.up(args.engines_dir, None, with_cassandra=cassandra_wanted(default=True))
    stack = stack_up(dir, engines.env(), ports_file=dir / PORTS_FILE, extra_env=settings)
    print((dir / "stack.env").read_text(), end="")
    print(f"# services up: {', '.join(f'{k}={v}' for k, v in stack.pids.items())}; "
          f"env file:\n{dir / 'stack.env'}")
    return 0


def _status(existing: Stack) -> int:
    ok = True
    for name in existing.names:
        status, body = existing.healthz(name)
        ok &= status == 200
        env = {**existing.env, **existing.instance_env.get(name, {})}
        listeners = kind_of(name).listeners
        listen = env.get(listeners[0].var, "-") if listeners else "-"
        print(f"{name:8} pid={existing.pids.get(name)} alive={existing.alive(name)} "
              f"listen={listen} metrics=http://{existing.metrics[name]} healthz={status} "
              f"{body.strip()[:80]}")
    return 0 if ok else 1
