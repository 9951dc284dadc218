"""Time never goes backwards (docs/design.md §3: "a message's created_at
never decreases as conversation_seq grows (also across writer restarts and clock
steps)"; docs/decisions/0017).

A private stack with two writers. (1) Both writers restart with their clocks 5 minutes
behind (QIM_CLOCK_SKEW_MS, a test knob): created_at and message_id keep growing with
conversation_seq and the conversation with the newest message tops the list. (2) A
writer whose clock runs a minute ahead sends into a conversation, then the other writer
does: the other writer's message is not older (HLC receive rule via the reserve's
refusal).
"""

from __future__ import annotations

import asyncio
import random

import pytest

from qim._core import ids
from qim.errors import RequestError
from qim.net.rpc import RpcClient, parse_error
from qim.net.tls import TlsContexts
from qim.proto.v1 import internal_pb2, message_pb2
from qim.protocol import Opcode
from tests.e2e.rawclient import RawClient, wait_for_entries
from tests.e2e.sessionclient import entry_when, sessions
from tests.e2e.test_groups import history
from tests.fixtures import running_stack

BEHIND_MS = -300_000


@pytest.fixture(scope="module")
def two_writers(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("hlc"), writers=2) as st:
        yield st


def restart_writers(stack, names, env: dict) -> None:
    for name in names:
        stack.stop_service(name)
    for name in names:
        stack.start_service(name, env)
    stack.wait_ready(list(names))


def time_order(acks) -> list[tuple[int, bytes]]:
    return [(a.created_at_ms, a.message_id) for a in sorted(acks, key=lambda a: a.conversation_seq)]


async def test_writers_restarted_with_the_clock_behind_keep_time_moving_forward(two_writers):
    me, older_peer, newer_peer = (random.getrandbits(40) + 1 for _ in range(3))
    client = await RawClient.login(two_writers, me)
    acks = {older_peer: [], newer_peer: []}
    for peer in (older_peer, newer_peer):  # the newer_peer conversation tops the list
        for i in range(3):
            op, ack = await client.send_text(peer, b"before %d" % i)
            assert op == Opcode.SEND_ACK
            acks[peer].append(ack)
    restart_writers(two_writers, ["writer", "writer2"], {"QIM_CLOCK_SKEW_MS": str(BEHIND_MS)})
    for i in range(3):  # now the older conversation gets the newest message
        op, ack = await client.send_text(older_peer, b"after %d" % i)
        assert op == Opcode.SEND_ACK, ack
        acks[older_peer].append(ack)
    for peer, sent in acks.items():
        order = time_order(sent)
        assert order == sorted(order), f"time went backwards in the conversation with {peer}"
    assert acks[older_peer][-1].created_at_ms >= acks[newer_peer][-1].created_at_ms
    conv = ids.conversation_id_direct(0, me, older_peer)
    await entry_when(client, conv, lambda e: e.last_message.message_id == acks[older_peer][-1].message_id)
    # newest message first. The order is the projection's (the conversation set's scores)
    # and an entry's last_message is read from the message store, so a page taken between
    # the commit and the projection shows the new message at the old place: wait for the
    # order, which never comes if created_at went backwards
    want = [conv, ids.conversation_id_direct(0, me, newer_peer)]
    deadline = asyncio.get_running_loop().time() + 10
    while (listed := [e.conversation_id for e in await sessions(client)])[:2] != want:
        assert asyncio.get_running_loop().time() < deadline, f"the newest conversation is not first: {listed}"
        await asyncio.sleep(0.1)
    op, page = await history(client, conv, peer=older_peer, newer=True)
    stamps = [(i.created_at_ms, i.message_id) for i in page.items]
    assert len(stamps) == 6 and stamps == sorted(stamps)
    await client.close()


async def direct_send(stack, addr: str, sender: int, peer: int, body: bytes) -> message_pb2.SendAck:
    """SEND_MESSAGE straight to one writer's internal RPC (bypassing gateway routing),
    over mutual TLS with the gateway's certificate (WRITER_SEND is a gateway's call)."""
    msg = message_pb2.SendMessage(client_message_id=random.randbytes(16),
                                  conversation_id=ids.conversation_id_direct(0, sender, peer),
                                  recipient_user_id=peer, message_type=1, body=body)
    req = internal_pb2.WriterSend(actor=internal_pb2.Actor(tenant_id=bytes(16), user_id=sender, device_id=1),
                                  upstream=msg.SerializeToString(), opcode=Opcode.SEND_MESSAGE)
    rpc = RpcClient(addr, tls=TlsContexts(stack.tls_files("gateway")), expect_service="writer")
    try:
        op, body = await rpc.call(Opcode.WRITER_SEND, req.SerializeToString())
    finally:
        await rpc.close()
    if op == Opcode.ERROR:
        raise parse_error(body)
    assert op == Opcode.SEND_ACK
    return message_pb2.SendAck.FromString(body)


async def test_a_writer_behind_another_does_not_write_older_times_into_a_conversation(two_writers):
    restart_writers(two_writers, ["writer2"], {"QIM_CLOCK_SKEW_MS": "60000"})  # a minute ahead
    sender, peer = random.getrandbits(40) + 1, random.getrandbits(40) + 1
    ahead = two_writers.instance_env["writer2"]["QIM_WRITER_LISTEN"]
    behind = two_writers.instance_env["writer"]["QIM_WRITER_LISTEN"]
    first = await direct_send(two_writers, ahead, sender, peer, b"from the writer ahead")
    try:
        second = await direct_send(two_writers, behind, sender, peer, b"from the writer behind")
    except RequestError as exc:
        pytest.fail(f"the writer behind refused instead of catching up: {exc}")
    assert second.conversation_seq > first.conversation_seq
    assert (second.created_at_ms, second.message_id) > (first.created_at_ms, first.message_id)


async def test_a_writer_two_hours_ahead_of_the_broker_acknowledges_its_sends(two_writers):
    """The writer stamps its Outbox records with its own clock, as librdkafka does with the
    host's; with CreateTime topics Kafka 4 refused every record more than 1 h ahead of the
    broker (message.timestamp.after.max.ms), so this writer committed nothing. QIM topics
    are LogAppendTime: the broker's clock stamps them (docs/decisions/0032). Last in this
    module: the stack's HLC high-water stays 2 h ahead afterwards."""
    restart_writers(two_writers, ["writer2"], {"QIM_CLOCK_SKEW_MS": "7260000"})
    sender, peer = random.getrandbits(40) + 1, random.getrandbits(40) + 1
    ahead = two_writers.instance_env["writer2"]["QIM_WRITER_LISTEN"]
    try:
        first = await direct_send(two_writers, ahead, sender, peer, b"from a writer 2 h ahead")
        again = await direct_send(two_writers, ahead, sender, peer, b"and a second one")
    except RequestError as exc:
        pytest.fail(f"the writer ahead could not commit: {exc}")
    assert again.conversation_seq == first.conversation_seq + 1
    client = await RawClient.login(two_writers, peer)
    got = await wait_for_entries(client, 2)
    assert [e.body for e in got] == [b"from a writer 2 h ahead", b"and a second one"]
    await client.close()
