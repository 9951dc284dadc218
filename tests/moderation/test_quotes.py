"""A quote of a message removed by an operator, or recalled by its sender, loses the
message's text for every reader (issue 38; docs/decisions/0134), through qim.sdk on the
session stack:

- the devices that already hold the reply (its sender's and the recipient's) clear the
  quote when the removal or recall notice reaches them (the LocalStore's reply index);
- a device that reads the conversation afterwards (a new install: history from the
  server) gets the reply with the quote's state and no preview (the writer's history page
  reads the quoted message's state), and so does a raw PULL_HISTORY.
A quote of a message still there keeps its preview."""

from __future__ import annotations

import asyncio
import uuid

from qim.proto.v1 import message_pb2
from qim.sdk import requests
from qim.sdk.events import SendAck
from tests.e2e.sdkclient import client, close_all
from tests.e2e.test_groups import users
from tests.moderation.test_reports import qimctl, until

DELETED, RECALLED = message_pb2.MESSAGE_STATE_DELETED, message_pb2.MESSAGE_STATE_RECALLED


async def _quote(c, conv: bytes, reply_id: bytes):
    """(state, preview) of the quote on `reply_id` as `c`'s store holds it; None before it arrived."""
    found = [m for m in await c.messages(conv) if m.message_id == reply_id]
    return None if not found or found[0].reply is None else (found[0].reply.state, found[0].reply.preview)


async def test_removed_and_recalled_messages_leave_no_text_in_quotes(stack, tmp_path):
    sender, member = users(2)
    a, b = await client(stack, tmp_path, sender), await client(stack, tmp_path, member)
    fresh = None
    try:
        for x in (a, b):
            await x.connect()
        conv = (await a.open_direct(member)).conversation_id
        await b.open_direct(sender)
        removed, recalled, kept = [await a.send_text(conv, t) for t in ("秘密 removed words", "recalled words",
                                                                         "kept words")]
        assert all(isinstance(m, SendAck) for m in (removed, recalled, kept))

        async def b_has_all() -> bool:
            ids = {m.message_id for m in await b.messages(conv)}
            return {removed.message_id, recalled.message_id, kept.message_id} <= ids

        await until(b_has_all, "the member did not get the three messages")
        replies = {}
        for target, text in ((removed, "秘密 removed words"), (recalled, "recalled words"), (kept, "kept words")):
            ack = await b.send(conv, f"re: {text}".encode(), reply_to=target.message_id)
            replies[target.message_id] = ack.message_id
            for x in (a, b):
                async def quoted(x=x, rid=ack.message_id, text=text) -> bool:
                    return await _quote(x, conv, rid) == (message_pb2.MESSAGE_STATE_NORMAL, text)

                await until(quoted, "the reply with its quote did not arrive")

        report = (await b.report(conv, removed.message_id, "abuse")).report_id
        done = await asyncio.to_thread(qimctl, stack, f"op-{uuid.uuid4().hex[:8]}", "moderation", "resolve", report,
                                       "--action", "remove-message", "--reason", "abuse confirmed")
        assert done.returncode == 0, done.stderr + done.stdout
        await a.recall(conv, recalled.message_id)

        for x in (a, b):  # the devices that held the quotes
            for target, state in ((removed, DELETED), (recalled, RECALLED)):
                async def cleared(x=x, rid=replies[target.message_id], state=state) -> bool:
                    return await _quote(x, conv, rid) == (state, "")

                await until(cleared, "a quote kept the text of a removed or recalled message")
            assert await _quote(x, conv, replies[kept.message_id]) == (message_pb2.MESSAGE_STATE_NORMAL, "kept words")

        fresh = await client(stack, tmp_path, member, device=2, name="-fresh")  # a new install reads history
        await fresh.connect()
        quotes = {rid: await _quote(fresh, conv, rid) for rid in replies.values()}
        assert quotes == {replies[removed.message_id]: (DELETED, ""), replies[recalled.message_id]: (RECALLED, ""),
                          replies[kept.message_id]: (message_pb2.MESSAGE_STATE_NORMAL, "kept words")}, quotes
        page = await requests.pull_history(fresh.runtime, conv, sender, anchor_seq=0, newer=True, limit=50)
        served = {i.message_id: (i.reply.state, i.reply.preview) for i in page.items if i.HasField("reply")}
        assert served == quotes, served
        assert not any("秘密" in i.reply.preview or "recalled" in i.reply.preview for i in page.items)
    finally:
        await close_all(a, b, *([fresh] if fresh is not None else []))
