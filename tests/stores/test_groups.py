"""GroupStore contract (docs/design.md §7; docs/decisions/0019 snapshot format): membership
changes through the CommitStore, member intervals (leave and re-join), immutable member
snapshots per version, the session list's member views; the snapshot codec."""

from __future__ import annotations

import struct

import pytest
from pyroaring import BitMap64

from qim.stores.errors import Conflict, MembershipMoved, NotFound, StoreCorrupt
from qim.stores.groups import ROARING_TAG, SnapshotKey, decode_members, encode_members
from tests.stores.conftest import group


async def test_changes_build_intervals_versions_and_snapshots(stores):
    g = group(stores, group_id=77)
    c1 = await g.change(5, "create", [5, 6, 7], joins=[5, 6, 7], group_id=77)  # J=1, v1
    await g.send(6, b"hello")  # seq 2
    c3 = await g.change(0, "edit", [5, 7], version=1, leaves=[6], group_id=77)  # J=3, v2: 6 left at 3
    await g.send(5, b"while away")  # seq 4
    c5 = await g.change(0, "edit", [5, 6, 7], version=2, joins=[6], group_id=77)  # J=5, v3: 6 back at 4
    assert (c1.conversation_seq, c3.conversation_seq, c5.conversation_seq) == (1, 3, 5)
    view = await stores.groups.read(g.tenant, g.conversation_id)
    assert (view.version, view.owner, view.group_id) == (3, 5, 77)
    assert view.members == {5: ((0, None),), 6: ((0, 3), (4, None)), 7: ((0, None),)}
    assert view.current == {5: 0, 6: 4, 7: 0}
    assert await stores.groups.intervals_of(g.tenant, g.conversation_id, 6) == ((0, 3), (4, None))
    assert await stores.groups.intervals_of(g.tenant, g.conversation_id, 8) is None
    snaps = await stores.groups.snapshots([SnapshotKey(g.tenant, g.conversation_id, v) for v in (1, 2, 3, 4)])
    assert [None if s is None else list(s) for s in snaps] == [[5, 6, 7], [5, 7], [5, 6, 7], None]


async def test_refusals_of_group_changes(stores):
    g = group(stores, group_id=3)
    with pytest.raises(NotFound):
        await g.change(0, "edit", [5], version=1, joins=[5], group_id=3)
    await g.change(5, "create", [5], joins=[5], group_id=3)
    with pytest.raises(Conflict):
        await g.change(9, "create", [9], joins=[9], group_id=3)
    with pytest.raises(MembershipMoved):
        await g.change(0, "edit", [5, 6], version=7, joins=[6], group_id=3)
    assert (await stores.groups.read(g.tenant, g.conversation_id)).version == 1


async def test_a_member_keeps_only_its_newest_intervals(stores):
    g = group(stores, group_id=4)
    await g.change(5, "create", [5, 6], joins=[5, 6], group_id=4)
    version = 1
    for _ in range(17):  # 17 leaves and 17 re-joins: 18 memberships in all
        await g.change(0, "edit", [5], version=version, leaves=[6], group_id=4)
        await g.change(0, "edit", [5, 6], version=version + 1, joins=[6], group_id=4)
        version += 2
    intervals = await stores.groups.intervals_of(g.tenant, g.conversation_id, 6)
    assert len(intervals) == 16 and intervals[-1][1] is None and intervals[0][0] > 0  # the oldest dropped


async def test_member_views_and_an_empty_read(stores):
    g1, g2, g3 = group(stores, group_id=11), group(stores, group_id=12), group(stores, group_id=13)
    await g1.change(5, "create", [5], joins=[5], group_id=11)
    await g2.change(6, "create", [6], joins=[6], group_id=12)
    views = await stores.groups.member_views(g1.tenant, 5, [g1.conversation_id, g2.conversation_id,
                                                            g3.conversation_id])
    assert [(v.intervals, v.group_id) for v in views] == [(((0, None),), 11), (None, 12), (None, None)]
    assert await stores.groups.member_views(g1.tenant, 5, []) == []
    empty = await stores.groups.read(g3.tenant, g3.conversation_id)
    assert empty.version is None and empty.members == {} and empty.current == {}


# --- the stored snapshot form (pure) ----------------------------------------------------
@pytest.mark.parametrize("users,form", [
    ([], "packed"),
    ([42], "packed"),
    (list(range(1_000_000, 1_001_000)), "roaring"),  # dense ids: a few bytes
    ([(i * 2654435761) % (1 << 40) + 1 for i in range(1000)], "packed"),  # scattered 40-bit ids: 8 B each
    ([1, (1 << 63) - 1], "packed"),
])
def test_snapshot_codec_takes_the_smaller_form_and_round_trips(users, form):
    data = encode_members(users)
    assert (data[:1] == bytes([ROARING_TAG])) is (form == "roaring")
    assert len(data) <= 8 * len(set(users))
    assert list(decode_members(data)) == sorted(set(users))


def test_snapshots_written_before_the_roaring_form_still_read():
    legacy = struct.pack(">3Q", 3, 9, 1 << 40)  # the packed u64 form of issue 6
    assert list(decode_members(legacy)) == [3, 9, 1 << 40]
    assert isinstance(decode_members(legacy), BitMap64)


@pytest.mark.parametrize("data", [b"\x00" * 7, struct.pack(">2Q", 9, 3), bytes([ROARING_TAG]) + b"garbage"])
def test_corrupt_snapshots_are_refused(data):
    with pytest.raises(StoreCorrupt):
        decode_members(data)


@pytest.mark.parametrize("users", [[0], [1 << 63], [-1]])
def test_ids_outside_the_u63_range_cannot_be_stored(users):
    with pytest.raises(ValueError):
        encode_members(users)


async def test_send_view_is_version_count_and_the_senders_intervals(stores):
    """What a group send is planned from: O(1) reads, the same answers as the
    full member read (version, number of current members, the sender's intervals)."""
    g = group(stores, group_id=91)
    assert await stores.groups.send_view(g.tenant, g.conversation_id, 5) == (None, 0, None, None)  # no group
    await g.change(5, "create", [5, 6, 7], joins=[5, 6, 7], group_id=91)
    await g.change(0, "edit", [5, 7], version=1, leaves=[6], group_id=91)
    view = await stores.groups.read(g.tenant, g.conversation_id)
    left = await stores.groups.send_view(g.tenant, g.conversation_id, 6)
    assert (left.version, left.member_count, left.intervals) == (2, len(view.current), view.members[6])
    assert left.intervals == ((0, 2),)  # left at J = 2
    assert await stores.groups.send_view(g.tenant, g.conversation_id, 5) == (2, 2, ((0, None),), None)  # not muted
    assert (await stores.groups.send_view(g.tenant, g.conversation_id, 8)).intervals is None
