"""A writer whose clock is hours behind Redis's and the broker's (docs/design.md §3 clock
rules, §5.2 the commit helper; docs/decisions/0017-writer-order-and-time.md, 0032): what
the writer committed is acknowledged, and a retry of it is the same message.

The session stack's writer is restarted with QIM_CLOCK_SKEW_MS (a test knob shifting the
writer's only wall-clock read) 2 h 1 min behind, then restored. Before the fix the commit
helper's expiry was computed as an absolute time from the writer's clock plus the 2 h
TTL and judged by Redis's clock: the hash expired at once, the send got ERROR INTERNAL,
the SDK marked it failed while the recipient held the message, and a resend by the user
made a duplicate. (A writer clock hours ahead cannot run on the session stack: the
cluster's HLC high-water would stay ahead for every later test; tests/infra covers the
broker's side of that case.)
"""

from __future__ import annotations

import os

import redis

from qim.consts import COMMIT_HELPER_TTL_MS
from qim.protocol import Opcode
from qim.sdk import direct_conversation
from tests.e2e.rawclient import RawClient
from tests.e2e.sdkclient import client, close_all
from tests.sdk.realstack import eventually, users

BEHIND_MS = -7_260_000  # 2 h 1 min: more than the commit helper's 2 h TTL


def restart_writer(stack, env: dict) -> None:
    stack.stop_service("writer")
    stack.start_service("writer", env)
    stack.wait_ready(["writer"])


async def test_a_writer_two_hours_behind_acknowledges_what_it_committed(stack, tmp_path):
    restart_writer(stack, {"QIM_CLOCK_SKEW_MS": str(BEHIND_MS)})
    try:
        a, b = users(2)
        conv = direct_conversation(0, a, b)
        ca, cb = await client(stack, tmp_path, a), await client(stack, tmp_path, b)
        await ca.connect()
        await cb.connect()
        await ca.open_direct(b)
        ack = await ca.send_text(conv, "sent while the writer's clock is behind")
        assert ack.conversation_seq == 1
        assert [u.state for u in await ca.unsent(conv)] in ([], ["acked"])

        async def settled() -> bool:
            return await ca.unsent(conv) == []

        await eventually(settled, what="the send settled in the sender's store")
        await eventually(lambda: cb.told.messages(conv), what="the message at the recipient")
        assert [m.body for m in cb.told.messages(conv)] == [b"sent while the writer's clock is behind"]

        # the same send again (a lost reply) is the same message, for the helper's whole TTL
        raw = await RawClient.login(stack, a, device=7)
        cmid = os.urandom(16)
        op, first = await raw.send_text(b, b"retried", cmid=cmid)
        assert op == Opcode.SEND_ACK, first
        op, again = await raw.send_text(b, b"retried", cmid=cmid)
        assert op == Opcode.SEND_ACK, again
        assert (again.message_id, again.conversation_seq) == (first.message_id, first.conversation_seq)
        ttl = stack_redis_pttl(stack, conv, a, cmid)
        assert COMMIT_HELPER_TTL_MS - 120_000 < ttl <= COMMIT_HELPER_TTL_MS, ttl
        await eventually(lambda: len(cb.told.messages(conv)) == 2, what="the retried message once")
        assert [m.body for m in cb.told.messages(conv)] == [b"sent while the writer's clock is behind", b"retried"]
        await raw.close()
        await close_all(ca, cb)
    finally:
        restart_writer(stack, {})


def stack_redis_pttl(stack, conv: bytes, sender: int, cmid: bytes) -> int:
    """PTTL of the commit hash of (sender, cmid), found by SCAN on its sender and cmid
    (the key layout is the store's; this check only needs the key to name both)."""
    r = redis.Redis.from_url(f"redis://{stack.env['QIM_REDIS_ADDR']}")
    try:
        keys = list(r.scan_iter(match=f"qim:commit:*:{sender}:{cmid.hex()}", count=10_000))
        assert len(keys) == 1, keys
        return int(r.pttl(keys[0]))
    finally:
        r.close()

