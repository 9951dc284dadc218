"""Session list entries, computed on the read path from canonical history (docs/design.md §6,
§7; seed 000 未读与已读 and "会话头不额外写第二份").

Visible part for a user: direct conversations everything; groups the union of the
user's member intervals lo < seq <= hi (lo = joined_at, hi = left_at, open while a
member; a re-joined member holds several, qim/stores/intervals.py). Head: the newest
visible message of any type (a recalled or deleted one without body). Unread, the single
definition, never accumulated on the write path:
  |{m visible : base < m.seq ∧ m.sender_id ≠ self ∧ m.type ≠ CONTROL ∧ m.state = NORMAL}|
with base = max(read_conversation_seq, lo of the first interval); exact while
head.seq − base ≤ 200 (UNREAD_EXACT_WINDOW), else unread = 200 and unread_exact = false.
Never latest − read. The entry's joined_at / left_at report the latest interval.
The user's own choices (pinned, muted_until, hidden), `mentioned` (an unread message of
that same set names the user or all; false past the exact window) and a direct peer's
`peer_read_seq` under the receipts rule come from ConversationStateStore
(qim/services/session/convstate.py, docs/decisions/0122); none of them changes unread.

Reads per page, whatever its size: read positions, peers and group views concurrently
(ReadPositionStore, SessionStore, GroupStore), then heads and unread windows in one
MessageStore.tails call. Any missing or corrupt input raises PageError: the page fails,
never a silent zero.
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable, Iterable, Optional

from qim._core import ids
from qim.consts import CONVERSATION_KIND_GROUP, MESSAGE_TYPE_CONTROL, SESSION_HEAD_BODY_MAX, UNREAD_EXACT_WINDOW
from qim.proto.v1 import history_pb2, message_pb2, session_pb2
from qim.stores.convstate import ConversationStateStore, ConvState
from qim.stores.errors import StoreCorrupt
from qim.stores.groups import GroupStore
from qim.stores.intervals import OPEN, Interval, latest, parse_intervals
from qim.stores.messages import MessageStore, TailQuery
from qim.stores.reads import ReadPositionStore
from qim.stores.sessions import SessionStore
from qim.wire.history import history_item

NORMAL = message_pb2.MESSAGE_STATE_NORMAL


class PageError(Exception):
    """A record, index entry or interval needed by the page is missing or corrupt."""


def count_unread(records: Iterable[message_pb2.MessageRecord], user: int, base: int, hi: Optional[int]) -> int:
    """The unread definition over `records` (any order, any superset of the window)."""
    return sum(1 for r in records
               if r.conversation_seq > base and (hi is None or r.conversation_seq <= hi)
               and r.sender_id != user and r.message_type != MESSAGE_TYPE_CONTROL and r.state == NORMAL)


def mentions(records: Iterable[message_pb2.MessageRecord], user: int, base: int) -> bool:
    """Whether an unread message (the unread definition's set) mentions `user` or all."""
    return any(r.conversation_seq > base and r.sender_id != user and r.message_type != MESSAGE_TYPE_CONTROL
               and r.state == NORMAL and (r.mention_all or user in r.mention_user_ids) for r in records)


def head_item(rec: message_pb2.MessageRecord, user: int) -> history_pb2.HistoryItem:
    """History form of the head; its body only up to SESSION_HEAD_BODY_MAX, so a page of
    heads stays far below the 4 MiB frame limit (docs/design.md §4)."""
    return history_item(rec, user, SESSION_HEAD_BODY_MAX)


def parse_member_intervals(raw: Optional[bytes], conv: bytes) -> tuple[Interval, ...]:
    """Member interval text "<joined_at>:<left_at>[,...]" -> ((lo, hi | None), ...)."""
    if raw is None:
        raise PageError(f"member interval missing for group {conv.hex()}")
    try:
        return parse_intervals(raw)
    except ValueError:
        raise PageError(f"corrupt member interval for group {conv.hex()}") from None


async def _zeros(n: int) -> list[int]:
    """No direct peer for any of `n` conversations (Summarizer.summarize with_peers=False)."""
    return [0] * n


class Summarizer:
    """`await summarize(tenant, user, convs)` -> {conversation_id: SessionEntry}."""

    def __init__(self, messages: MessageStore, groups: GroupStore, sessions: SessionStore,
                 reads: ReadPositionStore, states: Optional[ConversationStateStore] = None,
                 peer_reads: Optional[Callable[[int, int, list], Awaitable[list[int]]]] = None) -> None:
        self._messages = messages
        self._groups = groups
        self._sessions = sessions
        self._reads = reads
        # the user's own choices (pinned, muted_until, hidden) and the direct peers' read
        # positions under the receipts rule (qim/services/session/convstate.py); None: left 0
        self._states = states
        self._peer_reads = peer_reads

    async def summarize(self, tenant: int, user: int, convs: list[bytes],
                        with_peers: bool = True) -> dict[bytes, session_pb2.SessionEntry]:
        """SessionEntry per conversation of `convs` for `user`. Raises PageError (corrupt or
        missing data) and StoreUnavailable (the caller answers UNAVAILABLE).
        `with_peers=False` (the badge's settle, badge.py): the direct peer and its read
        position are neither read nor checked (peer_user_id = peer_read_seq = 0); every
        other field as the list shows it (those two reads were half the settle's own
        samples: docs/perf.md "Round six: the session's CPU per message")."""
        if not convs:
            return {}
        kinds = [ids.conversation_kind(c) for c in convs]
        group_convs = [c for c, k in zip(convs, kinds) if k == CONVERSATION_KIND_GROUP]
        try:
            reads, peers, views = await asyncio.gather(
                self._reads.positions(tenant, user, convs),
                self._sessions.peers(tenant, user, convs) if with_peers else _zeros(len(convs)),
                self._groups.member_views(tenant, user, group_convs))
        except StoreCorrupt as exc:
            raise PageError(exc.message) from None
        by_group = dict(zip(group_convs, views))
        intervals: list[tuple[Interval, ...]] = []
        group_ids: list[int] = []
        titles: dict[bytes, str] = {}
        for conv, kind, i in zip(convs, kinds, range(len(convs))):
            if kind != CONVERSATION_KIND_GROUP:
                intervals.append(OPEN)
                group_ids.append(0)
                continue
            view = by_group[conv]
            if view.intervals is None:
                raise PageError(f"member interval missing for group {conv.hex()}")
            if view.group_id is None:
                raise PageError(f"group meta missing for {conv.hex()}")
            intervals.append(view.intervals)
            group_ids.append(view.group_id)
            titles[conv] = view.title
            peers[i] = 0
        bases = [max(read, iv[0][0]) for read, iv in zip(reads, intervals)]
        try:
            tails = await self._messages.tails(tenant, [TailQuery(c, iv, b) for c, iv, b in zip(convs, intervals, bases)],
                                               UNREAD_EXACT_WINDOW)
        except StoreCorrupt as exc:
            raise PageError(exc.message) from None
        choices, peer_reads = await self._choices(tenant, user, convs, peers)
        out = {}
        for conv, kind, iv, read, peer, gid, base, tail in zip(convs, kinds, intervals, reads, peers, group_ids, bases,
                                                              tails):
            if tail.head is None:
                raise PageError(f"no visible message in {conv.hex()}")
            exact = tail.window is not None
            unread = count_unread(tail.window, user, base, None) if tail.window is not None else UNREAD_EXACT_WINDOW
            out[conv] = session_pb2.SessionEntry(
                conversation_id=conv, kind=kind, last_message=head_item(tail.head, user),
                last_activity_id=tail.head.message_id, read_conversation_seq=read, unread=unread,
                unread_exact=exact, joined_at=latest(iv)[0], left_at=latest(iv)[1] or 0, peer_user_id=peer,
                group_id=gid, group_title=titles.get(conv, ""))
            st = choices.get(conv)
            if st is not None:
                e = out[conv]
                e.pinned, e.muted_until, e.state_version = st.pinned, st.muted_until, st.version
                e.hidden = bool(st.hidden_at) and tail.head.created_at_ms <= st.hidden_at
            out[conv].mentioned = tail.window is not None and mentions(tail.window, user, base)
            out[conv].peer_read_seq = peer_reads.get(conv, 0)
        return out

    async def _choices(self, tenant: int, user: int, convs: list[bytes],
                       peers: list[int]) -> tuple[dict[bytes, ConvState], dict[bytes, int]]:
        """The user's choices per conversation and the direct peers' read positions."""
        if self._states is None or self._peer_reads is None:
            return {}, {}
        direct = [(p, c) for p, c in zip(peers, convs) if p]
        try:
            states, positions = await asyncio.gather(self._states.states(tenant, user, convs),
                                                     self._peer_reads(tenant, user, direct))
        except StoreCorrupt as exc:
            raise PageError(exc.message) from None
        return dict(zip(convs, states)), {c: pos for (_, c), pos in zip(direct, positions)}
