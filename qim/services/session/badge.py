"""UserBadgeState's settler (docs/decisions/0129-user-badge-state.md): the user's global
badge, absolute, with a version that only grows.

Every change that can move a user's unread in a conversation marks (user, conversation)
dirty in the same Redis script as the change itself: a registration of a dispatch
record (session_lib.lua, in the durable projection's batch under its checkpoint, so a
crash leaves no record both checkpointed and unmarked; replayed, it only marks again),
a MARK_READ that moved (session_mark_read.lua), a SET_CONVERSATION_STATE (mute). The
settler of the session node owning the user's shard (only once that shard is caught up)
reads the marks, computes each conversation's contribution from canonical history with
the list's own Summarizer — so the badge is the sum the list shows, never counted
twice — and writes them with badge_settle.lua, fenced by the shard's owner_epoch (a
timed mute is queued there to be marked again when it ends: `wake_due` each round):

  contribution = 0 for a group the user left (its latest interval closed);
               = 1 if `mentioned` else 0 while muted (muted_until in the future or for ever);
               = `unread` otherwise (past UNREAD_EXACT_WINDOW a lower bound, 200).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Awaitable, Callable, Optional

from qim.errors import EngineError
from qim.proto.v1 import session_pb2
from qim.services.session.summary import PageError
from qim.stores.badges import BadgeStore, Dirty
from qim.stores.convstate import MUTE_FOREVER
from qim.stores.errors import NotOwner

logger = logging.getLogger(__name__)

SETTLE_PAGE = 500  # dirty entries read per instance per round
# pause after every round unless a page came back full (a backlog): the marks a busy
# conversation makes meanwhile are settled by one summarize, not one each (docs/perf.md
# "Round six: the session's CPU per message"); the lag stays one round + this pause
IDLE_S = 0.2
# a user settled less than this long ago waits for it to pass before its next settle
# (outside a backlog): a recipient who keeps receiving is summarized about once a second,
# not once a round, whose window read (up to 201 records) was half the session's CPU per
# message at 100 msg/s (docs/perf.md "Round nine: a busy user settled once a second");
# its badge lags at most this + IDLE_S, a user settled longer ago still one round
BUSY_SETTLE_S = 1.0
ERROR_PAUSE_S = 1.0
PAGE_RETRY_S = (1.0, 300.0)  # a user whose page fails is retried after 1 s, doubling up to 5 min

Summarize = Callable[[int, int, list[bytes]], Awaitable[dict[bytes, session_pb2.SessionEntry]]]


def contribution(entry: session_pb2.SessionEntry, now_ms: int) -> int:
    """What one list entry adds to the badge (module doc, decision 0129)."""
    if entry.left_at:
        return 0
    if entry.muted_until == MUTE_FOREVER or entry.muted_until > now_ms:
        return 1 if entry.mentioned else 0
    return entry.unread


def badge_of(entries: list[session_pb2.SessionEntry], now_ms: int) -> int:
    """The badge a list shows: the sum of its entries' contributions (the audit rule)."""
    return sum(contribution(e, now_ms) for e in entries)


class BadgeSettler:
    """`run()` settles dirty marks of the shards this node serves until cancelled.

    `epoch_of(tenant, user)` -> the owner_epoch of the user's session shard when this node
    serves it caught up (None otherwise: its marks stay for the owner); `on_settled(tenant,
    user, badge, version)` after a change of the badge."""

    def __init__(
        self,
        badges: BadgeStore,
        summarize: Summarize,
        epoch_of: Callable[[int, int], Optional[tuple[int, int]]],
        metrics: Any,
        on_settled: Optional[Callable[[int, int, int, int], None]] = None,
    ) -> None:
        self._badges, self._summarize, self._epoch_of = badges, summarize, epoch_of
        self._on_settled = on_settled
        self.backlog = False  # the last round read a full page of some instance: no pause
        # (tenant, user) -> (retry at monotonic s, last pause s): a page that keeps failing
        # (a record missing) is retried with a growing pause, not every round at 5 Hz with a
        # warning each time; its marks stay, so nothing is lost when it heals
        self._page_failed: dict[tuple[int, int], tuple[float, float]] = {}
        self._settled_at: dict[tuple[int, int], float] = {}  # (tenant, user) -> monotonic s, the last BUSY_SETTLE_S
        self._settles = metrics.counter("qim_session_badge_settles", "UserBadgeState settles by outcome", ["outcome"])
        self._errors = metrics.counter(
            "qim_session_badge_settle_errors", "Badge marks left for a later round", ["reason"]
        )
        self._deferred = metrics.counter(
            "qim_session_badge_settles_deferred", "Users whose marks wait for BUSY_SETTLE_S since their last settle"
        )

    async def run(self) -> None:
        """Round after round, IDLE_S apart unless the last round read a full page of some
        instance (a backlog: the next page at once); an outage is retried after a pause,
        never dropped. Rounds back to back summarized a user once per message at any rate
        (each mark alone in its round): the doubled CPU per message of docs/perf.md
        "Round six: the session's CPU per message"."""
        while True:
            try:
                await self.round()
            except EngineError as exc:
                self._errors.labels(reason="unavailable").inc()
                logger.warning("badge settle round failed: %s", exc)
                await asyncio.sleep(ERROR_PAUSE_S)
                continue
            if not self.backlog:
                await asyncio.sleep(IDLE_S)

    async def round(self) -> int:
        """One page of marks per instance settled; how many users were settled."""
        users: dict[tuple[int, int], list[Dirty]] = {}
        dropped = self._badges.dropped_marks
        now_ms = int(time.time() * 1000)
        self.backlog = False
        for client in self._badges.clients():
            await self._badges.wake_due(client, now_ms, SETTLE_PAGE)  # timed mutes that ended
            page = await self._badges.dirty(client, SETTLE_PAGE)
            self.backlog = self.backlog or len(page) >= SETTLE_PAGE
            for d in page:
                users.setdefault((d.tenant, d.user), []).append(d)
        if self._badges.dropped_marks > dropped:  # malformed marks the store deleted
            self._errors.labels(reason="bad_mark").inc(self._badges.dropped_marks - dropped)
        done = 0
        now = time.monotonic()
        recent = self._settled_at = {k: t for k, t in self._settled_at.items() if now - t < BUSY_SETTLE_S}
        for (tenant, user), marks in users.items():
            owner = self._epoch_of(tenant, user)
            failed = self._page_failed.get((tenant, user))
            if owner is None or (failed is not None and now < failed[0]):
                continue
            # a backlog (a full page) settles everyone: the page would come back the same
            if not self.backlog and (tenant, user) in recent:
                self._deferred.inc()
                continue
            if await self._settle(tenant, user, owner, marks):
                recent[(tenant, user)] = now
                done += 1
        return done

    async def _settle(self, tenant: int, user: int, owner: tuple[int, int], marks: list[Dirty]) -> int:
        convs = list(dict.fromkeys(d.conversation_id for d in marks))
        try:
            entries = await self._summarize(tenant, user, convs)
        except PageError as exc:  # left marked (retried later), counted: never a silent zero
            self._errors.labels(reason="page").inc()
            pause = min(PAGE_RETRY_S[1], 2 * self._page_failed.get((tenant, user), (0.0, PAGE_RETRY_S[0] / 2))[1])
            self._page_failed[(tenant, user)] = (time.monotonic() + pause, pause)
            logger.warning("badge of a user not settled (retried in %.0f s): %s", pause, exc)
            return 0
        self._page_failed.pop((tenant, user), None)
        now_ms = int(time.time() * 1000)
        values = {c: contribution(entries[c], now_ms) for c in convs}
        # a timed mute changes the contribution when it ends, with no event: marked again then
        wakes = {c: entries[c].muted_until for c in convs if now_ms < entries[c].muted_until != MUTE_FOREVER}
        shard, epoch = owner
        try:
            badge, version, changed = await self._badges.settle(shard, epoch, tenant, user, values, marks, wakes)
        except NotOwner:
            self._errors.labels(reason="fenced").inc()
            return 0
        self._settles.labels(outcome="settled").inc()
        if changed and self._on_settled is not None:
            self._on_settled(tenant, user, badge, version)
        return 1
