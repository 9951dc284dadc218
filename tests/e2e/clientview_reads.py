"""Reads of the body-size matrix through the runtime's request(): history pages in both
directions and session-list heads, checked against what was sent (tests/e2e/clientview.py)."""

from __future__ import annotations

import asyncio

from qim.cli.bodies import digest
from qim.cli.verify import AppView
from qim.consts import HISTORY_PAGE_MAX_BYTES, MESSAGE_TYPE_CONTROL, SESSION_HEAD_BODY_MAX
from qim.proto.v1 import history_pb2, message_pb2, session_pb2
from qim.protocol import Opcode

MIXED_PAGE_LIMIT = 7  # several pages even where the byte budget does not split them
NORMAL = message_pb2.MESSAGE_STATE_NORMAL


def order_faults(view: AppView) -> list[str]:
    """Messages told after one of the same conversation with a higher or equal seq."""
    last, out = {}, []
    for t in view.told:
        if t.conversation_seq <= last.get(t.conversation_id, 0):
            out.append(f"{view.label}: conv {t.conversation_id.hex()[:8]} seq {t.conversation_seq} ({t.size} B) "
                       f"told after seq {last[t.conversation_id]}")
        last[t.conversation_id] = max(last.get(t.conversation_id, 0), t.conversation_seq)
    return out


async def history(rt, conv, user: int, newer: bool) -> list:
    """Every HistoryItem of `conv` visible to `user`, paged from the start (NEWER) or the
    latest (OLDER) with the 512 KiB byte budget."""
    items, anchor = [], 0
    limit = MIXED_PAGE_LIMIT if conv.label == "mixed" else 0
    while True:
        req = history_pb2.PullHistory(conversation_id=conv.conversation_id, peer_user_id=conv.peer(user),
                                      anchor_seq=anchor, direction=history_pb2.NEWER if newer else history_pb2.OLDER,
                                      limit=limit, max_bytes=HISTORY_PAGE_MAX_BYTES)
        _, body = await rt.request(Opcode.PULL_HISTORY, req.SerializeToString())
        page = history_pb2.HistoryBatch.FromString(body)
        items.extend(page.items)
        if not page.has_more or not page.items:
            return items
        anchor = page.next_anchor


async def check_history(sc, rt, user: int, presence: str) -> None:
    for conv in [c for c in sc.convs if user in c.recipients]:
        sent = [i for c, i in sc.intents if c is conv]
        for newer in (True, False):
            items = await history(rt, conv, user, newer)
            seqs = [it.conversation_seq for it in items]
            if seqs != sorted(set(seqs), reverse=not newer):
                sc.order[(presence, "history")].append(f"{conv.label} {'NEWER' if newer else 'OLDER'} pages: {seqs}")
            got = [it for it in items if it.message_type != MESSAGE_TYPE_CONTROL]
            for i in sent:
                mine = [it for it in got if it.message_id == i.message_id]
                where = (presence, "history", i.size)
                if len(mine) != 1:
                    sc.problems[where].append(f"{conv.label} {'NEWER' if newer else 'OLDER'}: seq "
                                              f"{i.conversation_seq} in {len(mine)} items")
                for it in mine[:1]:
                    if not it.body_included or len(it.body) != i.size or digest(it.body) != i.digest:
                        sc.problems[where].append(f"{conv.label}: seq {i.conversation_seq} body_included="
                                                  f"{it.body_included} with {len(it.body)} of {i.size} bytes")


async def session_list(rt) -> dict:
    out, cursor = {}, b""
    while True:
        _, body = await rt.request(Opcode.PULL_SESSION_LIST,
                                   session_pb2.PullSessionList(cursor=cursor, limit=200).SerializeToString())
        batch = session_pb2.SessionListBatch.FromString(body)
        out.update({e.conversation_id: e for e in batch.sessions})
        if not batch.has_more or not batch.next_cursor:
            return out
        cursor = batch.next_cursor


async def check_heads(sc, rt, user: int, presence: str, timeout: float = 30.0) -> None:
    """The head of every `size` conversation is its message: the body whole up to
    SESSION_HEAD_BODY_MAX, above it no body and body_included false (the cap signalled,
    never a truncated or empty body passed off as the message)."""
    heads = {c.conversation_id: i for c, i in sc.intents if c.label == "size" and user in c.recipients}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:  # the projection is asynchronous
        entries = await session_list(rt)
        if all(conv in entries and entries[conv].last_message.message_id == i.message_id
               for conv, i in heads.items()) or loop.time() > deadline:
            break
        await asyncio.sleep(0.2)
    for conv, i in heads.items():
        where = (presence, "head", i.size)
        entry = entries.get(conv)
        if entry is None or entry.last_message.message_id != i.message_id:
            sc.problems[where].append("the size's message never became the head")
            continue
        h = entry.last_message
        if (h.conversation_seq, h.sender_id, h.state) != (i.conversation_seq, i.sender, NORMAL):
            sc.problems[where].append(f"head seq/sender/state {h.conversation_seq}/{h.sender_id}/{h.state}")
        if i.size <= SESSION_HEAD_BODY_MAX:
            if not h.body_included or len(h.body) != i.size or digest(h.body) != i.digest:
                sc.problems[where].append(f"head body_included={h.body_included} with {len(h.body)} of {i.size} B")
        elif h.body_included or h.body:
            sc.problems[where].append(f"head above the cap: body_included={h.body_included}, {len(h.body)} B")
