"""GroupMutes (qim/stores/redis/mutes.py; docs/decisions/0127-group-mute.md) on the
"redis3" layout (three standalone instances): the mute lives beside the group's meta on
the core instance of its commit bucket (not the home, where the listing is), the
reserving script of a group send refuses it (Muted: POLICY_REFUSED with the message)
in the same call that checks membership, send_view reads it in its one round trip, an
unmute or the end lets the next send commit, a missing group is NotFound."""

from __future__ import annotations

import asyncio
import time

import pytest

from qim._core import ids
from qim.errors import ErrorCode
from qim.stores.commits import GroupSendCheck
from qim.stores.errors import Muted, NotFound
from qim.stores.redis.keys import CommitKeys
from qim.stores.redis.mutes import GroupMutes
from tests.stores.conftest import BACKENDS, _wipe, group

TENANT = 7


@pytest.fixture
async def redis3(store_engines):
    """The three-instance Redis stores, emptied."""
    backend = BACKENDS["redis3"](store_engines)
    await _wipe("redis3", backend)
    yield backend
    await backend.close()


def off_home(backend) -> int:
    """A group_id whose commit bucket is on a core instance other than the home."""
    t = backend.topology
    for gid in range(1, 10_000):
        if t.core(CommitKeys(TENANT, ids.conversation_id_group(TENANT, gid)).bucket) is not t.home:
            return gid
    raise AssertionError("every bucket on the home instance")


async def test_a_mute_refuses_sends_at_the_reserve_until_unmuted_or_its_end(redis3):
    gid = off_home(redis3)
    g = group(redis3, TENANT, gid)
    await g.change(5, "create", [5, 6], joins=[5, 6], group_id=gid)  # version 1
    mutes = GroupMutes(redis3.topology)
    await mutes.mute(TENANT, gid, 6, 0, "flooding 刷屏", "op-a")
    with pytest.raises(Muted) as refused:
        await g.send(6, b"muted", group=GroupSendCheck(1, 6))
    assert refused.value.code == ErrorCode.POLICY_REFUSED
    assert str(refused.value.message) == "you are muted in this group by a moderator: flooding 刷屏"
    assert (await g.send(5, b"the owner", group=GroupSendCheck(1, 5))).fresh  # only the muted one
    view = await redis3.groups.send_view(TENANT, g.conversation_id, 6)
    assert view.muted(int(time.time() * 1000)) == refused.value.message
    assert [(m.group_id, m.user, m.until_ms, m.operator) for m in await mutes.listing(gid)] == [(gid, 6, 0, "op-a")]

    assert await mutes.unmute(TENANT, gid, 6) is True
    assert (await g.send(6, b"unmuted", group=GroupSendCheck(1, 6))).fresh
    assert await mutes.unmute(TENANT, gid, 6) is False
    assert await mutes.listing() == []

    end = int(time.time() * 1000) + 1500
    await mutes.mute(TENANT, gid, 6, end, "cool down", "op-a")
    with pytest.raises(Muted, match="until .* UTC: cool down"):
        await g.send(6, b"inside", group=GroupSendCheck(1, 6))
    await asyncio.sleep(max(0.0, end / 1000 - time.time()) + 0.3)
    assert (await g.send(6, b"after the end", group=GroupSendCheck(1, 6))).fresh
    assert (await redis3.groups.send_view(TENANT, g.conversation_id, 6)).muted(int(time.time() * 1000)) is None
    assert await mutes.listing() == []  # an ended mute is not listed


async def test_no_mute_in_a_group_that_does_not_exist(redis3):
    with pytest.raises(NotFound):
        await GroupMutes(redis3.topology).mute(TENANT, off_home(redis3), 6, 0, "x", "op-a")
