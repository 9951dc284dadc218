"""Session-list helpers for end-to-end tests (frames through the real gateway)."""

from __future__ import annotations

import asyncio
import random

from qim.proto.v1 import common_pb2, session_pb2
from qim.protocol import Opcode


def new_user() -> int:
    """A user id no other test of the shared stack uses."""
    return random.getrandbits(40) + 1000


async def pull_page(client, limit: int = 0, cursor: bytes = b""):
    """(opcode, SessionListBatch | Error) of one PULL_SESSION_LIST."""
    op, body = await client.request(Opcode.PULL_SESSION_LIST,
                                    session_pb2.PullSessionList(limit=limit, cursor=cursor).SerializeToString())
    if op == Opcode.SESSION_LIST_BATCH:
        return op, session_pb2.SessionListBatch.FromString(body)
    assert op == Opcode.ERROR, hex(op)
    return op, body if isinstance(body, common_pb2.Error) else common_pb2.Error.FromString(body)


async def sessions(client, limit: int = 0) -> list:
    """Every SessionEntry of the user, newest first, following the cursor."""
    out, cursor = [], b""
    while True:
        op, batch = await pull_page(client, limit, cursor)
        assert op == Opcode.SESSION_LIST_BATCH, batch
        out.extend(batch.sessions)
        if not batch.has_more:
            return out
        cursor = batch.next_cursor


async def entry_when(client, conv: bytes, predicate, timeout: float = 10.0):
    """Pull the list until the entry of `conv` satisfies `predicate` (the projection is
    asynchronous); returns it or fails with the last entry seen."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last = None
    while True:
        last = next((e for e in await sessions(client) if e.conversation_id == conv), None)
        if last is not None and predicate(last):
            return last
        assert loop.time() < deadline, f"entry never satisfied the condition; last: {last}"
        await asyncio.sleep(0.1)


async def mark_read(client, conv: bytes, seq: int, peer: int = 0):
    op, body = await client.request(Opcode.MARK_READ, session_pb2.MarkRead(
        conversation_id=conv, read_conversation_seq=seq, peer_user_id=peer).SerializeToString())
    if op == Opcode.MARK_READ_OK:
        return op, session_pb2.MarkReadOk.FromString(body)
    return op, body if isinstance(body, common_pb2.Error) else common_pb2.Error.FromString(body)


PUSH_TYPES = {Opcode.READ_SYNC: session_pb2.ReadSync, Opcode.SESSION_DELTA: session_pb2.SessionDelta}


async def wait_push(client, opcode: int, predicate=lambda m: True, timeout: float = 10.0):
    """Wait for a server-initiated frame of `opcode` matching `predicate` (PINGs keep the
    client reading); returns it parsed, consuming it from client.pushes."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        for i, (op, raw) in enumerate(client.pushes):
            if op == opcode:
                msg = PUSH_TYPES[opcode].FromString(raw)
                if predicate(msg):
                    del client.pushes[i]
                    return msg
        assert loop.time() < deadline, f"no 0x{opcode:04x} frame; got {[hex(o) for o, _ in client.pushes]}"
        await client.request(Opcode.PING, b"")
        await asyncio.sleep(0.05)


def pushed(client, opcode: int) -> list:
    return [PUSH_TYPES[opcode].FromString(raw) for op, raw in client.pushes if op == opcode]


async def durable_caught_up(stack, redis_client, timeout: float = 20.0) -> None:
    """Wait until the durable projection's checkpoint reached the end of every dispatch
    partition (so no late replay of an old registration is still on its way)."""
    from confluent_kafka import Consumer, TopicPartition

    from qim.consts import DISPATCH_TOPIC
    from qim.stores.redis.keys import session_shard_checkpoint_key

    consumer = Consumer({"bootstrap.servers": stack.env["QIM_KAFKA_BOOTSTRAP"], "group.id": "qim-test-watermarks"})
    loop = asyncio.get_running_loop()
    try:
        parts = int(stack.env["QIM_MAILBOX_SHARD_COUNT"])
        deadline = loop.time() + timeout
        while True:
            high = await loop.run_in_executor(None, lambda: [
                consumer.get_watermark_offsets(TopicPartition(DISPATCH_TOPIC, p), 5.0, cached=False)[1]
                for p in range(parts)])
            ckpt = [await redis_client.hget(session_shard_checkpoint_key(p), "p") for p in range(parts)]
            if all(int(c or -1) >= h for c, h in zip(ckpt, high)):
                return
            assert loop.time() < deadline, "durable projection did not catch up"
            await asyncio.sleep(0.1)
    finally:
        consumer.close()
