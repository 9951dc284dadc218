"""Mailbox pulls of one runtime (docs/design.md §5 step 5, §9).

- Single flight, never losing a wake-up: every request (a PUSH_EVENTS frame, an
  explicit pull_mailbox(), the connect-time sync) sets a dirty mark; a running pull
  loops again while the mark is set, so a request that arrives during any state of
  the runtime (syncing, a pull in flight) is honoured.
- A push is a position (lane, mailbox_seq; docs/decisions/0033): one at or below this
  device's cursor on that lane asks for nothing (the entries are applied already), also
  when it arrives during a pull that brings it; one without a position (a wake-up) or
  above the cursor pulls.
- An inline push (docs/decisions/0156) carries the user's entries at mailbox_seq and
  the user's previous position: it is applied exactly as the page MailboxBatch{entries
  = inline_entries, next_cursor = mailbox_seq, lane, shard_epoch = the top 16 bits of
  mailbox_seq, has_more false} (same store call, same app events), inside the single
  flight, once the runtime is synced, only when the store's committed cursor (lane,
  shard_epoch, seq) is (lane, that shard_epoch, prev_mailbox_seq) at that moment: the
  entries are then exactly the page a pull would return. A push arriving while a pull
  is in flight waits for it (never applied concurrently) and is checked against the
  cursor the pull committed. Any other cursor (a gap: a lost push, a device that was
  offline) pulls; an entry is never applied on a failed check, nor a text entry
  without its body (stats["pushes_applied"] counts the applied ones).
- Transient ERRORs (UNAVAILABLE, RATE_LIMITED, MAILBOX_DIRTY) are retried with bounded
  exponential backoff (qim/sdk/retry.py); CURSOR_EXPIRED runs REBUILD; other errors
  surface (and a background pull that fails tells the app SyncFailed).
- Adaptive pages: a device on a slow link asks for pages of about PAGE_TARGET_S of its
  measured throughput (never below PAGE_MIN_BYTES; the server always returns the first
  entry), and for larger pages again while pages come back fast, up to
  MAILBOX_PAGE_MAX_BYTES; a page the connection lost half way (a session ended by its
  token's expiry) shrinks the next one to the rate its bytes arrived at. Liveness
  while a page arrives is the connection's (bytes count as progress), so a slow page
  is never mistaken for a dead server. A pull still running on a connection that is
  gone is let end before a pull on the new one starts (it would fail the new sync).
- A pull whose reply never comes while the server answers PINGs is sent again after
  PULL_REPEAT_PROBES probes during which nothing else arrived (bytes arriving may be
  the reply: never asked again then; stats["pull_repeats"]); the first reply wins.
"""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Any, Callable, Optional

from qim.consts import MAILBOX_PAGE_MAX_BYTES, MAILBOX_PAGE_MAX_ENTRIES
from qim.errors import ErrorCode, QimError
from qim.proto.v1 import mailbox_pb2, message_pb2
from qim.protocol import EventType, Opcode
from qim.sdk import events as ev
from qim.sdk.connection import Connection
from qim.sdk.core import RuntimeCore
from qim.sdk.events import ConnectionLost, NotConnected, ServerError
from qim.sdk.model import ApplyResult
from qim.sdk.rebuild import rebuild
from qim.sdk.retry import Backoff, with_retry

PAGE_START_BYTES = 128 * 1024  # first page of a connection's life; grows while fast
PAGE_MIN_BYTES = 8 * 1024
PAGE_TARGET_S = 1.0  # aim a page at about this much of the measured throughput
PAGE_FAST_S = 0.25   # a page at least half full that came back this fast: ask for more
# A pull whose reply has not come after this many answered probes (ack_deadline_s each,
# 3 s by default) is sent again: the server is alive (PONGs) but this reply was lost
# (a backend paused or replaced mid-request), and a single-flight puller waiting on it
# forever would leave the device silent. Pulls are idempotent by cursor; not every
# probe, so a slow page on a slow link is not asked for twice.
PULL_REPEAT_PROBES = 4
# ... and only probes during which the link was quiet count: a window that received at
# least this much (more than PONGs and pushes) may be carrying the reply, and a repeat
# then would make the gateway send the page a second time behind the first on the very
# link that is too slow (issue 34 item 3, decision 0087).
PULL_QUIET_BYTES = 4096
# inline pushes waiting for the single flight; more are dropped oldest first (each is a
# position too: the pull it then needs brings its entries)
INLINE_QUEUE_MAX = 256


def _whole(entry: mailbox_pb2.MailboxEntry, mailbox_seq: int) -> bool:
    """An inline entry the page {inline_entries, next_cursor = mailbox_seq} may hold: at
    that mailbox_seq, and a MESSAGE or EDIT shown as written carries its body (the server
    inlines only such entries, decision 0156; qim-js's `whole` is the same rule)."""
    shows = entry.event_type in (EventType.MESSAGE, EventType.EDIT) and entry.state == message_pb2.MESSAGE_STATE_NORMAL
    return entry.mailbox_seq == mailbox_seq and not (shows and not entry.body)


class Puller:
    """Single-flight PULL_MAILBOX loop with dirty marks, retries and adaptive pages."""

    def __init__(self, core: RuntimeCore) -> None:
        self._core = core
        self.page_bytes = PAGE_START_BYTES
        self._task: Optional[asyncio.Task] = None
        self._task_conn: Optional[Connection] = None  # the connection the running pull started on
        self._dirty = False
        # (lane, last applied mailbox_seq) as committed to the store, None while unknown
        self.position: Optional[tuple[int, int]] = None
        self._wanted: Optional[tuple[int, int]] = None  # the highest position pushed since the last pull began
        self._inline: collections.deque = collections.deque(maxlen=INLINE_QUEUE_MAX)  # PushEvents with entries

    def wake(self) -> None:
        """A notification (PUSH_EVENTS): pull soon. Never awaits and is never lost: a
        running pull runs again; without a connection the next connect pulls anyway."""
        self._dirty = True
        conn = self._core.conn
        if (self._task is None or self._task.done()) and conn is not None and conn.is_open:
            self._start()

    def notify(self, push: mailbox_pb2.PushEvents) -> None:
        """A PUSH_EVENTS frame: nothing when this device's cursor already covers its
        position (counted in stats["pushes_skipped"]); with inline entries, applied in
        the single flight when the committed cursor is at its prev_mailbox_seq (module
        doc); else pull soon (as `wake`, but a pull already running that brings the
        position does not run again for it)."""
        if not push.mailbox_seq:  # a wake-up without a position
            self.wake()
            return
        if self._covered(push.lane, push.mailbox_seq):
            stats = self._core.stats
            stats["pushes_skipped"] = stats.get("pushes_skipped", 0) + 1
            return
        wanted = self._wanted
        if wanted is None or wanted[0] != push.lane or wanted[1] < push.mailbox_seq:
            self._wanted = (push.lane, push.mailbox_seq)
        if push.inline_entries:  # tried before the pull its position would need
            self._inline.append(push)
        conn = self._core.conn
        if (self._task is None or self._task.done()) and conn is not None and conn.is_open:
            self._start()

    def _covered(self, lane: int, seq: int) -> bool:
        pos = self.position
        return pos is not None and pos[0] == lane and seq <= pos[1]

    def _behind(self) -> bool:
        """A pushed position the store does not cover yet (consumed: one pull per push)."""
        wanted, self._wanted = self._wanted, None
        return wanted is not None and not self._covered(*wanted)

    async def pull(self) -> None:
        """Pull until has_more is false, joining a running pull (it runs again).
        ConnectionLost / NotConnected / ServerError (after retries) / StoreError."""
        self._dirty = True
        task = self._task
        if task is not None and not task.done() and self._task_conn is not self._core.conn:
            try:  # a pull of a connection that is gone: let it end, then pull on this one
                await asyncio.shield(task)
            except (ConnectionLost, NotConnected):
                pass
            task = self._task
        if task is None or task.done():
            task = self._start()
        await asyncio.shield(task)

    def cancel(self) -> None:
        """Stop a running pull (on close or a lost connection)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()

    def _start(self) -> asyncio.Task:
        self._task_conn = self._core.conn
        self._task = task = asyncio.get_running_loop().create_task(self._loop())
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task) -> None:
        if task.cancelled():
            return
        exc = task.exception()  # retrieved here, so a pull nobody awaits never fails silently
        if exc is None or isinstance(exc, (ConnectionLost, NotConnected)):
            return  # the reconnect syncs again
        code = exc.code if isinstance(exc, QimError) else ErrorCode.INTERNAL
        self._core.emit(ev.SyncFailed(code, str(exc)))

    async def _loop(self) -> None:
        while True:
            await self._apply_inline()
            if not (self._dirty or self._behind()):
                return
            self._dirty = False
            while await self._page():
                pass

    async def _apply_inline(self) -> None:
        """Apply the waiting inline pushes that follow the committed cursor, in arrival
        order, each as the page it stands for (module doc). One that does not follow is
        dropped: its position is wanted, and the pull brings it."""
        core = self._core
        while self._inline:
            push = self._inline.popleft()
            if self._covered(push.lane, push.mailbox_seq):
                continue
            if not core.ready:  # syncing (a REBUILD may run beside this flight): the sync's pull brings it
                continue
            epoch = push.mailbox_seq >> 48
            cursor = await core.store.run(core.store.cursor)
            if cursor is None or tuple(cursor) != (push.lane, epoch, push.prev_mailbox_seq):
                continue  # a gap (or another lane or shard_epoch): pull
            if not all(_whole(e, push.mailbox_seq) for e in push.inline_entries):
                continue  # never a text without its body, nor an entry elsewhere: the pull serves them
            await core.apply(core.store.apply_mailbox_batch, list(push.inline_entries), push.mailbox_seq, push.lane,
                             epoch)
            self.position = (push.lane, push.mailbox_seq)  # committed: the store holds it
            if core.on_pulled is not None:  # as for a page (decision 0121 §4): a fresh message has no summary
                core.on_pulled(push.inline_entries)
            core.stats["pushes_applied"] = core.stats.get("pushes_applied", 0) + 1

    async def _page(self) -> bool:
        core, tuning = self._core, self._core.tuning
        conn = core.live()
        cursor = await core.store.run(core.store.cursor)
        self.position = (cursor[0], cursor[2]) if cursor else None

        async def attempt() -> tuple[int, bytes]:
            req = mailbox_pb2.PullMailbox(cursor=cursor[2] if cursor else 0, max_entries=MAILBOX_PAGE_MAX_ENTRIES,
                                          max_bytes=self.page_bytes).SerializeToString()
            start, rx = time.monotonic(), conn.bytes_rx
            try:
                reply = await conn.request_probed(Opcode.PULL_MAILBOX, req, tuning.ack_deadline_s, tuning.probe_s,
                                                  repeat=True, pace=self._repeated, repeat_every=PULL_REPEAT_PROBES,
                                                  quiet_bytes=PULL_QUIET_BYTES)
            except ConnectionLost:  # a page cut short (e.g. the session's token expired): no larger next time
                self._shrink(conn.bytes_rx - rx, time.monotonic() - start)
                raise
            self._adapt(len(reply[1]), time.monotonic() - start)
            return reply

        try:
            op, body = await with_retry(attempt, Backoff(budget=tuning.retry_budget_s))
        except ServerError as exc:
            if exc.code != ErrorCode.CURSOR_EXPIRED:
                raise
            await self.rebuild(conn)
            return True
        if op != Opcode.MAILBOX_BATCH:
            conn.abort(f"unexpected reply 0x{op:04x} to PULL_MAILBOX")
            raise ConnectionLost(f"unexpected reply 0x{op:04x} to PULL_MAILBOX")
        batch = mailbox_pb2.MailboxBatch.FromString(body)
        await core.apply(core.store.apply_mailbox_batch, list(batch.entries), batch.next_cursor, batch.lane,
                         batch.shard_epoch)
        self.position = (batch.lane, batch.next_cursor)  # committed: the store holds it
        if core.on_pulled is not None:  # summaries ride with the entries (decision 0121 §4)
            core.on_pulled(batch.entries)
        core.stats["pages"] += 1
        return batch.has_more

    async def rebuild(self, conn: Connection) -> None:
        """REBUILD (session list → history of every conversation → cursor from 0) on
        `conn`, transient errors retried; tells the app what changed, page by page."""
        core, tuning = self._core, self._core.tuning
        self.position = None  # the cursor restarts from 0

        async def call(opcode: int, body: bytes) -> tuple[int, bytes]:
            return await with_retry(lambda: conn.request_probed(opcode, body, tuning.ack_deadline_s, tuning.probe_s),
                                    Backoff(budget=tuning.retry_budget_s))

        async def apply(fn: Callable[..., ApplyResult], *args: Any) -> ApplyResult:
            return await core.apply(fn, *args)

        await rebuild(core.store, call, apply, self.page_bytes)
        core.stats["rebuilds"] = core.stats.get("rebuilds", 0) + 1
        core.emit(ev.CursorReset())

    async def _repeated(self) -> None:
        """A pull sent again (PULL_REPEAT_PROBES): counted in stats["pull_repeats"]."""
        self._core.stats["pull_repeats"] += 1

    def _shrink(self, nbytes: int, elapsed: float) -> None:
        """A page the connection lost after `nbytes` of it arrived in `elapsed` s: the
        next one aims at PAGE_TARGET_S of that rate (never larger than now). Without
        this a link too slow for one page per session (a short token) never progressed."""
        if elapsed > PAGE_TARGET_S and nbytes > 0:
            self.page_bytes = int(max(PAGE_MIN_BYTES, min(self.page_bytes, nbytes / elapsed * PAGE_TARGET_S)))

    def _adapt(self, nbytes: int, elapsed: float) -> None:
        """Page budget from the last page's size and time (see the module docstring)."""
        if elapsed <= PAGE_FAST_S:
            if nbytes * 2 >= self.page_bytes:
                self.page_bytes = min(self.page_bytes * 2, MAILBOX_PAGE_MAX_BYTES)
        elif elapsed > PAGE_TARGET_S and nbytes >= PAGE_MIN_BYTES:  # small pages: latency, not the link
            rate = nbytes / elapsed
            self.page_bytes = int(max(PAGE_MIN_BYTES, min(MAILBOX_PAGE_MAX_BYTES, rate * PAGE_TARGET_S)))
