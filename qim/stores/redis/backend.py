"""The Redis backend: one client per instance of the layout (topology.py, decision 0096),
every store over them, deployment checks of every instance (docs/design.md §8) and
liveness, all errors typed (qim/stores/redis/errors.py)."""

from __future__ import annotations

from qim.consts import MAILBOX_RETENTION_MS_DEFAULT
from qim.infra.redis.checks import check_deployment
from qim.stores.base import Stores
from qim.stores.errors import StoreCorrupt
from qim.stores.redis.commits import RedisCommitStore
from qim.stores.redis.convstate import RedisConversationStates
from qim.stores.redis.groups import RedisGroupStore
from qim.stores.redis.leases import RedisClockLeases
from qim.stores.redis.mailboxes import RedisMailboxStore
from qim.stores.redis.messages import RedisMessageStore
from qim.stores.redis.presence import RedisSessionEpochs
from qim.stores.redis.push import RedisPushRegistrations
from qim.stores.redis.rooms import RedisRoomEpochs
from qim.stores.redis.scripts import boundary
from qim.stores.redis.sessions import RedisReadPositions, RedisSessionStore
from qim.stores.redis.topology import RedisLayout, topology_of


class RedisBackend(Stores):
    """Every store of a process over the Redis instances of `layout` (a RedisLayout, or
    one 'host:port' holding every role; no archive tier: qim/stores/open.py adds it)."""

    name = "redis"

    def __init__(self, layout: "RedisLayout | str", mailbox_retention_ms: int = MAILBOX_RETENTION_MS_DEFAULT,
                 first_registrations: bool = False) -> None:
        self.topology = t = topology_of(layout)
        self.addr = ",".join(t.layout.addrs)
        self.client = t.home  # keys of no bucket (the archive state, tools)
        super().__init__(
            messages=RedisMessageStore(t),
            commits=RedisCommitStore(t),
            leases=RedisClockLeases(t),
            groups=RedisGroupStore(t),
            mailboxes=RedisMailboxStore(t, mailbox_retention_ms),
            # first_registrations: queue them for CQL user_conversation_state (the archive tier)
            sessions=RedisSessionStore(t, first_registrations),
            reads=RedisReadPositions(t),
            epochs=RedisSessionEpochs(t),
            rooms=RedisRoomEpochs(t),
            convstates=RedisConversationStates(t),
            push=RedisPushRegistrations(t),
        )

    async def check(self, commit_facts: bool, allow_unsafe_dev: bool) -> None:
        """Refuse an unsafe deployment: every instance of the layout checked (version,
        standalone, AOF, fsync, noeviction); RedisDeploymentError (an EngineError) naming
        every problem of the first bad instance; StoreUnavailable when one cannot be reached."""
        for addr, client in self.topology.clients.items():
            with boundary(f"redis at {addr}"):
                await check_deployment(client, addr, commit_facts=commit_facts, allow_unsafe_dev=allow_unsafe_dev)
        await self.load_placement()

    async def load_placement(self) -> None:
        """Read the placement map of MailboxShards and commit buckets now (decisions 0104,
        0113); StoreCorrupt when it names an address that is not a mailbox (for a shard)
        or core (for a bucket) instance of the layout."""
        try:
            await self.topology.load_placement()
        except ValueError as exc:
            raise StoreCorrupt(str(exc)) from None

    async def ping(self) -> None:
        """Return when every instance answers; StoreUnavailable otherwise."""
        for addr, client in self.topology.clients.items():
            with boundary(f"redis at {addr}"):
                await client.ping()
        await self.load_placement()

    async def close(self) -> None:
        """Close every instance's connection pool."""
        await self.topology.aclose()
