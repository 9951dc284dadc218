"""What the low-latency path remembers for the durable consumer (decision 0167;
qim/services/session/projected.py): by (partition, log offset of the mailbox_seq),
taken once, bounded with the oldest forgotten first and counted."""

from __future__ import annotations

import pytest

from qim._core import mailbox_seq as mseq
from qim.services.session.projected import Projected


def test_a_record_is_taken_once_by_its_partition_and_the_offset_of_its_mailbox_seq():
    p = Projected()
    assert p.add(3, mseq.compose(7, 41))
    assert not p.take(4, 41)  # another partition
    assert not p.take(3, 40)
    assert p.take(3, 41)  # the epoch is not part of it: the offset names the record
    assert not p.take(3, 41)  # once: a re-read after a lost tenure is written again
    assert len(p) == 0


def test_no_mailbox_seq_or_an_invalid_one_is_not_remembered():
    p = Projected()
    assert not p.add(0, 0)  # an older mailbox node sends none
    assert not p.add(0, 5)  # shard epoch 0: never a composed value
    assert not p.add(0, -1)
    assert len(p) == 0 and not p.take(0, 5)


def test_past_its_bound_the_oldest_are_forgotten_and_counted():
    p = Projected(limit=3)
    for offset in range(5):
        p.add(1, mseq.compose(1, offset))
    assert len(p) == 3 and p.forgotten == 2
    assert [p.take(1, o) for o in range(5)] == [False, False, True, True, True]
    # taken ones leave no debt: the next adds forget nothing that was still remembered
    for offset in range(5, 8):
        p.add(1, mseq.compose(1, offset))
    assert p.forgotten == 2 and len(p) == 3


def test_a_limit_below_one_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        Projected(limit=0)
