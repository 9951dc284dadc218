"""A room's replay ring: its newest events, bounded by count and by bytes (docs/design.md
§13 "Rooms"; docs/decisions/0045-rooms-phase-one-in-process-ring.md; the shape of centrifuge's memstream:
a stream with an epoch, offsets and a cap).

Each entry keeps its event already encoded as field 1 of RoomJoined / RoomEvents (tag,
length, bytes: `event_field`), so a replay or a push is a concatenation, never a
re-serialisation per member. The ring's seqs are contiguous: every event of the room
gets the next room_seq and enters the ring, the oldest leave it first; so the ring holds
exactly first_seq..last_seq. The newest event is always kept, even alone over the byte
bound (a post is at most the body limit, and QIM_ROOM_RING_BYTES is at least 1 KiB).
"""

from __future__ import annotations

import collections
import itertools
from dataclasses import dataclass
from typing import Deque, Iterator, Optional

EVENTS_FIELD_TAG = b"\x0a"  # field 1, length-delimited: `events` of RoomJoined and RoomEvents


def varint(n: int) -> bytes:
    """Protobuf base-128 varint of a non-negative int."""
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def event_field(event: bytes) -> bytes:
    """A serialized RoomEvent as field 1 of RoomJoined / RoomEvents."""
    return EVENTS_FIELD_TAG + varint(len(event)) + event


@dataclass
class Entry:
    """One event in the ring: `seq`, `wire` (event_field bytes), `head` (bytes of wire
    before the event itself), `sender` and `kind` (RoomEvent.Kind) for recalls."""

    __slots__ = ("seq", "wire", "head", "sender", "kind")
    seq: int
    wire: bytes
    head: int
    sender: int
    kind: int

    @classmethod
    def of(cls, seq: int, event: bytes, sender: int, kind: int) -> "Entry":
        """The entry of one serialized RoomEvent."""
        wire = event_field(event)
        return cls(seq, wire, len(wire) - len(event), sender, kind)

    @property
    def event(self) -> bytes:
        """The serialized RoomEvent."""
        return self.wire[self.head:]


class Ring:
    """At most `max_events` entries and `max_bytes` of wire bytes (the newest always
    stays). `evicted` counts entries pushed out since the ring was made."""

    def __init__(self, max_events: int, max_bytes: int) -> None:
        if max_events < 1 or max_bytes < 1:
            raise ValueError("a ring needs max_events >= 1 and max_bytes >= 1")
        self.max_events, self.max_bytes = max_events, max_bytes
        self._entries: Deque[Entry] = collections.deque()
        self.bytes = 0
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def first_seq(self) -> int:
        """The oldest seq held (0 when empty)."""
        return self._entries[0].seq if self._entries else 0

    @property
    def last_seq(self) -> int:
        """The newest seq held (0 when empty)."""
        return self._entries[-1].seq if self._entries else 0

    def append(self, entry: Entry) -> int:
        """Add the next event (its seq must be last_seq + 1 unless the ring is empty);
        returns how many old entries it pushed out. ValueError for a seq out of order."""
        if self._entries and entry.seq != self._entries[-1].seq + 1:
            raise ValueError(f"ring seq {entry.seq} after {self._entries[-1].seq}")
        self._entries.append(entry)
        self.bytes += len(entry.wire)
        out = 0
        while len(self._entries) > 1 and (len(self._entries) > self.max_events or self.bytes > self.max_bytes):
            self.bytes -= len(self._entries.popleft().wire)
            out += 1
        self.evicted += out
        return out

    def after(self, seq: int) -> Iterator[Entry]:
        """The entries with a seq above `seq`, oldest first."""
        first = self.first_seq
        start = max(0, seq - first + 1) if first else 0
        return itertools.islice(self._entries, start, None)

    def newest(self, n: int) -> Iterator[Entry]:
        """The newest `n` entries, oldest first."""
        return itertools.islice(self._entries, max(0, len(self._entries) - n), None)

    def get(self, seq: int) -> Optional[Entry]:
        """The entry of `seq`, None when the ring does not hold it."""
        first = self.first_seq
        if not first or not first <= seq <= self._entries[-1].seq:
            return None
        return self._entries[seq - first]

    def replace(self, entry: Entry) -> None:
        """Put `entry` in the place of the held entry with its seq (a recalled post)."""
        i = entry.seq - self.first_seq
        old = self._entries[i]
        self._entries[i] = entry
        self.bytes += len(entry.wire) - len(old.wire)
