"""Moderation bans as a device is told them (`qimctl moderation ban`; docs/decisions/0123,
Amendment 2).

The ban itself is a user-wide revocation with a cutoff at its end (revocations.py): that
is what refuses logins and sends. This HASH on the home instance, `qim:moderation:bans`,
"<tenant>:<user>" -> "<until_ms>\\t<reason>" (until_ms 0: until unbanned), only says why
and until when, so a gateway refusing the AUTH of a banned user answers ERROR BANNED and
one closing its connections sends KICKED{BANNED} with the reason and the end, instead of
"token revoked". Read only on those paths (a refusal, a kick): no cost on a login that
passes. A ban past its end is not in force (judged by the reader's clock).
"""

from __future__ import annotations

import time
from typing import Any, Optional

import redis.exceptions

from qim.stores.bans import Ban
from qim.stores.errors import StoreUnavailable

BANS_KEY = "qim:moderation:bans"
_ERRORS = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)


def _field(tenant: int, user: int) -> str:
    return f"{tenant}:{user}"


async def set_ban(home: Any, tenant: int, user: int, until_ms: int, reason: str) -> None:
    """Record why and until when `user` is banned (before its revocation is published).
    StoreUnavailable when the home instance cannot be written."""
    try:
        await home.hset(BANS_KEY, _field(tenant, user), f"{until_ms}\t{reason}")
    except _ERRORS as exc:
        raise StoreUnavailable(f"bans: {exc}") from exc


async def clear_ban(home: Any, tenant: int, user: int) -> None:
    """The ban ended (unban). StoreUnavailable when the home instance cannot be written."""
    try:
        await home.hdel(BANS_KEY, _field(tenant, user))
    except _ERRORS as exc:
        raise StoreUnavailable(f"bans: {exc}") from exc


async def ban_of(home: Any, tenant: int, user: int) -> Optional[Ban]:
    """The ban of `user` in force now, None when none (never banned, unbanned, ended).
    StoreUnavailable when the home instance cannot be read."""
    try:
        raw = await home.hget(BANS_KEY, _field(tenant, user))
    except _ERRORS as exc:
        raise StoreUnavailable(f"bans: {exc}") from exc
    if raw is None:
        return None
    until, _, reason = (raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw)).partition("\t")
    until_ms = int(until) if until.isdigit() else 0
    if until_ms and until_ms <= time.time() * 1000:
        return None
    return Ban(until_ms, reason)
