"""MessageStore contract (docs/design.md §5 steps 5 and 7, §6, §7): history pages over visible
intervals in both directions with limit and byte budget, the newest visible seq, session
tails with the exact unread window, single and batched record reads, message state."""

from __future__ import annotations

import pytest

from qim.proto.v1 import message_pb2
from qim.stores.commits import StateChange
from qim.stores.errors import RecordChanged
from qim.stores.messages import HISTORY_ITEM_OVERHEAD, NEWER, OLDER, MessageRef, TailQuery, item_size
from tests.stores.conftest import direct, now_ms

BODY = 100  # every message body of the history vectors
GAP = ((0, 4), (5, None))  # a member who left at 4 and re-joined after 5: sees 1-4 and 6-8
# (intervals, anchor, direction, limit, max_bytes) -> (seqs, has_more)
PAGES = [
    ((), 0, NEWER, 10, 1 << 20, [], False),
    (((0, None),), 0, NEWER, 10, 1 << 20, [1, 2, 3, 4, 5, 6, 7, 8], False),
    (((0, None),), 0, OLDER, 3, 1 << 20, [8, 7, 6], True),
    (((0, None),), 6, OLDER, 10, 1 << 20, [5, 4, 3, 2, 1], False),
    (((0, None),), 8, NEWER, 10, 1 << 20, [], False),
    (GAP, 0, NEWER, 10, 1 << 20, [1, 2, 3, 4, 6, 7, 8], False),
    (GAP, 2, NEWER, 3, 1 << 20, [3, 4, 6], True),
    (GAP, 4, NEWER, 10, 1 << 20, [6, 7, 8], False),
    (GAP, 0, OLDER, 3, 1 << 20, [8, 7, 6], True),
    (GAP, 7, OLDER, 2, 1 << 20, [6, 4], True),
    (GAP, 6, OLDER, 10, 1 << 20, [4, 3, 2, 1], False),
    (((2, 4),), 0, OLDER, 10, 1 << 20, [4, 3], False),  # a leaver's closed interval
    (((0, None),), 0, NEWER, 10, 2 * (BODY + HISTORY_ITEM_OVERHEAD), [1, 2], True),  # byte budget
    (((0, None),), 0, NEWER, 10, 1, [1], True),  # the first item always
]


@pytest.fixture
async def eight(stores):
    """A direct conversation with seqs 1..8, bodies of BODY bytes."""
    c = direct(stores)
    for n in range(1, 9):
        await c.send(5 if n % 2 else 9, bytes([n]) * BODY)
    return c


@pytest.mark.parametrize("intervals,anchor,direction,limit,max_bytes,seqs,has_more", PAGES)
async def test_history_page_vectors(stores, eight, intervals, anchor, direction, limit, max_bytes, seqs, has_more):
    page = await stores.messages.history_page(eight.tenant, eight.conversation_id, intervals, anchor, direction,
                                              limit, max_bytes)
    assert [r.conversation_seq for r in page.records] == seqs
    assert page.has_more is has_more
    assert all(r.body == bytes([r.conversation_seq]) * BODY for r in page.records)


async def test_unknown_direction_is_refused(stores, eight):
    with pytest.raises(ValueError):
        await stores.messages.history_page(eight.tenant, eight.conversation_id, ((0, None),), 0, 7, 10, 1000)


@pytest.mark.parametrize("intervals,latest", [(((0, None),), 8), (GAP, 8), (((0, 4),), 4), (((8, None),), None),
                                              ((), None)])
async def test_latest_visible_seq(stores, eight, intervals, latest):
    assert await stores.messages.latest_seq(eight.tenant, eight.conversation_id, intervals) == latest


# (intervals, base, window) -> (head seq, window seqs or None = not exact)
TAILS = [
    (((0, None),), 0, 200, 8, [8, 7, 6, 5, 4, 3, 2, 1]),
    (((0, None),), 5, 3, 8, [8, 7, 6]),
    (((0, None),), 4, 3, 8, None),  # 8 - 4 > 3: more than the window above the base
    (GAP, 2, 200, 8, [8, 7, 6, 4, 3]),
    (((0, 4),), 0, 200, 4, [4, 3, 2, 1]),
    (((8, None),), 8, 200, None, None),  # nothing visible
]


@pytest.mark.parametrize("intervals,base,window,head,seqs", TAILS)
async def test_tails_vectors(stores, eight, intervals, base, window, head, seqs):
    other = direct(stores, a=1, b=2)
    await other.send(1, b"elsewhere")
    tails = await stores.messages.tails(eight.tenant, [TailQuery(eight.conversation_id, intervals, base),
                                                       TailQuery(other.conversation_id, ((0, None),), 0)], window)
    assert (tails[0].head.conversation_seq if tails[0].head else None) == head
    got = None if tails[0].window is None else sorted((r.conversation_seq for r in tails[0].window), reverse=True)
    assert got == seqs
    assert tails[1].head.body == b"elsewhere" and [r.body for r in tails[1].window] == [b"elsewhere"]


async def test_get_sizes_resolve_and_a_conditional_state_change(stores):
    c = direct(stores)
    sent = await c.send(5, b"to recall")
    other = await c.send(9, b"x" * 300)
    stored = await stores.messages.get(c.tenant, c.conversation_id, sent.message_id)
    assert stored.record.body == b"to recall" and stored.record.conversation_seq == 1
    assert await stores.messages.get(c.tenant, c.conversation_id, b"\1" * 16) is None
    refs = [MessageRef(c.conversation_id, sent.message_id), MessageRef(c.conversation_id, other.message_id),
            MessageRef(c.conversation_id, b"\1" * 16)]
    sizes = await stores.messages.record_sizes(c.tenant, refs)
    assert sizes[0] > len(b"to recall") and sizes[1] > 300 and sizes[2] == 0

    recalled = message_pb2.MessageRecord()
    recalled.CopyFrom(stored.record)
    recalled.body, recalled.state = b"", message_pb2.MESSAGE_STATE_RECALLED
    change = StateChange(sent.message_id, stored.version, recalled.SerializeToString(),
                         message_pb2.MESSAGE_STATE_RECALLED)
    stale = StateChange(sent.message_id, "0" * 40, recalled.SerializeToString(), message_pb2.MESSAGE_STATE_RECALLED)
    with pytest.raises(RecordChanged):
        await stores.commits.reserve_state_change(c.reservation(5, b"r" * 16, b"notice", message_type=4), stale)
    res = c.reservation(5, b"r" * 16, b"notice", message_type=4)
    reserved = await stores.commits.reserve_state_change(res, change)
    assert reserved.fresh and reserved.conversation_seq == 3

    records, states = await stores.messages.resolve(c.tenant, refs, refs[:2])
    assert records[0].state == message_pb2.MESSAGE_STATE_RECALLED and records[0].body == b""
    assert records[1].body == b"x" * 300 and records[2] is None
    assert states == [message_pb2.MESSAGE_STATE_RECALLED, message_pb2.MESSAGE_STATE_NORMAL]
    assert await stores.messages.resolve(c.tenant, [], []) == ([], [])
    page = await stores.messages.history_page(c.tenant, c.conversation_id, ((0, None),), 0, NEWER, 10, 1 << 20)
    assert [(r.conversation_seq, r.state) for r in page.records] == [
        (1, message_pb2.MESSAGE_STATE_RECALLED), (2, 0), (3, 0)]
    assert item_size(page.records[0]) == HISTORY_ITEM_OVERHEAD  # no body once recalled
    assert now_ms() > 0
