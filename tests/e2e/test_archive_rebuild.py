"""The SDK across the archive's hot floor (docs/design.md §9): with a 1 s hot window
and a 3 s mailbox retention, a device whose cursor fell behind REBUILDs from the session
list and history, and a new device back-fills with history pages; both end with exactly
what was sent (bodies byte-exact, the recall shown), though most of it is read from the
archive."""

from __future__ import annotations

import asyncio
import os

import pytest

from qim.consts import MESSAGE_TYPE_CONTROL
from tests.e2e.archive import archive_stack, floor_of, wait_floor
from tests.e2e.sdkclient import client, close_all
from tests.sdk.realstack import eventually, runtime, shutdown, users

MAILBOX_RETENTION_MS = 3000


@pytest.fixture(scope="module")
def st(tmp_path_factory, shared_cassandra):
    with archive_stack(tmp_path_factory.mktemp("archive-rebuild"), shared_cassandra,
                       {"QIM_MAILBOX_RETENTION_MS": str(MAILBOX_RETENTION_MS)}) as stack:
        yield stack


def shown(rows) -> dict[bytes, tuple[int, bytes, int]]:
    return {m.message_id: (m.conversation_seq, m.body, m.state) for m in rows if m.message_type != MESSAGE_TYPE_CONTROL}


async def test_rebuild_and_back_fill_read_the_same_bytes_across_the_seam(st, tmp_path):
    a, b = users(2)
    ca = await client(st, tmp_path, a)
    await ca.connect()
    conv = (await ca.open_direct(b)).conversation_id
    want: dict[bytes, tuple[int, bytes, int]] = {}
    ack = await ca.send(conv, b"m0")
    want[ack.message_id] = (ack.conversation_seq, b"m0", 0)
    rb = runtime(st, tmp_path, b)
    await rb.connect()
    await eventually(lambda: _has(rb, conv, want), 30, "b applied m0 from its mailbox")
    await shutdown(rb)  # b's cursor stays at m0
    for i in range(12):
        body = os.urandom((30, 3000, 20_000)[i % 3])
        ack = await ca.send(conv, body)
        want[ack.message_id] = (ack.conversation_seq, body, 0)
    target = next(mid for mid, (seq, _, _) in want.items() if seq == 5)
    ok = await ca.recall(conv, target)
    want[target] = (want[target][0], b"", 1)
    await wait_floor(st, conv, ok.control_conversation_seq)
    await asyncio.sleep(MAILBOX_RETENTION_MS / 1000 + 0.5)  # b's entries after m0 are past the mailbox retention
    for body in (b"hot one", b"hot two"):
        ack = await ca.send(conv, body)
        want[ack.message_id] = (ack.conversation_seq, body, 0)
    assert 0 < floor_of(st, conv) < max(seq for seq, _, _ in want.values())

    rb = runtime(st, tmp_path, b)  # the same store: its cursor is behind the mailbox's retention
    await rb.connect()
    await eventually(lambda: _has(rb, conv, want), 60, "b's store equal to what was sent after REBUILD")
    assert rb.stats.get("rebuilds", 0) >= 1
    await shutdown(rb)

    fresh = await client(st, tmp_path, a, name="-new-device")  # a second install of a: an empty store
    await fresh.connect()
    got = await fresh.messages(conv, 0, 100)  # the store's few, then history pages (OLDER) back-filled
    assert shown(got) == want
    assert [m.conversation_seq for m in got] == sorted(m.conversation_seq for m in got)
    await close_all(ca, fresh)


async def _has(rt, conv: bytes, want) -> bool:
    return shown(await rt.store.run(rt.store.messages, conv)) == want
