"""ClockLeaseStore contract (docs/design.md §3 message_id; docs/decisions/0017): writer_id
leases, fresh windows above the cluster high-water, extensions only by the holder,
ceilings that only grow."""

from __future__ import annotations

import pytest

from qim.stores.errors import LeaseLost

NOW = 1_800_000_000_000


async def test_writer_ids_are_leased_once(stores):
    leases = stores.leases
    first = await leases.take_writer_id(1, "token-a", 60_000)
    second = await leases.take_writer_id(1, "token-b", 60_000)
    assert first == 1 and second == 2
    assert await leases.take_writer_id(1, "token-c", 60_000, writer_id=1) == 1  # configured: taken over
    assert not await leases.renew(1, first, "token-a", 60_000, NOW)  # no longer ours
    assert await leases.renew(1, first, "token-c", 60_000, NOW)


async def test_windows_start_above_every_published_ceiling(stores):
    leases = stores.leases
    w1 = await leases.lease_window(1, 1, NOW, 60_000, 0, 5_000)
    assert (w1.start, w1.end, w1.ceiling) == (NOW, NOW + 60_000, NOW + 5_000)
    w2 = await leases.lease_window(1, 2, NOW - 600_000, 60_000, 0, 5_000)  # a clock 10 min behind
    assert w2.start == NOW + 5_001 and w2.ceiling == w2.start + 1
    assert await leases.take_writer_id(1, "t", 60_000, writer_id=1) == 1
    assert await leases.renew(1, 1, "t", 60_000, NOW + 90_000)  # publishes a higher ceiling
    w3 = await leases.lease_window(1, 3, NOW, 60_000, 0, 5_000)
    assert w3.start == NOW + 90_001
    ext = await leases.lease_window(1, 1, NOW + 30_000, 60_000, w1.end, 5_000)  # the holder extends
    assert (ext.start, ext.end, ext.ceiling) == (None, NOW + 120_000, None)
    with pytest.raises(LeaseLost):
        await leases.lease_window(1, 1, NOW, 60_000, w1.end, 5_000)  # the end moved: not ours any more
