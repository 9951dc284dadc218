"""The client rule of inline pushes (docs/decisions/0156): a push carrying the user's
entries is applied as the page it stands for only when the committed cursor is its
prev_mailbox_seq (lane and shard_epoch too) and no pull is in flight; any other cursor
pulls. Against the in-process fake gateway, pushes sent by hand (push off), pulls
counted at the fake."""

from __future__ import annotations

import asyncio

from qim.proto.v1 import mailbox_pb2
from qim.protocol import Opcode
from tests.sdk.fakegateway import EPOCH, LANE
from tests.sdk.test_runtime import CONV, A, B, gw, runtime, wait_for

__all__ = ["gw"]  # the fixture


def counting(gw, monkeypatch) -> tuple[list[int], list]:
    """Pulls of B (their cursors) and, while `held` holds None first, B's pulls held back."""
    pulls: list[int] = []
    held: list = []
    serve = gw._pull

    def counted(stream, rid, user, req):
        if user == B:
            pulls.append(req.cursor)
            if held and held[0] is None:
                held.append(lambda: serve(stream, rid, user, req))
                return
        serve(stream, rid, user, req)

    monkeypatch.setattr(gw, "_pull", counted)
    return pulls, held


def push_to(gw, user: int, **kw) -> None:
    (stream,) = gw.online[user]
    stream.send(Opcode.PUSH_EVENTS, 0, mailbox_pb2.PushEvents(**kw).SerializeToString())


async def sent(gw, a, body: bytes) -> mailbox_pb2.MailboxEntry:
    """`body` from A to B; B's entry of it at the fake."""
    before = len(gw.mailboxes.get(B, []))
    await a.send_message(CONV, B, body)
    await wait_for(lambda: len(gw.mailboxes.get(B, [])) == before + 1)
    return gw.mailboxes[B][-1]


async def test_an_inline_push_at_the_cursor_is_applied_without_a_pull_and_a_gap_pulls(gw, tmp_path, monkeypatch):
    gw.push = False
    pulls, _ = counting(gw, monkeypatch)
    a, b = runtime(gw, tmp_path, A), runtime(gw, tmp_path, B)
    await a.connect()
    await b.connect()
    assert b.store.cursor() == (LANE, EPOCH, 0)
    before = len(pulls)
    first = await sent(gw, a, b"first")
    push_to(gw, B, lane=LANE, mailbox_seq=first.mailbox_seq, prev_mailbox_seq=0, inline_entries=[first])
    await wait_for(lambda: b.store.has_message(first.message_id))
    second = await sent(gw, a, b"second")
    push_to(gw, B, lane=LANE, mailbox_seq=second.mailbox_seq, prev_mailbox_seq=first.mailbox_seq,
            inline_entries=[second])
    await wait_for(lambda: b.store.has_message(second.message_id))
    assert b.store.cursor() == (LANE, EPOCH, second.mailbox_seq)
    assert len(pulls) == before and b.stats["pushes_applied"] == 2
    # a push withheld (third): the next one's previous position is not the cursor, so it pulls
    third, fourth = await sent(gw, a, b"third"), await sent(gw, a, b"fourth")
    push_to(gw, B, lane=LANE, mailbox_seq=fourth.mailbox_seq, prev_mailbox_seq=third.mailbox_seq,
            inline_entries=[fourth])
    await wait_for(lambda: b.store.has_message(fourth.message_id))
    assert len(pulls) == before + 1 and b.stats["pushes_applied"] == 2
    # a text without its body is never applied (the server inlines none): pulled
    bodiless = await sent(gw, a, b"bodiless")
    empty = mailbox_pb2.MailboxEntry()
    empty.CopyFrom(bodiless)
    empty.body = b""
    push_to(gw, B, lane=LANE, mailbox_seq=bodiless.mailbox_seq, prev_mailbox_seq=fourth.mailbox_seq,
            inline_entries=[empty])
    await wait_for(lambda: b.store.has_message(bodiless.message_id))
    assert len(pulls) == before + 2 and b.stats["pushes_applied"] == 2
    # another lane, or another shard_epoch, with the right previous offset: pulls too
    fourth = bodiless
    fifth = await sent(gw, a, b"fifth")
    push_to(gw, B, lane=LANE + 1, mailbox_seq=fifth.mailbox_seq, prev_mailbox_seq=fourth.mailbox_seq,
            inline_entries=[fifth])
    await wait_for(lambda: b.store.has_message(fifth.message_id))
    assert len(pulls) == before + 3 and b.stats["pushes_applied"] == 2
    # an entry whose mailbox_seq is not the push's (a server bug): pulled, never applied
    fourth = fifth
    sixth = await sent(gw, a, b"sixth")
    elsewhere = mailbox_pb2.MailboxEntry()
    elsewhere.CopyFrom(sixth)
    elsewhere.mailbox_seq = sixth.mailbox_seq + 1
    push_to(gw, B, lane=LANE, mailbox_seq=sixth.mailbox_seq, prev_mailbox_seq=fourth.mailbox_seq,
            inline_entries=[elsewhere])
    await wait_for(lambda: b.store.has_message(sixth.message_id))
    assert len(pulls) == before + 4 and b.stats["pushes_applied"] == 2
    assert [m.body for m in b.store.messages(CONV)] == [b"first", b"second", b"third", b"fourth", b"bodiless",
                                                        b"fifth", b"sixth"]
    await a.close()
    await b.close()


async def test_an_inline_push_during_a_pull_is_never_applied_beside_it(gw, tmp_path, monkeypatch):
    gw.push = False
    pulls, held = counting(gw, monkeypatch)
    a, b = runtime(gw, tmp_path, A), runtime(gw, tmp_path, B)
    await a.connect()
    await b.connect()
    first = await sent(gw, a, b"first")
    held.append(None)  # B's next pull is held at the fake: in flight
    task = asyncio.get_running_loop().create_task(b.pull_mailbox())
    await wait_for(lambda: len(held) == 2)
    # the cursor is still this push's previous position, but a pull is in flight
    push_to(gw, B, lane=LANE, mailbox_seq=first.mailbox_seq, prev_mailbox_seq=0, inline_entries=[first])
    await wait_for(lambda: b.stats["pushes"] == 1)
    await asyncio.sleep(0.2)
    assert not b.store.has_message(first.message_id) and b.stats.get("pushes_applied", 0) == 0
    held.pop(0)
    held.pop(0)()  # the pull's reply: it brings the entry
    await task
    await asyncio.sleep(0.1)
    assert b.stats.get("pushes_applied", 0) == 0  # covered by the pull: nothing applied twice
    assert [m.body for m in b.store.messages(CONV)] == [b"first"]
    await a.close()
    await b.close()
