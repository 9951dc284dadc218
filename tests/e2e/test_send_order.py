"""Send order end to end (docs/design.md §3: one device's sends to one
conversation get conversation_seq in submission order; docs/decisions/0017).

One connection pipelines hundreds of SEND_MESSAGE frames without waiting for ACKs: the
ACKs' conversation_seq follow submission order, the Outbox holds the conversation in
conversation_seq order, and the recipient's mailbox shows that order. The
previous_client_message_id rule refuses a send whose predecessor holds no commit state.
"""

from __future__ import annotations

import asyncio
import os
import random

from qim._core import ids
from qim.errors import ErrorCode
from qim.proto.v1 import message_pb2
from qim.protocol import Opcode
from tests.e2e.outboxread import first_occurrences, outbox_end, outbox_records
from tests.e2e.rawclient import RawClient, parse_reply, wait_for_entries
from tests.e2e.test_groups import create, gconv

SENDS = 400


async def pipeline(client: RawClient, messages: list[message_pb2.SendMessage], timeout: float = 60.0) -> list:
    """Send every message at once (no waiting), then collect the replies by request id;
    returns (opcode, reply) in submission order."""
    first = client._rid + 1
    for i, msg in enumerate(messages):
        client.stream.send(Opcode.SEND_MESSAGE, first + i, msg.SerializeToString())
    client._rid += len(messages)
    replies: dict[int, tuple] = {}
    while len(replies) < len(messages):
        item = await asyncio.wait_for(client.stream.read_frame(), timeout)
        assert item is not None, "connection closed"
        op, rid, body = item
        if rid:
            replies[rid] = (op, parse_reply(op, body))
    return [replies[first + i] for i in range(len(messages))]


def direct(sender: int, peer: int, body: bytes, **kw) -> message_pb2.SendMessage:
    return message_pb2.SendMessage(client_message_id=kw.pop("cmid", None) or os.urandom(16),
                                   conversation_id=ids.conversation_id_direct(0, sender, peer),
                                   recipient_user_id=peer, message_type=1, body=body, **kw)


def assert_in_order(results: list) -> list:
    assert all(op == Opcode.SEND_ACK for op, _ in results), [r for op, r in results if op != Opcode.SEND_ACK][:3]
    seqs = [ack.conversation_seq for _, ack in results]
    inversions = sum(1 for a, b in zip(seqs, seqs[1:]) if b <= a)
    assert inversions == 0, f"{inversions} of {len(seqs)} ACKs out of submission order"
    created = [ack.created_at_ms for _, ack in results]
    assert created == sorted(created)  # created_at never decreases as conversation_seq grows
    return seqs


async def test_pipelined_sends_are_sequenced_and_published_in_submission_order(stack, engines):
    sender, peer = random.getrandbits(40) + 1, random.getrandbits(40) + 1
    conv = ids.conversation_id_direct(0, sender, peer)
    start = outbox_end(engines.kafka_bootstrap)
    client = await RawClient.login(stack, sender)
    bodies = [b"order %04d" % i for i in range(SENDS)]
    seqs = assert_in_order(await pipeline(client, [direct(sender, peer, b) for b in bodies]))
    records = outbox_records(engines.kafka_bootstrap, start, conv, lambda r: len(first_occurrences(r)) >= SENDS)
    published = first_occurrences(records)
    assert [r.conversation_seq for r in published] == seqs  # Outbox order = conversation_seq order
    assert [r.body for r in published] == bodies
    receiver = await RawClient.login(stack, peer)
    entries = await wait_for_entries(receiver, SENDS, timeout=60)
    assert [e.body for e in entries] == bodies  # the recipient sees conversation_seq order
    assert [e.conversation_seq for e in entries] == seqs
    await client.close(), await receiver.close()


async def test_pipelined_group_sends_keep_submission_order(stack, engines):
    owner, member = random.getrandbits(40) + 1, random.getrandbits(40) + 1
    gid = random.getrandbits(62) + 1
    client = await RawClient.login(stack, owner)
    op, _ = await create(client, gid, [member])
    assert op == Opcode.GROUP_OK
    start = outbox_end(engines.kafka_bootstrap)
    msgs = [message_pb2.SendMessage(client_message_id=os.urandom(16), conversation_id=gconv(gid), message_type=1,
                                    body=b"g%03d" % i) for i in range(150)]
    seqs = assert_in_order(await pipeline(client, msgs))
    records = first_occurrences(outbox_records(engines.kafka_bootstrap, start, gconv(gid),
                                               lambda r: len(first_occurrences(r)) >= len(msgs)))
    assert [r.conversation_seq for r in records] == seqs
    await client.close()


async def test_previous_client_message_id_is_refused_until_the_previous_send_is_sequenced(stack):
    sender, peer = random.getrandbits(40) + 1, random.getrandbits(40) + 1
    client = await RawClient.login(stack, sender)
    first_cmid, second_cmid = os.urandom(16), os.urandom(16)
    second = direct(sender, peer, b"second", cmid=second_cmid, previous_client_message_id=first_cmid)
    op, err = await client.request(Opcode.SEND_MESSAGE, second.SerializeToString())
    assert op == Opcode.ERROR and err.code == ErrorCode.UNAVAILABLE, err  # retryable
    assert err.message == "previous send not yet sequenced"
    op, first = await client.send_text(peer, b"first", cmid=first_cmid)
    assert op == Opcode.SEND_ACK
    op, ack = await client.request(Opcode.SEND_MESSAGE, second.SerializeToString())  # the retry now passes
    assert op == Opcode.SEND_ACK and ack.conversation_seq > first.conversation_seq
    # the identity leaves the field out: a retry naming another previous send replays
    other = direct(sender, peer, b"second", cmid=second_cmid, previous_client_message_id=os.urandom(16))
    op, again = await client.request(Opcode.SEND_MESSAGE, other.SerializeToString())
    assert op == Opcode.SEND_ACK and (again.message_id, again.conversation_seq) == (ack.message_id, ack.conversation_seq)
    own = os.urandom(16)
    for cmid, bad in ((None, b"\x01" * 8), (None, bytes(16)), (own, own)):  # wrong length, zero, itself
        msg = direct(sender, peer, b"bad", cmid=cmid, previous_client_message_id=bad)
        op, err = await client.request(Opcode.SEND_MESSAGE, msg.SerializeToString())
        assert op == Opcode.ERROR and err.code == ErrorCode.INVALID_ARGUMENT, (bad, err)
    await client.close()
