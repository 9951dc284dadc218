"""The command line of `make perf` (qim/dev/perf.py) and its checks: every option
defaults to its PERF_* variable, and every value, given or from the environment, is
checked in `options()` before anything starts (a bad one used to surface minutes later
as a traceback, as every step failing with exit 0, or not at all: argparse checks
neither `type` nor `choices` of a default taken from the environment).

A value is kept as the string it was given until `options()` converts it, so the error
names where it came from: `perf: --seconds must be a number > 0, got '-1'` or
`perf: PERF_SECONDS must be a number > 0, got 'abc'`.
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Callable, Mapping, NamedTuple, Optional, Sequence

from qim.dev.perf_conn import WARMUP

DEFAULT_RATES = "25,100,250,500,750,1000,1250"
OUT_DIR = Path(__file__).resolve().parents[2] / ".perf"
TOPOLOGIES = ("single", "scaled")
BROKER_COUNTS = (1, 3)
MAILBOX_STORES = ("redis", "cql")


class PerfArgError(ValueError):
    """A bad option or PERF_* value; str() is the line after `perf: ` (exit 2)."""


def _number(text: str, low: float, strict: bool) -> float:
    value = float(text)  # ValueError for "abc"
    if not math.isfinite(value) or value < low or (strict and value == low):
        raise ValueError
    return value


def positive(text: str) -> float:
    """A finite number > 0."""
    return _number(text, 0.0, strict=True)


def non_negative(text: str) -> float:
    """A finite number >= 0."""
    return _number(text, 0.0, strict=False)


def rates(text: str) -> list[float]:
    """The ladder: comma-separated finite numbers > 0, at least one."""
    out = [positive(r) for r in text.split(",") if r.strip()]
    if not out:
        raise ValueError
    return out


def pairs(text: str) -> int:
    """Sender/receiver pairs: an integer >= 1."""
    value = int(text)
    if value < 1:
        raise ValueError
    return value


def sdk_clients(text: str) -> Optional[int]:
    """The SDK lane's clients: empty (the load generator's default), or 0 or an even integer."""
    if not text.strip():
        return None
    value = int(text)
    if value < 0 or value % 2:
        raise ValueError
    return value


def connections(text: str) -> int:
    """Idle connections of the connection step: 0 (no step) or more than the warm-up."""
    value = int(text)
    if value != 0 and value <= WARMUP:
        raise ValueError
    return value


def topology(text: str) -> str:
    """One of TOPOLOGIES."""
    if text not in TOPOLOGIES:
        raise ValueError
    return text


def mailbox_store(text: str) -> str:
    """One of MAILBOX_STORES (QIM_MAILBOX_STORE of the stack; docs/decisions/0102)."""
    if text not in MAILBOX_STORES:
        raise ValueError
    return text


def redis_instances(text: str) -> int:
    """Redis instances: 1, or N in 2..MAX_INSTANCES (measured side by side with 1)."""
    from qim.dev.redis_instances import MAX_INSTANCES

    value = int(text)
    if not 1 <= value <= MAX_INSTANCES:
        raise ValueError
    return value


def brokers(text: str) -> int:
    """One of BROKER_COUNTS: 1 (flush per append) or 3 (replication, the production profile)."""
    value = int(text)
    if value not in BROKER_COUNTS:
        raise ValueError
    return value


def mix(text: str) -> Optional[str]:
    """Empty: plain sends (None); else a `qim-loadgen rate --mix` value, checked here."""
    from qim.cli.loadgen_mix import parse_mix

    if not text:
        return None
    parse_mix(text)  # ArgError is a ValueError
    return text


class Opt(NamedTuple):
    """One option: its flag, variable, default text, converter and what it must be."""

    flag: str
    env: str
    default: str
    convert: Callable[[str], object]
    want: str
    help: str


OPTS = (
    Opt("--rates", "PERF_RATES", DEFAULT_RATES, rates, "comma-separated numbers > 0", "msg/s per step"),
    Opt("--seconds", "PERF_SECONDS", "60", positive, "a number > 0", "seconds per step"),
    Opt("--hold-seconds", "PERF_HOLD_SECONDS", "180", positive, "a number > 0", "seconds of the hold"),
    Opt("--pairs", "PERF_PAIRS", "20", pairs, "an integer >= 1", "sender/receiver pairs"),
    Opt("--sdk-clients", "PERF_SDK_CLIENTS", "", sdk_clients, "0 or an even integer",
        "SDK clients (empty: the load generator's 5 %%)"),
    Opt("--group-rate", "PERF_GROUP_RATE", "100", positive, "a number > 0",
        "msg/s of the direct sends during the group step"),
    Opt("--group-sends", "PERF_GROUP_SENDS", "60", positive, "a number > 0",
        "sends per second to the 1,000-member group (60: 60,000 entries/s offered, above the goal)"),
    Opt("--idle-seconds", "PERF_IDLE_SECONDS", "60", non_negative, "a number >= 0",
        "seconds of the idle window after the steps (0: none)"),
    Opt("--topology", "PERF_TOPOLOGY", "single", topology, " or ".join(TOPOLOGIES),
        "single: one node of each kind; scaled: two of every kind"),
    Opt("--brokers", "PERF_BROKERS", "1", brokers, " or ".join(map(str, BROKER_COUNTS)),
        "Kafka brokers: 1 flushes every append; 3 replicate (RF 3, min ISR 2), no flush"),
    Opt("--redis", "PERF_REDIS", "1", redis_instances, "an integer 1..16",
        "Redis instances: 1, or N standalone instances measured side by side with one"),
    Opt("--mailbox", "PERF_MAILBOX", "redis", mailbox_store, " or ".join(MAILBOX_STORES),
        "the stack's MailboxStore: cql runs the archive tier too (docs/decisions/0102)"),
    Opt("--mix", "PERF_MIX", "", mix, "empty or replies=F,mentions=F,reactions=F,typing=F",
        "messenger features in every step (qim-loadgen rate --mix; ms/msg then counts REACT and TYPING too)"),
    Opt("--connections", "PERF_CONNECTIONS", "10000", connections, f"0 or an integer > {WARMUP} (the warm-up)",
        "idle TLS connections of the connection step (0: no step)"),
)
FLAGS = (("--group-step", "PERF_GROUP_STEP", "add the 1,000-member group step"),
         ("--archive", "PERF_ARCHIVE", "with the archive tier (Cassandra and qim-archiver), as `make up` runs"))


def parser() -> argparse.ArgumentParser:
    """Options as strings (None: not given); `options()` converts and checks them."""
    p = argparse.ArgumentParser(prog="python -m qim.dev.perf",
                                description="make perf: a private stack, a ladder of rates, CPU per message")
    for o in OPTS:
        p.add_argument(o.flag, default=None, help=f"{o.help} ({o.want}; default: ${o.env}, else {o.default!r})")
    for flag, env, text in FLAGS:
        p.add_argument(flag, action="store_true", help=f"{text} (default: ${env}=1; 0 or 1)")
    p.add_argument("--out", default=None, help=f"output directory (default: $PERF_OUT, else {OUT_DIR})")
    return p


def options(argv: Optional[Sequence[str]] = None, environ: Mapping[str, str] = os.environ) -> argparse.Namespace:
    """The parsed and checked options (rates a list of floats, the rest converted);
    PerfArgError naming the first bad option or variable. argparse's own errors (an
    unknown option) exit 2 as usual; --help works whatever the environment holds."""
    cfg = parser().parse_args(argv)
    for o in OPTS:
        dest = o.flag[2:].replace("-", "_")
        given = getattr(cfg, dest)
        text, source = (given, o.flag) if given is not None else (environ.get(o.env, o.default), o.env)
        try:
            setattr(cfg, dest, o.convert(text))
        except ValueError:
            raise PerfArgError(f"{source} must be {o.want}, got {text!r}") from None
    for flag, env, _text in FLAGS:
        dest = flag[2:].replace("-", "_")
        value = environ.get(env, "0")
        if value not in ("0", "1", ""):
            raise PerfArgError(f"{env} must be 0 or 1, got {value!r}")
        setattr(cfg, dest, getattr(cfg, dest) or value == "1")
    if cfg.mailbox == "cql":  # on the archive tier's cluster; the stack's services inherit the variable
        cfg.archive = True
        os.environ["QIM_MAILBOX_STORE"] = "cql"
    cfg.out = cfg.out or environ.get("PERF_OUT") or str(OUT_DIR)
    if Path(cfg.out).exists() and not Path(cfg.out).is_dir():
        raise PerfArgError(f"--out/PERF_OUT {cfg.out!r} is not a directory")
    return cfg
