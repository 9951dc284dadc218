"""Writer operations: commit helper state, two writers behind the gateway,
readiness following Redis."""

from __future__ import annotations

import asyncio
import random
import time
import urllib.error
import urllib.request

import pytest

from qim._core import ids
from qim.consts import COMMIT_HELPER_TTL_MS
from qim.protocol import Opcode
from qim.services.gateway.router import rendezvous_order
from qim.stores.redis.keys import CommitKeys
from tests.e2e.rawclient import RawClient, wait_for_entries
from tests.fixtures import running_stack


def healthz(stack, name: str) -> int:
    try:
        with urllib.request.urlopen(f"http://{stack.metrics[name]}/healthz", timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code


async def test_commit_helper_state_is_small_and_expires(stack, engines):
    import redis

    a_id = random.getrandbits(40) + 1
    a = await RawClient.login(stack, a_id)
    r = redis.Redis(*engines.redis_addr.split(":"))
    keys = CommitKeys(0, ids.conversation_id_direct(0, a_id, a_id + 1))
    sizes = []
    for body in (b"s" * 100, b"L" * 200_000):
        _, ack = await a.send_text(a_id + 1, body)
        key = keys.commit(a_id, ack.client_message_id)
        assert set(r.hkeys(key)) == {b"dg", b"st", b"mid", b"cseq", b"cat", b"upd", b"obo"}
        ttl = r.pttl(key)
        assert COMMIT_HELPER_TTL_MS - 60_000 < ttl <= COMMIT_HELPER_TTL_MS
        sizes.append(r.memory_usage(key))
    # the helper state holds ACK coordinates only: a 2000x larger body costs nothing here
    assert abs(sizes[0] - sizes[1]) <= 16 and sizes[1] < 512
    await a.close()


@pytest.fixture(scope="module")
def two_writers(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("two-writers"), writers=2) as st:
        yield st


async def test_one_conversation_through_both_writers(two_writers):
    st = two_writers
    a_id = random.getrandbits(40) + 1
    b_id = a_id + 1
    conv = ids.conversation_id_direct(0, a_id, b_id)
    order = rendezvous_order(conv, tuple(st.env["QIM_WRITER_ADDRS"].split(",")))
    names = ["writer", "writer2"]
    first, second = names[order[0]], names[order[1]]
    a = await RawClient.login(st, a_id)
    acks = []
    _, ack = await a.send_text(b_id, b"via first")
    acks.append(ack)
    st.stop_service(first)  # the gateway falls back to the other writer
    op, replay = await a.send_text(b_id, b"via first", cmid=ack.client_message_id)
    assert op == Opcode.SEND_ACK and (replay.message_id, replay.conversation_seq) == (ack.message_id, ack.conversation_seq)
    _, ack = await a.send_text(b_id, b"via second")
    acks.append(ack)
    st.start_service(first)
    st.wait_ready([first])
    st.stop_service(second)
    _, ack = await a.send_text(b_id, b"via first again")
    acks.append(ack)
    st.start_service(second)
    st.wait_ready([second])
    b = await RawClient.login(st, b_id)
    entries = await wait_for_entries(b, 3)
    assert [e.body for e in entries] == [b"via first", b"via second", b"via first again"]
    seqs = [x.conversation_seq for x in acks]
    assert seqs == sorted(set(seqs))
    assert len({x.message_id for x in acks}) == 3
    writer_ids = {ids.split_message_id(x.message_id)[3] for x in acks}
    assert len(writer_ids) >= 2  # really committed by different writers


async def test_writer_readiness_follows_redis(two_writers):
    st = two_writers
    assert healthz(st, "writer") == 200
    redis_engine = st.engines.redis
    redis_engine.stop()
    try:
        deadline = time.monotonic() + 15
        while healthz(st, "writer") == 200 and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert healthz(st, "writer") == 503
    finally:
        redis_engine.restart()
    deadline = time.monotonic() + 20
    while healthz(st, "writer") != 200 and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    assert healthz(st, "writer") == 200
