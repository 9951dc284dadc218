"""The push-repair test's device pulls again for a push that overtook its pull's reply
(tests/e2e/test_push_repair.py `receive_by_push`). It did not: a push that arrived while
a pull was answered was kept in `RawClient.pushes` and never looked at, so a round whose
login wake-up raced the message recorded "no push in 10 s" with nothing dropped (CI).
No stack: a scripted gateway stream."""

from __future__ import annotations

import asyncio

from qim.proto.v1 import mailbox_pb2
from qim.protocol import Opcode
from tests.e2e.rawclient import RawClient
from tests.e2e.test_push_repair import receive_by_push


class ScriptedGateway:
    """A login wake-up; the first pull races the materializer (the entry's push overtakes
    the empty reply); the second pull brings the entry."""

    def __init__(self) -> None:
        self.frames: asyncio.Queue = asyncio.Queue()
        self.pulls = 0
        self.frames.put_nowait((Opcode.PUSH_EVENTS, 0, mailbox_pb2.PushEvents().SerializeToString()))

    def send(self, op: int, rid: int, body: bytes) -> None:
        assert op == Opcode.PULL_MAILBOX
        self.pulls += 1
        if self.pulls == 1:
            self.frames.put_nowait((Opcode.PUSH_EVENTS, 0, mailbox_pb2.PushEvents(mailbox_seq=5).SerializeToString()))
            self.frames.put_nowait((Opcode.MAILBOX_BATCH, rid, mailbox_pb2.MailboxBatch(next_cursor=0).SerializeToString()))
        else:
            batch = mailbox_pb2.MailboxBatch(next_cursor=5)
            batch.entries.add(mailbox_seq=5, body=b"round 3")
            self.frames.put_nowait((Opcode.MAILBOX_BATCH, rid, batch.SerializeToString()))

    async def read_frame(self):
        return await self.frames.get()


async def test_a_push_that_overtook_the_pull_reply_is_pulled_for():
    gateway = ScriptedGateway()
    client = RawClient(gateway, 2, 1)  # type: ignore[arg-type]
    assert await receive_by_push(client, 0, 1.0) == [b"round 3"]
    assert gateway.pulls == 2 and client.pushes == []
