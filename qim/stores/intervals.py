"""Member intervals of a group (docs/design.md §7: "A member who leaves and re-joins holds
several intervals. History, unread and heads outside every interval are invisible; a
leaver still reads what came before leaving.").

Stored form (every backend): per (group, user) the text "j1:l1,j2:l2,...,jn:ln", oldest
first, written only by the group change of the commit store: interval i covers conversation_seq s with
j_i < s <= l_i (l_i = 0: still a member, open). Intervals are disjoint and ascending (a
re-join's j is the seq of its JOINED message minus one, at or above the previous
left_at). At most MEMBER_INTERVALS_MAX are kept; a 17th membership drops the oldest, whose
messages then become invisible to that user.

Pure logic, no I/O: the group store parses with it, and the writer's history pages, the
session list, MARK_READ and the message store's history reads use the same functions, so
every read path draws the same boundaries.
"""

from __future__ import annotations

from typing import Optional, Sequence

Interval = tuple[int, Optional[int]]  # (lo exclusive, hi inclusive | None = open)
OPEN: tuple[Interval, ...] = ((0, None),)  # direct conversations: everything


def parse_intervals(raw: bytes) -> tuple[Interval, ...]:
    """Intervals from a group_members value. ValueError when it is not well formed
    (empty, non-numeric, overlapping, descending, or open before the last)."""
    out: list[Interval] = []
    parts = raw.split(b",")
    for i, part in enumerate(parts):
        lo_raw, _, hi_raw = part.partition(b":")
        lo, hi = int(lo_raw), int(hi_raw)  # ValueError on garbage or a missing ':'
        if hi == 0 and i != len(parts) - 1:
            raise ValueError("only the last member interval may be open")
        if (hi and hi <= lo) or (out and lo < (out[-1][1] or 0)):
            raise ValueError("member intervals overlap or are not ascending")
        out.append((lo, hi or None))
    return tuple(out)


def is_current(intervals: Sequence[Interval]) -> bool:
    """A current member: the last interval is open."""
    return bool(intervals) and intervals[-1][1] is None


def contains(intervals: Sequence[Interval], seq: int) -> bool:
    """Whether conversation_seq `seq` is visible."""
    return any(seq > lo and (hi is None or seq <= hi) for lo, hi in intervals)


def ascending_ranges(intervals: Sequence[Interval], after: int) -> list[Interval]:
    """The visible ranges above `after` (exclusive), ascending: what a NEWER page scans."""
    out = []
    for lo, hi in intervals:
        lo = max(lo, after)
        if hi is None or hi > lo:
            out.append((lo, hi))
    return out


def descending_ranges(intervals: Sequence[Interval], below: Optional[int]) -> list[Interval]:
    """The visible ranges at or below `below` (inclusive; None = no bound), newest first:
    what an OLDER page, a session head or the MARK_READ clamp scans."""
    out = []
    for lo, hi in reversed(intervals):
        top = hi if below is None else (below if hi is None else min(hi, below))
        if top is None or top > lo:
            out.append((lo, top))
    return out


def latest(intervals: Sequence[Interval]) -> Interval:
    """The newest interval (the one SessionEntry.joined_at / left_at report)."""
    return intervals[-1]


def clip(intervals: Sequence[Interval], floor: int) -> tuple[Interval, ...]:
    """The parts of `intervals` at or below `floor` (the archive tier, docs/decisions/0023: what the archive serves
    below a conversation's hot floor); empty when floor is 0."""
    out = []
    for lo, hi in intervals:
        if lo < floor:
            out.append((lo, floor if hi is None else min(hi, floor)))
    return tuple(out)
