"""Reactions and typing in the SDK (docs/sdk.md "Reactions and typing"; docs/protocol.md;
docs/decisions/0121-reactions-and-typing-are-ephemeral.md).

    r = await client.reactions.add(conv, message_id, "👍")    # ReactionSummary after it
    await client.reactions.remove(conv, message_id, "👍")
    summaries = await client.reactions.summaries(conv)        # message_id -> ReactionSummary
    client.reactions.known(message_id)                         # the newest learnt, pulls included
    await client.reactions.typing(conv)                        # at most one per 2 s goes out
    client.reactions.typing_in(conv)                           # user ids typing now

Nothing here touches the LocalStore, the mailbox cursor, unread or the conversation list:
a reaction is the ephemeral_aggregate delivery kind. Live REACTION_EVENTS are told as
ReactionsChanged (absolute counts: a lost one is repaired by the next, or by
`summaries()`, which reads them with history). A device that was away learns them from
its mailbox pulls too (MailboxEntry.reactions): `known(message_id)` needs no request.
Every summary carries the message's `version` (the server's order of its changes;
decision 0121, amended): events arrive out of order (through different gateways), so per
message only a summary with a higher version than the one held replaces it, whatever
brought it (event, pull, history page, REACT reply), and an event that is not newer is
not told at all: a ReactionsChanged always carries what `known` then holds.
TYPING_EVENTS as TypingChanged, and a
typing indication not renewed within its `expires_in_ms` is told stopped by itself; a
message from the typist in that conversation (a pulled MESSAGE entry) ends it at once
(told stopped: what the typist typed has arrived, no "typing…" lingers behind it).
Adding and removing are idempotent per (user, message, emoji). Errors: ServerError
(NOT_FOUND, FORBIDDEN, PAYLOAD_TOO_LARGE past 20 distinct emoji), ValueError for an
emoji the server would refuse (nothing sent), NotConnected, ConnectionLost.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from qim._core import ids
from qim.consts import CONVERSATION_KIND_DIRECT
from qim.errors import IdError, RequestError
from qim.proto.v1 import reaction_pb2
from qim.protocol import EventType, Opcode
from qim.sdk import requests
from qim.wire.reaction import check_emoji


@dataclass(frozen=True)
class ReactionSummary:
    """A message's reactions: (emoji, count, mine) most first; `mine`: this user reacted.
    `version`: the server's order of the message's summaries (higher: newer; 0: none
    assigned, from a server before versions); empty `counts` with a version: all removed."""

    counts: tuple[tuple[str, int, bool], ...] = ()
    version: int = 0

    def count(self, emoji: str) -> int:
        """How many users reacted with `emoji` (0: none)."""
        return next((c for e, c, _ in self.counts if e == emoji), 0)

    def mine(self) -> set[str]:
        """The emoji this user reacted with."""
        return {e for e, _, m in self.counts if m}


@dataclass(frozen=True)
class ReactionsChanged:
    """A member (`user_id`, `device_id`; possibly this user on another device) added or
    removed (`removed`) `emoji` on `message_id`; `summary` is the message's whole
    aggregate after it, `mine` as far as this client knows, and `version` its version
    (told only when newer than what the client held: module doc)."""

    conversation_id: bytes
    message_id: bytes
    user_id: int
    device_id: int
    emoji: str
    removed: bool
    summary: ReactionSummary
    version: int = 0


@dataclass(frozen=True)
class TypingChanged:
    """`user_id` started (`typing`) or stopped typing in `conversation_id` (stopped:
    told, the indication expired without renewal, or a message from them arrived there)."""

    conversation_id: bytes
    user_id: int
    typing: bool


def summary_of(msg: reaction_pb2.MessageReactionSummary, mine: Optional[set[str]] = None) -> ReactionSummary:
    """A ReactionSummary of the wire form; `mine` overrides the wire's flags when given."""
    return ReactionSummary(tuple((c.emoji, c.count, c.mine if mine is None else c.emoji in mine)
                                 for c in msg.counts), msg.version)


def newer(summary: ReactionSummary, held: Optional[ReactionSummary]) -> bool:
    """Whether `summary` replaces `held` (decision 0121, amended: versions): a higher
    version does; a lower or equal one is nothing new. Unversioned summaries (0, from a
    server before versions) replace only unversioned ones, the last learnt winning."""
    if held is None:
        return True
    return summary.version > held.version or summary.version == held.version == 0


KNOWN_MAX = 10_000  # summaries kept by `known` (a bound on memory, not a protocol limit)


class Reactions:
    """Reactions and typing of one ClientRuntime `rt` (its `request`, `store`, `user_id`
    and core: `emit`, `spawn`, `on_ephemeral`)."""

    def __init__(self, rt: Any) -> None:
        self._rt = rt
        self._mine: dict[bytes, set[str]] = {}  # message_id -> own emoji (as last learnt)
        # message_id -> the last summary learnt (pull, history, REACT, event), the newest KNOWN_MAX
        self._known: OrderedDict[bytes, ReactionSummary] = OrderedDict()
        self._typing: dict[tuple[bytes, int], float] = {}  # (conversation, user) -> monotonic expiry
        self._sent_typing: dict[bytes, float] = {}  # conversation -> monotonic time of our last TYPING

    def attach(self) -> None:
        """Hook into the runtime: live REACTION_EVENTS and TYPING_EVENTS."""
        self._rt.core.on_ephemeral = self.on_frame
        self._rt.core.on_pulled = self.on_pulled

    def known(self, message_id: bytes) -> Optional[ReactionSummary]:
        """The newest summary this client learnt of a message (the highest version of a
        mailbox pull, a history page, a REACT reply or a live event, whatever the order
        they arrived in); None: it learnt none (no reactions as far as it knows). In
        memory only, the KNOWN_MAX messages learnt of last."""
        return self._known.get(bytes(message_id))

    def _learn(self, message_id: bytes, summary: ReactionSummary) -> bool:
        """Keep `summary` if it is newer than the one held (`newer`); False: ignored."""
        if not newer(summary, self._known.get(message_id)):
            return False
        self._known[message_id] = summary
        self._known.move_to_end(message_id)
        self._mine[message_id] = summary.mine()
        while len(self._known) > KNOWN_MAX:
            self._mine.pop(self._known.popitem(last=False)[0], None)
        return True

    def on_pulled(self, entries: Sequence[Any]) -> None:
        """The MailboxEntry list of an applied MAILBOX_BATCH: the summaries it carries
        (field `reactions`, absent for a message that never had any; decision 0121 §4);
        a new message ends its sender's typing in its conversation (module doc)."""
        for e in entries:
            if e.HasField("reactions"):
                self._learn(bytes(e.message_id), summary_of(e.reactions))
            if e.event_type == EventType.MESSAGE:
                self._end_typing((bytes(e.conversation_id), int(e.sender_id)))

    async def _peer(self, conversation_id: bytes) -> int:
        """The peer of a direct conversation (0 for a group); ValueError when the store
        does not know it (as for a send: open_direct(peer_user_id) first)."""
        store = self._rt.store
        peer = int(await store.run(store.peer_of, conversation_id) or 0)
        try:
            direct = ids.conversation_kind(conversation_id) == CONVERSATION_KIND_DIRECT
        except IdError as exc:
            raise ValueError(f"not a conversation_id: {exc}") from None
        if direct and not peer:
            raise ValueError("unknown peer: open_direct(peer_user_id) first")
        return peer

    async def add(self, conversation_id: bytes, message_id: bytes, emoji: str) -> ReactionSummary:
        """Add this user's `emoji` to a message (a repeat changes nothing): the summary
        after it (`known` may already hold a newer one: module doc)."""
        return await self._react(conversation_id, message_id, emoji, False)

    async def remove(self, conversation_id: bytes, message_id: bytes, emoji: str) -> ReactionSummary:
        """Remove this user's `emoji` from a message (absent: nothing changes): the summary after it."""
        return await self._react(conversation_id, message_id, emoji, True)

    async def _react(self, conversation_id: bytes, message_id: bytes, emoji: str, remove: bool) -> ReactionSummary:
        try:
            check_emoji(emoji)
        except RequestError as exc:
            raise ValueError(exc.message) from None
        conv, mid = bytes(conversation_id), bytes(message_id)
        req = reaction_pb2.React(conversation_id=conv, peer_user_id=await self._peer(conv), message_id=mid,
                                 emoji=emoji, remove=remove)
        _, body = await self._rt.request(Opcode.REACT, req.SerializeToString())
        summary = summary_of(reaction_pb2.ReactOk.FromString(body).summary)
        self._learn(mid, summary)
        return summary

    async def summaries(self, conversation_id: bytes, anchor_seq: int = 0, limit: int = 50,
                        newer: bool = False) -> dict[bytes, ReactionSummary]:
        """The reactions of one history page (PULL_HISTORY from `anchor_seq`, OLDER from
        the newest by default): message_id -> summary, for the messages that have any (as
        read; `known` keeps whichever is newer, and learns of emptied ones too)."""
        conv = bytes(conversation_id)
        batch = await requests.pull_history(self._rt, conv, await self._peer(conv), anchor_seq=anchor_seq,
                                            newer=newer, limit=limit)
        out = {}
        for item in batch.items:
            if item.HasField("reactions"):
                summary = summary_of(item.reactions)
                self._learn(bytes(item.message_id), summary)
                if summary.counts:
                    out[bytes(item.message_id)] = summary
        return out

    async def typing(self, conversation_id: bytes, stopped: bool = False) -> bool:
        """Tell the conversation's online members this user is typing (or `stopped`).
        At most one every 2 s per conversation leaves (the gateway's limit): a sooner
        call returns False without sending; True when the server took it."""
        conv = bytes(conversation_id)
        now = time.monotonic()
        if not stopped and now - self._sent_typing.get(conv, -1e9) < 2.0:
            return False
        self._sent_typing[conv] = now
        req = reaction_pb2.Typing(conversation_id=conv, peer_user_id=await self._peer(conv), stopped=stopped)
        _, body = await self._rt.request(Opcode.TYPING, req.SerializeToString())
        return reaction_pb2.TypingOk.FromString(body).delivered

    def typing_in(self, conversation_id: bytes) -> list[int]:
        """The users typing in the conversation now (indications not yet expired)."""
        now = time.monotonic()
        return sorted(u for (c, u), until in self._typing.items() if c == bytes(conversation_id) and until > now)

    # --- live frames ------------------------------------------------------------------
    def on_frame(self, opcode: int, body: bytes) -> None:
        """A REACTION_EVENTS or TYPING_EVENTS frame from the connection (module doc)."""
        if opcode == Opcode.REACTION_EVENTS:
            self._on_reaction(reaction_pb2.ReactionEvents.FromString(body))
        elif opcode == Opcode.TYPING_EVENTS:
            self._on_typing(reaction_pb2.TypingEvents.FromString(body))

    def _on_reaction(self, frame: reaction_pb2.ReactionEvents) -> None:
        """A live event: kept and told only when newer than the summary held (module doc)."""
        mid = bytes(frame.message_id)
        mine = set(self._mine.get(mid, ()))
        if frame.user_id == self._rt.store.user_id:  # this user on another device
            (mine.discard if frame.removed else mine.add)(frame.emoji)
        summary = ReactionSummary(tuple((c.emoji, c.count, c.emoji in mine) for c in frame.counts), frame.version)
        if self._learn(mid, summary):
            self._rt.core.emit(ReactionsChanged(bytes(frame.conversation_id), mid, frame.user_id, frame.device_id,
                                                frame.emoji, frame.removed, summary, frame.version))

    def _on_typing(self, frame: reaction_pb2.TypingEvents) -> None:
        key = (bytes(frame.conversation_id), frame.user_id)
        was = self._typing.get(key, 0.0) > time.monotonic()
        if frame.stopped or not frame.expires_in_ms:
            self._end_typing(key)
            return
        until = time.monotonic() + frame.expires_in_ms / 1000
        self._typing[key] = until
        if not was:
            self._rt.core.emit(TypingChanged(key[0], key[1], True))
        asyncio.get_running_loop().call_later(frame.expires_in_ms / 1000 + 0.05, self._expire, key, until)

    def _end_typing(self, key: tuple[bytes, int]) -> None:
        """(conversation, user) stopped typing: forgotten, and told when it was typing
        (its pending expiry then finds nothing to end: `_expire`)."""
        was = self._typing.pop(key, 0.0) > time.monotonic()
        if was:
            self._rt.core.emit(TypingChanged(key[0], key[1], False))

    def _expire(self, key: tuple[bytes, int], until: float) -> None:
        if self._typing.get(key) == until:  # not renewed or stopped since
            del self._typing[key]
            self._rt.core.emit(TypingChanged(key[0], key[1], False))
