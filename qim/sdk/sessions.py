"""The conversation list kept current from the server (docs/design.md §4, §6).

- After every (re)connect's mailbox sync the whole list is pulled (PULL_SESSION_LIST,
  every page; seed 000: "登录序列自动拉一次会话列表取回，不能等宿主开口") and each
  entry's absolute values become the store's server snapshot (qim/sdk/conversations.py),
  then read positions this device moved but the server never confirmed are sent again
  (MARK_READ; "本地更高时反向回补 MARK_READ").
- SESSION_DELTA (absolute entries) is applied like a list page; READ_SYNC (another
  device of the user moved the read position) moves it here, forward only, and is told
  as ReadPositionChanged(source="sync").
- mark_read moves the position locally at once (durable), then MARK_READ; without a
  connection it stays unconfirmed and is sent after the next list pull.

Every change is one store transaction, told after the commit (qim/sdk/tell.py).
Errors: a failed background apply is told as SyncFailed; mark_read raises ServerError
for a permanent refusal (FORBIDDEN, NOT_FOUND).
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Callable, Optional

from qim.errors import ErrorCode, QimError
from qim.proto.v1 import session_pb2
from qim.protocol import Opcode
from qim.sdk import events as ev
from qim.sdk.connection import Connection
from qim.sdk.core import RuntimeCore
from qim.sdk.events import ConnectionLost, NotConnected
from qim.sdk.model import ApplyResult
from qim.sdk.rategate import gated_retry
from qim.sdk.retry import Backoff, with_retry

logger = logging.getLogger(__name__)
SESSION_PAGE = 200  # PullSessionList.limit maximum (docs/protocol.md)


class Sessions:
    """Session list, SESSION_DELTA, READ_SYNC and MARK_READ of one runtime."""

    def __init__(self, core: RuntimeCore) -> None:
        self._core = core
        self.pulls = 0  # complete list pulls applied (for tests and status lines)
        # every entry of a page or SESSION_DELTA, after it was applied (ConvStates.note_entries)
        self.note: Callable[[list[session_pb2.SessionEntry]], None] = lambda entries: None
        # UserBadgeState (docs/decisions/0129): (badge, version), only ever replaced by a
        # higher version, so a late frame never shows an older badge
        self.badge: tuple[int, int] = (0, 0)

    def _note_badge(self, badge: int, version: int) -> None:
        if version > self.badge[1]:
            self.badge = (badge, version)
            self._core.emit(ev.BadgeChanged(badge, version))

    def attach(self) -> None:
        """Hook into the runtime: list pull after each sync, server frames."""
        self._core.after_sync.append(self.pull_list)
        self._core.on_session_delta = self.on_delta
        self._core.on_read_sync = self.on_read_sync

    async def pull_list(self, conn: Optional[Connection] = None) -> None:
        """Every page of PULL_SESSION_LIST on `conn` (the live connection by default),
        each applied as it arrives; then unconfirmed read positions are sent again.
        ServerError after retries, ConnectionLost, NotConnected."""
        core, tuning = self._core, self._core.tuning
        conn = conn or core.live()
        if not conn.is_open:
            raise NotConnected("no connection")
        cursor = b""
        while True:
            body = session_pb2.PullSessionList(cursor=cursor, limit=SESSION_PAGE).SerializeToString()
            _, reply = await with_retry(
                functools.partial(conn.request_probed, Opcode.PULL_SESSION_LIST, body, tuning.ack_deadline_s,
                                  tuning.probe_s), Backoff(budget=tuning.retry_budget_s))
            batch = session_pb2.SessionListBatch.FromString(reply)
            self._note_badge(batch.badge, batch.badge_version)
            await core.apply(core.store.apply_sessions, list(batch.sessions), source="server")
            self.note(list(batch.sessions))
            if not batch.has_more or not batch.next_cursor:
                break
            cursor = batch.next_cursor
        self.pulls += 1
        for conv, seq, peer in await core.store.run(core.store.unconfirmed_reads):
            try:
                await self._send_mark(conn, conv, seq, peer)
            except (ConnectionLost, NotConnected):
                raise
            except QimError as exc:  # refused for good (e.g. no longer a member): stop asking
                logger.info("read position not accepted by the server: %s", exc.code.name)
                await core.apply(core.store.move_read, conv, seq, True, source="server")

    def on_delta(self, delta: session_pb2.SessionDelta) -> None:
        """SESSION_DELTA: absolute entries, applied in arrival order."""
        core = self._core
        self._note_badge(delta.badge, delta.badge_version)
        if not delta.sessions:
            return
        core.spawn(self._guard("server", core.store.apply_sessions, list(delta.sessions)))
        self.note(list(delta.sessions))

    def on_read_sync(self, sync: session_pb2.ReadSync) -> None:
        """READ_SYNC from another device of the user: move the position, forward only."""
        core = self._core
        core.spawn(self._guard("sync", core.store.move_read, bytes(sync.conversation_id), sync.read_conversation_seq,
                               True))

    async def _guard(self, source: str, fn: Callable[..., ApplyResult], *args: Any) -> None:
        """Apply a server frame's change; a failure is told as SyncFailed."""
        try:
            await self._core.apply(fn, *args, source=source)
        except QimError as exc:
            self._core.emit(ev.SyncFailed(exc.code, str(exc)))
        except Exception as exc:  # noqa: BLE001 — a server frame we could not apply is told, not logged away
            self._core.emit(ev.SyncFailed(ErrorCode.INTERNAL, f"{exc.__class__.__name__}: {exc}"))

    async def mark_read(self, conversation_id: bytes, seq: Optional[int] = None) -> int:
        """Move the user's read position of the conversation to `seq` (default: its
        newest known message) and tell the server; returns the position now held
        locally. Offline, the move is kept and sent after the next connect.
        ServerError (FORBIDDEN, NOT_FOUND, INVALID_ARGUMENT) when the server refuses."""
        core = self._core
        conv = bytes(conversation_id)
        entry = await core.store.run(core.store.conversation, conv)
        target = seq if seq is not None else (entry.last_conversation_seq if entry else 0)
        current = entry.read_conversation_seq if entry else 0
        if target <= current:
            return current
        await core.apply(core.store.move_read, conv, target, False, source="local")
        conn = core.conn
        if not core.connected or conn is None:
            return target
        try:
            await self._send_mark(conn, conv, target, entry.peer_user_id if entry else 0)
        except (ConnectionLost, NotConnected):
            pass  # unconfirmed: sent again after the next list pull
        now = await core.store.run(core.store.conversation, conv)
        return max(target, now.read_conversation_seq if now is not None else 0)

    async def _send_mark(self, conn: Connection, conv: bytes, seq: int, peer: int) -> None:
        core, tuning = self._core, self._core.tuning
        body = session_pb2.MarkRead(conversation_id=conv, read_conversation_seq=seq,
                                    peer_user_id=peer).SerializeToString()
        _, reply = await gated_retry(core.rate_gate, lambda permit: conn.request_probed(
            Opcode.MARK_READ, body, tuning.ack_deadline_s, tuning.probe_s, pace=permit.again),
            Backoff(budget=tuning.retry_budget_s))
        ok = session_pb2.MarkReadOk.FromString(reply)
        # the server clamps to its newest visible message: what we asked for is settled
        await core.apply(core.store.move_read, conv, max(seq, ok.read_conversation_seq), True, source="server")
