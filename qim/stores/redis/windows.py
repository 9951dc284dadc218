"""The badge settler's window cache (docs/decisions/0158-settler-window-cache.md): the
records already read, reduced to the fields of the unread definition, and the history
index where it is known complete, so a settle reads neither the records it holds nor,
mostly, the window's index: not the whole exact window (up to UNREAD_EXACT_WINDOW + 1
records) of a recipient who never reads, five rounds a second.

What it holds, per (tenant, conversation) (`Held`): `checked`, a conversation_seq;
message_id -> WindowRecord (conversation_seq, sender_id, message_type, state,
mention_all, mention_user_ids: every field count_unread and mentions read); and, when
`low` is set, the index rows of (low, checked], every seq of that range indexed.

Why it stays exact (the reads: held.py):
- Records. A record changes in place only in state_change.lua (recall, delete, edit),
  which reserves a CONTROL message of the same conversation in the same call
  (RedisCommitStore.reserve_state_change refuses any other type). Every held record
  reflects every rewrite whose reserved seq is <= `checked`: each read of a held
  conversation GETs its seq counter C' and then its index above `checked`; unless that
  shows every seq of (checked, C'] and none of them is a CONTROL message, the held
  records are not used (read again) and replaced; `checked` becomes C'. A new entry
  starts at the seq of the head it read (indexed, hence reserved before its records
  were read).
- Index. Seqs come from one counter; a seq is indexed once (with its record, or later by
  record.lua in split mode) and removed only by the archiver's trim (history_trim.lua),
  below the hot floor it raises in the same call. So once every seq of (low, checked]
  was seen indexed, no row of that range is added later, and the floor (read after the
  index above `checked`) tells which were removed. A window is served from the held
  index only when its base is >= max(low, floor) and a held row is visible to the query.
The head is always read whole; the read position, the intervals and the user's choices
are read every time, never held.

Bound: at most MAX_RECORDS records and MAX_CONVERSATIONS conversations, least recently
used conversations evicted first; a conversation keeps about one window (records more
than a window below `checked` are pruned, the held index with them). ~0.3 KB a record:
see the decision record.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import OrderedDict
from typing import Any, NamedTuple, Optional, Sequence

from qim.proto.v1 import message_pb2
from qim.stores.messages import Tail, TailQuery

MAX_RECORDS = 50_000
MAX_CONVERSATIONS = 20_000
# a window shorter than this starts no entry: read as before, since the seq counter and
# the index above `checked` cost about what reading a few records does (a sender's own
# window, a reader's)
MIN_WINDOW = 16


class WindowRecord(NamedTuple):
    """The fields of a MessageRecord the unread definition reads (summary.py count_unread,
    mentions), under the same names."""

    conversation_seq: int
    sender_id: int
    message_type: int
    state: int
    mention_all: bool
    mention_user_ids: tuple[int, ...]


def window_record(rec: message_pb2.MessageRecord) -> WindowRecord:
    """The WindowRecord of a decoded record."""
    return WindowRecord(rec.conversation_seq, rec.sender_id, rec.message_type, rec.state, rec.mention_all,
                        tuple(rec.mention_user_ids))


class Held:
    """One conversation's entry: `checked` (see the module doc), `records` (message_id ->
    WindowRecord), `gen` (raised by every write: a read validated against an older
    generation does not write back), and, when `low` is not None, the conversation's
    history index over (low, checked] complete: `seqs`/`mids`/`recs` ascending, every seq
    of that range indexed (so none is added later), `recs` their held records."""

    __slots__ = ("checked", "records", "gen", "low", "seqs", "mids", "recs")

    def __init__(self, checked: int) -> None:
        self.checked = checked
        self.records: dict[bytes, WindowRecord] = {}
        self.gen = 0
        self.low: Optional[int] = None
        self.seqs: list[int] = []
        self.mids: list[bytes] = []
        self.recs: list[WindowRecord] = []

    def cut(self, floor: int) -> None:
        """Forget the index at or below `floor` (trimmed, or out of every window)."""
        if self.low is not None and floor > self.low:
            i = bisect_right(self.seqs, floor)
            self.seqs, self.mids, self.recs = self.seqs[i:], self.mids[i:], self.recs[i:]
            self.low = min(floor, self.checked)


class WindowCache:
    """Bounded LRU of Held entries by (tenant, conversation_id); one per settler, not shared
    between processes. Counters (when `metrics` is given): qim_session_window_records_total
    {outcome = hit | miss} (window records served held / read),
    qim_session_window_drops_total{reason = gap | control} (a conversation's records dropped:
    a seq of (checked, C'] not in the index, or a CONTROL message among them) and
    qim_session_window_reads_total{path = held | index} (windows served from the held
    index / read from Redis's)."""

    def __init__(self, metrics: Any = None, max_records: int = MAX_RECORDS,
                 max_conversations: int = MAX_CONVERSATIONS) -> None:
        self.max_records, self.max_conversations = max_records, max_conversations
        self._held: OrderedDict[tuple[int, bytes], Held] = OrderedDict()
        self.records = 0  # records held over every entry
        self._hits: Any = None
        self._misses: Any = None
        self._drops: Any = None
        self._paths: Any = None
        if metrics is not None:
            c = metrics.counter("qim_session_window_records", "Window records of the settler's summarize",
                                ["outcome"])
            self._hits, self._misses = c.labels(outcome="hit"), c.labels(outcome="miss")
            self._drops = metrics.counter("qim_session_window_drops",
                                          "Conversations whose held window records were dropped", ["reason"])
            paths = metrics.counter("qim_session_window_reads", "Windows of the settler's summarize", ["path"])
            self._paths = (paths.labels(path="index"), paths.labels(path="held"))

    def __len__(self) -> int:
        return len(self._held)

    def get(self, tenant: int, conversation_id: bytes) -> Optional[Held]:
        """The entry (now the most recently used), None when not held."""
        held = self._held.get((tenant, conversation_id))
        if held is not None:
            self._held.move_to_end((tenant, conversation_id))
        return held

    def counted(self, hits: int, misses: int, served: bool) -> None:
        """Count window records served held (`hits`) and read (`misses`), and one window
        `served` from the held index or not."""
        if self._hits is not None:
            if hits:
                self._hits.inc(hits)
            if misses:
                self._misses.inc(misses)
            self._paths[served].inc()

    def dropped(self, reason: str) -> None:
        """Count a conversation whose held records were dropped (`reason`: gap | control)."""
        if self._drops is not None:
            self._drops.labels(reason=reason).inc()

    def write(self, tenant: int, conversation_id: bytes, seen: Optional[Held], gen: int, keep: bool, checked: int,
              fresh: dict[bytes, WindowRecord], window: int, new: Sequence[tuple[bytes, int]] = (),
              floor: int = 0, index: Optional[tuple[int, list[int], list[bytes]]] = None) -> None:
        """After a read validated against `seen` at generation `gen` and read `checked` (C'):
        `keep` the held entry (valid: its records not stale, `new` = the index rows of
        (old checked, C'], ascending) or start a new one; add the `fresh` records (read
        after C' was); the held index loses what the hot `floor` trimmed; `index` = (low,
        seqs, mids), a complete index over (low, C'] this read found, is taken by an entry
        without one. Nothing is written when the entry changed meanwhile (another read
        wrote it: its C' may be newer than this read's records)."""
        key = (tenant, conversation_id)
        held = self._held.get(key)
        if held is not seen or (held is not None and held.gen != gen):
            return
        if held is None or not keep or checked < held.checked:
            if held is not None:
                self.records -= len(held.records)
            held = self._held[key] = Held(checked)
            self._held.move_to_end(key)
        before = len(held.records)
        held.records.update(fresh)
        records = held.records
        if held.low is not None and new:  # every seq of (old checked, C'] indexed: still complete
            held.seqs.extend(s for _, s in new)
            held.mids.extend(m for m, _ in new)
            held.recs.extend(records[m] for m, _ in new)
        held.checked = checked
        if held.low is None and index is not None:
            held.low, held.seqs, held.mids = index
            held.recs = [records[m] for m in held.mids]
        held.cut(floor)
        held.gen += 1
        if len(held.records) > 2 * (window + 1):  # prune what no exact window can reach now
            below = checked - window - 1
            held.records = {m: r for m, r in held.records.items() if r.conversation_seq > below}
            held.cut(below)
        self.records += len(held.records) - before
        self._evict()

    def _evict(self) -> None:
        while self._held and (self.records > self.max_records or len(self._held) > self.max_conversations):
            _, held = self._held.popitem(last=False)
            self.records -= len(held.records)


def contiguous(rows: Sequence[tuple[bytes, int]], checked: int, current: int) -> bool:
    """Whether `rows` (index rows above `checked`, ascending, those <= `current`) are every
    seq of (checked, current], each once."""
    return len(rows) == current - checked and all(seq == checked + 1 + i for i, (_, seq) in enumerate(rows))


class WindowedMessages:
    """The MessageStore face the settler's Summarizer reads (only `tails` is used there):
    RedisMessageStore.tails with this cache."""

    def __init__(self, messages: Any, cache: WindowCache) -> None:
        self.messages, self.cache = messages, cache

    async def tails(self, tenant: int, queries: Sequence[TailQuery], window: int) -> list[Tail]:
        """MessageStore.tails through the cache (window records held are WindowRecords)."""
        return await self.messages.tails(tenant, queries, window, cache=self.cache)
