"""The user's own choices per conversation (pin, mute, hide) and read receipts in the
SDK (docs/sdk.md "Pin, mute, hide", "Read receipts"; docs/decisions/0122).

Held in memory, exact after every connect: each session list page and SESSION_DELTA
carries the absolute state of its entries (SessionEntry pinned, muted_until, hidden,
mentioned, peer_read_seq), CONVERSATION_STATE_SYNC brings another device's change,
READ_RECEIPT the peer's read position of a direct conversation (forward only between
list pulls). A change is told as ConversationStateChanged, a read tick as PeerRead. The choices
(pinned, muted_until, hidden) carry the server's version (docs/decisions/0157): one
older than the held state is late (a SESSION_DELTA summarized before the change, or a
sync overtaken by the reply) and is not applied.

The list the app shows (`shape`): pinned first, newest activity first in each part;
hidden ones left out while their newest message is not newer than the one they were
hidden at (a new message brings them back); muted ones stay with their unread count.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, replace
from typing import Any, Iterable, Optional

from qim.consts import MESSAGE_TYPE_CONTROL
from qim.proto.v1 import convstate_pb2, session_pb2
from qim.protocol import Opcode
from qim.sdk import events as ev
from qim.sdk.core import RuntimeCore
from qim.sdk.model import Conversation
from qim.sdk.retry import Backoff, with_retry

MUTE_FOREVER = (1 << 64) - 1  # muted_until meaning "for ever" (docs/protocol.md)


@dataclass(frozen=True)
class ConversationState:
    """The user's choices for one conversation and what the list marks: `pinned`;
    `muted_until` (ms since the epoch, 0 not muted, MUTE_FOREVER for ever); `hidden`
    with `hidden_upto` (the newest conversation_seq when hidden: a newer message shows it
    again); `mentioned` (an unread message mentions the user); `peer_read_seq` (direct:
    the peer's read position, 0 when receipts are off on either side); `version` (the
    server's version of the three choices, growing with every change; 0 unknown)."""

    conversation_id: bytes
    pinned: bool = False
    muted_until: int = 0
    hidden: bool = False
    hidden_upto: int = 0
    mentioned: bool = False
    peer_read_seq: int = 0
    version: int = 0

    def muted(self, now_ms: Optional[int] = None) -> bool:
        """Whether the conversation is muted at `now_ms` (default: now)."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        return self.muted_until > now


@dataclass(frozen=True)
class Readers:
    """PULL_READERS: who read the message at `conversation_seq` (never the asker), out
    of `counted` members who could see it."""

    conversation_id: bytes
    conversation_seq: int
    reader_user_ids: tuple[int, ...]
    counted: int


class ConvStates:
    """The in-memory states of one runtime and the calls that change them."""

    def __init__(self, runtime: Any) -> None:
        self._rt = runtime  # a ClientRuntime: request, retry_budget_s and its core
        self._core: RuntimeCore = runtime.core
        self._states: dict[bytes, ConversationState] = {}
        self._ticked: dict[bytes, int] = {}  # conversation -> the highest READ_RECEIPT told

    def attach(self, sessions: Any) -> None:
        """Hook into the runtime: list entries (`sessions.note`) and the two server frames."""
        sessions.note = self.note_entries
        self._core.frame_handlers[Opcode.CONVERSATION_STATE_SYNC] = self._on_sync
        self._core.frame_handlers[Opcode.READ_RECEIPT] = self._on_receipt
        told = self._core.tell

        def tell(result: Any, read_source: str = "local") -> None:  # every committed apply
            told(result, read_source)
            self._note_mentions(result)
        self._core.tell = tell  # type: ignore[method-assign]

    def _note_mentions(self, result: Any) -> None:
        """A stored message that mentions this user (or all) above the read position sets
        `mentioned` at once, as the server's next entry will (the unread definition's set,
        qim/services/session/summary.py `mentions`): without it a mention arriving live
        showed no "@" until the next list pull (a reconnect). A read clears it through
        the server's SESSION_DELTA (absolute)."""
        if not result.inserted:
            return
        me = self._core.store.user_id
        reads = {c.conversation_id: c.read_conversation_seq for c in result.conversations}
        for m in result.inserted:
            if (m.sender_id != me and m.message_type != MESSAGE_TYPE_CONTROL and m.state == 0
                    and (m.mention_all or me in m.mentions) and m.conversation_seq > reads.get(m.conversation_id, 0)):
                old = self.get(m.conversation_id)
                if not old.mentioned:
                    self._put(replace(old, mentioned=True), "local")

    def get(self, conversation_id: bytes) -> ConversationState:
        """The state held for a conversation (all defaults when none is known)."""
        conv = bytes(conversation_id)
        return self._states.get(conv) or ConversationState(conv)

    def _put(self, new: ConversationState, source: str) -> None:
        old = self._states.get(new.conversation_id, ConversationState(new.conversation_id))
        if old != new:
            self._states[new.conversation_id] = new
            if replace(old, version=new.version) != new:  # a new version alone is not news to the app
                self._core.emit(ev.ConversationStateChanged(new, source))

    def note_entries(self, entries: Iterable[session_pb2.SessionEntry]) -> None:
        """Absolute states from a list page or SESSION_DELTA; the choices of an entry whose
        state_version is below the held one are late and kept as held (decision 0157),
        its `mentioned` and `peer_read_seq` are applied either way."""
        for e in entries:
            conv = bytes(e.conversation_id)
            old = self.get(conv)
            if e.state_version < old.version:
                self._put(replace(old, mentioned=e.mentioned, peer_read_seq=e.peer_read_seq), "server")
                continue
            seq = e.last_message.conversation_seq if e.HasField("last_message") else 0
            self._put(ConversationState(conv, e.pinned, e.muted_until, e.hidden, seq if e.hidden else 0,
                                        e.mentioned, e.peer_read_seq, e.state_version), "server")

    def _apply(self, st: convstate_pb2.ConversationState, last_seq: int, source: str) -> ConversationState:
        old = self.get(bytes(st.conversation_id))
        if st.version < old.version:  # late: a newer state is held (decision 0157)
            return old
        new = replace(old, pinned=st.pinned, muted_until=st.muted_until, hidden=st.hidden,
                      hidden_upto=(max(old.hidden_upto, last_seq) if st.hidden else 0), version=st.version)
        self._put(new, source)
        return new

    def _on_sync(self, body: bytes) -> None:
        st = convstate_pb2.ConversationState.FromString(body)
        self._core.spawn(self._apply_with_head(st, "sync"))

    async def _apply_with_head(self, st: convstate_pb2.ConversationState, source: str) -> ConversationState:
        entry = await self._core.store.run(self._core.store.conversation, bytes(st.conversation_id))
        return self._apply(st, entry.last_conversation_seq if entry else 0, source)

    def _on_receipt(self, body: bytes) -> None:
        r = convstate_pb2.ReadReceipt.FromString(body)
        old = self.get(bytes(r.conversation_id))
        if r.read_conversation_seq > old.peer_read_seq:  # watermarks only move forward
            self._states[old.conversation_id] = replace(old, peer_read_seq=r.read_conversation_seq)
        # told once per newer receipt, by its own watermark: the user's SESSION_DELTA
        # carries the same position and may arrive first (it raises peer_read_seq
        # silently), and the receipt after it must still tell the tick
        if r.read_conversation_seq > self._ticked.get(old.conversation_id, 0):
            self._ticked[old.conversation_id] = r.read_conversation_seq
            self._core.emit(ev.PeerRead(old.conversation_id, r.reader_user_id, r.read_conversation_seq))

    def shape(self, listing: list[Conversation]) -> list[Conversation]:
        """The list the app shows (module docstring): pinned first, hidden left out."""
        shown = [c for c in listing if not self.hidden(c)]
        return [c for c in shown if self.get(c.conversation_id).pinned] + \
               [c for c in shown if not self.get(c.conversation_id).pinned]

    def hidden(self, c: Conversation) -> bool:
        """Whether `c` is hidden now (no message newer than the one it was hidden at)."""
        st = self._states.get(c.conversation_id)
        return st is not None and st.hidden and c.last_conversation_seq <= st.hidden_upto

    # --- the calls ----------------------------------------------------------------------
    async def _request(self, opcode: int, body: bytes) -> tuple[int, bytes]:
        """One request; transient ERRORs retried with bounded jittered backoff (retry.py)."""
        return await with_retry(functools.partial(self._rt.request, opcode, body),
                                Backoff(budget=self._rt.retry_budget_s))

    async def change(self, conversation_id: bytes, peer_user_id: int, *, pinned: Optional[bool] = None,
                     muted_until: Optional[int] = None, hidden: Optional[bool] = None) -> ConversationState:
        """SET_CONVERSATION_STATE with the given fields; the state after it (told as
        ConversationStateChanged(source="local")). ServerError (FORBIDDEN, NOT_FOUND,
        INVALID_ARGUMENT), NotConnected."""
        req = convstate_pb2.SetConversationState(conversation_id=bytes(conversation_id), peer_user_id=peer_user_id)
        if pinned is not None:
            req.pinned = pinned
        if muted_until is not None:
            req.muted_until = muted_until
        if hidden is not None:
            req.hidden = hidden
        _, body = await self._request(Opcode.SET_CONVERSATION_STATE, req.SerializeToString())
        return await self._apply_with_head(convstate_pb2.ConversationState.FromString(body), "local")

    async def receipts(self, enabled: Optional[bool]) -> bool:
        """SET_RECEIPTS (None: only ask); the setting held. Turning them off clears the
        peers' read positions held here (symmetric: the user sees none)."""
        req = convstate_pb2.SetReceipts()
        if enabled is not None:
            req.enabled = enabled
        _, body = await self._request(Opcode.SET_RECEIPTS, req.SerializeToString())
        on = convstate_pb2.ReceiptsOk.FromString(body).enabled
        if not on:
            for st in list(self._states.values()):
                if st.peer_read_seq:
                    self._put(replace(st, peer_read_seq=0), "local")
        return on

    async def readers(self, conversation_id: bytes, seq: int, peer_user_id: int) -> Readers:
        """PULL_READERS. ServerError FORBIDDEN (receipts off, not a member, a group above
        the size limit), INVALID_ARGUMENT."""
        req = convstate_pb2.PullReaders(conversation_id=bytes(conversation_id), conversation_seq=seq,
                                        peer_user_id=peer_user_id)
        _, body = await self._request(Opcode.PULL_READERS, req.SerializeToString())
        got = convstate_pb2.ReadersBatch.FromString(body)
        return Readers(bytes(got.conversation_id), got.conversation_seq, tuple(got.reader_user_ids), got.counted)
