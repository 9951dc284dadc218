"""A push is a position (docs/decisions/0033): PUSH_EVENTS at or below the device's
cursor on its lane asks for no pull; one above it, on another lane, or without a
position (a wake-up) pulls. Against the in-process fake gateway, whose pushes are sent
by hand here (push off) so every frame is known; pulls are counted at the fake."""

from __future__ import annotations

import asyncio

from qim.proto.v1 import mailbox_pb2
from qim.protocol import Opcode
from tests.sdk.fakegateway import LANE
from tests.sdk.test_runtime import CONV, A, B, gw, runtime, wait_for

__all__ = ["gw"]  # the fixture


async def test_a_push_the_cursor_covers_is_not_pulled_and_any_other_is(gw, tmp_path, monkeypatch):
    gw.push = False
    pulls: list[int] = []
    serve = gw._pull

    def counted(stream, rid, user, req):
        if user == B:
            pulls.append(req.cursor)
        serve(stream, rid, user, req)

    monkeypatch.setattr(gw, "_pull", counted)
    a, b = runtime(gw, tmp_path, A), runtime(gw, tmp_path, B)
    await a.connect()
    await b.connect()
    first = await a.send_message(CONV, B, b"first")
    await wait_for(lambda: gw.mailboxes.get(B))
    await b.pull_mailbox()
    assert b.store.has_message(first.message_id)
    seq = b.store.cursor()[2]

    def push(**kw) -> None:
        (stream,) = gw.online[B]
        stream.send(Opcode.PUSH_EVENTS, 0, mailbox_pb2.PushEvents(**kw).SerializeToString())

    before = len(pulls)
    push(lane=LANE, mailbox_seq=seq, message_ids=[first.message_id])  # late: already pulled
    push(lane=LANE, mailbox_seq=seq - 1)
    await wait_for(lambda: b.stats["pushes"] == 2)
    await asyncio.sleep(0.2)
    assert len(pulls) == before and b.stats["pushes_skipped"] == 2

    push(lane=LANE + 1, mailbox_seq=seq)  # another lane: not comparable with the cursor
    await wait_for(lambda: len(pulls) == before + 1)
    second = await a.send_message(CONV, B, b"second")
    await wait_for(lambda: len(gw.mailboxes[B]) == 2)
    push(lane=LANE, mailbox_seq=gw.mailboxes[B][-1].mailbox_seq)  # above the cursor
    await wait_for(lambda: b.store.has_message(second.message_id))
    assert len(pulls) == before + 2
    push()  # a wake-up: no position
    await wait_for(lambda: len(pulls) == before + 3)
    assert [m.body for m in b.store.messages(CONV)] == [b"first", b"second"]
    await a.close()
    await b.close()


async def test_a_pull_whose_reply_is_lost_is_sent_again(gw, tmp_path):
    # The server answers PINGs but never this PULL_MAILBOX (a backend paused mid-request):
    # after PULL_REPEAT_PROBES answered probes the pull goes out again and the message
    # arrives; without the repeat the single-flight puller would wait forever.
    a = runtime(gw, tmp_path, A)
    b = runtime(gw, tmp_path, B, ack_deadline_s=0.1, probe_s=1.0)
    await a.connect()
    await b.connect()
    gw.drop_pulls[B] = 1
    ack = await a.send_message(CONV, B, b"after a lost pull")
    await wait_for(lambda: b.store.has_message(ack.message_id))
    assert gw.drop_pulls[B] == 0 and b.stats["pull_repeats"] == 1
    assert [m.body for m in b.store.messages(CONV)] == [b"after a lost pull"]
    await a.close()
    await b.close()
