"""UserConversationState and read receipts of SessionProjection (issue 37; docs/decisions/0122;
docs/protocol.md "Conversation state", "Read receipts").

SET_CONVERSATION_STATE: the user's own choices (pin, mute until a time or for ever, hide)
per conversation, shared by every device: the reply is the absolute state, the user's
other devices get CONVERSATION_STATE_SYNC and every device a SESSION_DELTA (like
READ_SYNC after MARK_READ). They shape the list through the snapshot's scores
(`shape`): a pinned conversation's score is raised by PIN_BOOST (pinned first, newest
first within each part, one keyset cursor over both). A hidden one stays in the pages
marked `hidden` (every device learns it; the SDKs leave it out of their lists) while
its newest message is not newer than the score it was hidden at, so the next message
brings it back with no write on the message path. Unread is untouched: a muted
conversation keeps its count and is only marked.

Read receipts are watermarks (seed: "who read seq 50" = {members whose read position >=
50}; storage O(members)): a MARK_READ that moved a direct conversation's position sends
READ_RECEIPT to the peer's devices; a direct entry carries the peer's position
(SessionEntry.peer_read_seq); PULL_READERS answers who read a message of a direct
conversation or of a group of at most READERS_GROUP_MAX members (larger: FORBIDDEN, and
nothing is ever pushed in groups). Privacy is symmetric: a user with receipts off
(SET_RECEIPTS) sends none and sees none: no READ_RECEIPT either way, peer_read_seq 0,
PULL_READERS refused, and never listed as a reader.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Optional

from qim._core import ids
from qim.consts import CONVERSATION_KIND_DIRECT, CONVERSATION_KIND_GROUP
from qim.errors import ErrorCode, IdError, RequestError
from qim.proto.v1 import convstate_pb2, session_pb2
from qim.protocol import Opcode
from qim.stores.convstate import ConversationStateStore, ConvState, StateChange
from qim.stores.groups import GroupStore
from qim.stores.intervals import contains, is_current
from qim.stores.sessions import SessionStore

logger = logging.getLogger(__name__)

PIN_BOOST = 1 << 48  # above any created_at_ms (2^41 ms is the year 2039): pinned sort first
READERS_GROUP_MAX = 100  # PULL_READERS answers for groups up to this many current members

DeviceSend = Callable[[int, int, int, int, bytes], None]  # (tenant, user, exclude_device, opcode, body)


def shaped(score: Optional[int], state: ConvState) -> Optional[int]:
    """The list score of a conversation under the user's choices: raised by PIN_BOOST
    when pinned (None stays None: not in the set)."""
    if score is None:
        return None
    return score + PIN_BOOST if state.pinned else score


def _conv_of(member: bytes) -> bytes:
    return bytes.fromhex(member.decode("ascii"))


class ConvStateCalls:
    """The handlers of SET_CONVERSATION_STATE, SET_RECEIPTS and PULL_READERS, the list
    shaping (`shape`, `shape_scores`) and the receipt push after MARK_READ (`read_moved`).

    `summarize(tenant, user, [conv])` gives the SessionEntry a delta carries; `mark(key,
    member)` marks a user's cached list; `forget(key)` drops a user's cached list."""

    def __init__(self, states: ConversationStateStore, sessions: SessionStore, groups: GroupStore,
                 send_devices: DeviceSend, summarize: Callable[..., Any], mark: Callable[[tuple, bytes], None],
                 forget: Callable[[tuple], object], unserved: Callable[[int, int, bool], Optional[str]]) -> None:
        self._states, self._sessions, self._groups = states, sessions, groups
        self._send_devices, self._summarize, self._mark, self._forget = send_devices, summarize, mark, forget
        self._unserved = unserved
        self._tasks: set[asyncio.Task] = set()

    # --- list shaping (the snapshot's scores) -------------------------------------------
    async def shape(self, tenant: int, user: int, asc: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
        """The conversation set (score, member) ascending as the list orders it."""
        states = await self._states.states(tenant, user, [_conv_of(m) for _, m in asc])
        return sorted((shaped(score, st) or score, m) for (score, m), st in zip(asc, states))

    async def shape_scores(self, tenant: int, user: int, members: list[bytes],
                           scores: list[Optional[int]]) -> list[Optional[int]]:
        """Re-read scores of `members` (None = absent) as the list orders them."""
        states = await self._states.states(tenant, user, [_conv_of(m) for m in members])
        return [shaped(score, st) for score, st in zip(scores, states)]

    # --- SET_CONVERSATION_STATE ---------------------------------------------------------
    async def set_state(self, actor: Any, req: convstate_pb2.SetConversationState) -> convstate_pb2.ConversationState:
        """SET_CONVERSATION_STATE: the changed fields kept, the absolute state answered,
        then CONVERSATION_STATE_SYNC to the other devices and SESSION_DELTA to all."""
        tenant, user = int.from_bytes(actor.tenant_id, "big"), actor.user_id
        conv = await self._member_conv(tenant, user, req.conversation_id, req.peer_user_id)
        change = StateChange(req.pinned if req.HasField("pinned") else None,
                             req.muted_until if req.HasField("muted_until") else None,
                             req.hidden if req.HasField("hidden") else None)
        if change == StateChange():
            raise RequestError(ErrorCode.INVALID_ARGUMENT, "SET_CONVERSATION_STATE changes nothing (set a field)")
        st = await self._states.change(tenant, user, conv, change)
        self._mark((tenant, user), conv.hex().encode())
        reply = convstate_pb2.ConversationState(conversation_id=conv, pinned=st.pinned, muted_until=st.muted_until,
                                                hidden=bool(st.hidden_at), version=st.version)
        self._spawn(self._sync_state(tenant, user, actor.device_id, reply))
        return reply

    async def _sync_state(self, tenant: int, user: int, device: int, state: convstate_pb2.ConversationState) -> None:
        """Best effort like READ_SYNC: the next list pull is exact anyway."""
        self._send_devices(tenant, user, device, Opcode.CONVERSATION_STATE_SYNC, state.SerializeToString())
        try:
            entry = (await self._summarize(tenant, user, [state.conversation_id]))[state.conversation_id]
        except Exception as exc:  # noqa: BLE001 — best effort: the next list pull is exact anyway
            logger.warning("SESSION_DELTA after SET_CONVERSATION_STATE skipped: %s", exc.__class__.__name__)
            return
        self._send_devices(tenant, user, 0, Opcode.SESSION_DELTA,
                           session_pb2.SessionDelta(sessions=[entry]).SerializeToString())

    async def _member_conv(self, tenant: int, user: int, conv: bytes, peer: int) -> bytes:
        """`conv` when the user is in it (direct: listed or the named peer's; group: ever a
        member); RequestError otherwise."""
        reason = self._unserved(tenant, user, False)
        if reason:
            raise RequestError(ErrorCode.UNAVAILABLE, reason)
        try:
            kind = ids.conversation_kind(conv)
        except IdError:
            raise RequestError(ErrorCode.INVALID_ARGUMENT, "conversation_id must be 16 non-zero bytes") from None
        if kind == CONVERSATION_KIND_DIRECT:
            if peer and ids.conversation_id_direct(tenant, user, peer) != conv:
                raise RequestError(ErrorCode.FORBIDDEN, "not a participant of this conversation")
            if not peer and not await self._sessions.listed(tenant, user, conv):
                raise RequestError(ErrorCode.NOT_FOUND, "conversation not in the user's list")
        elif kind == CONVERSATION_KIND_GROUP:
            if await self._groups.intervals_of(tenant, conv, user) is None:
                raise RequestError(ErrorCode.FORBIDDEN, "not a member of this group")
        else:
            raise RequestError(ErrorCode.INVALID_ARGUMENT, "rooms have no conversation state")
        return conv

    # --- SET_RECEIPTS -------------------------------------------------------------------
    async def set_receipts(self, actor: Any, req: convstate_pb2.SetReceipts) -> convstate_pb2.ReceiptsOk:
        """SET_RECEIPTS: keep the setting (unset: only ask); answer the setting held."""
        tenant, user = int.from_bytes(actor.tenant_id, "big"), actor.user_id
        if req.HasField("enabled"):
            await self._states.set_receipts(tenant, user, req.enabled)
            self._forget((tenant, user))  # cached entries carry peer_read_seq under the old setting
            return convstate_pb2.ReceiptsOk(enabled=req.enabled)
        return convstate_pb2.ReceiptsOk(enabled=(await self._states.receipts(tenant, [user]))[0])

    # --- receipts -----------------------------------------------------------------------
    def read_moved(self, tenant: int, user: int, conv: bytes, seq: int, peer: int) -> None:
        """After a MARK_READ moved `user`'s position in a direct conversation to `seq`:
        READ_RECEIPT to the peer's devices when both have receipts on (background)."""
        self._spawn(self._push_receipt(tenant, user, conv, seq, peer))

    async def _push_receipt(self, tenant: int, user: int, conv: bytes, seq: int, peer: int) -> None:
        try:
            if not peer:
                peer = (await self._sessions.peers(tenant, user, [conv]))[0]
            if not peer or not all(await self._states.receipts(tenant, [user, peer])):
                return
        except Exception as exc:  # noqa: BLE001 — best effort: the peer's next list pull carries it
            logger.warning("READ_RECEIPT skipped: %s", exc.__class__.__name__)
            return
        self._mark((tenant, peer), conv.hex().encode())  # a list this node caches for the peer
        body = convstate_pb2.ReadReceipt(conversation_id=conv, reader_user_id=user, read_conversation_seq=seq)
        self._send_devices(tenant, peer, 0, Opcode.READ_RECEIPT, body.SerializeToString())

    async def peer_reads(self, tenant: int, user: int, pairs: list[tuple[int, bytes]]) -> list[int]:
        """The peer's read position of each (peer, direct conversation) for `user`'s list,
        0 where either side has receipts off (the summarizer's peer_read_seq)."""
        if not pairs:
            return []
        mine, rows = await asyncio.gather(self._states.receipts(tenant, [user]),
                                          self._states.receipt_positions(tenant, pairs))
        if not mine[0]:
            return [0] * len(pairs)
        return [pos if on else 0 for pos, on in rows]

    async def pull_readers(self, actor: Any, req: convstate_pb2.PullReaders) -> convstate_pb2.ReadersBatch:
        """PULL_READERS: the members other than the asker with position >= the seq and
        receipts on. FORBIDDEN: the asker's receipts are off, not a member, or a group
        above READERS_GROUP_MAX current members."""
        tenant, user = int.from_bytes(actor.tenant_id, "big"), actor.user_id
        conv = await self._member_conv(tenant, user, req.conversation_id, req.peer_user_id)
        if req.conversation_seq == 0:
            raise RequestError(ErrorCode.INVALID_ARGUMENT, "conversation_seq must be > 0")
        if not (await self._states.receipts(tenant, [user]))[0]:
            raise RequestError(ErrorCode.FORBIDDEN, "read receipts are off for this user: it sees none")
        seq = req.conversation_seq
        if ids.conversation_kind(conv) == CONVERSATION_KIND_DIRECT:
            peer = req.peer_user_id or (await self._sessions.peers(tenant, user, [conv]))[0]
            members = [peer] if peer else []
        else:
            view = await self._groups.send_view(tenant, conv, user)
            if view.member_count > READERS_GROUP_MAX:
                raise RequestError(ErrorCode.FORBIDDEN, f"who-read is answered for groups of at most "
                                                        f"{READERS_GROUP_MAX} members (this one has {view.member_count})")
            group = await self._groups.read(tenant, conv)
            # members who could see the message: an interval lo < seq <= hi (open: still a member)
            members = [u for u, iv in group.members.items() if u != user and is_current(iv) and contains(iv, seq)]
        rows = await self._states.receipt_positions(tenant, [(u, conv) for u in members])
        readers = sorted(u for u, (pos, on) in zip(members, rows) if on and pos >= seq)
        return convstate_pb2.ReadersBatch(conversation_id=conv, conversation_seq=seq, reader_user_ids=readers,
                                          counted=len(members))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
