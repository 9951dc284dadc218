"""Direct messages beside a large group's burst keep every order (issue 41, decision
0142): a 300-member group's messages and direct messages to one of its members, all
pipelined at once, on the real stack. The member pulls with its cursor while they
arrive: nothing ever appears at or below a cursor it already passed (a final pull from
0 is exactly the concatenation of its incremental pulls), and each conversation's
entries are in conversation_seq order with every message once. Whether a direct record
overtook group records here depends on the machine's pace; tests/mailbox/test_overtake.py
makes it happen deterministically."""

from __future__ import annotations

import asyncio
import os
import random

from qim._core import ids
from qim.proto.v1 import message_pb2
from qim.protocol import Opcode
from tests.e2e.rawclient import RawClient
from tests.e2e.test_groups import create, gconv

GROUP_SENDS, DIRECT_SENDS = 60, 30
DEADLINE_S = 90.0  # a loaded machine; the pulls poll until everything arrived


async def pipelined(client: RawClient, messages: list[message_pb2.SendMessage]) -> list[int]:
    """Send every message at once, then read the replies; the conversation_seq of each ACK."""
    rids = []
    for m in messages:
        client._rid += 1
        rids.append(client._rid)
        client.stream.send(Opcode.SEND_MESSAGE, client._rid, m.SerializeToString())
    acks: dict[int, int] = {}
    while len(acks) < len(rids):
        item = await asyncio.wait_for(client.stream.read_frame(), DEADLINE_S)
        assert item is not None, "connection closed"
        op, rid, body = item
        if rid == 0:
            continue  # a push
        assert op == Opcode.SEND_ACK, (op, body)
        acks[rid] = message_pb2.SendAck.FromString(body).conversation_seq
    return [acks[r] for r in rids]


async def test_direct_and_group_orders_hold_while_a_large_group_bursts(stack):
    base = random.getrandbits(40) + 1
    owner, member, peer = base, base + 1, base + 2
    made_up = [base + 10 + i for i in range(297)]  # members who never connect
    gid = random.getrandbits(40) + 1
    a, b, c = [await RawClient.login(stack, u) for u in (owner, member, peer)]
    op, _ = await create(a, gid, [owner, member, *made_up])
    assert op == Opcode.GROUP_OK
    conv = gconv(gid)
    group = [message_pb2.SendMessage(client_message_id=os.urandom(16), conversation_id=conv, message_type=1,
                                     body=b"g%03d" % i) for i in range(GROUP_SENDS)]
    direct = [message_pb2.SendMessage(client_message_id=os.urandom(16), recipient_user_id=member, message_type=1,
                                      conversation_id=_direct(peer, member), body=b"d%03d" % i)
              for i in range(DIRECT_SENDS)]
    seen: list = []
    cursor = 0

    async def pull_while_arriving() -> None:
        nonlocal cursor
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEADLINE_S
        while sum(e.message_type != 4 for e in seen) < GROUP_SENDS + DIRECT_SENDS:
            assert loop.time() < deadline, f"only {len(seen)} entries arrived"
            got, cursor = await b.pull_all(cursor)
            assert all(e.mailbox_seq > s.mailbox_seq for e in got for s in seen[-1:]), "an entry below the cursor"
            seen.extend(got)
            await asyncio.sleep(0.05)

    puller = asyncio.get_running_loop().create_task(pull_while_arriving())
    group_seqs, direct_seqs = await asyncio.gather(pipelined(a, group), pipelined(c, direct))
    await puller
    assert group_seqs == sorted(group_seqs) and direct_seqs == sorted(direct_seqs)  # one sender, submission order

    everything, _ = await b.pull_all(0)  # nothing appeared later below a cursor the member passed
    assert [(e.mailbox_seq, e.event_id) for e in everything] == [(e.mailbox_seq, e.event_id) for e in seen]
    for conversation, sent in ((conv, group), (_direct(peer, member), direct)):
        mine = [e for e in everything if e.conversation_id == conversation and e.message_type != 4]
        assert [e.body for e in mine] == [m.body for m in sent]  # every message once, in sent order
        assert [e.conversation_seq for e in mine] == sorted({e.conversation_seq for e in mine})
    owned, _ = await a.pull_all(0)  # the sender's own mailbox: the group in order too
    assert [e.body for e in owned if e.message_type != 4] == [m.body for m in group]
    for client in (a, b, c):
        await client.close()


def _direct(x: int, y: int) -> bytes:
    return ids.conversation_id_direct(0, x, y)
