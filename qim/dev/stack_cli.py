"""`qim-dev stack up|down|status`: the QIM services on top of `qim-dev engines`."""

from __future__ import annotations

import argparse
from pathlib import Path

from qim.dev.engines import EngineSet, default_dir
from qim.dev.stack import Stack, stack_up


def default_stack_dir() -> Path:
    return default_dir().parent / "stack"


def add_parser(sub) -> None:
    p = sub.add_parser("stack", help="run qim-writer, qim-mailbox, qim-session, qim-gateway, qim-fanout")
    p.add_argument("action", choices=["up", "down", "status"])
    p.add_argument("--dir", default=None, help=f"stack directory (default {default_stack_dir()})")
    p.add_argument("--engines-dir", default=None, help=f"engine directory (default {default_dir()})")


def run(args: argparse.Namespace) -> int:
    """Carry out one stack action; returns the exit code (EngineError propagates)."""
    dir = Path(args.dir) if args.dir else default_stack_dir()
    existing = Stack.load(dir)
    if args.action == "up":
        if existing is not None and all(existing.healthz(s)[0] == 200 for s in existing.names):
            print(f"stack already up; env file:\n{dir / 'stack.env'}")
            return 0
        if existing is not None:
            existing.down()
        engines = EngineSet.up(args.engines_dir, None)
        stack = stack_up(dir, engines.env())
        print((dir / "stack.env").read_text(), end="")
        print(f"# services up: {', '.join(f'{k}={v}' for k, v in stack.pids.items())}; env file:\n{dir / 'stack.env'}")
        return 0
    if existing is None:
        print(f"no stack recorded in {dir}")
        return 0 if args.action == "down" else 1
    if args.action == "down":
        existing.down()
        print(f"stack in {dir} stopped")
        return 0
    ok = True
    for name in existing.names:
        status, body = existing.healthz(name)
        ok &= status == 200
        listen = {**existing.env, **existing.instance_env.get(name, {})}.get(f"QIM_{name.rstrip('0123456789').upper()}_LISTEN", "-")
        print(f"{name:8} pid={existing.pids.get(name)} alive={existing.alive(name)} listen={listen} "
              f"metrics=http://{existing.metrics[name]} healthz={status} {body.strip()[:80]}")
    return 0 if ok else 1
