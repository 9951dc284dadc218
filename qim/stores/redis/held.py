"""MessageStore.tails through the badge settler's window cache (RedisMessageStore.tails
with `cache`; the rule and the entries: qim/stores/redis/windows.py, docs/decisions/0158).

Per query one of two reads, chosen before the pipeline:
- held: the conversation's held index is complete over (low, checked], the query's base
  is at least low and some held row is visible to it. The pipeline reads only the seq
  counter C', the index above `checked` and the hot floor; the head and the window are
  the held rows and the new ones (<= C'), cut to the query's visible ranges.
- index: the head and the window from the history index as `_tails_on` reads them (plus
  C' and the index above `checked` when the conversation is held).
Then one MGET: the heads (always read whole), the window records not held, the new rows'
records (their types decide whether the held records stay); a second MGET only for the
window records a CONTROL message among the new rows made stale. A held read whose entry
turns out stale (a hole above `checked`, a floor above the base) is read again by the
index path, in a second pipeline.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Optional, Sequence

from qim.consts import MESSAGE_TYPE_CONTROL
from qim.stores.intervals import descending_ranges
from qim.stores.messages import Tail, TailQuery
from qim.stores.redis.keys import CommitKeys
from qim.stores.redis.messages import _bound, _checked
from qim.stores.redis.scripts import boundary, int_score_pairs
from qim.stores.redis.windows import MIN_WINDOW, Held, WindowCache, WindowRecord, contiguous, window_record

Wanted = dict[tuple[bytes, bytes], tuple[CommitKeys, int]]


class _Read:
    """One query of a `tails_held` call: the held entry as found (`held`, `gen`), whether
    it is `served` from the held index, the rows (`head`, `rows`: None past the window;
    served: only the new ones, the held ones' records in `part`),
    C' (`current`), the hot floor, the index rows of (checked, C'] (`new`: None when the
    held entry is stale), the held records used (`kept`) and what `_plan` made of them."""

    __slots__ = ("q", "keys", "ranges", "held", "gen", "served", "head", "rows", "part", "current", "floor", "new",
                 "kept", "window", "missing", "read")

    def __init__(self, q: TailQuery, keys: CommitKeys, held: Optional[Held], serve: bool) -> None:
        self.q, self.keys, self.ranges, self.held = q, keys, descending_ranges(q.intervals, None), held
        self.gen = held.gen if held is not None else 0
        self.served = serve and held is not None and _servable(held, self.ranges, q.base, held.low, [])
        self.head: Optional[tuple[bytes, int]] = None
        self.rows: Optional[list[tuple[bytes, int]]] = None
        self.part: list[WindowRecord] = []  # a served window's held rows, as records
        self.current = self.floor = 0
        self.new: Optional[list[tuple[bytes, int]]] = None
        self.kept: dict[bytes, WindowRecord] = {}
        self.window: list = []
        self.missing: list[tuple[int, bytes]] = []
        self.read: list[bytes] = []


def _servable(held: Held, ranges, base: int, low: Optional[int], new: list) -> bool:
    """Whether a query (visible `ranges`, `base`) can be served from the held index
    complete over (low, checked] (and the `new` rows above it): base >= low and a row
    visible to it there (so its head is known)."""
    if low is None or base < low:
        return False
    return _newest(held, ranges, low, new) is not None


def _newest(held: Held, ranges, low: int, new: list) -> Optional[tuple[bytes, int]]:
    """The newest row (message_id, seq) above `low` visible in `ranges` (descending)."""
    for lo, hi in ranges:
        for mid, seq in reversed(new):  # above every held row
            if lo < seq and (hi is None or seq <= hi) and seq > low:
                return mid, seq
        top = len(held.seqs) if hi is None else bisect_right(held.seqs, hi)
        if top and held.seqs[top - 1] > max(lo, low):
            return held.mids[top - 1], held.seqs[top - 1]
    return None


def _rows(held: Held, ranges, base: int, new: list, part: Optional[list]) -> list[tuple[bytes, int]]:
    """The visible rows above `base`: the held ones' records appended to `part`, the rows
    (message_id, seq) returned: the new ones, and when `part` is None the held ones too."""
    out: list[tuple[bytes, int]] = []
    seqs = held.seqs
    for lo, hi in ranges:
        bottom = max(lo, base)
        out.extend((m, s) for m, s in new if s > bottom and (hi is None or s <= hi))
        top = len(seqs) if hi is None else bisect_right(seqs, hi)
        start = bisect_left(seqs, bottom + 1)
        if part is None:
            out.extend(zip(held.mids[start:top], seqs[start:top]))
        else:
            part.extend(held.recs[start:top])
    return out


async def tails_held(client, tenant: int, queries: Sequence[TailQuery], window: int, cache: WindowCache,
                     serve: bool = True) -> list[Tail]:
    """MessageStore.tails over the conversations of one core instance with `cache` (module
    doc); `serve` False: every query by the index path."""
    reads = [_Read(q, CommitKeys(tenant, q.conversation_id), cache.get(tenant, q.conversation_id), serve)
             for q in queries]
    with boundary("session heads"):
        async with client.pipeline(transaction=False) as pipe:  # raw replies: see int_score_pairs
            for r in reads:
                if r.held is not None:  # C', then the index above `checked`, then the floor
                    pipe.get(r.keys.seq())
                    pipe.execute_command("ZRANGEBYSCORE", r.keys.history(), f"({r.held.checked}", "+inf",
                                         "WITHSCORES", "LIMIT", 0, window + 2)
                    pipe.get(r.keys.floor())
                if r.served:
                    continue
                for lo, hi in r.ranges:
                    pipe.execute_command("ZREVRANGEBYSCORE", r.keys.history(), _bound(hi), f"({lo}",
                                         "WITHSCORES", "LIMIT", 0, 1)
                for lo, hi in r.ranges:
                    pipe.execute_command("ZREVRANGEBYSCORE", r.keys.history(), _bound(hi),
                                         f"({max(lo, r.q.base)}", "WITHSCORES", "LIMIT", 0, window + 1)
            res = await pipe.execute()
        again = _parse(reads, res, window, cache)
        redone = {id(r) for r in again}
        wanted: Wanted = {}
        for r in reads:
            if r.head is not None and id(r) not in redone:
                _plan(r, wanted)
        fetched = await _records(client, wanted)
        stale: Wanted = {}
        for r in reads:
            if r.rows is not None and r.new and id(r) not in redone \
                    and any(_type(fetched, r, m) == MESSAGE_TYPE_CONTROL for m, _ in r.new):
                cache.dropped("control")  # a rewrite may have happened: nothing held is used
                if r.served:  # the held index stands (a rewrite moves no row); its records not
                    assert r.held is not None
                    r.rows, r.part = _rows(r.held, r.ranges, r.q.base, r.new, None), []
                r.new, r.kept = None, {}
                _plan(r, stale)
        if stale:
            fetched.update(await _records(client, {k: v for k, v in stale.items() if k not in fetched}))
    redo = dict(zip((id(r) for r in again), await tails_held(client, tenant, [r.q for r in again], window, cache,
                                                             serve=False))) if again else {}
    return [redo[id(r)] if id(r) in redo else _finish(r, tenant, fetched, window, cache) for r in reads]


def _parse(reads: list[_Read], res: list, window: int, cache: WindowCache) -> list[_Read]:
    """Fill each read from the pipeline's replies; the served reads that cannot be served
    after all (read again by the index path)."""
    at, again = 0, []
    for r in reads:
        held = r.held
        if held is not None:
            r.current, r.floor = int(res[at] or 0), int(res[at + 2] or 0)
            new = [p for p in int_score_pairs(res[at + 1]) if p[1] <= r.current]
            at += 3
            if r.current >= held.checked and contiguous(new, held.checked, r.current):
                r.new, r.kept = new, held.records
        if r.served:
            low = None if held is None or held.low is None else max(held.low, r.floor)
            if r.new is None or held is None or low is None or not _servable(held, r.ranges, r.q.base, low, r.new):
                again.append(r)  # stale (the index path counts the drop) or a floor above the base
                continue
            r.head = head = _newest(held, r.ranges, low, r.new)
            if head is not None and head[1] - r.q.base <= window:
                r.rows = _rows(held, r.ranges, r.q.base, r.new, r.part)
            continue
        n = len(r.ranges)
        r.head = next((p[0] for p in map(int_score_pairs, res[at:at + n]) if p), None)
        if held is None and r.head is not None:
            r.current = r.head[1]  # indexed, so reserved before the MGET: a valid `checked`
        if r.head is not None and r.head[1] - r.q.base <= window:
            r.rows = [p for part in res[at + n:at + 2 * n] for p in int_score_pairs(part)]
            if held is not None and r.new is None:
                cache.dropped("gap")
        at += 2 * n
    return again


def _finish(r: _Read, tenant: int, fetched: dict, window: int, cache: WindowCache) -> Tail:
    """The Tail of one read; the entry written back."""
    conv = r.q.conversation_id
    head = fetched[(conv, r.head[0])] if r.head is not None else None
    if r.rows is None:  # not exact (or nothing visible): no window read, the entry left as it is
        return Tail(head, None)
    window_rows = r.window
    for i, mid in r.missing:
        window_rows[i] = fetched[(conv, mid)]
    cache.counted(len(r.part) + len(r.rows) - len(r.missing), len(r.missing), r.served)
    window_rows += r.part  # the held rows of a served window (their order does not matter)
    if r.held is not None or len(r.rows) >= MIN_WINDOW:
        fresh = {mid: window_record(fetched[(conv, mid)]) for mid in r.read}
        cache.write(tenant, conv, r.held, r.gen, r.new is not None, r.current, fresh, window, r.new or (),
                    r.floor, None if r.served else _complete(r))
    return Tail(head, window_rows)


def _complete(r: _Read) -> Optional[tuple[int, list[int], list[bytes]]]:
    """(low, seqs, mids) when this index read saw every seq of (base, C'] (the window rows
    are base+1 .. C', each once): a complete held index from here on."""
    rows, base = r.rows or [], r.q.base
    if r.head is None or r.head[1] != r.current or len(rows) != r.current - base:
        return None
    asc = sorted(rows, key=lambda p: p[1])
    if any(seq != base + 1 + i for i, (_, seq) in enumerate(asc)):
        return None
    return base, [s for _, s in asc], [m for m, _ in asc]


def _plan(r: _Read, wanted: Wanted) -> None:
    """What `r` needs read (into `wanted`): the head always, the window rows and the new
    rows not held; `r.window` gets the held WindowRecords in place (None where read),
    `r.missing` the (index, message_id) to fill, `r.read` every message_id read."""
    conv, keys, kept = r.q.conversation_id, r.keys, r.kept
    head = r.head
    assert head is not None
    r.read = [head[0]]
    wanted[(conv, head[0])] = (keys, head[1])  # the head: always read whole
    if r.rows is None:
        return
    # held where the index row is the held record's (a message_id never moves seq; checked anyway)
    window: list = [w if (w := kept.get(mid)) is not None and w.conversation_seq == seq else None
                    for mid, seq in r.rows]
    missing = [(i, r.rows[i][0]) for i, w in enumerate(window) if w is None]
    for i, mid in missing:  # another read of the conversation may want it too: read once
        wanted.setdefault((conv, mid), (keys, r.rows[i][1]))
        r.read.append(mid)
    for mid, seq in r.new or ():
        w = kept.get(mid)
        if w is None or w.conversation_seq != seq:
            wanted.setdefault((conv, mid), (keys, seq))
            r.read.append(mid)
    r.window, r.missing = window, missing


def _type(fetched: dict, r: _Read, mid: bytes) -> int:
    """The message_type of a new row: as read by this call, else as held."""
    rec = fetched.get((r.q.conversation_id, mid))
    return rec.message_type if rec is not None else r.kept[mid].message_type


async def _records(client, wanted: Wanted) -> dict:
    """{(conversation_id, message_id): checked record} of `wanted` (one MGET)."""
    if not wanted:
        return {}
    raws = await client.mget([keys.record(mid) for (_, mid), (keys, _) in wanted.items()])
    return {(conv, mid): _checked(raw, conv, mid, seq) for ((conv, mid), (_, seq)), raw in zip(wanted.items(), raws)}
