"""Stable addresses of the development stack of one checkout.

`make down && make up` must give the same QIM_GATEWAY_LISTEN (a client's LocalStore
path is derived from the gateway address). The stack CLI remembers the ports in its
directory: `.qim/stack/ports.json` ({key: port}). The development token key is kept
beside it the same way (qim.dev.devkeys), so tokens a client holds stay valid.

A remembered port that another process holds when the stack starts is replaced by a
free one, remembered from then on, and `stack up` says so in one line naming the
service, the old and the new port (docs/decisions/0150-a-taken-remembered-port-moves.md;
before, decision 0014 refused to start). The clients' local stores keep their name: the
stack's deployment name (QIM_DEPLOYMENT) is kept in its own file, not derived from the
gateway's port again (qim.dev.stack_env.dev_deployment).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from qim.dev._proc import pick_ports, port_in_use
from qim.errors import EngineError

PORTS_FILE = "ports.json"


class PortBook:
    """Ports by key ("gateway", "writer2_metrics", ...), optionally remembered in a file.

    `path=None`: fresh ports every time, nothing written (tests). Otherwise keys already
    in the file keep their port and new keys get a free one, saved by `save()`.
    Raises EngineError if the file is corrupt.
    """

    def __init__(self, path: Path | None) -> None:
        self.path = Path(path) if path else None
        self.ports: dict[str, int] = {}
        self.remembered: set[str] = set()
        if self.path is not None and self.path.exists():
            try:
                raw = json.loads(self.path.read_text())
                self.ports = {str(k): int(v) for k, v in raw.items()}
            except (ValueError, TypeError, AttributeError) as e:
                raise EngineError(f"{self.path} is corrupt ({e}); remove it to choose "
                                  f"new ports") from e
            self.remembered = set(self.ports)

    def take(self, keys: list[str]) -> dict[str, int]:
        """Ports for `keys` (remembered ones first, the rest newly chosen)."""
        new = [k for k in keys if k not in self.ports]
        for key, port in zip(new, pick_ports(len(new), exclude=self.ports.values())):
            self.ports[key] = port
        return {k: self.ports[k] for k in keys}

    def replace_taken(self, keys: list[str]) -> list[tuple[str, int, int]]:
        """Give every remembered port of `keys` that is in use now (another process
        listens on it or holds it bound) a free port instead; returns (key, old port,
        new port) per replacement, in `keys` order ([] when none was taken). The new
        ports are remembered by the next save(). EngineError when no port is free."""
        taken = [k for k in keys if k in self.remembered and port_in_use(self.ports[k])]
        # exclude every port of the book: a replacement never lands on another key's port
        fresh = pick_ports(len(taken), exclude=self.ports.values())
        moved = [(k, self.ports[k], port) for k, port in zip(taken, fresh)]
        for key, _, port in moved:
            self.ports[key] = port
        return moved

    def save(self) -> None:
        """Write the file (no-op without a path)."""
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.ports, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, self.path)
