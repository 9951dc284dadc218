"""The PushRegistrationStore contract (qim/stores/push.py; docs/decisions/0128) on real
Redis: one instance, and three instances where users live on different ones (decision
0096). Replace, unregister, the version that only grows, remove-only-the-failed-token
(a re-register racing a provider's 410 survives), revocations hide, many users read at once."""

from __future__ import annotations

import asyncio

import pytest

from qim.proto.v1 import push_pb2
from qim.stores.redis.backend import RedisBackend
from qim.stores.redis.keys import push_key
from qim.stores.redis.revocations import RevocationStore
from tests.fixtures import redis_instances
from tests.stores.conftest import redis3_layout

TENANT = 7
HOUR = 3600


def reg(device: int, token: str = "ab" * 32, iat: int = 1_000, content: bool = True) -> push_pb2.PushRegistration:
    """An APNs registration of `device` made with a token issued at `iat` (unix s)."""
    settings = push_pb2.PushRegister(provider=push_pb2.PUSH_PROVIDER_APNS, token=token, apns_topic="com.example.app",
                                     apns_environment=push_pb2.APNS_ENVIRONMENT_SANDBOX, content=content)
    return push_pb2.PushRegistration(device_id=device, settings=settings, registered_at_ms=5, token_iat=iat)


@pytest.fixture(scope="module", params=["redis", "redis3"])
def backend_addr(request, tmp_path_factory):
    """One Redis, or the three-instance layout of tests/stores ("redis3")."""
    n = 1 if request.param == "redis" else 3
    root = tmp_path_factory.mktemp(f"push-{request.param}")
    with redis_instances(root / f"r{i}" for i in range(n)) as engines:
        addrs = [e.addr for e in engines]
        yield addrs[0] if n == 1 else redis3_layout(addrs)


@pytest.fixture
async def backend(backend_addr):
    b = RedisBackend(backend_addr)
    for client in b.topology.clients.values():
        await client.flushall()
    yield b
    await b.close()


async def test_put_replaces_one_per_device_and_the_version_only_grows(backend):
    store = backend.push
    assert await store.registrations(TENANT, 1) == ([], 0)
    v1 = await store.put(TENANT, 1, reg(10))
    v2 = await store.put(TENANT, 1, reg(11, token="cd" * 32))
    v3 = await store.put(TENANT, 1, reg(10, token="ef" * 32, content=False))  # re-register replaces
    assert 0 < v1 < v2 < v3
    regs, version = await store.registrations(TENANT, 1)
    assert version == v3 and [r.device_id for r in regs] == [10, 11]
    assert regs[0].settings.token == "ef" * 32 and regs[0].settings.content is False
    removed, v4 = await store.unregister(TENANT, 1, 10)
    assert removed and v4 > v3
    assert await store.unregister(TENANT, 1, 10) == (False, v4)  # nothing there: the version stays
    assert [r.device_id for r in (await store.registrations(TENANT, 1))[0]] == [11]
    await store.unregister(TENANT, 1, 11)
    regs, v5 = await store.registrations(TENANT, 1)
    assert regs == [] and v5 > v4  # empty, and still never back to 0
    assert await store.put(TENANT, 1, reg(10)) > v5


async def test_remove_only_while_the_failed_token_is_stored(backend):
    store = backend.push
    await store.put(TENANT, 2, reg(1, token="aa" * 32))
    # the device re-registered a new token while the provider's 410 for the old one was on its way
    await store.put(TENANT, 2, reg(1, token="bb" * 32))
    assert not await store.remove(TENANT, 2, 1, "aa" * 32)
    assert [r.settings.token for r in (await store.registrations(TENANT, 2))[0]] == ["bb" * 32]
    assert await store.remove(TENANT, 2, 1, "bb" * 32)  # the stored token failed: gone
    assert (await store.registrations(TENANT, 2))[0] == []
    assert not await store.remove(TENANT, 2, 1, "bb" * 32)


async def test_racing_re_register_and_remove_leave_the_new_token_or_nothing_of_the_old(backend):
    store = backend.push
    for i in range(20):
        old, new = f"{i:02x}" * 32, f"{i + 100:02x}" * 32
        await store.put(TENANT, 3, reg(1, token=old))
        await asyncio.gather(store.remove(TENANT, 3, 1, old), store.put(TENANT, 3, reg(1, token=new)))
        assert [r.settings.token for r in (await store.registrations(TENANT, 3))[0]] == [new]


async def test_a_revocation_hides_the_registrations_made_with_older_tokens(backend):
    store, revocations = backend.push, RevocationStore(backend.topology)
    await store.put(TENANT, 4, reg(1, iat=1_000))
    await store.put(TENANT, 4, reg(2, iat=1_000))
    await revocations.revoke(TENANT, 4, 1, 1_500, HOUR)  # device 1 only
    assert [r.device_id for r in (await store.registrations(TENANT, 4))[0]] == [2]
    assert [r.device_id for r in (await store.registrations_of(TENANT, [4]))[4]] == [2]
    await store.put(TENANT, 4, reg(1, iat=2_000))  # a new login's token registers again: live
    assert [r.device_id for r in (await store.registrations(TENANT, 4))[0]] == [1, 2]
    await revocations.revoke(TENANT, 4, 0, 2_500, HOUR)  # the whole user
    assert (await store.registrations(TENANT, 4))[0] == [] and (await store.registrations_of(TENANT, [4]))[4] == []


async def test_registrations_of_many_users_on_their_instances(backend):
    store, t = backend.push, backend.topology
    users = list(range(100, 124))
    for u in users:
        for d in range(1, 1 + u % 3):
            await store.put(TENANT, u, reg(d, token=f"{u:04x}" * 16))
    if len(t.clients) > 1:  # the users really are spread over the instances
        assert len({id(t.user(TENANT, u)) for u in users}) > 1
        for u in users:
            assert await t.user(TENANT, u).exists(push_key(TENANT, u)) == (u % 3 > 0)
    got = await store.registrations_of(TENANT, users + [999, users[0]])
    assert set(got) == set(users) | {999} and got[999] == []
    for u in users:
        assert [r.device_id for r in got[u]] == list(range(1, 1 + u % 3))
        assert all(r.settings.token == f"{u:04x}" * 16 for r in got[u])


async def test_a_corrupt_value_is_store_corrupt(backend):
    from qim.stores.errors import StoreCorrupt

    await backend.topology.user(TENANT, 5).hset(push_key(TENANT, 5), "1", b"\xff\xff not a registration")
    with pytest.raises(StoreCorrupt):
        await backend.push.registrations(TENANT, 5)


async def test_round_trips_one_per_write_and_one_per_instance_per_read(backend, monkeypatch):
    from redis.asyncio.client import Pipeline

    from qim.infra.redis.pipe import PipelinedRedis

    store, t = backend.push, backend.topology
    users = list(range(200, 216))
    for u in users:  # also loads the scripts: no NOSCRIPT reload in the counts below
        await store.put(TENANT, u, reg(1))
        await store.remove(TENANT, u, 9, "none")
    count = 0

    def counting(fn):
        async def counted(*args, **kw):
            nonlocal count
            count += 1
            return await fn(*args, **kw)
        return counted

    for client in t.clients.values():
        monkeypatch.setattr(client, "execute_command", counting(client.execute_command))
    monkeypatch.setattr(Pipeline, "execute", counting(Pipeline.execute))
    monkeypatch.setattr(PipelinedRedis, "execute", counting(PipelinedRedis.execute))
    await store.put(TENANT, users[0], reg(2))
    assert count == 1
    assert await store.remove(TENANT, users[0], 2, "ab" * 32) and count == 2
    count = 0
    got = await store.registrations_of(TENANT, users)
    instances = len({id(t.user(TENANT, u)) for u in users})
    assert all(len(got[u]) == 1 for u in users)
    assert count == instances + 1  # one pipelined HGETALL per instance, one MGET of the cutoffs
