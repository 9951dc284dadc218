"""The Redis backend: one connection pool, every store over it, deployment checks
(DESIGN.md §8) and liveness, all errors typed (qim/stores/redis/errors.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from qim.consts import MAILBOX_RETENTION_MS_DEFAULT
from qim.infra.redis.checks import check_deployment
from qim.infra.redis.client import connect
from qim.stores.commits import CommitStore
from qim.stores.groups import GroupStore
from qim.stores.leases import ClockLeaseStore
from qim.stores.mailboxes import MailboxStore
from qim.stores.messages import MessageStore
from qim.stores.presence import SessionEpochStore
from qim.stores.reads import ReadPositionStore
from qim.stores.redis.commits import RedisCommitStore
from qim.stores.redis.groups import RedisGroupStore
from qim.stores.redis.leases import RedisClockLeases
from qim.stores.redis.mailboxes import RedisMailboxStore
from qim.stores.redis.messages import RedisMessageStore
from qim.stores.redis.presence import RedisSessionEpochs
from qim.stores.redis.scripts import boundary
from qim.stores.redis.sessions import RedisReadPositions, RedisSessionStore
from qim.stores.sessions import SessionStore

if TYPE_CHECKING:
    from qim.stores.open import ArchiveTier


class RedisBackend:
    """One Redis instance ('host:port') holding every store of a process."""

    name = "redis"

    def __init__(self, addr: str, mailbox_retention_ms: int = MAILBOX_RETENTION_MS_DEFAULT,
                 first_registrations: bool = False) -> None:
        self.addr = addr
        self.client = connect(addr)
        # annotated with the interfaces: mypy checks each implementation against its Protocol
        self.messages: MessageStore = RedisMessageStore(self.client)
        self.commits: CommitStore = RedisCommitStore(self.client)
        self.leases: ClockLeaseStore = RedisClockLeases(self.client)
        self.groups: GroupStore = RedisGroupStore(self.client)
        self.mailboxes: MailboxStore = RedisMailboxStore(self.client, mailbox_retention_ms)
        # first_registrations: queue them for CQL user_conversation_state (the archive tier, issue 14)
        self.sessions: SessionStore = RedisSessionStore(self.client, first_registrations)
        self.reads: ReadPositionStore = RedisReadPositions(self.client)
        self.epochs: SessionEpochStore = RedisSessionEpochs(self.client)
        self.archive_tier: Optional[ArchiveTier] = None  # the Redis backend alone has no archive tier (qim/stores/open.py)

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
