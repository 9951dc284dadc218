"""The archive tier under the store contract suite: the CQL backends of
BACKENDS in conftest.py.

`SyncedTier` stands for the HistoryArchiver and the trimmer between a test's writes and
its reads: before every MessageStore read it archives what Redis holds that was not
archived yet (records as the Outbox carries them, recalls/deletes from their CONTROL
messages, through the archiver's own planning) and trims with the writer's own check
against the archive: everything ("cql": every read is served by the archive) or the
older half of each conversation ("seam": pages cross the hot floor). The reads themselves go through the TieredMessageStore unchanged.
"""

from __future__ import annotations

from qim.proto.v1 import message_pb2
from qim.services.archiver.plan import plan
from qim.services.writer.trimmer import trim_prefix
from qim.stores.open import ArchiveTier
from qim.stores.redis.scripts import boundary
from qim.stores.tiered import TieredMessageStore

CQL_TABLES = ("message_record", "conversation_history", "conversation_archive", "user_conversation_state")


class SyncedTier:
    """A MessageStore: archive + trim (`fraction` of each conversation's hot rows), then read."""

    def __init__(self, tiered: TieredMessageStore, tier: ArchiveTier, redis_client, fraction: float) -> None:
        self._tiered = tiered
        self._tier = tier
        self._redis = redis_client
        self._fraction = fraction
        self._archived: set[tuple[bytes, int]] = set()

    async def sync(self) -> None:
        """Archive every hot message not archived yet, then trim."""
        with boundary("test sync"):  # a dead Redis is StoreUnavailable, as from the stores
            keys = [k async for k in self._redis.scan_iter(match="qim:hist:*")]
        for key in keys:
            _, _, _, tenant_hex, conv_hex = key.decode().split(":")
            tenant, conv = int(tenant_hex, 16), bytes.fromhex(conv_hex)
            _, rows = await self._tier.state.hot_rows(tenant, conv, 100_000)
            new = [r for r in rows if (conv, r.conversation_seq) not in self._archived]
            if new:
                prefix = key.decode().split(":")[2]
                with boundary("test sync"):
                    raws = await self._redis.mget([f"qim:msg:{prefix}:{r.message_id.hex()}" for r in new])
                recs = [message_pb2.MessageRecord.FromString(raw) for raw in raws]
                for tenant_id, batch in plan(recs, {}, 30, _now()).items():
                    await self._tier.archive.write(tenant_id, batch.records, batch.changes)
                self._archived.update((conv, r.conversation_seq) for r in new)
            cut = int(len(rows) * self._fraction)
            floor, _ = await self._tier.state.hot_rows(tenant, conv, 1)
            # the writer's own check and trim (qim/services/writer/trimmer.py)
            await trim_prefix(self._tier.state, self._tier.archive, tenant, conv, floor, rows[:cut], "default", 30,
                              _now())

    async def get(self, *a):
        await self.sync()
        return await self._tiered.get(*a)

    async def record_sizes(self, *a):
        await self.sync()
        return await self._tiered.record_sizes(*a)

    async def resolve(self, *a):
        await self.sync()
        return await self._tiered.resolve(*a)

    async def history_page(self, *a):
        await self.sync()
        return await self._tiered.history_page(*a)

    async def latest_seq(self, *a):
        await self.sync()
        return await self._tiered.latest_seq(*a)

    async def tails(self, *a):
        await self.sync()
        return await self._tiered.tails(*a)


def _now() -> int:
    import time

    return time.time_ns() // 1_000_000


async def truncate(tier: ArchiveTier) -> None:
    """Empty every archive table (a test starts with an empty archive)."""
    ks = tier.cql.session.keyspace
    for table in CQL_TABLES:
        await tier.cql.session.execute(f"TRUNCATE {ks}.{table}")
