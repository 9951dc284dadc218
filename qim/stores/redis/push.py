"""PushRegistrationStore on Redis (qim/stores/push.py; docs/decisions/0128): one HASH per
user (keys.push_key) on the user's instance, beside its read positions and conversation
state, so it moves with the user's MailboxShard (shardkeys.USER_PREFIXES). Writes are one
Lua call by cached SHA (lua/push_put.lua, lua/push_drop.lua); reads one pipelined
HGETALL per instance, then one MGET of the revocation cutoffs on the home instance
(decision 0100: the cutoffs are on every core instance; the home is one).
"""

from __future__ import annotations

import hashlib
from typing import Any, Sequence

from google.protobuf.message import DecodeError

from qim.proto.v1.push_pb2 import PushRegistration
from qim.stores.errors import StoreCorrupt
from qim.stores.redis.keys import push_key, revocation_key
from qim.stores.redis.mailboxes import mailbox_clients
from qim.stores.redis.scripts import boundary
from qim.stores.redis.spread import spread
from qim.stores.redis.topology import as_topology

PUSH_SCRIPTS = ("push_put", "push_drop")


def token_digest(token: str) -> str:
    """The digest kept beside a registration to compare tokens in Lua (16 bytes, hex)."""
    return hashlib.blake2b(token.encode("utf-8"), digest_size=16).hexdigest()


def parse_hash(raw: dict) -> tuple[list[PushRegistration], int]:
    """The registrations (by device_id) and version of one HGETALL reply; StoreCorrupt
    for a field or value that is not the stored shape."""
    regs, version = [], 0
    try:
        for field, value in raw.items():
            name = field.decode("ascii") if isinstance(field, bytes) else field
            if name == "v":
                version = int(value)
            elif not name.startswith("t:"):
                reg = PushRegistration.FromString(value)
                if reg.device_id != int(name):
                    raise ValueError("device mismatch")
                regs.append(reg)
    except (ValueError, UnicodeDecodeError, DecodeError):
        raise StoreCorrupt("corrupt push registration") from None
    regs.sort(key=lambda r: r.device_id)
    return regs, version


def _live_after(reg: PushRegistration, cutoff: int) -> bool:
    """Whether `reg` outlives a revocation `cutoff` (0: none): its token is newer."""
    return cutoff == 0 or reg.token_iat > cutoff


class RedisPushRegistrations:
    """PushRegistrationStore over a RedisTopology (or one redis-py client)."""

    def __init__(self, client: Any) -> None:
        self._t = t = as_topology(client)
        self._single, self._redis = t.single, t.home
        self._scripts_of = {id(c): t.scripts(c, PUSH_SCRIPTS) for c in mailbox_clients(t)}

    def _user(self, tenant: int, user: int) -> Any:
        return self._redis if self._single else self._t.user(tenant, user)

    async def put(self, tenant: int, user: int, registration: PushRegistration) -> int:
        """PushRegistrationStore.put: push_put.lua."""
        scripts = self._scripts_of[id(self._user(tenant, user))]
        device = registration.device_id
        got = await scripts.call("push_put", [push_key(tenant, user)],
                                 [device, registration.SerializeToString(), token_digest(registration.settings.token)])
        return int(got)

    async def _drop(self, tenant: int, user: int, device: int, digest: str) -> tuple[bool, int]:
        scripts = self._scripts_of[id(self._user(tenant, user))]
        removed, version = await scripts.call("push_drop", [push_key(tenant, user)], [device, digest])
        return bool(removed), int(version)

    async def unregister(self, tenant: int, user: int, device: int) -> tuple[bool, int]:
        """PushRegistrationStore.unregister: push_drop.lua with any token."""
        return await self._drop(tenant, user, device, "")

    async def remove(self, tenant: int, user: int, device: int, token: str) -> bool:
        """PushRegistrationStore.remove: push_drop.lua only while the token's digest matches."""
        return (await self._drop(tenant, user, device, token_digest(token)))[0]

    async def registrations(self, tenant: int, user: int) -> tuple[list[PushRegistration], int]:
        """PushRegistrationStore.registrations: one HGETALL, then the cutoffs."""
        with boundary("push registrations read"):
            raw = await self._user(tenant, user).hgetall(push_key(tenant, user))
        regs, version = parse_hash(raw)
        return (await self._live(tenant, {user: regs}))[user], version

    async def registrations_of(self, tenant: int, users: Sequence[int]) -> dict[int, list[PushRegistration]]:
        """PushRegistrationStore.registrations_of: one pipelined HGETALL per instance, then the cutoffs."""
        async def read(client: Any, part: Sequence[int]) -> list:
            with boundary("push registrations read"):
                async with client.pipeline(transaction=False) as pipe:
                    for u in part:
                        pipe.hgetall(push_key(tenant, u))
                    return await pipe.execute()
        unique = list(dict.fromkeys(users))
        got = await spread(self._t, unique, lambda u: self._user(tenant, u), read)
        return await self._live(tenant, {u: parse_hash(raw)[0] for u, raw in zip(unique, got)})

    async def _live(self, tenant: int, regs: dict[int, list[PushRegistration]]) -> dict[int, list[PushRegistration]]:
        """`regs` without the registrations a revocation covers (cutoff >= token_iat):
        one MGET of every device's and user's cutoff on the home instance."""
        pairs = [(u, r.device_id) for u, rs in regs.items() for r in rs]
        if not pairs:
            return regs
        keys = [k for u, d in pairs for k in (revocation_key(tenant, u, d), revocation_key(tenant, u, 0))]
        with boundary("revocation cutoffs read"):
            values = await self._t.home.mget(keys)
        try:
            nums = [int(v) if v else 0 for v in values]
        except ValueError:
            raise StoreCorrupt("corrupt revocation cutoff") from None
        cutoff = {pair: max(nums[2 * i], nums[2 * i + 1]) for i, pair in enumerate(pairs)}
        return {u: [r for r in rs if _live_after(r, cutoff[(u, r.device_id)])] for u, rs in regs.items()}
