"""REBUILD after CURSOR_EXPIRED (DESIGN.md §9, seed 001 §3.2):
session list → per-conversation history → new cursor.

Entries between the device cursor and the mailbox trim boundary are gone from the
mailbox, but every message is still in canonical history. The client pages the whole
session list, then each conversation's history NEWER than the highest
conversation_seq it holds, stores those messages (idempotent on message_id, cursor
untouched), and only then restarts its cursor from 0 (a zero cursor never expires).
Errors: ServerError / ConnectionLost from the requests; nothing is half-applied because
every page is one SQLite transaction and the cursor moves last.
"""

from __future__ import annotations

from types import SimpleNamespace

from qim.consts import HISTORY_PAGE_MAX_LIMIT, MESSAGE_TYPE_CONTROL
from qim.proto.v1 import history_pb2, session_pb2
from qim.protocol import EventType, Opcode

SESSION_PAGE = 200


async def session_list(call) -> list[session_pb2.SessionEntry]:
    """Every entry of the user's conversation list, all pages."""
    out, cursor = [], b""
    while True:
        _, body = await call(Opcode.PULL_SESSION_LIST,
                                   session_pb2.PullSessionList(cursor=cursor, limit=SESSION_PAGE).SerializeToString())
        batch = session_pb2.SessionListBatch.FromString(body)
        out.extend(batch.sessions)
        if not batch.has_more or not batch.next_cursor:
            return out
        cursor = batch.next_cursor


def as_entry(conversation_id: bytes, item: history_pb2.HistoryItem) -> SimpleNamespace:
    """A history item in the shape LocalStore applies (mailbox_seq 0: not from a mailbox)."""
    return SimpleNamespace(event_type=EventType.MESSAGE, message_id=item.message_id, conversation_id=conversation_id,
                           conversation_seq=item.conversation_seq, sender_id=item.sender_id,
                           created_at_ms=item.created_at_ms, message_type=item.message_type,
                           custom_type=item.custom_type, client_message_id=item.client_message_id,
                           body=item.body, mailbox_seq=0)


async def backfill(rt, call, entry: session_pb2.SessionEntry) -> list:
    """History of one conversation newer than what the store holds; returns ApplyResults."""
    rows = await rt.store.run(rt.store.messages, entry.conversation_id)
    anchor = max((r.conversation_seq for r in rows), default=0)
    results = []
    while True:
        req = history_pb2.PullHistory(conversation_id=entry.conversation_id, peer_user_id=entry.peer_user_id,
                                      anchor_seq=anchor, direction=history_pb2.NEWER, limit=HISTORY_PAGE_MAX_LIMIT)
        _, body = await call(Opcode.PULL_HISTORY, req.SerializeToString())
        page = history_pb2.HistoryBatch.FromString(body)
        items = [as_entry(entry.conversation_id, i) for i in page.items if i.message_type != MESSAGE_TYPE_CONTROL]
        if items:
            results.append(await rt.store.run(rt.store.apply_push, items))
        if not page.has_more or not page.items:
            return results
        anchor = page.next_anchor


async def rebuild(rt, call) -> list:
    """The whole REBUILD over `call(opcode, body) -> (opcode, body)` (the connection in
    use: it runs during the connect-time sync too); returns the back-filled ApplyResults."""
    results = []
    for entry in await session_list(call):
        results.extend(await backfill(rt, call, entry))
    await rt.store.run(rt.store.reset_cursor)
    return results
