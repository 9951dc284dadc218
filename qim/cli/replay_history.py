"""`qim-loadgen replay --history-check` (docs/decisions/0023; `make demo`): after the replay, every
conversation's history is read again through the SDK (PULL_HISTORY pages, NEWER, by a
fresh device of one member) and compared with what was sent: every acknowledged message
once, at its conversation_seq, from its sender, of its type, with a body byte-exact
(SHA-256 and length) or, once recalled, shown recalled without one; nothing else but
CONTROL messages. With the archive tier (QIM_REDIS_ADDR and a hot floor per
conversation in Redis, on its commit bucket's core instance when QIM_REDIS_CORE_ADDRS
lists several: docs/decisions/0096) the messages at or below their conversation's floor were served by
the archive: `from_cold` counts them. Before reading it waits (at most WAIT_ARCHIVE_S)
until the archive watermark passed the end of the replay, so the archive holds it all,
then (at most --history-settle seconds) until every conversation has a hot floor.

Output: `history: conversations=N messages=M from_cold=C mismatched=X`; X counts messages
missing, twice, or differing, and items nobody sent.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from qim.cli.bodies import digest
from qim.cli.replay_common import TENANT, Device
from qim.consts import MESSAGE_TYPE_CONTROL
from qim.proto.v1 import message_pb2
from qim.sdk.requests import pull_history

WAIT_ARCHIVE_S = 30.0
PAGE = 50


@dataclass
class HistoryResult:
    """Counts of the re-read."""

    conversations: int = 0
    messages: int = 0
    from_cold: int = 0
    mismatched: int = 0

    def line(self) -> str:
        """The `history: ...` line (printed before the replay's last line)."""
        return (f"history: conversations={self.conversations} messages={self.messages} "
                f"from_cold={self.from_cold} mismatched={self.mismatched}")


async def _floors(redis_addr: str, convs: list[bytes], replay_end_ms: int, settle_s: float) -> dict[bytes, int]:
    """conversation -> hot floor, once the archive watermark passed the replay's end and,
    for at most `settle_s` more seconds, until every conversation has a floor (part of it
    in the archive: with a short hot window the trimmer needs a few seconds). The
    instances are those of the environment (QIM_REDIS_CORE_ADDRS, `redis_addr` the home);
    ConfigError when they are bad."""
    from qim.cli.envargs import redis_layout
    from qim.stores.redis.archive import RedisArchiveState
    from qim.stores.redis.topology import topology_of

    topology = topology_of(redis_layout("QIM_REDIS_ADDR", redis_addr, os.environ))
    try:
        state = RedisArchiveState(topology)
        deadline = time.monotonic() + WAIT_ARCHIVE_S
        while time.monotonic() < deadline:  # polls another process's progress
            if await state.watermark() >= replay_end_ms:
                break
            await asyncio.sleep(0.5)
        deadline = time.monotonic() + settle_s
        floors = await state.floors(TENANT, convs)
        while not all(floors) and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            floors = await state.floors(TENANT, convs)
        return dict(zip(convs, floors))
    finally:
        await topology.aclose()


async def _read_all(device: Device, conv: bytes, peer: int) -> list:
    """Every HistoryItem of the conversation, oldest first."""
    items: list = []
    anchor = 0
    await device.rt.connect()
    while True:
        batch = await pull_history(device.rt, conv, peer, anchor_seq=anchor, newer=True, limit=PAGE)
        items.extend(batch.items)
        if not batch.has_more or not batch.items:
            return items
        anchor = batch.next_anchor


def compare(intents: Sequence, items: Sequence, floor: int, result: HistoryResult) -> None:
    """Count one conversation's messages, cold ones and mismatches (see the module docstring)."""
    want = {i.message_id: i for i in intents if i.message_id is not None}
    seen: set[bytes] = set()
    for item in items:
        if item.message_type == MESSAGE_TYPE_CONTROL:
            continue
        intent = want.get(item.message_id)
        if intent is None or item.message_id in seen:
            result.mismatched += 1  # nobody sent it, or it came twice
            continue
        seen.add(item.message_id)
        recalled = item.state == message_pb2.MESSAGE_STATE_RECALLED
        body_ok = (not item.body and not item.body_included) if intent.recalled else (
            digest(item.body) == intent.digest and len(item.body) == intent.size)
        if (not body_ok or recalled != intent.recalled or item.conversation_seq != intent.conversation_seq
                or item.sender_id != intent.sender or item.message_type != intent.message_type
                or item.custom_type != intent.custom_type):
            result.mismatched += 1
        if floor and item.conversation_seq <= floor:
            result.from_cold += 1
    result.mismatched += len(set(want) - seen)  # acknowledged, never listed
    result.messages += len(want)


async def history_check(cfg, dialogues: Sequence, base_dir: str, replay_end_ms: int,
                        redis_addr: Optional[str] = None,
                        on_done: Optional[Callable[[], None]] = None) -> HistoryResult:
    """Re-read every dialogue's history (see the module docstring); `on_done()` after
    each conversation (progress)."""
    redis_addr = redis_addr or os.environ.get("QIM_REDIS_ADDR", "")
    convs = [d.conv for d in dialogues]
    floors = await _floors(redis_addr, convs, replay_end_ms, cfg.history_settle) if redis_addr else {}
    result = HistoryResult(conversations=len(dialogues))
    sem = asyncio.Semaphore(max(1, cfg.concurrency))

    async def one(d) -> None:
        async with sem:
            reader = d.members[0]
            device = Device(cfg, base_dir, reader, "history")
            try:
                items = await _read_all(device, d.conv, d.peer_of(reader))
            finally:
                await device.rt.close()
                device.store.close()
            compare(d.intents, items, floors.get(d.conv, 0), result)
            if on_done is not None:
                on_done()

    await asyncio.gather(*(one(d) for d in dialogues))
    return result
