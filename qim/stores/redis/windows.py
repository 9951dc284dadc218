"""The badge settler's window cache (docs/decisions/0158-settler-window-cache.md): the
fields of the unread definition of records already read, so a settle reads and decodes
only the records it does not hold, not the whole exact window (up to
UNREAD_EXACT_WINDOW + 1 records) of a recipient who never reads, five rounds a second.

What it holds, per (tenant, conversation): `checked`, a conversation_seq, and
message_id -> WindowRecord (conversation_seq, sender_id, message_type, state,
mention_all, mention_user_ids: every field count_unread and mentions read). The rule
that keeps it exact (RedisMessageStore.tails, `_tails_held`): a record changes in place
only in state_change.lua (recall, delete, edit), which reserves a CONTROL message of the
same conversation in the same call (RedisCommitStore.reserve_state_change refuses any
other type). So every cached record reflects every rewrite whose CONTROL message's seq
is <= `checked`; each read of a held conversation first GETs its seq counter C' and then
its history index above `checked`; unless that shows every seq of (checked, C'] and none
of them is a CONTROL message, the conversation's cached records are dropped (re-read),
and `checked` becomes C'. A new entry starts at the seq of the head it read (indexed,
hence reserved before its records were read). The head is always read whole; the read
position, the intervals and the user's choices are read every time, never cached.

Bound: at most MAX_RECORDS records and MAX_CONVERSATIONS conversations, least recently
used conversations evicted first; a conversation keeps about one window (records more
than a window below `checked` are pruned). ~0.3 KB a record: see the decision record.
"""

from __future__ import annotations

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
    generation does not write back)."""

    __slots__ = ("checked", "records", "gen")

    def __init__(self, checked: int) -> None:
        self.checked = checked
        self.records: dict[bytes, WindowRecord] = {}
        self.gen = 0


class WindowCache:
    """Bounded LRU of Held entries by (tenant, conversation_id); one per settler, not shared
    between processes. Counters (when `metrics` is given): qim_session_window_records_total
    {outcome = hit | miss} (window records served held / read), and
    qim_session_window_drops_total{reason = gap | control} (a conversation's records dropped:
    a seq of (checked, C'] not in the index, or a CONTROL message among them)."""

    def __init__(self, metrics: Any = None, max_records: int = MAX_RECORDS,
                 max_conversations: int = MAX_CONVERSATIONS) -> None:
        self.max_records, self.max_conversations = max_records, max_conversations
        self._held: OrderedDict[tuple[int, bytes], Held] = OrderedDict()
        self.records = 0  # records held over every entry
        self._hits: Any = None
        self._misses: Any = None
        self._drops: Any = None
        if metrics is not None:
            c = metrics.counter("qim_session_window_records", "Window records of the settler's summarize",
                                ["outcome"])
            self._hits, self._misses = c.labels(outcome="hit"), c.labels(outcome="miss")
            self._drops = metrics.counter("qim_session_window_drops",
                                          "Conversations whose held window records were dropped", ["reason"])

    def __len__(self) -> int:
        return len(self._held)

    def get(self, tenant: int, conversation_id: bytes) -> Optional[Held]:
        """The entry (now the most recently used), None when not held."""
        held = self._held.get((tenant, conversation_id))
        if held is not None:
            self._held.move_to_end((tenant, conversation_id))
        return held

    def counted(self, hits: int, misses: int) -> None:
        """Count window records served held (`hits`) and read (`misses`)."""
        if self._hits is not None:
            if hits:
                self._hits.inc(hits)
            if misses:
                self._misses.inc(misses)

    def dropped(self, reason: str) -> None:
        """Count a conversation whose held records were dropped (`reason`: gap | control)."""
        if self._drops is not None:
            self._drops.labels(reason=reason).inc()

    def write(self, tenant: int, conversation_id: bytes, seen: Optional[Held], gen: int, keep: bool, checked: int,
              fresh: dict[bytes, WindowRecord], window: int) -> None:
        """After a read validated against `seen` at generation `gen` and read `checked` (C'):
        `keep` the held records (none of them stale) or drop them, add the `fresh` ones
        (read after C' was), set `checked`. Nothing is written when the entry changed
        meanwhile (another read wrote it: its C' may be newer than this read's records)."""
        key = (tenant, conversation_id)
        held = self._held.get(key)
        if held is not seen or (held is not None and held.gen != gen):
            return
        if held is None or not keep or checked < held.checked:
            if held is not None:
                self.records -= len(held.records)
            held = self._held[key] = Held(checked)
            self._held.move_to_end(key)
        held.checked = checked
        held.gen += 1
        before = len(held.records)
        held.records.update(fresh)
        if len(held.records) > 2 * (window + 1):  # prune what no exact window can reach now
            floor = checked - window - 1
            held.records = {m: r for m, r in held.records.items() if r.conversation_seq > floor}
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
