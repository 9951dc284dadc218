"""ChunkQueue's outbound order (qim/net/chunks.py, docs/decisions/0011, 0069) against a
plain model of its rules, on random puts and takes: control replies first, active frames
round-robin chunk by chunk, one frame per (opcode, request_id) at a time in arrival
order, at most MAX_OPEN_MULTI multi-chunk frames open; the chunks of one write
(`next_chunks`) are the same chunks in the same order. (The queue keeps a FIFO per key
instead of the model's rescans, which cost a backed-up one-way link quadratic time: its
measurement is in docs/perf.md, never in a timed test.)"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from qim._core import frame as frame_codec
from qim.net.chunks import MAX_OPEN_MULTI, URGENT_OPCODES, ChunkQueue
from qim.protocol import Opcode

CHUNK = 64
OPCODES = [Opcode.PONG, Opcode.SEND_ACK, Opcode.PUSH_EVENTS, Opcode.PROJECTION]


class Model:
    """The rules, spelled out with lists: scan everything, every time."""

    def __init__(self) -> None:
        self.urgent: list[bytes] = []
        self.active: list[list] = []  # [key, remaining chunks, multi], round-robin order
        self.pending: list[tuple] = []  # (key, chunks) in arrival order

    def put(self, key: tuple[int, int], chunks: list[bytes]) -> None:
        busy = {k for k, *_ in self.active} | {k for k, _ in self.pending}
        if key[0] in URGENT_OPCODES and len(chunks) == 1 and key not in busy:
            self.urgent.append(chunks[0])
        else:
            self.pending.append((key, chunks))
            self.promote()

    def promote(self) -> None:
        blocked = {k for k, *_ in self.active}
        still = []
        for key, chunks in self.pending:
            multi = len(chunks) > 1
            opened = sum(1 for *_, m in self.active if m)
            if key in blocked or (multi and opened >= MAX_OPEN_MULTI):
                blocked.add(key)
                still.append((key, chunks))
            else:
                blocked.add(key)
                self.active.append([key, list(chunks), multi])
        self.pending = still

    def take(self):
        if self.urgent:
            return self.urgent.pop(0)
        if not self.active:
            return None
        frame = self.active.pop(0)
        chunk = frame[1].pop(0)
        if frame[1]:
            self.active.append(frame)
        else:
            self.promote()
        return chunk


ops = st.lists(st.one_of(
    st.tuples(st.just("put"), st.sampled_from(OPCODES), st.integers(0, 3), st.integers(0, 4 * CHUNK)),
    st.tuples(st.just("take"), st.integers(1, 5)),
    st.tuples(st.just("batch"), st.integers(1, 4 * CHUNK))), max_size=120)


@settings(max_examples=400, deadline=None)
@given(ops)
def test_the_queue_follows_the_rules(steps):
    run(steps)


def test_a_frame_waiting_for_a_multi_chunk_slot_starts_before_a_later_frame():
    """Eight multi-chunk frames open, one more waits for a slot, then a one-chunk frame
    of an open frame's key: when that key's frame ends, the waiting frame (earlier)
    starts first, and a key that keeps queueing large frames cannot starve it."""
    keys = [(Opcode.PUSH_EVENTS, i) for i in range(MAX_OPEN_MULTI)]
    steps = [("put", op, rid, 3 * CHUNK) for op, rid in keys]
    steps += [("put", Opcode.PROJECTION, 0, 3 * CHUNK), ("put", Opcode.PUSH_EVENTS, 0, 8),
              ("put", Opcode.PUSH_EVENTS, 0, 3 * CHUNK), ("take", 40)]
    run(steps)


def run(steps) -> None:
    q, model, serial = ChunkQueue(CHUNK), Model(), 0
    for step in steps:
        if step[0] == "put":
            _, opcode, rid, size = step
            serial += 1
            body = serial.to_bytes(4, "big") * (size // 4 + 1)
            q.put(opcode, rid, body)
            model.put((opcode, rid), frame_codec.encode_frame(opcode, rid, body, False, CHUNK))
        elif step[0] == "take":
            for _ in range(step[1]):
                assert q.next_chunk() == model.take()
        else:  # the chunks of one socket write: the same order, within the limit unless one
            batch = q.next_chunks(step[1])
            assert batch == [model.take() for _ in batch]
            assert len(batch) <= 1 or sum(map(len, batch)) <= step[1]
            if not batch:
                assert model.take() is None
    while (chunk := model.take()) is not None:
        assert q.next_chunk() == chunk
    assert q.next_chunk() is None and not q and q.queued_bytes == 0
