"""No send of a revoked token commits once the revocation is written (issue 33 item 9;
docs/decisions/0080-revocation-checked-at-commit.md).

The window was the time between `qimctl token revoke` writing the cutoff and the gateway
closing the connection (its PUBLISH reaching the gateway, about 0.5 s in the report):
sends of the revoked device went on committing. Here the cutoff is written and NOT
published, which holds that window open for as long as the test likes: the connection
stays up, and its next direct and group sends are refused UNAUTHENTICATED by the
writer's reserve itself. A retry of a send committed before the revocation still gets
its ACK; another device of the user is not touched until the whole user is revoked.
"""

from __future__ import annotations

import os
import random
import time

from qim.errors import ErrorCode
from qim.infra.redis.client import connect
from qim.protocol import Opcode
from qim.stores.redis.keys import revocation_key
from tests.e2e.chaos import delivered_once
from tests.e2e.rawclient import RawClient
from tests.e2e.test_groups import create, gsend


async def _revoke_unpublished(stack, user: int, device: int) -> None:
    """The cutoff as `qimctl token revoke` writes it (qim/stores/redis/revocations.py), no PUBLISH."""
    client = connect(stack.env["QIM_REDIS_ADDR"])
    try:
        await client.set(revocation_key(0, user, device), int(time.time()), ex=3600)
    finally:
        await client.aclose()


def refused(op: int, reply) -> bool:
    return op == Opcode.ERROR and reply.code == ErrorCode.UNAUTHENTICATED and "revoked" in reply.message


async def test_a_revoked_tokens_sends_are_refused_before_the_kick(stack):
    user, peer, member = (random.getrandbits(40) + 1 for _ in range(3))
    gid = random.getrandbits(62) + 1
    phone = await RawClient.login(stack, user, device=1)
    laptop = await RawClient.login(stack, user, device=2)
    try:
        op, _ = await create(phone, gid, [member])
        assert op == Opcode.GROUP_OK
        first = os.urandom(16)
        op, ack = await phone.send_text(peer, b"before", cmid=first)
        assert op == Opcode.SEND_ACK, ack
        assert (await gsend(phone, gid, b"group before"))[0] == Opcode.SEND_ACK

        await _revoke_unpublished(stack, user, 1)
        op, reply = await phone.send_text(peer, b"after")
        assert refused(op, reply), (op, reply)  # before the fix: SEND_ACK, committed
        op, reply = await gsend(phone, gid, b"group after")
        assert refused(op, reply), (op, reply)
        op, again = await phone.send_text(peer, b"before", cmid=first)  # a retry of a committed send
        assert op == Opcode.SEND_ACK and again.message_id == ack.message_id, again
        assert (await laptop.send_text(peer, b"laptop"))[0] == Opcode.SEND_ACK  # another device: untouched

        await _revoke_unpublished(stack, user, 0)  # the whole user
        assert refused(*await laptop.send_text(peer, b"laptop after"))
        entries = await delivered_once(stack, peer, [b"before", b"laptop"])
        assert not {e.body for e in entries} & {b"after", b"laptop after"}
    finally:
        await phone.close()
        await laptop.close()
