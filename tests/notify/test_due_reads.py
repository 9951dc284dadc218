"""The NotificationService's verdicts read a batch's read positions and conversation
states in one round trip per Redis instance, not two per recipient (docs/decisions/0145:
at 1,000 devices a batch of 200 records to 200 users cost 400 round trips before its
registrations were even read), on a real Redis, and the batched read still gives each
(user, conversation) its own position and mute (qim/services/notify/due.py)."""

from __future__ import annotations

import secrets
import time
from types import SimpleNamespace

import pytest
import redis.asyncio as aioredis

from qim.infra.redis.client import connect
from qim.proto.v1 import message_pb2, push_pb2
from qim.services.notify.due import Candidate, verdicts
from qim.stores.convstate import MUTE_FOREVER, StateChange
from qim.stores.redis.convstate import RedisConversationStates
from qim.stores.redis.push import RedisPushRegistrations
from qim.stores.redis.sessions import RedisReadPositions

T, USERS, SEQ = 0, 40, 5
CONV = bytes([1]) + b"\x05" * 15


class Records:
    """The message store's resolve: every message a NORMAL record (the records' own
    reads are the message store's, not what this test counts)."""

    async def resolve(self, tenant, refs, state_refs):
        return ([message_pb2.MessageRecord(sender_id=1, conversation_seq=SEQ) for _ in refs],
                [message_pb2.MESSAGE_STATE_NORMAL for _ in state_refs])


@pytest.fixture
async def stores(private_redis):
    client = connect(private_redis.addr)
    yield SimpleNamespace(messages=Records(), reads=RedisReadPositions(client),
                          convstates=RedisConversationStates(client), push=RedisPushRegistrations(client))
    await client.aclose()


def counting(monkeypatch) -> list[str]:
    """Every round trip redis-py makes from now on: a command, or a pipeline's execute."""
    trips: list[str] = []
    command, execute = aioredis.Redis.execute_command, aioredis.client.Pipeline.execute

    async def one(self, *args, **kw):
        trips.append(str(args[0]))
        return await command(self, *args, **kw)

    async def batch(self, *args, **kw):
        trips.append("PIPELINE")
        return await execute(self, *args, **kw)
    monkeypatch.setattr(aioredis.Redis, "execute_command", one)
    monkeypatch.setattr(aioredis.client.Pipeline, "execute", batch)
    return trips


async def test_a_batch_reads_positions_and_mutes_in_one_round_trip_each_user_its_own(stores, monkeypatch):
    users = [1000 + i for i in range(USERS)]
    for u in users:
        settings = push_pb2.PushRegister(provider=push_pb2.PUSH_PROVIDER_APNS, token=secrets.token_hex(32))
        await stores.push.put(T, u, push_pb2.PushRegistration(device_id=1, settings=settings,
                                                              registered_at_ms=1, token_iat=int(time.time())))
    await stores.reads.mark_read(T, users[0], CONV, SEQ)  # read on another device
    await stores.convstates.change(T, users[1], CONV, StateChange(muted_until=MUTE_FOREVER))
    now = int(time.time() * 1000)
    cands = [Candidate(T, u, CONV, u.to_bytes(16, "big"), SEQ, now) for u in users]
    trips = counting(monkeypatch)
    got = await verdicts(stores, cands, lambda t, u, d: False, now)
    assert {d.candidate.user: d.outcome for d in got} == {
        **{u: "due" for u in users}, users[0]: "suppressed_read", users[1]: "suppressed_muted"}
    # the registrations (one pipeline) and their revocation cutoffs (one MGET), the
    # positions and states (one pipeline): never a round trip per recipient
    assert len(trips) <= 3, f"{len(trips)} round trips for {USERS} recipients: {trips[:8]}"
