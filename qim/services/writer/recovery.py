"""CommitRecovery (DESIGN.md §5.2): resumes in-flight commits nobody retries, through the
same path as a retry (OutboxPublisher.resume), in conversation_seq order.

Per pass: the stale entries of every bucket's in-flight set (one pipelined read), their
message ids and seqs, then their records (to learn the conversation). Per conversation,
with its turn held: the conversation's unpublished commits up to the highest stale one
(older ones first: a stale commit must not overtake an older reservation), enqueued in
seq order; the turn is released once they are enqueued and deliveries are awaited after.
Commits this process has enqueued itself are skipped (they are not lost, only slow).
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict

from qim.consts import COMMIT_BUCKET_COUNT, UNPUBLISHED_SCAN_MAX
from qim.errors import EngineError, RequestError
from qim.proto.v1 import message_pb2
from qim.services.writer.committer import MessageCommitter
from qim.services.writer.hlc import now_ms
from qim.services.writer.keys import CommitKeys, inflight_key, record_key_for

logger = logging.getLogger(__name__)

RECOVERY_PERIOD_S = 1.0
STALE_PER_BUCKET = 64


class CommitRecovery:
    """`await recover_once()` -> commits resumed; `recovery_loop()` runs it every second.
    Errors of one conversation are logged and retried on the next pass (the commits stay
    in the in-flight set), never dropped."""

    def __init__(self, redis, committer: MessageCommitter, stale_ms: int) -> None:
        self._redis = redis
        self._committer = committer
        self._outbox = committer.outbox
        self._stale_ms = stale_ms

    async def recover_once(self) -> int:
        """One pass; returns how many stale commits were resumed."""
        cutoff = now_ms() - self._stale_ms
        async with self._redis.pipeline(transaction=False) as pipe:
            for bucket in range(COMMIT_BUCKET_COUNT):
                pipe.zrangebyscore(inflight_key(bucket), "-inf", cutoff, start=0, num=STALE_PER_BUCKET)
            found = await pipe.execute()
        stale = [(bucket, ck.decode()) for bucket, cks in enumerate(found) for ck in cks
                 if ck.decode() not in self._outbox.enqueued]
        if not stale:
            return 0
        async with self._redis.pipeline(transaction=False) as pipe:
            for _, ck in stale:
                pipe.hmget(ck, "mid", "cseq")
            heads = await pipe.execute()
        gone = [(b, ck) for (b, ck), (mid, _) in zip(stale, heads) if mid is None]
        live = [(ck, mid, int(cseq)) for (_, ck), (mid, cseq) in zip(stale, heads) if mid is not None]
        async with self._redis.pipeline(transaction=False) as pipe:
            for bucket, ck in gone:  # expired or already gone: nothing to resume
                pipe.zrem(inflight_key(bucket), ck)
            for ck, mid, _ in live:
                pipe.get(record_key_for(ck, mid))
            res = await pipe.execute()
        by_conv: dict[tuple[bytes, bytes], list[tuple[str, int]]] = defaultdict(list)
        for (ck, mid, seq), raw in zip(live, res[len(gone):]):
            if raw is None:  # RESERVED (split mode): the record lives in the commit hash
                raw = await self._redis.hget(ck, "rec")
            rec = message_pb2.MessageRecord.FromString(raw or b"")
            if not rec.conversation_id:
                logger.error("in-flight commit without a readable record; left in place")
                continue
            by_conv[(rec.tenant_id, rec.conversation_id)].append((ck, seq))
        resumed = 0
        for (tenant_id, conv), entries in by_conv.items():
            try:
                resumed += await self._resume_conversation(tenant_id, conv, entries)
            except (RequestError, EngineError) as exc:
                logger.warning("commit recovery of one conversation failed: %s", exc)
        return resumed

    async def _resume_conversation(self, tenant_id: bytes, conv: bytes, entries: list[tuple[str, int]]) -> int:
        keys = CommitKeys(int.from_bytes(tenant_id, "big"), conv)
        turn = self._committer.ticket(tenant_id, conv)
        try:
            await turn.wait()
            top = max(seq for _, seq in entries)
            older = await self._redis.zrangebyscore(keys.unpublished(), "-inf", top, start=0,
                                                    num=UNPUBLISHED_SCAN_MAX, withscores=True)
            flat = [x for ck, seq in older for x in (ck, int(seq))]
            todo = dict(self._outbox.publish_older(keys, flat, ""))
            todo.update((ck, seq) for ck, seq in entries if ck not in self._outbox.enqueued)
            pendings = await self._outbox.resume(keys, list(todo.items()))
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
