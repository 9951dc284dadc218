"""The store contract suite (docs/decisions/0019-storage-layer.md): one set of
vectors run against every store backend through the Protocol interfaces of qim/stores
only: Redis (a Redis of this package's own), "redis3" (three standalone Redis instances
of this package's own, every key on the instance the placement rules of
qim/stores/redis/topology.py say: decision 0096), and the archive tier (the CQL
MessageStore behind the TieredMessageStore, on a keyspace of the shared Cassandra node)
as "cql" (every read from the archive) and "seam" (reads across the hot floor); see
tests/stores/archived.py. The MailboxStore vectors also run on "cqlmbx": the CQL
MailboxStore (decision 0102) for `mailboxes`, Redis for the rest (`mailbox_stores`).

Data is written the way services write it (CommitStore reserving calls, group changes,
registrations), never by driver commands, so the vectors hold for any backend.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Optional

import pytest

from qim._core import ids
from qim.consts import COMMIT_HELPER_TTL_MS, MEMBER_INTERVALS_MAX
from qim.proto.v1 import message_pb2
from qim.stores.commits import CommitRef, GroupChange, GroupSendCheck, Reservation, Reserved
from qim.stores.open import Stores
from tests.fixtures import redis_instances

if TYPE_CHECKING:
    from qim.config.redislayout import RedisLayout


def _redis_backend(engines: dict) -> Stores:
    from qim.stores.redis.backend import RedisBackend

    return RedisBackend(engines["redis"])


REDIS3_SHARD_COUNT = 8  # the MailboxShards that place users over the three instances (tests/fixtures.py)


def redis3_layout(addrs) -> "RedisLayout":
    """The layout of the "redis3" backend: core = the three instances, mailbox = the
    three rotated by one (qim/dev/redis_instances.py, as `qim-dev engines up
    --redis-instances 3` lays them out)."""
    from qim.dev.redis_instances import layout_of

    return layout_of(addrs, REDIS3_SHARD_COUNT)


def shard_users(tenant: int, shard: int, n: int, start: int = 1) -> list[int]:
    """The first `n` user ids from `start` whose MailboxShard (of REDIS3_SHARD_COUNT) is
    `shard`: the recipients of a shard's dispatch record are its own users, so a
    shard's fused call never crosses Redis instances (decision 0097); vectors of a
    shard's calls name such users."""
    out: list[int] = []
    user = start
    while len(out) < n:
        if ids.mailbox_shard(tenant, user, REDIS3_SHARD_COUNT) == shard:
            out.append(user)
        user += 1
    return out


def _redis3_backend(engines: dict) -> Stores:
    from qim.stores.redis.backend import RedisBackend

    return RedisBackend(redis3_layout(engines["redis3"]))


def _archive_backend(fraction: float) -> Callable[[dict], Stores]:
    """Redis stores whose MessageStore reads through the TieredMessageStore after the
    archive caught up and `fraction` of each conversation was trimmed (tests/stores/archived.py)."""
    def build(engines: dict) -> Stores:
        from qim.stores.open import ArchiveTier, TieredStores
        from qim.stores.redis.backend import RedisBackend
        from tests.stores.archived import SyncedTier

        redis = RedisBackend(engines["redis"])
        tier = ArchiveTier(redis.client, engines["cql"])
        stores = TieredStores(redis, tier, tiered_reads=True)
        stores.messages = SyncedTier(stores.messages, tier, redis.client, fraction)  # type: ignore[assignment]
        return stores
    return build


def _cql_mailbox_backend(engines: dict) -> Stores:
    """Redis for every store but `mailboxes`: the CQL MailboxStore (docs/decisions/0102)
    on the package's keyspace of the shared CQL node, as QIM_MAILBOX_STORE=cql builds it."""
    from qim.stores.cql.mailboxes import CqlMailboxStore
    from qim.stores.open import ArchiveTier, TieredStores
    from qim.stores.redis.backend import RedisBackend

    redis = RedisBackend(engines["redis"])
    tier = ArchiveTier(redis.client, engines["cql"])
    stores = TieredStores(redis, tier, tiered_reads=False)
    stores.mailboxes = CqlMailboxStore(tier.cql.session)
    return stores


# backend name -> factory(engines: {"redis": addr, "cql": ScyllaConfig}) -> Stores
BACKENDS: dict[str, Callable[[dict], Stores]] = {
    "redis": _redis_backend,
    "redis3": _redis3_backend,  # three standalone instances (decision 0096)
    "cql": _archive_backend(1.0),  # every read served by the archive (CQL)
    "seam": _archive_backend(0.5),  # the older half archived and trimmed: reads cross the hot floor
}
# the MailboxStore contract (test_mailboxes*.py) also runs on the CQL MailboxStore; the
# other vectors would only repeat the "redis" backend's runs there
MAILBOX_BACKENDS: dict[str, Callable[[dict], Stores]] = {**BACKENDS, "cqlmbx": _cql_mailbox_backend}


@pytest.fixture(scope="package")
def store_engines(tmp_path_factory, shared_cassandra) -> dict:
    """Engines of this package: its own Redis, three more standalone instances (the
    "redis3" backend's, `redis3`: their addresses), and a keyspace of the shared CQL node."""
    names = ("stores-redis", "stores-redis3-a", "stores-redis3-b", "stores-redis3-c")
    with redis_instances(tmp_path_factory.mktemp(n) for n in names) as started:
        yield {"redis": started[0].addr, "redis3": tuple(e.addr for e in started[1:]),
               "cql": shared_cassandra.scylla("qim_contract")}




@pytest.fixture(params=sorted(BACKENDS))
async def stores(request, store_engines) -> Stores:
    """A backend's stores over emptied engines (global families such as in-flight
    indexes, leases and checkpoints start empty in every test)."""
    backend = BACKENDS[request.param](store_engines)
    await _wipe(request.param, backend)
    yield backend
    await backend.close()


@pytest.fixture(params=sorted(MAILBOX_BACKENDS))
async def mailbox_stores(request, store_engines) -> Stores:
    """`stores` of the MailboxStore vectors: every backend of BACKENDS and "cqlmbx"."""
    backend = MAILBOX_BACKENDS[request.param](store_engines)
    await _wipe(request.param, backend)
    yield backend
    await backend.close()


async def _wipe(name: str, backend) -> None:
    from tests.stores.archived import truncate

    redis = backend if name in ("redis", "redis3") else backend.redis
    for client in redis.topology.clients.values():  # every instance of the layout
        await client.flushdb()
    if name == "cqlmbx":  # the mailbox tables only
        await backend.archive_tier.cql.apply_schema()
        await _empty_mailbox_tables(backend.archive_tier.cql.session)
        return
    if name not in ("redis", "redis3"):
        await backend.archive_tier.cql.apply_schema()
        await truncate(backend.archive_tier)


async def _empty_mailbox_tables(session) -> None:
    """TRUNCATE the CQL MailboxStore's tables: a DELETE would leave tombstones at today's
    time, above the offset-based write timestamps of the frontier, day index and
    identity rows (decision 0102), and hide every later write of the same keys."""
    from qim.stores.cql.mailbox_schema import PARTITION_KEYS

    for table in PARTITION_KEYS:
        await session.execute(f"TRUNCATE {session.keyspace}.{table}")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def digest_of(*parts: bytes) -> bytes:
    """A 36-byte identity digest (the store treats it as opaque bytes)."""
    return hashlib.sha256(b"\0".join(parts)).digest() + len(parts).to_bytes(4, "big")


@dataclass
class Conv:
    """One conversation written through the CommitStore as the writer does: ids from a
    per-conversation clock (so reserves never go below the newest id), committed at once."""

    stores: Stores
    tenant: int
    conversation_id: bytes
    clock_ms: int = field(default_factory=now_ms)
    token: str = "writer-a"
    offsets: int = 0

    def next_id(self) -> tuple[bytes, int]:
        self.clock_ms += 1
        return ids.compose_message_id(self.clock_ms, 0, 1, 1), self.clock_ms

    def reservation(self, sender: int, cmid: bytes, body: bytes = b"hi", *, message_type: int = 1,
                    previous: bytes = b"", split: bool = False, digest: Optional[bytes] = None,
                    message_id: Optional[bytes] = None, list_older: bool = False) -> Reservation:
        mid, ms = (message_id, self.clock_ms) if message_id else self.next_id()
        rec = message_pb2.MessageRecord(tenant_id=self.tenant.to_bytes(16, "big"), message_id=mid,
                                        conversation_id=self.conversation_id, sender_id=sender, sender_device_id=1,
                                        client_message_id=cmid, message_type=message_type, body=body,
                                        created_at_ms=ms)
        return Reservation(CommitRef(self.tenant, self.conversation_id, sender, cmid),
                           digest if digest is not None else digest_of(body, cmid), mid, ms, rec.SerializeToString(),
                           b"audience:" + cmid, self.token, split=split, previous=previous,
                           list_older=list_older)

    async def commit(self, reserved: Reserved, ref: CommitRef) -> Reserved:
        self.offsets += 1
        await self.stores.commits.mark_committed(ref, self.offsets, COMMIT_HELPER_TTL_MS)
        return reserved

    async def send(self, sender: int, body: bytes = b"hi", *, cmid: Optional[bytes] = None, message_type: int = 1,
                   group: Optional[GroupSendCheck] = None, commit: bool = True) -> Reserved:
        cmid = cmid or self.clock_ms.to_bytes(8, "big") + sender.to_bytes(8, "big")
        res = self.reservation(sender, cmid, body, message_type=message_type)
        reserved = await self.stores.commits.reserve(res, group)
        return await self.commit(reserved, res.ref) if commit else reserved

    async def change(self, actor: int, op: str, members_after, *, version: Optional[int] = None, joins=(),
                     leaves=(), group_id: int = 1) -> Reserved:
        """A membership change (CONTROL message) as the writer's Groups makes it."""
        cmid = b"g" + self.clock_ms.to_bytes(8, "big") + bytes(7)
        res = self.reservation(actor, cmid, b"membership", message_type=4)
        change = GroupChange(op, version, actor, sorted(members_after), group_id, 3600, MEMBER_INTERVALS_MAX,
                             list(joins), list(leaves))
        reserved = await self.stores.commits.reserve_group_change(res, change)
        return await self.commit(reserved, res.ref)


def direct(stores: Stores, tenant: int = 7, a: int = 5, b: int = 9) -> Conv:
    """The direct conversation of users a and b."""
    return Conv(stores, tenant, ids.conversation_id_direct(tenant, a, b))


def group(stores: Stores, tenant: int = 7, group_id: int = 1) -> Conv:
    """The conversation of group `group_id`."""
    return Conv(stores, tenant, ids.conversation_id_group(tenant, group_id))
