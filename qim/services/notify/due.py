"""Which (device, message) pairs are due an alert (docs/decisions/0135), by the unread
definition of the session list (qim/services/session/summary.py; docs/design.md §6):

a dispatch record of event MESSAGE, not CONTROL, to each recipient other than its sender
(user 0 is an operator: nobody); then per recipient device, in this order:
  older than QIM_NOTIFY_MAX_AGE_MS (a day: the providers' own expiry of an alert; a
  first start on a deployment replays the log's retention) -> suppressed_expired;
  recalled or deleted (the record's state is not NORMAL, or it is gone) -> suppressed_recalled;
  the user's read position already at or past it (read on another device) -> suppressed_read;
  the conversation muted by the user (muted_until in the future or for ever) and the
  message does not mention the user (nor all) -> suppressed_muted;
  the device connected now (PresenceDirectory) -> suppressed_online;
  otherwise due.
Reactions and typing never reach the dispatch log (decision 0121); edits and recalls are
CONTROL records or other event types.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from functools import partial
from typing import Callable, Optional, Sequence

from qim.consts import MESSAGE_TYPE_CONTROL
from qim.notify.providers.base import ProviderName, Registration
from qim.proto.v1 import message_pb2, push_pb2
from qim.protocol import EventType
from qim.stores.base import Stores
from qim.stores.convstate import MUTE_FOREVER
from qim.stores.messages import MessageRef
from qim.wire.dispatch import Dispatch

NORMAL = message_pb2.MESSAGE_STATE_NORMAL
PROVIDER_NAMES: dict[int, ProviderName] = {push_pb2.PUSH_PROVIDER_APNS: "apns", push_pb2.PUSH_PROVIDER_FCM: "fcm",
                                           push_pb2.PUSH_PROVIDER_WEBPUSH: "webpush"}


@dataclass(frozen=True)
class Candidate:
    """A message to one recipient (before its devices are known)."""

    tenant: int
    user: int
    conversation_id: bytes
    message_id: bytes
    seq: int
    created_at_ms: int = 0
    sender: int = 0


@dataclass(frozen=True)
class Due:
    """A (device, message) pair with its verdict: `outcome` "due" or a suppressed_* reason."""

    candidate: Candidate
    registration: push_pb2.PushRegistration
    record: Optional[message_pb2.MessageRecord]
    outcome: str

    @property
    def provider(self) -> str:
        """The registration's provider name ("apns", "fcm", "webpush"; "unknown" otherwise)."""
        return PROVIDER_NAMES.get(self.registration.settings.provider, "unknown")


def candidates(records: Sequence[Dispatch]) -> list[Candidate]:
    """The recipients each record is an unread message for (module doc, first line)."""
    out = []
    for d in records:
        c = d.coord
        if d.event_type != EventType.MESSAGE or c.message_type == MESSAGE_TYPE_CONTROL:
            continue
        out += [Candidate(d.tenant, u, c.conversation_id, c.message_id, c.conversation_seq, c.created_at_ms,
                          c.sender_id) for u in d.recipients if u and u != c.sender_id]
    return out


def provider_registration(reg: push_pb2.PushRegistration) -> Registration:
    """The providers' Registration of a stored PushRegistration (decision 0128)."""
    s = reg.settings
    name = PROVIDER_NAMES[s.provider]
    if name == "webpush":
        return Registration("webpush", subscription={"endpoint": s.token,
                                                     "keys": {"p256dh": s.webpush_p256dh, "auth": s.webpush_auth}},
                            with_content=s.content)
    return Registration(name, token=s.token, with_content=s.content, apns_topic=s.apns_topic,
                        apns_sandbox=s.apns_environment == push_pb2.APNS_ENVIRONMENT_SANDBOX)


def muted(muted_until: int, now_ms: int) -> bool:
    """Whether a conversation state's muted_until mutes it now."""
    return muted_until == MUTE_FOREVER or muted_until > now_ms


async def verdicts(stores: Stores, cands: Sequence[Candidate], online: Callable[[int, int, int], bool],
                   now_ms: int, max_age_ms: int = 86_400_000) -> list[Due]:
    """Every (device, message) pair of `cands` with its verdict (module doc). Reads, per
    tenant: the records and their states (one round trip), the recipients' read positions
    and conversation states (one round trip per instance: ConversationStateStore.read_states)
    and their registrations (one round trip per instance), the last two concurrently;
    `online(tenant, user, device)` answers from memory (PresenceFollower)."""
    out: list[Due] = []
    for tenant in dict.fromkeys(c.tenant for c in cands):
        mine = [c for c in cands if c.tenant == tenant]
        refs = list(dict.fromkeys(MessageRef(c.conversation_id, c.message_id) for c in mine))
        records, states = await stores.messages.resolve(tenant, refs, refs)
        by_ref = {r: (rec, st) for r, rec, st in zip(refs, records, states)}
        users = list(dict.fromkeys(c.user for c in mine))
        pairs = list(dict.fromkeys((c.user, c.conversation_id) for c in mine))
        # one round trip per instance, not two per recipient (decision 0145)
        rows, regs = await asyncio.gather(stores.convstates.read_states(tenant, pairs),
                                          stores.push.registrations_of(tenant, users))
        read_at = {pair: p for pair, (p, _) in zip(pairs, rows)}
        mute_at = {pair: s.muted_until for pair, (_, s) in zip(pairs, rows)}
        for c in mine:
            rec, state = by_ref[MessageRef(c.conversation_id, c.message_id)]
            for reg in regs.get(c.user, []):
                if reg.settings.provider not in PROVIDER_NAMES:
                    continue
                verdict = verdict_of(c, rec, state, read_at[(c.user, c.conversation_id)],
                                     mute_at[(c.user, c.conversation_id)],
                                     partial(online, tenant, c.user, reg.device_id), now_ms, max_age_ms)
                out.append(Due(c, reg, rec, verdict))
    return out


def verdict_of(c: Candidate, rec: Optional[message_pb2.MessageRecord], state: int, read_seq: int,
               muted_until: int, online: Callable[[], bool], now_ms: int, max_age_ms: int) -> str:
    """One device's verdict on one message (module doc, in that order; `online` asked last)."""
    if c.created_at_ms < now_ms - max_age_ms:
        return "suppressed_expired"
    if rec is None or state != NORMAL:
        return "suppressed_recalled"
    if read_seq >= c.seq:
        return "suppressed_read"
    if muted(muted_until, now_ms) and not (rec.mention_all or c.user in rec.mention_user_ids):
        return "suppressed_muted"
    if online():
        return "suppressed_online"
    return "due"
