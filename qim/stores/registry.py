"""ShardRegistry: the one authority on which node owns which shard (docs/design.md §2, §13;
docs/decisions/0040-scale-leases-and-fencing.md).

Nodes of one kind (a service of qim/topology.py whose row names `leases`) each hold a
node lease under their node id, and own shards of their kind (MailboxShards, session
shards, Outbox partitions) through shard leases. Every lease expires by the registry's
own clock (Redis TIME) unless renewed; a node's heartbeat renews its node lease and
every shard lease it holds in one operation.

Every grant of a shard to a different owner (node id and incarnation) raises that
shard's `owner_epoch` by one; the epoch never goes back and never resets (a released
or expired shard keeps it). The owner passes its epoch to every write it makes, and the
data store refuses a stale one in the same script (the fence: `MailboxStore`,
`SessionStore`, `ArchiveStateStore`). owner_epoch is NOT the 16-bit shard_epoch of
mailbox_seq: a takeover resumes at min(W)+1 of the same partition offsets.

An incarnation is a token unique per process start: a node restarted under the same id
is a new owner (its shards get a new epoch), and a process that finds its node id held
by an incarnation that keeps renewing is a duplicate (`JoinRefused`).

Errors: StoreUnavailable when the registry cannot be reached (the call may or may not
have applied: every operation here is safe to repeat).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Protocol, Sequence

from qim.errors import ConfigError


@dataclass(frozen=True)
class NodeInfo:
    """One node lease: `addr` is what peers dial (RPC listener; "" when none),
    `extra` free-form facts of the kind (e.g. a gateway's push address), `remaining_ms`
    the lease time left by the registry's clock at the read, `since_ms` when this
    incarnation joined (registry clock, unix ms)."""

    kind: str
    node_id: str
    incarnation: str
    addr: str
    extra: str
    remaining_ms: int
    since_ms: int = 0


@dataclass(frozen=True)
class Owner:
    """The lease of one shard as read: `node_id` "" when nobody holds it,
    `remaining_ms` <= 0 when it expired (or was released), `addr` the owner's node
    address ("" when the node lease is gone), `since_ms` when this owner took it."""

    shard: int
    node_id: str
    owner_epoch: int
    remaining_ms: int
    addr: str = ""
    since_ms: int = 0

    @property
    def live(self) -> bool:
        """True while somebody holds an unexpired lease."""
        return bool(self.node_id) and self.remaining_ms > 0


@dataclass
class Heartbeat:
    """What one heartbeat learned: `gone` when this incarnation no longer holds its node
    lease (another process took the id), the shards whose lease this node no longer
    holds (`lost`: taken by another owner), and the live node ids of the kind."""

    gone: bool
    lost: list[int] = field(default_factory=list)
    live: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class JoinResult:
    """`joined` True when this incarnation now holds the node lease (`since_ms`: when it
    joined, by the registry's clock: later incarnations of one id have later ones);
    otherwise the holder's incarnation, its renewal count (`beat`) and the lease time
    left, so the caller can tell a live duplicate (it renews) from a dead predecessor
    (it does not)."""

    joined: bool
    holder: str = ""
    beat: int = 0
    remaining_ms: int = 0
    addr: str = ""
    since_ms: int = 0


class JoinRefused(ConfigError):
    """Another live process holds this node id (it keeps renewing its lease): two nodes
    configured with one id. The process refuses to start with a message naming the id."""


class ShardRegistry(Protocol):
    """Node and shard leases of every kind. Times are milliseconds; shards are ints in
    0..count-1 of their kind."""

    async def join(self, kind: str, node_id: str, incarnation: str, ttl_ms: int, addr: str, extra: str,
                   take_from: Optional[tuple[str, int]] = None) -> JoinResult:
        """Take the node lease when it is free, expired or already this incarnation's;
        with `take_from` = (incarnation, beat) also when it is still that holder's with
        that same renewal count (a predecessor seen not renewing: presumed dead)."""
        ...

    async def heartbeat(self, kind: str, node_id: str, incarnation: str, ttl_ms: int,
                        held: dict[int, int]) -> Heartbeat:
        """Renew the node lease and every shard lease of `held` (shard -> owner_epoch)
        that is still this incarnation's at that epoch, in one operation."""
        ...

    async def acquire(self, kind: str, node_id: str, incarnation: str, ttl_ms: int,
                      shards: Sequence[int]) -> dict[int, int]:
        """Take every shard of `shards` that is free, expired or held under this node id
        (a dead predecessor's, once `join` took its node lease): shard -> owner_epoch for
        those granted (raised by one when the owner changed). Nothing when this
        incarnation no longer holds its node lease."""
        ...

    async def release(self, kind: str, node_id: str, incarnation: str, shards: Sequence[int]) -> int:
        """Give up shards this incarnation holds (expired at once, epoch kept); how many."""
        ...

    async def leave(self, kind: str, node_id: str, incarnation: str) -> None:
        """Drop the node lease if this incarnation holds it (clean stop)."""
        ...

    async def nodes(self, kind: str) -> list[NodeInfo]:
        """Every node lease of the kind that has not expired, by node id."""
        ...

    async def owners(self, kind: str, count: int) -> list[Owner]:
        """The lease of every shard 0..count-1 of the kind, with its owner's address."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...
