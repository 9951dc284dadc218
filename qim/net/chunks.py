"""The outbound order of one link's chunks, whatever carries them (docs/design.md §4;
docs/decisions/0011-slow-links.md).

Each frame becomes its chunks (`qim._core.frame.encode_frame`); a transport's single
writer takes them one at a time from `ChunkQueue.next_chunk()`:
- control replies (PONG, ERROR, SEND_ACK, AUTH_OK, KICKED; one chunk each) go before any
  other chunk, so a PONG or an ACK never waits behind a large frame;
- other frames share the link round-robin, chunk by chunk;
- two frames with one (opcode, request_id) are never interleaved (the receiver
  reassembles by that key), and at most MAX_OPEN_MULTI multi-chunk frames are open at
  once (every receiver refuses more than 16 open reassemblies).
`queued_bytes` counts what was queued and not yet taken: the transport's back-pressure
and its callers' drop decisions read it.
"""

from __future__ import annotations

import collections
import heapq
from typing import Deque, Optional

from qim._core import frame as frame_codec
from qim.protocol import Opcode

MAX_OPEN_MULTI = 8  # multi-chunk frames interleaved at once (receivers allow 16 open)
# Replies that a peer's liveness probe or send path waits for: sent before bulk chunks.
URGENT_OPCODES = frozenset({Opcode.PONG, Opcode.ERROR, Opcode.SEND_ACK, Opcode.AUTH_OK, Opcode.KICKED})


class ChunkQueue:
    """Chunks waiting for one link, in the order of the module doc. `chunk_bytes` is the
    chunk size of the frames queued (1..64 KiB, checked by the caller). An empty queue
    holds no container (a deque is 760 bytes: an idle link keeps none).

    Every operation is O(1) in the frames queued (O(log n) in the multi-chunk frames
    waiting for a slot): a frame whose key is busy waits in its key's own FIFO, not in
    one list scanned on every put and every finished frame (every one-way frame has
    request_id 0, so a backed-up one-way link queued thousands of frames under one key
    and each put rescanned them all: decisions/0069). Waiting frames start in arrival
    order, as with the scan."""

    __slots__ = ("chunk_bytes", "_urgent", "_frames", "_keys", "_multi_wait", "_open_multi", "_arrivals",
                 "queued_bytes")

    def __init__(self, chunk_bytes: int) -> None:
        self.chunk_bytes = chunk_bytes
        self._urgent: Optional[Deque[bytes]] = None  # single-chunk control replies
        # The round-robin of active frames: [key, chunks, next index, multi].
        self._frames: Optional[Deque[list]] = None
        # key -> (arrival, chunks) of the frames of that key waiting behind its active one;
        # a key is present while it has an active frame or frames waiting
        self._keys: Optional[dict[tuple[int, int], Deque[tuple[int, list[bytes]]]]] = None
        # (arrival, key) of keys whose next frame is multi-chunk and waits for a slot (a heap)
        self._multi_wait: Optional[list[tuple[int, tuple[int, int]]]] = None
        self._open_multi = 0
        self._arrivals = 0
        self.queued_bytes = 0

    def __bool__(self) -> bool:
        """True while a chunk is waiting."""
        return bool(self._urgent or self._frames or self._multi_wait)

    def put(self, opcode: int, request_id: int, body: bytes, compress: bool = False) -> None:
        """Queue one frame's chunks. FrameTooLarge for a body over 4 MiB."""
        chunks = frame_codec.encode_frame(opcode, request_id, body, compress, self.chunk_bytes)
        self.queued_bytes += sum(len(c) for c in chunks) if len(chunks) > 1 else len(chunks[0])
        key = (opcode, request_id)
        keys = self._keys
        self._arrivals += 1
        if keys is not None and key in keys:  # behind the key's active or waiting frames
            keys[key].append((self._arrivals, chunks))
        elif opcode in URGENT_OPCODES and len(chunks) == 1:
            if self._urgent is None:
                self._urgent = collections.deque()
            self._urgent.append(chunks[0])
        else:
            if keys is None:
                keys = self._keys = {}
            keys[key] = collections.deque()
            self._start(key, self._arrivals, chunks)

    def _start(self, key: tuple[int, int], arrival: int, chunks: list[bytes]) -> None:
        """Activate `chunks` of `key` (whose FIFO exists), or let them wait, first in
        their key's FIFO, when MAX_OPEN_MULTI multi-chunk frames are open."""
        multi = len(chunks) > 1
        if multi and self._open_multi >= MAX_OPEN_MULTI:
            self._keys[key].appendleft((arrival, chunks))  # type: ignore[index]  # the key's next frame
            if self._multi_wait is None:
                self._multi_wait = []
            heapq.heappush(self._multi_wait, (arrival, key))
            return
        self._open_multi += multi
        if self._frames is None:
            self._frames = collections.deque()
        self._frames.append([key, chunks, 0, multi])

    def _finished(self, key: tuple[int, int], multi: bool) -> None:
        """The active frame of `key` sent its last chunk: its key's next frame and the
        multi-chunk frames waiting for the slot it may free start, in arrival order."""
        keys = self._keys
        assert keys is not None
        own: Optional[Deque] = keys[key]
        if not own:
            del keys[key]
            own = None
        self._open_multi -= multi
        waiting = self._multi_wait
        while True:
            slot = waiting[0] if waiting and self._open_multi < MAX_OPEN_MULTI else None
            if own is not None and (slot is None or own[0][0] < slot[0]):
                arrival, chunks = own.popleft()
                own = None  # one frame of a key at a time: the rest waits behind it
                self._start(key, arrival, chunks)
            elif slot is not None:
                heapq.heappop(waiting)  # type: ignore[arg-type]
                arrival, chunks = keys[slot[1]].popleft()
                self._start(slot[1], arrival, chunks)
            else:
                break
        if not self._multi_wait:
            self._multi_wait = None

    def next_chunk(self) -> Optional[bytes]:
        """The next chunk to write (taken: `queued_bytes` shrinks), None when idle."""
        chunk = self._take()
        if chunk is not None:
            self.queued_bytes -= len(chunk)
        return chunk

    def next_chunks(self, limit: int) -> list[bytes]:
        """The next chunks to write together, in order: the next one, then more while
        their total stays within `limit` bytes (the small frames of one turn of the
        event loop leave in one socket write: one system call and one TLS record instead
        of one each). Taken: `queued_bytes` shrinks. [] when idle."""
        out: list[bytes] = []
        total = 0
        while True:
            if self._urgent:
                n = len(self._urgent[0])
            elif self._frames:
                head = self._frames[0]
                n = len(head[1][head[2]])
            else:
                break
            if out and total + n > limit:
                break
            out.append(self._take())  # type: ignore[arg-type]  # the chunk just measured
            total += n
        self.queued_bytes -= total
        return out

    def _take(self) -> Optional[bytes]:
        if self._urgent:
            urgent = self._urgent.popleft()
            if not self._urgent:
                self._urgent = None
            return urgent
        frames = self._frames
        if frames:
            active = frames.popleft()
            key, chunks, i, multi = active
            chunk = chunks[i]
            if i + 1 < len(chunks):
                active[2] = i + 1
                frames.append(active)
            else:
                self._finished(key, multi)
            if not frames and not self._multi_wait:  # idle again: drop the containers
                self._frames = None
                if not self._keys:
                    self._keys = None
            return chunk
        return None

    def holds(self, opcode: int, request_id: int) -> bool:
        """True while a non-urgent frame of (opcode, request_id) has chunks not yet taken
        (a reply still being written: the gateway defers a repeated page behind it)."""
        return self._keys is not None and (opcode, request_id) in self._keys

    def clear(self) -> None:
        """Drop everything queued (an aborted link)."""
        self._urgent = self._frames = self._keys = self._multi_wait = None
        self._open_multi = 0
        self.queued_bytes = 0
