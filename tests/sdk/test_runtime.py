"""ClientRuntime against an in-process fake gateway (real frames, fake backend).

The real services are covered by tests/e2e; these check the SDK state machine: login
sync, ACK, a push being only a wake-up, reconnect reconciliation with the same cmid,
the ACK deadline probe and event ordering (docs/design.md §9).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from qim.sdk import ClientRuntime, LocalStore, SendTimeout, ServerError, direct_conversation
from qim.sdk import events as ev
from qim.sdk.faults import LinkFaults
from qim.wire.devtoken import issue_dev_token
from qim.wire.tokens import SigningKey
from tests.sdk.fakegateway import FakeGateway

KEY = SigningKey.generate()  # the fake gateway's token key
TENANT, A, B = 0, 11, 22
CONV = direct_conversation(TENANT, A, B)


@pytest.fixture
async def gw():
    g = FakeGateway(KEY)
    g.addr = await g.start()
    yield g
    await g.stop()


def runtime(gw, tmp_path, user, **kw) -> ClientRuntime:
    store = LocalStore.open(LocalStore.path_for(str(tmp_path), gw.addr, TENANT, user), TENANT, user)
    token = issue_dev_token(KEY, TENANT, user, store.device_id)
    return ClientRuntime(gw.addr, token, store, plaintext=True, **kw)  # the fake gateway speaks plaintext


def drain(rt) -> list:
    out = []
    while not rt.events.empty():
        out.append(rt.events.get_nowait())
    return out


async def wait_for(pred, timeout=5.0):
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, "condition not reached"
        await asyncio.sleep(0.01)


async def test_online_send_push_and_event_order(gw, tmp_path):
    a, b = runtime(gw, tmp_path, A), runtime(gw, tmp_path, B)
    await a.connect()
    await b.connect()
    ack = await a.send_message(CONV, B, b"hello \xe4\xbd\xa0\xe5\xa5\xbd")
    assert ack.conversation_seq == 1  # by SEND_ACK or by our own pushed entry, whichever first
    await wait_for(lambda: b.store.has_message(ack.message_id))
    await b.pull_mailbox()
    (msg,) = b.store.messages(CONV)
    assert msg.body == b"hello \xe4\xbd\xa0\xe5\xa5\xbd" and msg.sender_id == A and msg.client_message_id is None
    assert b.store.cursor() is not None and b.stats["pushes"] >= 1
    kinds = []
    while not b.events.empty():
        kinds.append(type(b.events.get_nowait()))
    i = kinds.index(ev.ConversationsUpdated)
    assert kinds[i + 1] is ev.MessagesAdded
    await a.close()
    await b.close()


async def test_push_is_only_a_wake_up_for_a_pull(gw, tmp_path):
    gw.push_reference = True  # push entries reference the body, as the mailbox's do above the inline budget
    a, b = runtime(gw, tmp_path, A), runtime(gw, tmp_path, B, event_queue=False)
    told = []
    b.on_event = told.append
    await a.connect()
    await b.connect()
    await a.send_message(CONV, B, b"whole body" * 500)

    def added() -> list:
        return [m for e in told if isinstance(e, ev.MessagesAdded) for m in e.messages]

    await wait_for(added)
    (msg,) = b.store.messages(CONV)
    assert msg.body == b"whole body" * 500 and msg.mailbox_seq == b.store.cursor()[2]  # applied by a pull
    added = added()
    assert [m.body for m in added] == [b"whole body" * 500] and b.stats["pushes"] >= 1
    await a.close()
    await b.close()


async def test_offline_recipient_pulls_at_login(gw, tmp_path):
    a = runtime(gw, tmp_path, A)
    await a.connect()
    acks = [await a.send_message(CONV, B, f"m{i}".encode()) for i in range(7)]  # > one page of 3
    b = runtime(gw, tmp_path, B)
    await b.connect()  # connect() returns after the login sync
    got = b.store.messages(CONV)
    assert [m.message_id for m in got] == [x.message_id for x in acks]
    assert [m.body for m in got] == [f"m{i}".encode() for i in range(7)]
    await a.close()
    await b.close()


async def test_cut_before_ack_resends_same_cmid_once(gw, tmp_path):
    a = runtime(gw, tmp_path, A, faults=LinkFaults())
    await a.connect()
    # the own entry is not visible at reconnect (which waits up to FIRST_SPREAD_S = 1 s, decision 0078): forces a resend
    gw.materialize_delay = 3.0
    a.faults.cut_after_next_send()
    ack = await a.send_message(CONV, B, b"cut")
    assert gw.sends_seen == 2 and len(gw.committed) == 1
    (cmid, (_d, server_ack)), = [(k[1], v) for k, v in gw.committed.items()]
    assert ack.client_message_id == cmid and ack.message_id == server_ack.message_id
    assert a.stats["reconnects"] == 1 and a.stats["resends"] == 1
    await a.close()


async def test_cut_before_ack_reconciled_from_own_entry(gw, tmp_path):
    a = runtime(gw, tmp_path, A, reconnect_backoff=(0.3, 1.0), faults=LinkFaults())
    await a.connect()
    a.faults.cut_after_next_send()
    ack = await a.send_message(CONV, B, b"cut")  # own entry visible before the reconnect
    assert ack.reconciled and gw.sends_seen == 1 and a.stats["resends"] == 0
    assert a.store.pending_sends() == []
    await a.close()


async def test_pending_from_previous_process_resent_after_login(gw, tmp_path):
    a = runtime(gw, tmp_path, A)
    row = a.store.add_pending(CONV, B, 1, b"", b"written before a crash")
    await a.connect()
    await wait_for(lambda: a.store.pending_state(row.client_message_id) in ("acked", "committed"))
    assert (A, row.client_message_id) in gw.committed
    await a.close()


async def test_lost_ack_with_live_peer_is_retried_idempotently(gw, tmp_path):
    a = runtime(gw, tmp_path, A, ack_deadline_s=0.2, probe_s=0.5)
    await a.connect()
    gw.materialize_delay = 5
    gw.drop_acks = 1
    ack = await a.send_message(CONV, B, b"slow")
    assert gw.sends_seen == 2 and len(gw.committed) == 1 and ack.conversation_seq == 1
    await a.close()


async def test_silent_server_detected_by_probe(gw, tmp_path):
    a = runtime(gw, tmp_path, A, ack_deadline_s=0.2, probe_s=0.3, auto_reconnect=False, send_timeout=2)
    await a.connect()
    gw.silent = True
    start = time.monotonic()
    task = asyncio.ensure_future(a.send_message(CONV, B, b"into the void"))
    await wait_for(lambda: not a.connected, timeout=2)
    assert time.monotonic() - start < 0.2 + 0.3 + 0.3  # deadline + probe (+ slack)
    with pytest.raises(SendTimeout):
        await task  # no reconnect: the send stays pending until the caller's timeout
    seen = []
    while not a.events.empty():
        seen.append(a.events.get_nowait())
    assert any(isinstance(e, ev.Disconnected) and "ping" in e.reason for e in seen)
    assert len(a.store.pending_sends()) == 1  # kept for the next connect
    await a.close()


async def test_conflict_is_typed_error(gw, tmp_path):
    from qim._core import ids
    from qim.proto.v1 import message_pb2

    a = runtime(gw, tmp_path, A)
    await a.connect()
    nxt = a.store.reserve_ordinal() + 1  # same block: the next send uses this ordinal
    cmid = ids.client_message_id(a.store.store_nonce, a.store.device_id, nxt)
    gw.committed[(A, cmid)] = (b"digest of other content", message_pb2.SendAck())
    with pytest.raises(ServerError) as info:
        await a.send_message(CONV, B, b"mine")
    assert info.value.code.name == "CONFLICT" and info.value.request_opcode == 0x0201
    assert a.store.pending_state(cmid) == "failed" and a.store.pending_sends() == []
    (row,) = a.store.pending_sends(("failed",))
    assert row.body == b"mine"  # the text is kept for the app
    failed = [e for e in drain(a) if isinstance(e, ev.SendFailed)]
    assert [(e.client_message_id, e.code.name) for e in failed] == [(cmid, "CONFLICT")]
    await a.close()


async def test_bad_token_is_unauthenticated(gw, tmp_path):
    store = LocalStore.open(":memory:", TENANT, A)
    rt = ClientRuntime(gw.addr, issue_dev_token(SigningKey.generate(), TENANT, A, store.device_id), store,
                       plaintext=True)
    with pytest.raises(ServerError) as info:
        await rt.connect()
    assert info.value.code.name == "UNAUTHENTICATED"


async def test_own_message_is_listed_once_its_echo_is_applied(gw, tmp_path):
    """SEND_ACK leaves the send "acked" (unsent, not a stored message); the store lists it
    with its conversation_seq only when its own mailbox entry is applied (store.py
    "pending"): a reader of the listing right after the ACK may not find it yet."""
    told: list = []
    a = runtime(gw, tmp_path, A, event_queue=False, on_event=told.append)
    await a.connect()
    gw.materialize_delay = 0.3  # the echo lags the ACK, as under load
    ack = await a.send_message(CONV, B, b"mine")
    assert not ack.reconciled and not a.store.has_message(ack.message_id)
    assert [(r.client_message_id, r.state) for r in a.store.unsent(CONV)] == [(ack.client_message_id, "acked")]
    await wait_for(lambda: any(isinstance(e, ev.MessagesAdded) and e.messages[0].message_id == ack.message_id
                               for e in told))  # the echo, told after its commit
    (msg,) = a.store.messages(CONV)
    assert (msg.conversation_seq, msg.sender_id) == (ack.conversation_seq, A) and a.store.unsent(CONV) == []
    await a.close()
