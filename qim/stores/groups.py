"""GroupStore: group meta, member intervals and member snapshots (docs/design.md §7;
docs/decisions/0005-groups-history.md, 0019-storage-layer.md).

Written only by the commit store's group change (atomically with its CONTROL message);
this interface is the read side. A member's intervals are in qim/stores/intervals.py
form. A member snapshot is the set of current members at one membership_version,
immutable, kept long enough for every replay of the Outbox, dispatch and
DispatchProgress windows; the fanout plans a group message from exactly its version.

Snapshot stored form (`encode_members` / `decode_members`, every backend): the smaller
of (1) the members as u64 big-endian, ascending (also every snapshot written before
docs/decisions/0019; its first byte is < 0x80 because ids have bit 63 clear) and (2) 0xFF followed
by the portable serialization of a 64-bit roaring bitmap (pyroaring BitMap64). Dense
ids (sequential allocation) shrink to bytes; random ids stay at most 8 bytes a member.

Errors: StoreUnavailable; StoreCorrupt for an unreadable interval or snapshot.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Iterable, NamedTuple, Optional, Protocol, Sequence

from pyroaring import BitMap64

from qim.stores.errors import StoreCorrupt
from qim.stores.intervals import Interval, is_current

ROARING_TAG = 0xFF


def encode_members(users: Iterable[int]) -> bytes:
    """Stored snapshot bytes of a member set (the smaller form, see the module docstring).
    ValueError for an id outside 1..2^63-1."""
    try:
        members = BitMap64(users)
    except OverflowError:
        raise ValueError("member ids must be non-zero with bit 63 clear") from None
    if members and (members.min() <= 0 or members.max() >= 1 << 63):
        raise ValueError("member ids must be non-zero with bit 63 clear")
    packed_len = 8 * len(members)
    roaring = members.serialize()
    if 1 + len(roaring) < packed_len:
        return bytes([ROARING_TAG]) + roaring
    return struct.pack(f">{len(members)}Q", *members)


def decode_members(data: bytes) -> BitMap64:
    """The member set of stored snapshot bytes; StoreCorrupt when they are neither form."""
    if data[:1] == bytes([ROARING_TAG]):
        try:
            return BitMap64.deserialize(data[1:])
        except (ValueError, OverflowError) as exc:
            raise StoreCorrupt(f"member snapshot does not decode: {exc.__class__.__name__}") from None
    if len(data) % 8:
        raise StoreCorrupt("member snapshot length is not a multiple of 8")
    users = struct.unpack(f">{len(data) // 8}Q", data)
    if list(users) != sorted(set(users)):
        raise StoreCorrupt("member snapshot is not ascending and distinct")
    return BitMap64(users)


@dataclass
class GroupView:
    """One read of a group. `version` None: no such group. `members`: every user with
    intervals (current and former members)."""

    version: Optional[int] = None
    owner: int = 0
    group_id: int = 0
    members: dict[int, tuple[Interval, ...]] = field(default_factory=dict)

    @property
    def current(self) -> dict[int, int]:
        """Current members -> joined_at of their current (last, open) interval."""
        return {u: iv[-1][0] for u, iv in self.members.items() if is_current(iv)}


class MemberView(NamedTuple):
    """One user's view of one group for the session list: its intervals (None: never a
    member), the group_id (None: no group meta) and its title ("" none)."""

    intervals: Optional[tuple[Interval, ...]]
    group_id: Optional[int]
    title: str = ""


class GroupSendView(NamedTuple):
    """What a group send is planned from (O(1), never the member list: no per-send cost that grows with the group): the
    membership_version (None: no such group), the current member count, and the
    sender's own intervals (None: never a member); `mute`: the sender's group mute as
    stored, "<until_ms>\t<message>" (qim/stores/redis/mutes.py; None: not muted), read in
    the same round trip (decision 0127)."""

    version: Optional[int]
    member_count: int
    intervals: Optional[tuple[Interval, ...]]
    mute: Optional[str] = None

    def muted(self, now_ms: int) -> Optional[str]:
        """The message a muted sender is told while the mute is in force at `now_ms`, else None."""
        if self.mute is None or "\t" not in self.mute:
            return None
        until, _, message = self.mute.partition("\t")
        return message if until in ("", "0") or not until.isdigit() or int(until) > now_ms else None


class SnapshotKey(NamedTuple):
    """(tenant, group conversation_id, membership_version) of one member snapshot."""

    tenant: int
    conversation_id: bytes
    version: int


class GroupStore(Protocol):
    """Read side of groups; writes go through CommitStore.reserve_group_change."""

    async def read(self, tenant: int, conversation_id: bytes) -> GroupView:
        """Meta and every member's intervals of the group (one round trip)."""
        ...

    async def intervals_of(self, tenant: int, conversation_id: bytes, user: int) -> Optional[tuple[Interval, ...]]:
        """`user`'s intervals in the group, None when it never was a member."""
        ...

    async def send_view(self, tenant: int, conversation_id: bytes, user: int) -> GroupSendView:
        """Version, current member count and `user`'s intervals (one round trip, O(1))."""
        ...

    async def member_views(self, tenant: int, user: int, conversation_ids: Sequence[bytes]) -> list[MemberView]:
        """`user`'s view of each group (one round trip for all)."""
        ...

    async def snapshots(self, keys: Sequence[SnapshotKey]) -> list[Optional[BitMap64]]:
        """The member snapshot of each key, None when it is gone (one round trip)."""
        ...
