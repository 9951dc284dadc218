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
from typing import Deque, Iterator, Optional

from qim._core import frame as frame_codec
from qim.protocol import Opcode

MAX_OPEN_MULTI = 8  # multi-chunk frames interleaved at once (receivers allow 16 open)
# Replies that a peer's liveness probe or send path waits for: sent before bulk chunks.
URGENT_OPCODES = frozenset({Opcode.PONG, Opcode.ERROR, Opcode.SEND_ACK, Opcode.AUTH_OK, Opcode.KICKED})


class ChunkQueue:
    """Chunks waiting for one link, in the order of the module doc. `chunk_bytes` is the
    chunk size of the frames queued (1..64 KiB, checked by the caller). An empty queue
    holds no container (a deque is 760 bytes: an idle link keeps none)."""

    __slots__ = ("chunk_bytes", "_urgent", "_frames", "_active", "_pending", "_open_multi", "queued_bytes")

    def __init__(self, chunk_bytes: int) -> None:
        self.chunk_bytes = chunk_bytes
        self._urgent: Optional[Deque[bytes]] = None  # single-chunk control replies
        # Round-robin of active frames. A frame waits in _pending while a frame with its
        # key is active or while MAX_OPEN_MULTI multi-chunk frames are open.
        self._frames: Optional[Deque[tuple[tuple[int, int], Iterator[bytes], bool]]] = None
        self._active: Optional[set[tuple[int, int]]] = None
        self._pending: Optional[Deque[tuple[tuple[int, int], list[bytes]]]] = None
        self._open_multi = 0
        self.queued_bytes = 0

    def __bool__(self) -> bool:
        """True while a chunk is waiting."""
        return bool(self._urgent or self._frames or self._pending)

    def put(self, opcode: int, request_id: int, body: bytes, compress: bool = False) -> None:
        """Queue one frame's chunks. FrameTooLarge for a body over 4 MiB."""
        chunks = frame_codec.encode_frame(opcode, request_id, body, compress, self.chunk_bytes)
        self.queued_bytes += sum(len(c) for c in chunks)
        key = (opcode, request_id)
        if (opcode in URGENT_OPCODES and len(chunks) == 1 and not (self._active and key in self._active)
                and not (self._pending and any(k == key for k, _ in self._pending))):
            if self._urgent is None:
                self._urgent = collections.deque()
            self._urgent.append(chunks[0])
        else:
            if self._pending is None:
                self._pending = collections.deque()
            self._pending.append((key, chunks))
            self._activate()

    def _activate(self) -> None:
        """Move pending frames into the round-robin, in arrival order per key."""
        if self._active is None:
            self._active = set()
        if self._frames is None:
            self._frames = collections.deque()
        blocked: set[tuple[int, int]] = set()
        keep: Deque = collections.deque()
        for key, chunks in self._pending or ():
            multi = len(chunks) > 1
            if key in self._active or key in blocked or (multi and self._open_multi >= MAX_OPEN_MULTI):
                blocked.add(key)
                keep.append((key, chunks))
                continue
            self._active.add(key)
            self._open_multi += multi
            self._frames.append((key, iter(chunks), multi))
        self._pending = keep or None

    def next_chunk(self) -> Optional[bytes]:
        """The next chunk to write (taken: `queued_bytes` shrinks), None when idle."""
        chunk = self._take()
        if chunk is not None:
            self.queued_bytes -= len(chunk)
        return chunk

    def _take(self) -> Optional[bytes]:
        if self._urgent:
            urgent = self._urgent.popleft()
            if not self._urgent:
                self._urgent = None
            return urgent
        while self._frames:
            key, frame_chunks, multi = self._frames.popleft()
            chunk = next(frame_chunks, None)
            if chunk is None:
                self._active.discard(key)  # type: ignore[union-attr]  # set with every frame
                self._open_multi -= multi
                if self._pending:
                    self._activate()
                continue
            self._frames.append((key, frame_chunks, multi))
            return chunk
        if self._frames is not None and not self._pending:  # idle again: drop the containers
            self._frames = self._active = None
        return None

    def clear(self) -> None:
        """Drop everything queued (an aborted link)."""
        self._urgent = self._frames = self._active = self._pending = None
        self._open_multi = 0
        self.queued_bytes = 0
