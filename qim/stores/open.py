"""Building the stores of a process (issue 11): the one place a service's wiring gets its
storage from, so no service module names a driver or a backend.

    stores = open_stores(config.common.redis_addr, mailbox_retention_ms=...)
    await stores.check(commit_facts=True, allow_unsafe_dev=...)   # at start
    stores.messages / commits / leases / groups / mailboxes / sessions / reads

Only the Redis backend exists today (QIM_MESSAGE_STORE_BACKEND is not read yet); the
CQL backend and the TieredMessageStore will be chosen here (docs/decisions/0019).
"""

from __future__ import annotations

from typing import Protocol

from qim.consts import MAILBOX_RETENTION_MS_DEFAULT
from qim.stores.commits import CommitStore
from qim.stores.groups import GroupStore
from qim.stores.leases import ClockLeaseStore
from qim.stores.mailboxes import MailboxStore
from qim.stores.messages import MessageStore
from qim.stores.reads import ReadPositionStore
from qim.stores.sessions import SessionStore


class Stores(Protocol):
    """Every store of one backend, and the backend's own checks."""

    name: str
    messages: MessageStore
    commits: CommitStore
    leases: ClockLeaseStore
    groups: GroupStore
    mailboxes: MailboxStore
    sessions: SessionStore
    reads: ReadPositionStore

    async def check(self, commit_facts: bool, allow_unsafe_dev: bool) -> None:
        """Refuse an unsafe deployment at start (EngineError naming every problem;
        `commit_facts`: the instance holds commit state, so stricter persistence)."""
        ...

    async def ping(self) -> None:
        """Return when the backend answers; StoreUnavailable otherwise (readiness)."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


def open_stores(redis_addr: str, *, mailbox_retention_ms: int = MAILBOX_RETENTION_MS_DEFAULT) -> Stores:
    """The stores over the Redis at 'host:port' (connections are made lazily).
    ValueError for a bad address."""
    from qim.stores.redis.backend import RedisBackend  # the driver is imported only here

    return RedisBackend(redis_addr, mailbox_retention_ms)
