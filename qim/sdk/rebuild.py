"""REBUILD after CURSOR_EXPIRED (docs/design.md §9, seed 001 §3.2):
session list → per-conversation history → new cursor.

Entries between the device cursor and the mailbox trim boundary are gone from the
mailbox, and with them any recall or delete notice and any membership change they
carried; canonical history still has every message as it is now. So REBUILD makes the
whole store agree with history, not only the part newer than the newest local row:
for each conversation of the session list and each conversation the store holds, it
pages history NEWER from just below the lowest stored conversation_seq (from 0 when it
holds none) to the end, stores new messages, applies states (recalled, deleted: the
local text goes, the state stays) and repairs bodies, and then removes the stored rows
history did not return (outside every member interval of this user: no longer shown).
A group history the user may not read at all (FORBIDDEN) removes every stored row of
it. Only then does the cursor restart from 0 (a zero cursor never expires).

Errors: ServerError / ConnectionLost from the requests (the caller retries transient
ones), StoreError when history returns a NORMAL item without its body. Nothing is
half-applied: every page is one SQLite transaction and the cursor moves last, so an
interrupted REBUILD runs again on the next CURSOR_EXPIRED.
"""

from __future__ import annotations

import logging
from typing import Awaitable, Callable

from qim._core import ids
from qim.consts import CONVERSATION_KIND_GROUP, HISTORY_PAGE_MAX_BYTES, HISTORY_PAGE_MAX_LIMIT
from qim.errors import ErrorCode
from qim.proto.v1 import history_pb2, session_pb2
from qim.protocol import Opcode
from qim.sdk.events import ServerError
from qim.sdk.model import ApplyResult
from qim.sdk.store import LocalStore

logger = logging.getLogger(__name__)
SESSION_PAGE = 200
Call = Callable[[int, bytes], Awaitable[tuple[int, bytes]]]
Apply = Callable[..., Awaitable[ApplyResult]]  # apply(store_method, *args): commit, then tell the app


async def session_list(call: Call) -> list[session_pb2.SessionEntry]:
    """Every entry of the user's conversation list, all pages."""
    out: list[session_pb2.SessionEntry] = []
    cursor = b""
    while True:
        _, body = await call(Opcode.PULL_SESSION_LIST,
                             session_pb2.PullSessionList(cursor=cursor, limit=SESSION_PAGE).SerializeToString())
        batch = session_pb2.SessionListBatch.FromString(body)
        out.extend(batch.sessions)
        if not batch.has_more or not batch.next_cursor:
            return out
        cursor = batch.next_cursor


async def reconcile(store: LocalStore, call: Call, conversation_id: bytes, peer_user_id: int, above_seq: int,
                    apply: Apply, max_bytes: int = HISTORY_PAGE_MAX_BYTES) -> None:
    """Walk the conversation's history NEWER from `above_seq` (exclusive) to its end,
    applying each page; then remove stored rows above `above_seq` it did not return."""
    seen: set[bytes] = set()
    anchor = above_seq
    while True:
        req = history_pb2.PullHistory(conversation_id=conversation_id, peer_user_id=peer_user_id,
                                      anchor_seq=anchor, direction=history_pb2.NEWER, limit=HISTORY_PAGE_MAX_LIMIT,
                                      max_bytes=max_bytes)
        _, body = await call(Opcode.PULL_HISTORY, req.SerializeToString())
        page = history_pb2.HistoryBatch.FromString(body)
        seen.update(bytes(i.message_id) for i in page.items)
        await apply(store.apply_history, conversation_id, list(page.items))
        if not page.has_more or not page.items:
            break
        anchor = page.next_anchor
    await apply(store.remove_absent, conversation_id, above_seq, seen)


async def rebuild(store: LocalStore, call: Call, apply: Apply, max_bytes: int = HISTORY_PAGE_MAX_BYTES) -> None:
    """The whole REBUILD over `call(opcode, body) -> (opcode, body)` (the connection in
    use: it runs during the connect-time sync too); `apply(store_method, *args)` commits
    one change and tells the app what it changed."""
    sessions = {bytes(s.conversation_id): s.peer_user_id for s in await session_list(call)}
    held = await store.run(store.conversations_held)
    for conv in list(sessions) + [c for c in held if c not in sessions]:
        low, hint = held.get(conv, (1, 0))
        peer = sessions.get(conv) or hint
        try:
            await reconcile(store, call, conv, peer, low - 1, apply, max_bytes)
        except ServerError as exc:
            if exc.code != ErrorCode.FORBIDDEN or conv in sessions:
                raise
            if ids.conversation_kind(conv) != CONVERSATION_KIND_GROUP:
                # a direct conversation whose peer we cannot name: leave its rows, say so
                logger.warning("REBUILD could not check a direct conversation it holds (no peer known)")
                continue
            # no member interval at all: none of its stored rows may be shown
            await apply(store.remove_absent, conv, -1, set())
    await store.run(store.reset_cursor)
