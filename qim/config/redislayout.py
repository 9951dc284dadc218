"""RedisLayout: which standalone Redis instances hold what (docs/decisions/0096; the
placement rules and the clients: qim/stores/redis/topology.py).

QIM_REDIS_CORE_ADDRS and QIM_REDIS_MAILBOX_ADDRS (comma lists) name the instances per
role; unset, both are QIM_REDIS_ADDR (one instance for everything, the development
default). The order of a list is the placement: keep it when adding an instance
(docs/operations.md "Several Redis instances").
"""

from __future__ import annotations

from dataclasses import dataclass

from qim._core import ids
from qim.consts import COMMIT_BUCKET_COUNT


@dataclass(frozen=True)
class RedisLayout:
    """Which Redis instances hold what: `core` and `mailbox` 'host:port' addresses (at
    least one each) and the MailboxShard count that places users. ValueError when a
    list is empty or the shard count is not a power of two in 1..65536."""

    core: tuple[str, ...]
    mailbox: tuple[str, ...]
    shard_count: int = 1

    def __post_init__(self) -> None:
        if not self.core or not self.mailbox:
            raise ValueError("a Redis layout needs at least one core and one mailbox instance")
        if not (1 <= self.shard_count <= 65536 and self.shard_count & (self.shard_count - 1) == 0):
            raise ValueError(f"shard count {self.shard_count} is not a power of two in 1..65536")

    @classmethod
    def single(cls, addr: str, shard_count: int = 1) -> "RedisLayout":
        """Every role on the one instance at `addr` (development, tools, unit tests)."""
        return cls((addr,), (addr,), shard_count)

    @property
    def addrs(self) -> tuple[str, ...]:
        """Every distinct address, core first, in order."""
        return tuple(dict.fromkeys(self.core + self.mailbox))

    @property
    def home(self) -> str:
        """The core instance holding the keys of no bucket."""
        return self.core[0]

    def core_index(self, bucket: int) -> int:
        """The core instance (index into `core`) of commit bucket `bucket`."""
        if not 0 <= bucket < COMMIT_BUCKET_COUNT:
            raise ValueError(f"commit bucket {bucket} out of range")
        return bucket * len(self.core) // COMMIT_BUCKET_COUNT

    def mailbox_index(self, shard: int) -> int:
        """The mailbox instance (index into `mailbox`) of MailboxShard `shard`."""
        if shard < 0:
            raise ValueError(f"shard {shard} out of range")
        return shard % len(self.mailbox)

    def user_shard(self, tenant: int, user_id: int) -> int:
        """The MailboxShard of a user (its virtual bucket's low bits)."""
        return ids.mailbox_shard(tenant, user_id, self.shard_count)
