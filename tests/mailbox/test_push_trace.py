"""The message's trace id reaches the mailbox's push and projection as a parameter
(issue 36 item 6), not round-tripped through the log context as hex: the materializer
hands each new record's trace id to its push hook with the record, and the PushBatch
positions and PROJECTION frames carry what they are given, whatever is bound for the
log lines meanwhile. Real Redis; the dispatch partitions are the stand-in of
tests/mailbox/test_lost_reply.py."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

from qim._core import ids, watermark
from qim._core.types import MessageCoord
from qim.faults import MAILBOX_POINTS, FaultPoints
from qim.infra.redis.client import connect
from qim.obs.logcontext import bind
from qim.proto.v1 import internal_pb2, projection_pb2
from qim.services.mailbox.materializer import MailboxMaterializer
from qim.services.mailbox.projection import ProjectionFeed
from qim.services.mailbox.targets import push_bodies
from qim.stores.redis.mailboxes import RedisMailboxStore
from qim.wire.dispatch import Dispatch
from tests.mailbox.test_lost_reply import NOW_MS, SHARD, TENANT, DispatchLog

TRACE = bytes(range(16))
SETTLE_S = 30.0


def traced_record(offset: int, recipients: tuple[int, ...], trace_id: bytes) -> bytes:
    """A dispatch record (version 2 when `trace_id`) for SHARD to `recipients`."""
    coord = MessageCoord(b"T" + offset.to_bytes(15, "big"), ids.conversation_id_direct(TENANT, 1, 2), offset + 1,
                         recipients[0], NOW_MS + offset, 1, b"")
    return Dispatch(TENANT, b"E" + offset.to_bytes(15, "big"), coord, SHARD, b"c" * 16, recipients,
                    f"t{offset}".encode(), trace_id=trace_id).encode()


async def test_the_push_hook_gets_each_records_trace_id_as_a_parameter(private_redis):
    client = connect(private_redis.addr)
    pushed: list[tuple[int, bytes]] = []
    log = DispatchLog()
    m = MailboxMaterializer("unused:1", RedisMailboxStore(client), [SHARD],
                            lambda tenant, seq, users, event, trace_id, inline: pushed.append((event.conversation_seq, trace_id)),
                            FaultPoints("", MAILBOX_POINTS), consumer=log)  # type: ignore[arg-type]
    await m.start()
    task = asyncio.get_running_loop().create_task(m.run())
    try:
        log.add(SHARD, 0, traced_record(0, (21,), TRACE))
        log.add(SHARD, 1, traced_record(1, (21,), b""))  # an untraced message (dispatch version 1)
        deadline = time.monotonic() + SETTLE_S
        while watermark.start_offset(m.shards[SHARD].blob) <= 1:
            assert not m.shards[SHARD].dirty and time.monotonic() < deadline, "records not materialized"
            await asyncio.sleep(0.01)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.aclose()
    assert pushed == [(1, TRACE), (2, b"")]


def test_pushes_and_projections_carry_the_trace_id_they_are_given_not_the_bound_one():
    position = internal_pb2.PushBatch.FromString(push_bodies(TENANT, 5, b"m" * 16, [21], TRACE)[0]).positions[0]
    assert position.trace_id == TRACE
    sent: list[bytes] = []
    link = SimpleNamespace(send=lambda body: sent.append(body) or "sent")
    owners = SimpleNamespace(owner=lambda kind, shard: SimpleNamespace(addr="127.0.0.1:1"))
    feed = ProjectionFeed(owners, spawn=lambda coro, name: None)  # type: ignore[arg-type]
    feed.links["127.0.0.1:1"] = link  # type: ignore[assignment]  # the session owner's link: nothing is dialled
    event = SimpleNamespace(conversation_id=b"c" * 16, conversation_seq=3, created_at_ms=NOW_MS, sender_id=21)
    with bind(trace=b"\xff" * 16):  # a different id bound for the log lines changes nothing
        feed.send(SHARD, TENANT, [21], event, TRACE, mailbox_seq=(3 << 48) | 77)  # type: ignore[arg-type]
    frame = projection_pb2.Projection.FromString(sent[0])
    assert [msg.trace_id for msg in frame.messages] == [TRACE]
    # where the record was read: the session skips it on its durable path (decision 0167)
    assert [(msg.shard, msg.mailbox_seq) for msg in frame.messages] == [(SHARD, (3 << 48) | 77)]
