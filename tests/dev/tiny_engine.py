"""A tiny real server (python -m http.server) driven by qim.dev.engine.Engine.

Lets the process plumbing be tested in a second instead of a JVM's ten: same
launcher, same readiness loop, same stop/kill/restart, same pid bookkeeping.
Run as a script (`python tiny_engine.py DIR PORT DIE_WITH_PARENT`), it starts one
engine, prints its pid and exits (or, with "hold", sleeps until killed).
"""

from __future__ import annotations

import sys
import time
import urllib.request
from pathlib import Path

from qim.dev.engine import Engine


class TinyEngine(Engine):
    """http.server on 127.0.0.1:<main> serving its own directory."""

    name = "tiny"
    start_timeout = 20.0

    def _prepare(self) -> None:
        (self.dir / "index.html").write_text("tiny\n")

    def _command(self) -> list[str]:
        return [sys.executable, "-m", "http.server", str(self.ports["main"]),
                "--bind", "127.0.0.1"]

    def _check_ready(self) -> bool:
        with urllib.request.urlopen(f"http://{self.addr}/index.html", timeout=1) as r:
            return r.status == 200


if __name__ == "__main__":
    d, port, die, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
    eng = TinyEngine(Path(d), {"main": port}, die_with_parent=die).start()
    print(eng.pid, flush=True)
    if mode == "hold":
        time.sleep(600)
