"""ConversationStateStore on Redis (qim/stores/convstate.py; docs/decisions/0122): the
convstate HASH and the receipts STRING of each user (keys.py), on the user's instance
like its read positions; convstate_change.lua makes a change (and a hide's score read)
atomic and grows its version (decision 0157).
"""

from __future__ import annotations

from typing import Any, Sequence

from qim.stores.convstate import ConvState, StateChange
from qim.stores.errors import StoreCorrupt
from qim.stores.redis.keys import convs_key, convstate_key, read_key, receipts_key
from qim.stores.redis.mailboxes import mailbox_clients
from qim.stores.redis.scripts import boundary
from qim.stores.redis.spread import spread
from qim.stores.redis.topology import as_topology

CONVSTATE_SCRIPTS = ("convstate_change",)


def parse_state(raw: Any) -> ConvState:
    """The stored "<pinned>:<muted_until>:<hidden_at>:<version>" (None = never set; the
    older shape without a version reads as version 0, decision 0157); StoreCorrupt otherwise."""
    if raw is None:
        return ConvState()
    try:
        parts = [int(x) for x in (raw.decode("ascii") if isinstance(raw, bytes) else raw).split(":")]
    except (ValueError, UnicodeDecodeError):
        raise StoreCorrupt("corrupt conversation state") from None
    if len(parts) == 3:
        parts.append(0)
    if len(parts) != 4:
        raise StoreCorrupt("corrupt conversation state")
    p, m, h, v = parts
    return ConvState(bool(p), m, h, v)


def _opt(value: Any) -> str:
    """A StateChange field as a script argument ("" keeps the stored value)."""
    return "" if value is None else str(int(value))


class RedisConversationStates:
    """ConversationStateStore over a RedisTopology (or one redis-py client)."""

    def __init__(self, client: Any) -> None:
        self._t = t = as_topology(client)
        self._single, self._redis = t.single, t.home
        self._scripts_of = {id(c): t.scripts(c, CONVSTATE_SCRIPTS) for c in mailbox_clients(t)}

    def _user(self, tenant: int, user: int) -> Any:
        return self._redis if self._single else self._t.user(tenant, user)

    async def states(self, tenant: int, user: int, conversation_ids: Sequence[bytes]) -> list[ConvState]:
        """ConversationStateStore.states: one HMGET."""
        if not conversation_ids:
            return []
        with boundary("conversation state read"):
            got = await self._user(tenant, user).hmget(convstate_key(tenant, user), [c.hex() for c in conversation_ids])
        return [parse_state(r) for r in got]

    async def change(self, tenant: int, user: int, conversation_id: bytes, change: StateChange) -> ConvState:
        """ConversationStateStore.change: convstate_change.lua."""
        scripts = self._scripts_of[id(self._user(tenant, user))]
        got = await scripts.call("convstate_change", [convstate_key(tenant, user), convs_key(tenant, user)],
                                 [conversation_id.hex(), _opt(change.pinned), _opt(change.muted_until),
                                  _opt(change.hide)])
        return parse_state(got)

    async def receipts(self, tenant: int, users: Sequence[int]) -> list[bool]:
        """ConversationStateStore.receipts: one MGET per instance."""
        async def read(client: Any, part: Sequence[int]) -> list:
            with boundary("receipts read"):
                return await client.mget([receipts_key(tenant, u) for u in part])
        got = await spread(self._t, users, lambda u: self._user(tenant, u), read)
        return [v != b"0" for v in got]

    async def set_receipts(self, tenant: int, user: int, enabled: bool) -> None:
        """ConversationStateStore.set_receipts: DEL (on, the default) or SET "0"."""
        with boundary("receipts write"):
            client = self._user(tenant, user)
            if enabled:
                await client.delete(receipts_key(tenant, user))
            else:
                await client.set(receipts_key(tenant, user), b"0")

    async def _read_pairs(self, tenant: int, pairs: Sequence[tuple[int, bytes]], second: Any,
                          what: str) -> list[tuple[Any, Any]]:
        """(read position, second(tenant, user, conv) queued on the pipe) per (user, conv)
        of `pairs`, in order: one pipeline per instance (receipt_positions, read_states)."""
        async def read(client: Any, part: Sequence[tuple[int, bytes]]) -> list:
            with boundary(what):
                async with client.pipeline(transaction=False) as pipe:
                    for u, conv in part:
                        pipe.hget(read_key(tenant, u), conv.hex())
                        second(pipe, u, conv)
                    got = await pipe.execute()
            return list(zip(got[0::2], got[1::2]))
        if not pairs:
            return []
        return await spread(self._t, pairs, lambda pair: self._user(tenant, pair[0]), read)

    async def receipt_positions(self, tenant: int, pairs: Sequence[tuple[int, bytes]]) -> list[tuple[int, bool]]:
        """ConversationStateStore.receipt_positions: one pipeline of HGET + GET per instance."""
        rows = await self._read_pairs(tenant, pairs, lambda pipe, u, conv: pipe.get(receipts_key(tenant, u)),
                                      "receipt positions read")
        try:
            return [(int(pos or 0), flag != b"0") for pos, flag in rows]
        except ValueError:
            raise StoreCorrupt("corrupt read position") from None

    async def read_states(self, tenant: int, pairs: Sequence[tuple[int, bytes]]) -> list[tuple[int, ConvState]]:
        """ConversationStateStore.read_states: one pipeline of two HGETs per pair per instance."""
        rows = await self._read_pairs(tenant, pairs,
                                      lambda pipe, u, conv: pipe.hget(convstate_key(tenant, u), conv.hex()),
                                      "read positions and states read")
        try:
            return [(int(pos or 0), parse_state(state)) for pos, state in rows]
        except ValueError:
            raise StoreCorrupt("corrupt read position") from None
