"""The options every `qim-loadgen` command shares (replay, rate, room), written once:
the gateways (`--gateway`, default $QIM_GATEWAY_ADDRS, else $QIM_GATEWAY_ADDR: several
comma-separated addresses the clients spread over, qim/cli/gateways.py), the
development token key (`--token-key`, default $QIM_DEV_TOKEN_KEY) and the client TLS
options (`--ca-file`, `--plaintext`: qim/cli/tlsopts.py); and reading them into a run's
settings before anything connects.
"""

from __future__ import annotations

import argparse
import os

from qim.cli.gateways import parse_gateways
from qim.cli.tlsopts import add_client_args, client_context
from qim.errors import ConfigError
from qim.wire.devtoken import load_dev_key


def loadgen_parser(command: str, doc: str, spread: str) -> argparse.ArgumentParser:
    """The parser of `qim-loadgen COMMAND` with the shared options; its description is
    the first paragraph of `doc`, `spread` names what spreads over the gateways
    ("devices", "clients", "members") in --gateway's help."""
    p = argparse.ArgumentParser(prog=f"qim-loadgen {command}", description=doc.split("\n\n")[0])
    p.add_argument("--gateway", default=os.environ.get("QIM_GATEWAY_ADDRS") or os.environ.get("QIM_GATEWAY_ADDR"),
                   help=f"gateway host:port, or several comma-separated: {spread} spread over them "
                        "(default: $QIM_GATEWAY_ADDRS, else $QIM_GATEWAY_ADDR)")
    p.add_argument("--token-key", default=os.environ.get("QIM_DEV_TOKEN_KEY"),
                   help="development token key, a PEM private key file (default: $QIM_DEV_TOKEN_KEY)")
    add_client_args(p)  # --ca-file, --plaintext (qim/cli/tlsopts.py)
    return p


def load_gateway_args(cfg: argparse.Namespace) -> None:
    """Read the shared options of `cfg` in place: `token_key` becomes the SigningKey,
    `gateways` the tuple of addresses, `tls` the client context of the first one (one CA
    for every gateway; None with --plaintext). ConfigError when --gateway or --token-key
    is missing, an address is bad or the TLS options cannot be used; ValueError when the
    key file cannot be read."""
    if not cfg.gateway or not cfg.token_key:
        raise ConfigError("--gateway/QIM_GATEWAY_ADDRS and --token-key/QIM_DEV_TOKEN_KEY are required")
    cfg.token_key = load_dev_key(cfg.token_key)
    cfg.gateways = parse_gateways(cfg.gateway)
    cfg.tls = client_context(cfg, cfg.gateways[0], "--gateway")
