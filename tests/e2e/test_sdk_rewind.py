"""A device that holds more than its mailbox (docs/decisions/0076): its cursor is ahead of
the lane's watermark of the same shard_epoch, because the mailbox was rewound under it
(Redis lost its last writes, a restore of an older release). The mailbox answers
CURSOR_EXPIRED, the SDK REBUILDs from history: the message the server no longer has
leaves the device with MessagesRemoved, CursorReset tells the app, the device is
connected (it does not retry the pull for ever) and then gets the next message.
"""

from __future__ import annotations

import asyncio
import os
import random
import time

from qim._core import mailbox_seq as mseq
from qim.errors import ErrorCode
from qim.proto.v1 import mailbox_pb2
from qim.protocol import EventType
from qim.sdk import ClientRuntime, LocalStore, direct_conversation
from qim.sdk import events as ev
from qim.sdk.events import ServerError
from qim.wire.devtoken import issue_dev_token
from tests.e2e.rawclient import sdk_transport

DEADLINE_S = 60.0


def runtime(stack, path, user: int, told: list | None = None) -> ClientRuntime:
    """A runtime of `user` over the SQLite store at `path` (kept across runtimes)."""
    store = LocalStore.open(str(path), 0, user)
    token = issue_dev_token(stack.token_key, 0, user, store.device_id)
    return ClientRuntime(stack.gateway_addr, token, store, event_queue=False, send_timeout=30,
                         on_event=told.append if told is not None else None, **sdk_transport(stack))


async def connect(rt: ClientRuntime) -> None:
    """rt.connect(), again while a stack that just started answers UNAVAILABLE past the
    SDK's retry budget (a loaded host), until DEADLINE_S * 2; any other error raises."""
    end = time.monotonic() + DEADLINE_S * 2
    while True:
        try:
            await asyncio.wait_for(rt.connect(), DEADLINE_S)
            return
        except ServerError as exc:
            if exc.code not in (ErrorCode.UNAVAILABLE, ErrorCode.MAILBOX_DIRTY) or time.monotonic() > end:
                raise
        await asyncio.sleep(1)


async def shown(rt: ClientRuntime, conv: bytes) -> list[tuple[int, bytes]]:
    """(conversation_seq, body) of every stored message of `conv`, in order."""
    return [(m.conversation_seq, m.body) for m in await rt.store.run(rt.store.messages, conv)]


async def until(rt: ClientRuntime, conv: bytes, want: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    """Pull until the store shows `want` or DEADLINE_S passed; what it shows."""
    end = time.monotonic() + DEADLINE_S
    while (got := await shown(rt, conv)) != want and time.monotonic() < end:
        await asyncio.sleep(0.1)
        if rt.connected:
            await rt.pull_mailbox()
    return got


async def test_a_cursor_ahead_of_the_watermark_rebuilds_and_drops_what_the_server_lacks(stack, tmp_path):
    a, b = random.getrandbits(40) + 1, random.getrandbits(40) + 1
    conv = direct_conversation(0, a, b)
    ra, rb = runtime(stack, tmp_path / "a.sqlite3", a), runtime(stack, tmp_path / "b.sqlite3", b)
    try:
        await connect(ra)
        await ra.send_message(conv, b, b"m1")
        await connect(rb)
        assert await until(rb, conv, [(1, b"m1")]) == [(1, b"m1")]
        lane, epoch, seq = await rb.store.run(rb.store.cursor)
    finally:
        await rb.close()
    # the device keeps a message and a cursor the mailbox does not have (its mailbox was
    # rewound): conversation_seq 2, 1000 offsets past the watermark, same shard_epoch
    lost = mailbox_pb2.MailboxEntry(
        mailbox_seq=mseq.compose(epoch, mseq.split(seq)[1] + 1000), event_type=EventType.MESSAGE,
        event_id=os.urandom(16), message_id=os.urandom(16), conversation_id=conv, conversation_seq=2, sender_id=a,
        created_at_ms=int(time.time() * 1000), message_type=1, body=b"lost")
    await rb.store.run(rb.store.apply_mailbox_batch, [lost], lost.mailbox_seq, lane, epoch)
    rb.store.close()
    told: list = []
    rb = runtime(stack, tmp_path / "b.sqlite3", b, told)
    try:
        assert await shown(rb, conv) == [(1, b"m1"), (2, b"lost")]
        await connect(rb)  # before 0076: refused for ever (INVALID_ARGUMENT)
        assert await until(rb, conv, [(1, b"m1")]) == [(1, b"m1")]
        assert rb.connected and rb.stats.get("rebuilds") == 1
        assert any(isinstance(e, ev.CursorReset) for e in told)
        removed = [mid for e in told if isinstance(e, ev.MessagesRemoved) for mid in e.message_ids]
        assert removed == [lost.message_id]
        cursor = await rb.store.run(rb.store.cursor)
        assert cursor is None or mseq.split(cursor[2])[1] < mseq.split(lost.mailbox_seq)[1]
        ack = await ra.send_message(conv, b, b"m2")  # the server's seq 2: shown, not the lost one
        assert ack.conversation_seq == 2
        assert await until(rb, conv, [(1, b"m1"), (2, b"m2")]) == [(1, b"m1"), (2, b"m2")]
        assert rb.stats.get("rebuilds") == 1  # once: the cursor it restarted from is served
    finally:
        await rb.close()
        await ra.close()
        rb.store.close()
        ra.store.close()
