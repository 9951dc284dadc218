"""Command-line defaults taken from QIM_* variables and checks of address options, shared
by qimctl and qim-desktop (docs/operations.md: a bad value exits 2 with one line naming
the variable or option, never a traceback).

A default read from the environment goes through qim.config.Env, so a bad variable is the
same ConfigError naming it that a service gives; an option given on the command line is
checked by the argparse `type` here (argparse's own exit 2 naming the option).
"""

from __future__ import annotations

import argparse
from typing import Mapping, Optional

from qim.config.env import Env
from qim.config.redislayout import RedisLayout
from qim.errors import ConfigError
from qim.wire.addr import parse_addr

WRITER_DEFAULT = "127.0.0.1:7101"  # the writer's listener default (qim/topology.py)


def tenant_default(env: Mapping[str, str]) -> int:
    """$QIM_TENANT_ID as a u128 (0 when unset); ConfigError naming it otherwise."""
    return Env(env).tenant()


def shard_count_default(env: Mapping[str, str]) -> int:
    """$QIM_MAILBOX_SHARD_COUNT (a power of two, 64 when unset); ConfigError naming it."""
    return Env(env).shard_count()


def first_writer(env: Mapping[str, str]) -> str:
    """The first address of $QIM_WRITER_ADDRS (else the writer's default listener);
    ConfigError naming the variable when an address of it is not host:port."""
    return Env(env).addrs("QIM_WRITER_ADDRS", WRITER_DEFAULT)[0]


def tenant_arg(value: str) -> int:
    """argparse type of --tenant: a u128, decimal or 0x hex."""
    try:
        return Env({"QIM_TENANT_ID": value}).tenant()
    except ConfigError:
        raise argparse.ArgumentTypeError(f"{value!r} is not an unsigned 128-bit number (decimal or 0x hex)") from None


def shard_count_arg(value: str) -> int:
    """argparse type of --shard-count: a power of two in 1..65536."""
    try:
        return Env({"QIM_MAILBOX_SHARD_COUNT": value}).shard_count()
    except ConfigError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a power of two in 1..65536") from None


def check_addr(flag: str, value: str) -> tuple[str, int]:
    """(host, port) of `value` (qim/wire/addr.py form); ConfigError naming `flag` otherwise."""
    try:
        return parse_addr(value)
    except ValueError as exc:
        raise ConfigError(f"{flag}: {exc}") from None


def redis_layout(flag: str, addr: Optional[str], env: Mapping[str, str],
                 shard_count: Optional[int] = None) -> RedisLayout:
    """The Redis instances a command reads or writes, as the services place keys
    (docs/decisions/0096): `addr` (the `flag` option, default $QIM_REDIS_ADDR) is the
    home; $QIM_REDIS_CORE_ADDRS and $QIM_REDIS_MAILBOX_ADDRS list the instances per role
    (unset: `addr` holds every role); the shard count places users ($QIM_MAILBOX_SHARD_COUNT
    unless given). ConfigError naming the option or variable when one is missing or bad,
    or when `addr` is not the first core address (another deployment's home)."""
    if not addr:
        raise ConfigError(f"{flag} (or QIM_REDIS_ADDR) is required")
    check_addr(flag, addr)
    e = Env(env)
    core = e.addrs("QIM_REDIS_CORE_ADDRS") if e.raw("QIM_REDIS_CORE_ADDRS") else (addr,)
    mailbox = e.addrs("QIM_REDIS_MAILBOX_ADDRS") if e.raw("QIM_REDIS_MAILBOX_ADDRS") else (addr,)
    if core[0] != addr:
        raise ConfigError(f"{flag} {addr} is not the first of QIM_REDIS_CORE_ADDRS ({core[0]}, the home "
                          "instance): give the home's address or unset QIM_REDIS_CORE_ADDRS")
    return RedisLayout(core, mailbox, shard_count if shard_count is not None else e.shard_count())
