"""Send order and outcomes against the in-process fake gateway:
previous_client_message_id, ordinal order of frames, retries with a recomputed
previous id, every transmit-path exception settling its waiter, pull retries."""

from __future__ import annotations

import asyncio
import threading

import pytest

from qim.sdk import ServerError, direct_conversation
from qim.sdk import events as ev
from tests.sdk.fakegateway import FakeGateway
from tests.sdk.test_runtime import KEY, TENANT, drain, runtime, wait_for

A, B, C = 11, 22, 33
X, Y = direct_conversation(TENANT, A, B), direct_conversation(TENANT, A, C)


@pytest.fixture
async def gw():
    g = FakeGateway(KEY)
    g.addr = await g.start()
    g.require_previous = True  # the writer's rule: a send waits for its previous one to be sequenced
    yield g
    await g.stop()


async def test_pending_sends_are_resent_in_ordinal_order_naming_their_previous(gw, tmp_path):
    a = runtime(gw, tmp_path, A)
    earlier = [a.store.add_pending(X, B, 1, b"", b"x0 from an earlier process")]
    plan = [(X, B, b"x1"), (Y, C, b"y0"), (X, B, b"x2"), (Y, C, b"y1"), (X, B, b"x3")]
    cmids = [await a.submit_message(conv, peer, body) for conv, peer, body in plan]  # not connected: stored only
    assert gw.frames == []
    await a.connect()
    acks = await asyncio.gather(*(a.wait_ack(c) for c in cmids))
    x_ids = [earlier[0].client_message_id, cmids[0], cmids[2], cmids[4]]
    y_ids = [cmids[1], cmids[3]]
    first = {}
    for f in gw.frames:
        first.setdefault(f.client_message_id, f)
    assert list(first) == [earlier[0].client_message_id, *cmids]  # frames left in ordinal order
    assert [first[c].previous_client_message_id for c in x_ids] == [b"", *x_ids[:-1]]
    assert [first[c].previous_client_message_id for c in y_ids] == [b"", y_ids[0]]
    assert [acks[i].conversation_seq for i in (0, 2, 4)] == [2, 3, 4] and [acks[i].conversation_seq
                                                                           for i in (1, 3)] == [1, 2]
    await a.close()


async def test_refused_until_the_previous_is_sequenced_then_retried_with_a_new_previous(gw, tmp_path):
    a = runtime(gw, tmp_path, A, ack_deadline_s=0.2, probe_s=0.5)
    await a.connect()
    gw.drop_frames = 1  # x0's first frame is lost on the way
    c0 = await a.submit_message(X, B, b"x0")
    c1 = await a.submit_message(X, B, b"x1")
    ack0, ack1 = await a.wait_ack(c0), await a.wait_ack(c1)
    assert (ack0.conversation_seq, ack1.conversation_seq) == (1, 2)  # submission order kept
    named = [f.previous_client_message_id for f in gw.frames if f.client_message_id == c1]
    assert named[0] == c0 and named[-1] == b""  # refused while x0 was unsequenced; recomputed later
    assert a.store.pending_sends() == []
    await a.close()


async def test_an_exception_while_transmitting_settles_the_waiter(gw, tmp_path):
    a = runtime(gw, tmp_path, A)
    await a.connect()
    real = a._sender.frame

    def broken(row):
        if row.body == b"poison":
            raise RuntimeError("encoder bug")
        return real(row)

    a._sender.frame = broken
    with pytest.raises(RuntimeError):
        await a.send_message(X, B, b"poison")
    (row,) = a.store.pending_sends(("failed",))
    assert row.body == b"poison"
    assert [e.code.name for e in drain(a) if isinstance(e, ev.SendFailed)] == ["INTERNAL"]
    assert (await a.send_message(X, B, b"fine")).conversation_seq == 1  # the next send does not wait for it
    await a.close()


async def test_transient_pull_errors_are_retried_and_permanent_ones_surface(gw, tmp_path):
    a = runtime(gw, tmp_path, A)
    await a.connect()
    ack = await a.send_message(X, B, b"waiting for you")
    await a.close()
    b = runtime(gw, tmp_path, B)
    gw.pull_errors = [11, 7, 10]  # UNAVAILABLE, RATE_LIMITED, MAILBOX_DIRTY
    await b.connect()
    assert b.store.has_message(ack.message_id) and gw.pull_errors == []
    gw.pull_errors = [5]  # INVALID_ARGUMENT is permanent
    with pytest.raises(ServerError) as info:
        await b.pull_mailbox()
    assert info.value.code.name == "INVALID_ARGUMENT"
    await b.close()


async def test_retry_budget_bounds_a_transient_error(gw, tmp_path):
    b = runtime(gw, tmp_path, B, retry_budget_s=0.3)
    gw.pull_errors = [11] * 1000
    with pytest.raises(ServerError) as info:
        await b.connect()
    assert info.value.code.name == "UNAVAILABLE" and not b.connected


async def test_push_during_a_pull_runs_the_pull_again(gw, tmp_path):
    a, b = runtime(gw, tmp_path, A), runtime(gw, tmp_path, B)
    await a.connect()
    await b.connect()
    gate = asyncio.Event()
    original_pull = gw._pull

    class Capture:
        def send(self, *frame):
            self.frame = frame

    def held_pull(stream, rid, user, req):  # the page is cut now (empty) and answered later
        cap = Capture()
        original_pull(cap, rid, user, req)

        async def later():
            await gate.wait()
            stream.send(*cap.frame)
        asyncio.get_running_loop().create_task(later())

    gw._pull = held_pull
    pulling = asyncio.ensure_future(b.pull_mailbox())
    await asyncio.sleep(0.05)
    ack = await a.send_message(X, B, b"during your pull")  # its push arrives while b's pull is in flight
    await wait_for(lambda: b.stats["pushes"] >= 1)
    gw._pull = original_pull
    gate.set()
    await pulling  # the first page was empty: only the second round (dirty) brings the message
    assert b.store.has_message(ack.message_id)
    await a.close()
    await b.close()


async def test_a_batch_committed_while_closing_is_still_told(gw, tmp_path):
    a, b = runtime(gw, tmp_path, A), runtime(gw, tmp_path, B)
    await a.connect()
    await b.connect()
    entered, release = threading.Event(), threading.Event()
    real = b.store.apply_mailbox_batch

    def held(entries, *rest):  # the pull a push woke is mid-commit on the store thread
        if entries and not release.is_set():
            entered.set()
            release.wait(5)
        return real(entries, *rest)

    b.store.apply_mailbox_batch = held
    ack = await a.send_message(X, B, b"told even so")
    await wait_for(entered.is_set)
    closing = asyncio.ensure_future(b.close())  # cancels the pull while its batch commits
    await asyncio.sleep(0.05)
    release.set()
    await closing
    told = []
    await wait_for(lambda: told.extend(drain(b)) or any(
        isinstance(e, ev.MessagesAdded) and ack.message_id in [m.message_id for m in e.messages] for e in told))
    assert b.store.has_message(ack.message_id)  # committed, and the app was told
    await a.close()
