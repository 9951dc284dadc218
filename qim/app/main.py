"""One entry point for every service process: `main(name)` runs the row `name` of
qim/topology.py (its node class over its configuration from QIM_* variables) until
SIGTERM, through the shell of qim/app/run.py (exit codes, signals, logging).

Console scripts name `qim.app.main:<service>` (pyproject.toml `[project.scripts]`,
derived from the table and checked by tests/test_topology.py); `python -m qim.app
<service>` is the same (the dev stack starts its processes so).
"""

from __future__ import annotations

from functools import partial
from typing import Callable

from qim.app.run import run_node
from qim.config import Env
from qim.topology import SERVICES, load, service


def main(name: str) -> None:
    """Run service `name` (KeyError naming the known ones for another name)."""
    row = service(name)
    if row.entry is None or row.config is None:
        raise KeyError(f"{name} is not a process")
    entry, config = row.entry, row.config

    def build():  # imported here: an app-only install gets run_node's one-line message
        node_class = load(entry)
        return node_class(load(config).from_env(Env()))

    run_node(name, build)


def __getattr__(name: str) -> Callable[[], None]:
    """`qim.app.main.<service>`: main of that service, what a console script calls."""
    row = SERVICES.get(name)
    if row is None or not row.process:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return partial(main, name)
