"""CommitRecovery (docs/design.md §5.2): resumes in-flight commits nobody retries, through the
same path as a retry (OutboxPublisher.resume), in conversation_seq order.

Per pass: the stale in-flight commits of every commit bucket (CommitStore.stale: a
fixed number of pipelined reads, vanished entries dropped from the index). Per
conversation, with its turn held: the conversation's unpublished commits up to the
highest stale one (older ones first: a stale commit must not overtake an older
reservation), enqueued in seq order; the turn is released once they are enqueued and
deliveries are awaited after. Commits this process has enqueued itself are skipped (they
are not lost, only slow).
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict

from qim.consts import UNPUBLISHED_SCAN_MAX
from qim.errors import EngineError, RequestError
from qim.services.writer.committer import MessageCommitter
from qim.stores.commits import CommitRef, CommitStore

logger = logging.getLogger(__name__)

RECOVERY_PERIOD_S = 1.0
STALE_PER_BUCKET = 64


class CommitRecovery:
    """`await recover_once()` -> commits resumed; `recovery_loop()` runs it every second.
    Errors of one conversation are logged and retried on the next pass (the commits stay
    in the in-flight set), never dropped."""

    def __init__(self, commits: CommitStore, committer: MessageCommitter, stale_ms: int) -> None:
        self._commits = commits
        self._committer = committer
        self._outbox = committer.outbox
        self._stale_ms = stale_ms

    async def recover_once(self) -> int:
        """One pass; returns how many stale commits were resumed."""
        scan = await self._commits.stale(self._stale_ms, STALE_PER_BUCKET)
        if scan.unreadable:
            logger.error("%d in-flight commits without a readable record; left in place", scan.unreadable)
        by_conv: dict[tuple[int, bytes], list[tuple[CommitRef, int]]] = defaultdict(list)
        for ref, seq in scan.commits:
            if ref not in self._outbox.enqueued:
                by_conv[(ref.tenant, ref.conversation_id)].append((ref, seq))
        resumed = 0
        for (tenant, conv), entries in by_conv.items():
            try:
                resumed += await self._resume_conversation(tenant, conv, entries)
            except (RequestError, EngineError) as exc:
                logger.warning("commit recovery of one conversation failed: %s", exc)
        return resumed

    async def _resume_conversation(self, tenant: int, conv: bytes, entries: list[tuple[CommitRef, int]]) -> int:
        turn = self._committer.ticket(tenant.to_bytes(16, "big"), conv)
        try:
            await turn.wait()
            top = max(seq for _, seq in entries)
            older = await self._commits.unpublished(tenant, conv, top, UNPUBLISHED_SCAN_MAX)
            todo = dict(self._outbox.publish_older(older, None))
            todo.update((ref, seq) for ref, seq in entries if ref not in self._outbox.enqueued)
            pendings = await self._outbox.resume(list(todo.items()))
        finally:
            turn.release()
        results = await asyncio.gather(*(self._outbox.complete(p) for p in pendings), return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException):
                raise r
        return len(entries)

    async def recovery_loop(self) -> None:
        """Background resumption through the same code path as requests."""
        while True:
            await asyncio.sleep(RECOVERY_PERIOD_S)
            try:
                n = await self.recover_once()
                if n:
                    logger.info("commit recovery resumed %d in-flight commits", n)
            except (RequestError, EngineError) as exc:
                logger.warning("commit recovery pass failed: %s", exc)
            except Exception:
                logger.exception("commit recovery pass crashed")
