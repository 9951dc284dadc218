"""Conversation registration, shared by both projection paths (docs/design.md §6, seed 004 §6).

A committed message materialized for `users` registers the conversation for every
user this session node owns: score = created_at_ms with ZADD GT, the sender's own
registration also moves its read position to the message ("sending marks the
conversation read up to the sent message"), and a direct conversation's peer is
recorded once. A direct message's dispatch to the recipient's shard does not list the
sender (its mailbox may be on another shard); the sender is registered from it too,
with the recipient as peer, so a user who only ever sent into a conversation still
learns whom it is with after a relogin with an empty local store.

Both paths (durable dispatch consumer, the mailbox's low-latency Projection) build
registrations with `from_message` and write them with `SessionStore.register`, the one
order-independent write (qim/stores/sessions.py): the seed lost registrations when the
two paths wrote differently (docs/decisions/0006-session-projection.md).
"""

from __future__ import annotations

from typing import Callable, Iterable

from qim._core import ids
from qim.consts import CONVERSATION_KIND_DIRECT, CONVERSATION_KIND_GROUP
from qim.errors import IdError
from qim.stores.sessions import Registration

__all__ = ["Registration", "from_message", "merge"]


def from_message(tenant: int, conversation_id: bytes, seq: int, created_at_ms: int, sender: int,
                 users: Iterable[int], owns: Callable[[int], bool]) -> list[Registration]:
    """Registrations of one message for the owned users among `users` (the recipients of
    one dispatch record). ValueError when the conversation is not direct or group (rooms
    never reach the dispatch log: such a record is corrupt)."""
    try:
        kind = ids.conversation_kind(conversation_id)
    except IdError as exc:
        raise ValueError(f"bad conversation_id: {exc}") from None
    if kind not in (CONVERSATION_KIND_DIRECT, CONVERSATION_KIND_GROUP):
        raise ValueError(f"conversation kind {kind} has no session list")
    users = list(users)
    direct = kind == CONVERSATION_KIND_DIRECT
    other = next((u for u in users if u != sender), 0) if direct else 0
    out = []
    for user in users:
        if not owns(user):
            continue
        mine = user == sender
        out.append(Registration(tenant, user, conversation_id, created_at_ms, seq if mine else 0,
                                (other if mine else sender) if direct else 0))
    if direct and other and sender not in users and owns(sender):
        out.append(Registration(tenant, sender, conversation_id, created_at_ms, seq, other))
    return out


def merge(regs: Iterable[Registration]) -> list[Registration]:
    """One registration per (tenant, user, conversation): the newest created_at, the
    highest own seq, the first known peer. Every field is order-independent, so merging
    changes the round trip count, never the result."""
    acc: dict[tuple[int, int, bytes], Registration] = {}
    for r in regs:
        key = (r.tenant, r.user, r.conversation_id)
        prev = acc.get(key)
        if prev is None:
            acc[key] = r
        else:
            acc[key] = Registration(r.tenant, r.user, r.conversation_id, max(prev.created_at_ms, r.created_at_ms),
                                    max(prev.own_seq, r.own_seq), prev.peer or r.peer)
    return list(acc.values())
