"""Shared by the examples: the stack's address and development key, tokens, fresh user ids."""

from __future__ import annotations

import os
import random
import sys

from qim.wire.devtoken import issue_dev_token


def endpoint() -> str:
    """$QIM_GATEWAY_ADDR (from .qim/stack/stack.env)."""
    try:
        return os.environ["QIM_GATEWAY_ADDR"]
    except KeyError:
        sys.exit("set QIM_GATEWAY_ADDR and QIM_DEV_TOKEN_KEY: set -a; . .qim/stack/stack.env; set +a")


def token(user: int, device: int) -> str:
    """A development token for (tenant 0, user, device) signed with the key at $QIM_DEV_TOKEN_KEY."""
    return issue_dev_token(os.environ["QIM_DEV_TOKEN_KEY"], 0, user, device)


def fresh_users(n: int) -> list[int]:
    """n user ids nobody used before (random 40-bit), so an example can run again."""
    base = random.getrandbits(40) + 1
    return [base + i for i in range(n)]


def check(condition: bool, what: str) -> None:
    """Exit non-zero with `what` when the condition does not hold."""
    if not condition:
        sys.exit(f"unexpected: {what}")
