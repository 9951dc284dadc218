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

from typing import Callable, Iterable, NamedTuple, Sequence

from qim._core import ids
from qim.consts import CONVERSATION_KIND_DIRECT, CONVERSATION_KIND_GROUP
from qim.errors import IdError
from qim.stores.sessions import Registration

__all__ = ["Message", "Registration", "from_message", "kind_of", "merge", "registrations"]


class Message(NamedTuple):
    """One committed message as a projection path sees it: `users` are the recipients of
    one dispatch record (user ids)."""

    tenant: int
    conversation_id: bytes
    seq: int
    created_at_ms: int
    sender: int
    users: Sequence[int]


def kind_of(conversation_id: bytes) -> int:
    """The conversation kind of a message that has a session list: CONVERSATION_KIND_DIRECT
    or _GROUP. ValueError otherwise (rooms never reach the dispatch log: such a record is
    corrupt)."""
    try:
        kind = ids.conversation_kind(conversation_id)
    except IdError as exc:
        raise ValueError(f"bad conversation_id: {exc}") from None
    if kind not in (CONVERSATION_KIND_DIRECT, CONVERSATION_KIND_GROUP):
        raise ValueError(f"conversation kind {kind} has no session list")
    return kind


def from_message(tenant: int, conversation_id: bytes, seq: int, created_at_ms: int, sender: int,
                 users: Iterable[int], owns: Callable[[int], bool]) -> list[Registration]:
    """Registrations of one message for the owned users among `users` (the recipients of
    one dispatch record). ValueError as kind_of. User 0 (an operator's action, e.g. a
    delete resolving a report) is nobody's session: never registered (a badge mark for
    it would be settled for no user)."""
    kind = kind_of(conversation_id)
    users = list(users)
    direct = kind == CONVERSATION_KIND_DIRECT
    other = next((u for u in users if u != sender), 0) if direct else 0
    out = []
    for user in users:
        if not user or not owns(user):
            continue
        mine = user == sender
        out.append(Registration(tenant, user, conversation_id, created_at_ms, seq if mine else 0,
                                (other if mine else sender) if direct else 0))
    if direct and other and sender and sender not in users and owns(sender):
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


def registrations(messages: Iterable[Message], owns: Callable[[int], bool]) -> list[Registration]:
    """merge() of every message's from_message(), built without one Registration per
    (message, recipient): group messages of one conversation to the same recipients
    collapse first (the newest created_at, each sender's highest seq), so a batch of k
    messages to a group of n members costs n registrations, not k × n. Every field is
    order-independent (merge), so the result is the same set. ValueError as kind_of."""
    out: list[Registration] = []
    collapsed: dict[tuple, list] = {}  # (tenant, conversation, recipients) -> [created_at_ms, {sender: seq}]
    for m in messages:
        if kind_of(m.conversation_id) == CONVERSATION_KIND_DIRECT:  # one or two recipients: as they are
            out += from_message(m.tenant, m.conversation_id, m.seq, m.created_at_ms, m.sender, m.users, owns)
            continue
        key = (m.tenant, m.conversation_id, tuple(m.users))
        entry = collapsed.get(key)
        if entry is None:
            collapsed[key] = entry = [m.created_at_ms, {}]
        elif m.created_at_ms > entry[0]:
            entry[0] = m.created_at_ms
        seqs = entry[1]
        if m.seq > seqs.get(m.sender, 0):
            seqs[m.sender] = m.seq  # read only for a sender among the recipients, as from_message
    for (tenant, conv, users), (created, seqs) in collapsed.items():
        out += [Registration(tenant, u, conv, created, seqs.get(u, 0), 0) for u in users if u and owns(u)]
    return merge(out)
