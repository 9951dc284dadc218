"""What the CQL MailboxStore adds to the MailboxStore contract (docs/decisions/0102),
on the "cqlmbx" backend (tests/stores/conftest.py): owner fencing by the frontier row of
the highest owner_epoch, write timestamps that let the highest frontier and the earliest
dispatch observation win in any arrival order, and the start-up refusals of
QIM_MAILBOX_STORE=cql."""

from __future__ import annotations

import pytest

from qim.config.env import Env
from qim.config.tier import TierConfig
from qim.consts import DAY_MS, WM_LAYOUT_V1
from qim.errors import ConfigError
from qim.stores.errors import NotOwner
from qim.stores.mailboxes import FRESH, RESUME, FusedRecord
from tests.stores.conftest import MAILBOX_BACKENDS, _wipe
from tests.stores.fencing import stale_owner_refused

SHARD, DAY = 5, 19000


def seq(offset: int) -> bytes:
    return ((1 << 48) | offset).to_bytes(8, "big")


@pytest.fixture
async def mb(store_engines):
    """The CQL MailboxStore over emptied tables."""
    stores = MAILBOX_BACKENDS["cqlmbx"](store_engines)
    await _wipe("cqlmbx", stores)
    yield stores.mailboxes
    await stores.close()


async def test_a_stale_owner_is_refused_before_it_writes_and_cannot_fence_back(mb):
    await stale_owner_refused(mb, SHARD, DAY, (seq(0), seq(1), seq(2)))
    assert await mb.read_range(0, 7, [DAY], -1, 10, 10) == []  # nothing of owner 1 landed
    assert await mb.begin(SHARD, b"e" * 16, b"g" * 32, 1, seq(1), fence=2) == (FRESH, seq(1))
    with pytest.raises(NotOwner):
        await mb.load_watermark(SHARD, fence=1)
    assert await mb.finish(SHARD, 1, b"d" * 16, None, b"W", writer=b"two", fence=2)
    assert await mb.load_watermark(SHARD) == (b"W", 1)


async def test_a_stale_owners_late_frontier_write_is_never_read(mb):
    """Owner 1 passed its fence check just before owner 2 fenced; its frontier write
    lands afterwards, on its own lower-epoch row: the shard's W stays owner 2's."""
    await mb.load_watermark(SHARD, fence=1)
    assert await mb.finish(SHARD, 1, b"d" * 16, None, b"W1", writer=b"one", fence=1)
    assert await mb.load_watermark(SHARD, fence=2) == (b"W1", 1)  # owner 2 continues from W1
    await mb._frontier.write(SHARD, 1, b"W-late", WM_LAYOUT_V1, 1, b"one", 1000)  # owner 1's write, landing late
    assert await mb.load_watermark(SHARD) == (b"W1", 1)
    assert await mb.finish(SHARD, 2, b"x" * 16, b"W1", b"W2", writer=b"two", fence=2)
    assert await mb.load_watermark(SHARD) == (b"W2", 2)


async def test_the_highest_frontier_and_the_earliest_observation_win_in_any_order(mb):
    """A delayed lower frontier write (a timed-out attempt that still lands) never
    replaces a higher one, and of two observations of one dispatch the earliest offset
    gives the mailbox_seq, whichever write lands last."""
    f = mb._frontier
    await f.write(SHARD, 0, b"W10", WM_LAYOUT_V1, 1, b"me", 10)
    await f.write(SHARD, 0, b"W5", WM_LAYOUT_V1, 1, b"me", 5)  # older, arriving later
    assert await mb.load_watermark(SHARD) == (b"W10", 1)
    for offset in (30, 20):  # the later observation written first
        stmt, params = await f.identity_write(SHARD, b"k" * 16, b"g" * 32, seq(offset), offset)
        await mb.session.execute(stmt, params)
    assert await mb.begin(SHARD, b"k" * 16, b"g" * 32, 31, seq(31)) == (RESUME, seq(20))
    with pytest.raises(ValueError, match="48 bits"):
        await f.identity_write(SHARD, b"k" * 16, b"g" * 32, seq(0), 1 << 48)
    page = [FusedRecord(0, b"%02d" % i * 8, b"g" * 32, i, seq(i), DAY, [(7, seq(i) + b"x")]) for i in range(65)]
    with pytest.raises(ValueError, match="1..64 records"):  # a page is at most 64 records
        await mb.fused(SHARD, 1, page, b"W10", b"W", fence=0)


def test_start_refuses_cql_without_a_cluster_or_with_a_log_outliving_the_identity_rows():
    cql = {"QIM_SCYLLA_ADDRS": "127.0.0.1:9042", "QIM_MAILBOX_STORE": "cql"}
    assert TierConfig.from_env(Env(cql)).mailbox_store == "cql"
    assert TierConfig.from_env(Env({})).mailbox_store == "redis"
    with pytest.raises(ConfigError, match="QIM_MAILBOX_STORE=cql needs a CQL cluster"):
        TierConfig.from_env(Env({"QIM_MAILBOX_STORE": "cql"}))
    with pytest.raises(ConfigError, match="must be one of"):
        TierConfig.from_env(Env({"QIM_MAILBOX_STORE": "sql"}))
    with pytest.raises(ConfigError, match="31-day dispatch identity TTL"):
        TierConfig.from_env(Env({**cql, "QIM_DISPATCH_LOG_RETENTION_MS": str(30 * DAY_MS)}))
    assert TierConfig.from_env(Env({**cql, "QIM_DISPATCH_LOG_RETENTION_MS": str(29 * DAY_MS)}))
