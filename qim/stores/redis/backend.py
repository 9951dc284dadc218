"""The Redis backend: one connection pool, every store over it, deployment checks
(docs/design.md §8) and liveness, all errors typed (qim/stores/redis/errors.py)."""

from __future__ import annotations

from qim.consts import MAILBOX_RETENTION_MS_DEFAULT
from qim.infra.redis.checks import check_deployment
from qim.infra.redis.client import connect
from qim.stores.base import Stores
from qim.stores.redis.commits import RedisCommitStore
from qim.stores.redis.groups import RedisGroupStore
from qim.stores.redis.leases import RedisClockLeases
from qim.stores.redis.mailboxes import RedisMailboxStore
from qim.stores.redis.messages import RedisMessageStore
from qim.stores.redis.presence import RedisSessionEpochs
from qim.stores.redis.rooms import RedisRoomEpochs
from qim.stores.redis.scripts import boundary
from qim.stores.redis.sessions import RedisReadPositions, RedisSessionStore


class RedisBackend(Stores):
    """One Redis instance ('host:port') holding every store of a process (no archive tier:
    qim/stores/open.py adds it)."""

    name = "redis"

    def __init__(self, addr: str, mailbox_retention_ms: int = MAILBOX_RETENTION_MS_DEFAULT,
                 first_registrations: bool = False) -> None:
        self.addr = addr
        self.client = connect(addr)
        super().__init__(
            messages=RedisMessageStore(self.client),
            commits=RedisCommitStore(self.client),
            leases=RedisClockLeases(self.client),
            groups=RedisGroupStore(self.client),
            mailboxes=RedisMailboxStore(self.client, mailbox_retention_ms),
            # first_registrations: queue them for CQL user_conversation_state (the archive tier)
            sessions=RedisSessionStore(self.client, first_registrations),
            reads=RedisReadPositions(self.client),
            epochs=RedisSessionEpochs(self.client),
            rooms=RedisRoomEpochs(self.client),
        )

    async def check(self, commit_facts: bool, allow_unsafe_dev: bool) -> None:
        """Refuse an unsafe deployment (RedisDeploymentError, an EngineError, naming every
        problem); StoreUnavailable when Redis cannot be reached."""
        with boundary(f"redis at {self.addr}"):
            await check_deployment(self.client, self.addr, commit_facts=commit_facts,
                                   allow_unsafe_dev=allow_unsafe_dev)

    async def ping(self) -> None:
        """Return when Redis answers; StoreUnavailable otherwise."""
        with boundary(f"redis at {self.addr}"):
            await self.client.ping()

    async def close(self) -> None:
        """Close the connection pool."""
        await self.client.aclose()
