"""Device push registrations move with the user's MailboxShard (docs/decisions/0128,
0104; `make test-redis-move`): registered through two session nodes' stack of three
Redis instances, the user's shard moved to another instance by `qimctl redis
move-shard`, then listed again (every device's, the version still growing) and found
only on the target instance. Shard 0: the move-under-traffic test never takes it."""

from __future__ import annotations

import asyncio
import random

from qim.dev.redis_instances import layout_of
from qim.infra.redis.client import connect
from qim.stores.redis.keys import push_key
from tests.e2e.sdkclient import client, close_all
from tests.redismove.movekit import qimctl_move

TENANT, SHARD = 0, 0


async def _listed(c) -> list[tuple[int, str]]:
    return [(r.device_id, r.provider) for r in await c.push.list()]


async def test_push_registrations_move_with_the_users_shard(stack3, tmp_path):
    st, es = stack3, stack3.engines
    st.wait_ready()
    layout = layout_of(es.redis_addrs, es.shard_count)
    user = next(u for u in iter(lambda: random.getrandbits(40) + 1, 0) if layout.user_shard(TENANT, u) == SHARD)
    home = connect(es.redis_addrs[0])
    try:
        source = (await home.hget("qim:placement", f"shard:{SHARD}") or b"").decode() or \
            layout.mailbox[layout.mailbox_index(SHARD)]
    finally:
        await home.aclose()
    target = next(a for a in layout.mailbox if a != source)

    phone, laptop = await client(st, tmp_path, user, 1), await client(st, tmp_path, user, 2)
    await phone.connect()
    await laptop.connect()
    await phone.push.register("fcm", "fcm-token-1", content=False)
    await laptop.push.register("apns", "ab" * 32, apns_topic="com.example.chat", apns_environment="sandbox")
    assert await _listed(laptop) == [(1, "fcm"), (2, "apns")]
    before = laptop.push.version
    await close_all(phone, laptop)

    moved = await asyncio.get_running_loop().run_in_executor(
        None, lambda: qimctl_move(st, "move-shard", "--shard", SHARD, target))
    assert moved.returncode == 0, moved.stdout + moved.stderr

    for addr, expect in ((target, 1), (source, 0)):
        c = connect(addr)
        try:
            assert await c.exists(push_key(TENANT, user)) == expect, addr
        finally:
            await c.aclose()
    phone = await client(st, tmp_path, user, 1, name="again")
    try:
        await phone.connect()  # the shard's new owners serve it (the SDK retries UNAVAILABLE meanwhile)
        assert await _listed(phone) == [(1, "fcm"), (2, "apns")]
        await phone.push.register("fcm", "fcm-token-2")
        assert phone.push.version > before  # the version moved with it: it never goes back
        assert [r.token for r in await phone.push.list()] == ["fcm-token-2", "ab" * 32]
    finally:
        await close_all(phone)
