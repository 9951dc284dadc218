"""SessionStore and ReadPositionStore contract (docs/design.md §6; docs/decisions/0006):
order-independent registrations, the conversation set, peers, forward-only read
positions, and the durable projection's checkpoint (bind, compare-and-set, lost replies)."""

from __future__ import annotations

import pytest

from qim._core import ids
from qim.consts import SESSION_PROJECT_MAX_REGS
from qim.stores.errors import CheckpointConflict
from qim.stores.sessions import Registration

DIRECT = ids.conversation_id_direct(7, 5, 9)
GROUP = ids.conversation_id_group(7, 77)


async def test_registrations_sets_peers_and_read_positions(stores):
    s, r = stores.sessions, stores.reads
    assert await s.register([Registration(7, 5, DIRECT, 2000, 2, 9), Registration(7, 5, GROUP, 1000, 0, 0)]) == 2
    assert await s.register([Registration(7, 5, DIRECT, 1500, 1, 9)]) == 0  # older: nothing moves back
    assert await s.register([]) == 0
    assert await s.conversations(7, 5) == [(1000, GROUP.hex().encode()), (2000, DIRECT.hex().encode())]
    assert await s.scores(7, 5, [DIRECT.hex().encode(), b"00" * 16]) == [2000, None]
    assert await s.listed(7, 5, DIRECT) and not await s.listed(7, 9, DIRECT)
    assert await s.peers(7, 5, [DIRECT, GROUP]) == [9, 0]
    assert await r.positions(7, 5, [DIRECT, GROUP]) == [2, 0]  # sending marked it read
    assert await r.mark_read(7, 5, DIRECT, 1) == (2, False)  # never back
    assert await r.mark_read(7, 5, GROUP, 4) == (4, True)
    assert await r.positions(7, 5, [GROUP]) == [4]
    assert await s.conversations(7, 404) == [] and await r.positions(7, 5, []) == []


async def test_a_set_is_unchecked_until_marked_and_the_mark_is_per_user(stores):
    """The mark that a set was completed from user_conversation_state (docs/decisions/0065):
    absent for a set the projection alone wrote, read with the set in one call."""
    s = stores.sessions
    await s.register([Registration(7, 21, DIRECT, 2000, 0, 9)])
    assert await s.checked_conversations(7, 21) == ([(2000, DIRECT.hex().encode())], False)
    assert not await s.mark_checked(7, 21, 2)  # the set holds fewer than were checked: lost since
    assert await s.checked_conversations(7, 21) == ([(2000, DIRECT.hex().encode())], False)
    assert await s.mark_checked(7, 21, 1)
    assert await s.checked_conversations(7, 21) == ([(2000, DIRECT.hex().encode())], True)
    assert await s.checked_conversations(7, 22) == ([], False)  # another user
    assert await s.checked_conversations(8, 21) == ([], False)  # another tenant


async def test_a_batch_larger_than_one_script_call_registers_every_member(stores):
    """A group message's registrations for many members (more than one script call
    takes: SESSION_PROJECT_MAX_REGS) are all written, in one pipelined round trip, and
    counted once; the same batch again adds nothing and moves nothing back."""
    s = stores.sessions
    members = range(1000, 1000 + 2 * SESSION_PROJECT_MAX_REGS + 5)
    regs = [Registration(7, u, GROUP, 3000, 11 if u == 1000 else 0, 0) for u in members]
    assert await s.register(regs) == len(regs)
    assert await s.register(regs) == 0
    for u in (1000, 1000 + SESSION_PROJECT_MAX_REGS, members[-1]):
        assert await s.conversations(7, u) == [(3000, GROUP.hex().encode())]
    assert await stores.reads.positions(7, 1000, [GROUP]) == [11]  # the sender's own message
    assert await stores.reads.positions(7, 1001, [GROUP]) == [0]


async def test_checkpoint_binds_advances_and_refuses_a_second_owner(stores):
    s = stores.sessions  # one checkpoint per session shard, fenced by its owner_epoch
    new = await s.checkpoint_bind(1, "cluster|topic|4", 1)
    assert (new.status, new.offsets) == ("NEW", [0])
    await s.checkpoint_advance(1, "cluster|topic|4", 1, 0, 5)
    await s.checkpoint_advance(1, "cluster|topic|4", 1, 0, 5)  # a retry after a lost reply
    resumed = await s.checkpoint_bind(1, "cluster|topic|4", 1)
    assert (resumed.status, resumed.offsets) == ("OK", [5])
    with pytest.raises(CheckpointConflict) as conflict:
        await s.checkpoint_advance(1, "cluster|topic|4", 1, 3, 9)  # not the stored position
    assert conflict.value.reason == "QIM_CKPT_CONFLICT"
    with pytest.raises(CheckpointConflict):
        await s.checkpoint_advance(1, "other|binding|4", 1, 5, 6)
    mismatch = await s.checkpoint_bind(1, "cluster|other-topic|4", 1)
    assert (mismatch.status, mismatch.binding) == ("MISMATCH", "cluster|topic|4")
    assert (await s.checkpoint_bind(3, "cluster|topic|4", 1)).status == "NEW"  # shard 3 has its own
