"""The stale-owner check both MailboxStores share (the Redis one inside its scripts,
tests/stores/test_registry.py; the CQL one by its frontier rows,
tests/stores/test_cql_mailbox.py): a paused owner's writes are refused once a newer
owner_epoch fenced the shard (docs/decisions/0040 and 0102)."""

from __future__ import annotations

from qim.stores.errors import NotOwner
from qim.stores.mailboxes import FRESH, FusedRecord


async def stale_owner_refused(mb, shard: int, day: int, seqs: tuple[bytes, bytes, bytes]) -> None:
    """Owner 1 fences `shard` and begins a dispatch (seqs[0]); owner 2 fences it next;
    then every write of owner 1 (begin with seqs[1], append and finish on `day`, fused
    with seqs[2]) raises NotOwner saying owner_epoch 1 is stale. AssertionError naming
    the writes that were not refused so."""
    assert await mb.load_watermark(shard, fence=1) == (None, 1)  # owner 1 fenced the shard
    assert (await mb.begin(shard, b"d" * 16, b"g" * 32, 0, seqs[0], fence=1))[0] == FRESH
    assert await mb.load_watermark(shard, fence=2) == (None, 1)  # owner 2 took over (paused owner 1)
    writes = {
        "begin": mb.begin(shard, b"e" * 16, b"g" * 32, 1, seqs[1], fence=1),
        "append": mb.append(0, 1, day, [(7, seqs[1] + b"x")], shard=shard, fence=1),
        "finish": mb.finish(shard, 1, b"d" * 16, None, b"W", writer=b"one", fence=1),
        "fused": mb.fused(shard, 1, [FusedRecord(0, b"f" * 16, b"g" * 32, 2, seqs[2], day, [(7, seqs[2] + b"y")])],
                          None, b"W", writer=b"one", fence=1),
    }
    refused = []
    for name, write in writes.items():
        try:
            await write
        except NotOwner as exc:
            refused.append((name, "owner_epoch 1 is stale" in exc.message))
    assert refused == [(name, True) for name in writes]
