"""ShardRegistry contract on a real Redis (qim/stores/registry.py;
docs/decisions/0040-scale-leases-and-fencing.md): node leases, shard grants whose
owner_epoch grows on every change of owner and never resets, renewal reporting lost
shards, expiry by the registry's clock, release on a clean stop; and the fences of the
stores that check the epoch inside their own scripts (mailbox watermark, session and
archive checkpoints): a stale owner's write is refused and changes nothing."""

from __future__ import annotations

import asyncio

import pytest

from qim.dev.redis_engine import start_redis
from qim.errors import EngineError
from qim.infra.redis.client import connect
from qim.stores.errors import NotOwner
from qim.stores.redis.mailboxes import RedisMailboxStore
from qim.stores.redis.registry import RedisShardRegistry
from qim.stores.redis.sessions import RedisSessionStore
from tests.stores.fencing import stale_owner_refused

TTL = 60_000
SHARD = 5


@pytest.fixture(scope="module")
def registry_redis(tmp_path_factory):
    """A Redis of this module's own (no CQL: these stores are Redis only)."""
    try:
        eng = start_redis(tmp_path_factory.mktemp("registry-redis"), die_with_parent=True)
    except EngineError as exc:
        pytest.fail(f"redis could not start: {exc}", pytrace=False)
    yield eng.addr
    eng.stop()


@pytest.fixture
async def redis(registry_redis):
    client = connect(registry_redis)
    await client.flushdb()
    yield client
    await client.aclose()


async def test_grants_raise_the_owner_epoch_on_every_change_of_owner(redis):
    reg = RedisShardRegistry(redis)
    assert (await reg.join("mailbox", "a", "a-1", TTL, "127.0.0.1:1", "")).joined
    assert (await reg.join("mailbox", "b", "b-1", TTL, "127.0.0.1:2", "")).joined
    assert await reg.acquire("mailbox", "a", "a-1", TTL, [0, 1]) == {0: 1, 1: 1}
    assert await reg.acquire("mailbox", "a", "a-1", TTL, [0]) == {0: 1}  # the same owner: same epoch
    assert await reg.acquire("mailbox", "b", "b-1", TTL, [0, 1]) == {}  # held and live
    assert await reg.release("mailbox", "a", "a-1", [0]) == 1
    assert await reg.acquire("mailbox", "b", "b-1", TTL, [0, 1]) == {0: 2}  # released: a new owner, epoch + 1
    beat = await reg.heartbeat("mailbox", "a", "a-1", TTL, {0: 1, 1: 1})
    assert (beat.gone, beat.lost, sorted(beat.live)) == (False, [0], ["a", "b"])
    owners = await reg.owners("mailbox", 3)
    assert [(o.node_id, o.owner_epoch, o.addr, o.live) for o in owners] == [
        ("b", 2, "127.0.0.1:2", True), ("a", 1, "127.0.0.1:1", True), ("", 0, "", False)]
    # the same node id restarted (a new incarnation, once join took the id over) is a new owner
    assert (await reg.join("mailbox", "a", "a-2", TTL, "127.0.0.1:1", "", take_from=("a-1", 1))).joined
    assert await reg.acquire("mailbox", "a", "a-2", TTL, [1]) == {1: 2}
    assert (await reg.heartbeat("mailbox", "a", "a-1", TTL, {1: 1})).gone  # the old incarnation is out
    assert await reg.acquire("mailbox", "a", "a-1", TTL, [2]) == {}  # and may take nothing
    assert [n.node_id for n in await reg.nodes("mailbox")] == ["a", "b"]
    await reg.leave("mailbox", "b", "b-1")
    assert [n.node_id for n in await reg.nodes("mailbox")] == ["a"]
    assert (await reg.owners("mailbox", 1))[0].addr == ""  # its node lease is gone


async def test_a_lease_ends_by_the_registry_clock_and_the_epoch_survives_it(redis):
    reg = RedisShardRegistry(redis)
    await reg.join("session", "a", "a-1", 300, "", "")
    await reg.join("session", "b", "b-1", TTL, "", "")
    assert await reg.acquire("session", "a", "a-1", 300, [SHARD]) == {SHARD: 1}
    assert await reg.acquire("session", "b", "b-1", TTL, [SHARD]) == {}
    await asyncio.sleep(0.4)  # a's leases end unrenewed (a dead or paused node)
    assert [n.node_id for n in await reg.nodes("session")] == ["b"]
    assert await reg.acquire("session", "b", "b-1", TTL, [SHARD]) == {SHARD: 2}
    beat = await reg.heartbeat("session", "a", "a-1", 300, {SHARD: 1})  # a comes back: it lost the shard
    assert beat.lost == [SHARD] and not beat.gone


async def test_join_refuses_a_live_holder_and_takes_a_silent_one_only_at_its_renewal_count(redis):
    reg = RedisShardRegistry(redis)
    assert (await reg.join("fanout", "f", "f-1", TTL, "x:1", "")).joined
    held = await reg.join("fanout", "f", "f-2", TTL, "x:2", "")
    assert (held.joined, held.holder, held.beat, held.addr) == (False, "f-1", 0, "x:1")
    await reg.heartbeat("fanout", "f", "f-1", TTL, {})  # the holder renews: beat 1
    assert not (await reg.join("fanout", "f", "f-2", TTL, "x:2", "", take_from=("f-1", 0))).joined
    assert (await reg.join("fanout", "f", "f-2", TTL, "x:2", "", take_from=("f-1", 1))).joined


async def test_a_stale_mailbox_owner_is_refused_inside_every_write_script(redis):
    mb = RedisMailboxStore(redis)
    seq8 = (1 << 48).to_bytes(8, "big")
    await stale_owner_refused(mb, SHARD, 19000, (seq8, seq8, seq8))
    assert await redis.exists(f"qim:dp:{{s{SHARD}}}:{(b'e' * 16).hex()}") == 0
    assert await redis.hget(f"qim:wm:{{s{SHARD}}}", "blob") is None  # nothing of owner 1 landed
    assert await mb.read_range(0, 7, [19000], -1, 10, 10) == []
    with pytest.raises(NotOwner):  # and it cannot fence the shard back
        await mb.load_watermark(SHARD, fence=1)
    assert await mb.finish(SHARD, 1, b"d" * 16, None, b"W", writer=b"two", fence=2)  # the owner writes


async def test_session_and_archive_checkpoints_refuse_a_stale_owner(redis):
    sessions = RedisSessionStore(redis)
    assert (await sessions.checkpoint_bind(SHARD, "c|t|8", 1)).status == "NEW"
    await sessions.checkpoint_advance(SHARD, "c|t|8", 1, 0, 4)
    assert (await sessions.checkpoint_bind(SHARD, "c|t|8", 2)).offsets == [4]  # taken over at 4
    with pytest.raises(NotOwner) as refused:
        await sessions.project("c|t|8", {SHARD: (1, 4, 9)}, [])
    assert refused.value.shard == SHARD
    with pytest.raises(NotOwner):
        await sessions.checkpoint_advance(SHARD, "c|t|8", 1, 4, 9)
    with pytest.raises(NotOwner):
        await sessions.checkpoint_bind(SHARD, "c|t|8", 1)
    await sessions.project("c|t|8", {SHARD: (2, 4, 9)}, [])
    assert await redis.hget(f"qim:session:ckpt:{{s{SHARD}}}", "p") == b"9"
