"""One entry point for every service process: `main(name)` runs the row `name` of
qim/topology.py (its node class over its configuration from QIM_* variables) until
SIGTERM, through the shell of qim/app/run.py (exit codes, signals, logging).

Console scripts name `qim.app.main:<service>` (pyproject.toml `[project.scripts]`,
derived from the table and checked by tests/test_topology.py); `python -m qim.app
<service>` is the same (the dev stack starts its processes so). A service takes no
arguments: `--help`/`-h` prints its usage and exits 0 before anything is read or
started; any other argument exits 2 (EXIT_CONFIG) without starting.
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from typing import Callable, Optional, Sequence

from qim.app.run import run_node
from qim.config import Env
from qim.topology import SERVICES, load, service

CONFIG_DOC = "docs/operations.md"  # its "Configuration reference", generated from qim/config/variables.py


def usage_parser(name: str) -> argparse.ArgumentParser:
    """The argument parser of `qim-<name>`: only -h/--help (argparse exits 2 on anything else)."""
    row = service(name)
    return argparse.ArgumentParser(
        prog=f"qim-{name}",
        description=f"Run the {row.entity} (qim/topology.py row {name!r}) until SIGTERM or SIGINT; "
                    "SIGHUP reloads its TLS certificates. It takes no arguments: it is configured by "
                    f"QIM_* environment variables, each listed with its default in {CONFIG_DOC} "
                    "\"Configuration reference\" (generated from qim/config/variables.py).",
        epilog="exit codes: 0 stopped by a signal, 2 configuration error (the message names the variable), "
               "3 cannot start, 4 the server extra is not installed")


def main(name: str, argv: Optional[Sequence[str]] = None) -> None:
    """Run service `name` (KeyError naming the known ones for another name). `argv` (default
    sys.argv[1:], what a console script gets) is parsed first: --help exits 0, any other
    argument exits 2, both before the configuration is read."""
    row = service(name)
    if row.entry is None or row.config is None:
        raise KeyError(f"{name} is not a process")
    usage_parser(name).parse_args(sys.argv[1:] if argv is None else argv)
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
