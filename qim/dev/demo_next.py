"""The last lines `make demo` prints: what to do next (docs/decisions/0085).

    python -m qim.dev.demo_next [--stack-dir .qim/stack] [--web-port 8088] [--web-pid .qim/web/qim-web.pid]

After the replay's verdict line: the stack stays up, the two terminal commands (Alice
and Bob), the web page's address (only when qim-web is running, else how to start it),
how to send photos and files, how to add a second device, and `make down`. Exit 1 (with
one line saying so) when the stack's stack.env is missing: then there is nothing to chat on.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

SOURCE = "set -a; . .qim/stack/stack.env; set +a; "
DESKTOP = ".venv/bin/qim-desktop"


def web_running(pid_file: Path) -> bool:
    """True when the pid recorded by `make web-up` is a live process."""
    try:
        os.kill(int(pid_file.read_text().strip()), 0)
    except (OSError, ValueError):
        return False
    return True


def next_steps(stack_env_exists: bool, web_port: int, web_up: bool) -> list[str]:
    """The lines of the block (the caller prints them)."""
    if not stack_env_exists:
        return ["demo: no .qim/stack/stack.env: the stack is not up (see the lines above; `make up` starts it)"]
    web = (f"open http://127.0.0.1:{web_port}/ in a browser, sign in as 1003 (any user id) and chat with 1001"
           if web_up else "not running: `make web-up` starts it (its log: .qim/web/qim-web.log)")
    return [
        "",
        "demo: done. The engines and services stay up (.qim/stack/stack.env). What to do next:",
        "  chat as two people, one terminal each (Enter sends, /help lists the commands, Ctrl+Q quits):",
        f"    {SOURCE}{DESKTOP} --user 1001 --name Alice --chat 1002",
        f"    {SOURCE}{DESKTOP} --user 1002 --name Bob --chat 1001",
        f"  the web page: {web}",
        "  photos and files: /attach PATH and /save [N] PATH in qim-desktop, the 📎 button on the page",
        "  a second device of Alice (a device is a local store; each needs its own directory):",
        f"    {SOURCE}{DESKTOP} --user 1001 --name Alice --chat 1002 --data-dir ~/.local/share/qim-device2",
        "  several nodes of each kind: docs/operations.md \"Several nodes of each kind\"",
        "  stop everything: make down",
    ]


def main(argv: list[str] | None = None) -> int:
    """Print the block on stdout; 1 when the stack is not up."""
    p = argparse.ArgumentParser(prog="python -m qim.dev.demo_next", description=__doc__.split("\n\n")[0])
    p.add_argument("--stack-dir", default=".qim/stack", help="the stack directory (default .qim/stack)")
    p.add_argument("--web-port", type=int, default=8088, help="qim-web's port (default 8088)")
    p.add_argument("--web-pid", default=".qim/web/qim-web.pid", help="qim-web's pid file (default .qim/web/qim-web.pid)")
    args = p.parse_args(argv)
    up = (Path(args.stack_dir) / "stack.env").exists()
    print("\n".join(next_steps(up, args.web_port, web_running(Path(args.web_pid)))), flush=True)
    return 0 if up else 1


if __name__ == "__main__":
    sys.exit(main())
