"""A restore rewinds devices that synced past the backup point (issue 33 item 4;
docs/decisions/0075), in three steps around a backup and restore, so the backup test
runs it on the stacks it starts anyway:

- before the backup: A sends m1 to B, B syncs it;
- after the backup: A sends m2, B and A sync it (the cut leaves it out);
- after the restore: A's new install sends m3 and m4, which take conversation_seq 2
  and 3 again (and m2's mailbox offset). Then B's device connects: it must show exactly
  the server's messages (m1, m3, m4: m2 told to the app as removed, nothing missed),
  be told of the REBUILD (CursorReset, exactly one) and be connected, not retrying for
  ever; A's first device, which holds its own m2, agrees with the server too.
"""

from __future__ import annotations

import random

from qim.sdk import direct_conversation
from qim.sdk import events as ev
from tests.e2e.test_sdk_rewind import connect, runtime, shown, until


async def _synced(rt, conv: bytes, want: list) -> None:
    """`rt` shows `want` and holds a cursor (a pull applied it, not only a push)."""
    assert await until(rt, conv, want) == want
    assert await rt.store.run(rt.store.cursor) is not None


class Rewind:
    """The scenario's devices (stores under `base`) and what the server ACKed."""

    def __init__(self, base) -> None:
        self.base = base
        self.a, self.b = random.getrandbits(40) + 1, random.getrandbits(40) + 1
        self.conv = direct_conversation(0, self.a, self.b)
        self.m2 = None

    async def _pair(self, st, *steps) -> None:
        ra = runtime(st, self.base / "a.sqlite3", self.a)
        rb = runtime(st, self.base / "b.sqlite3", self.b)
        try:
            await connect(ra)
            await connect(rb)
            for step in steps:
                await step(ra, rb)
        finally:
            for rt in (ra, rb):
                await rt.close()
                rt.store.close()

    async def before_backup(self, st) -> None:
        """m1, synced by B."""
        async def m1(ra, rb):
            await ra.send_message(self.conv, self.b, b"m1")
            await _synced(rb, self.conv, [(1, b"m1")])
        await self._pair(st, m1)

    async def after_backup(self, st) -> None:
        """m2 (seq 2), synced by B and by A's device."""
        async def m2(ra, rb):
            self.m2 = await ra.send_message(self.conv, self.b, b"m2")
            assert self.m2.conversation_seq == 2
            await _synced(rb, self.conv, [(1, b"m1"), (2, b"m2")])
            await _synced(ra, self.conv, [(1, b"m1"), (2, b"m2")])
        await self._pair(st, m2)

    async def after_restore(self, st) -> None:
        """m3 and m4 from A's new install, then B's and A's devices agree with the server."""
        a2 = runtime(st, self.base / "a2.sqlite3", self.a)
        try:
            await connect(a2)
            m3 = await a2.send_message(self.conv, self.b, b"m3")
            m4 = await a2.send_message(self.conv, self.b, b"m4")
        finally:
            await a2.close()
            a2.store.close()
        assert (m3.conversation_seq, m4.conversation_seq) == (2, 3)  # m2's number is handed out again
        server = [(1, b"m1"), (2, b"m3"), (3, b"m4")]
        for path, user in (("b.sqlite3", self.b), ("a.sqlite3", self.a)):
            told: list = []
            rt = runtime(st, self.base / path, user, told)
            try:
                assert await shown(rt, self.conv) == [(1, b"m1"), (2, b"m2")]
                await connect(rt)
                assert await until(rt, self.conv, server) == server, path  # not the lost seq 2, nothing missed
                assert rt.connected and rt.state == "ready", (path, rt.state)
                assert rt.stats.get("rebuilds") == 1, path  # once: the new life's cursor is served after it
                assert any(isinstance(e, ev.CursorReset) for e in told), path
                assert [i for e in told if isinstance(e, ev.MessagesRemoved) for i in e.message_ids] == \
                    [self.m2.message_id], path
                stored = [m.message_id for m in await rt.store.run(rt.store.messages, self.conv)][1:]
                assert stored == [m3.message_id, m4.message_id], path
            finally:
                await rt.close()
                rt.store.close()
