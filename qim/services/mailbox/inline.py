"""Inline pushes: which records a push may carry whole (docs/decisions/0156; issue 41).

A push is a position (docs/decisions/0033), and for a small direct record it may also
carry each recipient user's entries at that position together with the user's previous
entry position on its lane (`prev_mailbox_seq`): a device whose committed cursor equals
it applies them as the page a PULL_MAILBOX would have returned, and pulls otherwise.

The rule, so that an inline entry is always byte-identical to what MailboxPuller
(pull.py) serves for that user at that mailbox_seq:
- only a MESSAGE of a direct conversation with at most INLINE_MAX_USERS recipients (a
  direct message: the receiver and the sender's own user); groups, rooms and CONTROL
  events (RECALL, DELETE, EDIT, MEMBERSHIP: a pull fills their target's state) push the
  position only;
- only a body carried inline and not empty (a referenced body is filled at pull time,
  with its replies, mentions and quote: never shown empty), each user's serialized
  entries at most INLINE_MAX_BYTES;
- only a record materialized FRESH by the fused call, whose store read each user's
  previous entry offset after every entry below it was written (the Redis store;
  decisions/0142: an overtake writes the records ahead in the same call). A fresh
  MESSAGE has no reaction summary and no recalled state, which a pull adds.
"""

from __future__ import annotations

from typing import Optional

from qim._core import ids
from qim._core import mailbox_seq as mseq
from qim._core.types import MailboxEvent
from qim.consts import CONVERSATION_KIND_DIRECT
from qim.proto.v1 import mailbox_pb2
from qim.protocol import EventType
from qim.wire.dispatch import Dispatch

INLINE_MAX_USERS = 4  # a direct message has two (one when a user writes to itself)
INLINE_MAX_BYTES = 4096  # per user's serialized entries: a push frame stays small

# user -> (prev_mailbox_seq: 0 when the user has no earlier entry, the serialized
# MailboxEntry of each of its entries at the record's mailbox_seq)
Inline = dict[int, tuple[int, list[bytes]]]


def entry_pb(seq: int, ev: MailboxEvent) -> mailbox_pb2.MailboxEntry:
    """Wire form of one MailboxEvent at `seq` (body filled later when referenced)."""
    return mailbox_pb2.MailboxEntry(
        mailbox_seq=seq, event_type=ev.event_type, event_id=ev.event_id, message_id=ev.message_id,
        conversation_id=ev.conversation_id, conversation_seq=ev.conversation_seq, sender_id=ev.sender_id,
        created_at_ms=ev.created_at_ms, message_type=ev.message_type, custom_type=ev.custom_type,
        client_message_id=ev.client_message_id, body=ev.body or b"",
    )


def inlinable(d: Dispatch) -> bool:
    """Whether a push of `d` may carry its entries (the module's rule, but for the
    per-user byte budget and the store's previous positions, checked in `inline_entries`)."""
    return (d.event_type == EventType.MESSAGE and d.coord.conversation_id[:1] == bytes([CONVERSATION_KIND_DIRECT])
            and 0 < len(d.recipients) <= INLINE_MAX_USERS and bool(d.body) and len(d.body or b"") < INLINE_MAX_BYTES)


def inline_entries(d: Dispatch, seq: int, epoch: int, prevs: Optional[dict[int, int]]) -> Inline:
    """The inline part of the push of `d` materialized FRESH at mailbox_seq `seq` in
    shard_epoch `epoch`: per recipient whose previous entry offset the store read
    (`prevs`: user -> offset, -1 none), its previous position (composed in `epoch`, as
    a pull composes every position it serves: decisions/0075) and its entries,
    serialized as a pull serves them (the cmid only in the sender's own entry). A user
    over INLINE_MAX_BYTES, or left out of `prevs`, is left out (position only)."""
    out: Inline = {}
    if not prevs or not inlinable(d):
        return out
    for user in d.recipients:
        prev = prevs.get(user)
        if prev is None:
            continue
        cmid = d.client_message_id if user == d.coord.sender_id else b""
        ev = MailboxEvent.at(d.event_type, ids.event_id(d.dispatch_id, user, d.event_type), d.coord, cmid, d.body)
        data = entry_pb(seq, ev).SerializeToString()
        if len(data) <= INLINE_MAX_BYTES:
            out[user] = (mseq.compose(epoch, prev) if prev >= 0 else 0, [data])
    return out
