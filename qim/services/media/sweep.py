"""MediaSweeper: deletes the media objects nothing references any more (issue 40;
docs/decisions/0139).

An object is kept while one of its references (qim/stores/redis/media.py `refs`) holds it:
- `m:<conversation>:<message>` (the writer, after committing a MEDIA message): while that
  message is in history and NORMAL. A recalled or operator-deleted message's object is
  deleted at the next sweep (downloads were refused at once, decision 0138); one whose
  message left history (the conversation's retention) likewise.
- `c:<conversation>:<client_message_id>:<ms>` (the writer, before it commits): for
  QIM_MEDIA_ORPHAN_MS after that time, so a send under way is never swept.
An object with neither, uploaded more than QIM_MEDIA_ORPHAN_MS ago, is an orphan (an upload
never sent) and is deleted. Its quota is not refunded: the quota counts bytes uploaded per
UTC day, and a refund would let a client upload and abandon without limit.

Several nodes: the one holding the lease (`lease`, a few intervals long) sweeps; the others
wait. The sweep is idempotent besides: the record is claimed atomically (`claim`: only when
no reference arrived since it was read) before the object is deleted, so a send racing the
sweeper is refused by the writer (the record is gone) or keeps the object (claim fails).
An object whose delete fails gets its record back, so the next sweep tries again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from prometheus_client import CollectorRegistry, Counter

from qim.errors import EngineError
from qim.proto.v1 import message_pb2
from qim.stores.errors import StorageError

logger = logging.getLogger(__name__)
LEASE_INTERVALS = 3  # the lease outlives this many sweep intervals: a dead holder's lapses


@dataclass
class SweepResult:
    """What one sweep did: `orphans` and `released` media_ids deleted (never sent; recalled,
    deleted or past retention), `kept` how many records were held, `failed` deletes to retry."""

    orphans: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)
    kept: int = 0
    failed: int = 0


def _held_by_send(refs: set[str], now_ms: int, orphan_ms: int) -> bool:
    """A `c:` reference younger than the orphan window: a send under way (module doc)."""
    for ref in refs:
        if ref.startswith("c:"):
            try:
                if now_ms - int(ref.rsplit(":", 1)[1]) < orphan_ms:
                    return True
            except ValueError:
                return True  # unreadable: keep rather than delete what may be in use
    return False


class MediaSweeper:
    """The sweep of one tenant's media (module doc). `ledger`: the MediaLedger; `objects`:
    the ObjectStore; `messages`: the MessageStore (both tiers); `holder`: this node's
    lease name."""

    def __init__(
        self,
        ledger: Any,
        objects: Any,
        messages: Any,
        tenant: int,
        orphan_ms: int,
        holder: str,
        registry: Optional[CollectorRegistry] = None,
    ) -> None:
        self.ledger, self.objects, self.messages = ledger, objects, messages
        self.tenant, self.orphan_ms, self.holder = tenant, orphan_ms, holder
        self.deleted = Counter(
            "qim_media_sweep_deleted",
            "media objects the sweeper deleted, by reason (orphan: never sent; released: "
            "recalled, deleted or past retention)",
            ["reason"],
            registry=registry,
        )
        self.failures = Counter(
            "qim_media_sweep_failures", "sweeps or object deletes that failed (retried)", registry=registry
        )

    async def _in_use(self, refs: set[str]) -> bool:
        """True when one `m:` reference's message is in history and NORMAL."""
        for ref in refs:
            if not ref.startswith("m:"):
                continue
            _, conv, msg = ref.split(":", 2)
            found = await self.messages.get(self.tenant, bytes.fromhex(conv), bytes.fromhex(msg))
            rec = found.record if found is not None else None
            if rec is not None and rec.state == message_pb2.MESSAGE_STATE_NORMAL:
                return True
        return False

    async def sweep_once(self, now_ms: Optional[int] = None) -> SweepResult:
        """One pass over every record (module doc). Raises StorageError / EngineError when
        Redis, the message store or the object store cannot be read."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        result = SweepResult()
        for media_id in await self.ledger.media_ids(self.tenant):
            record = await self.ledger.get(self.tenant, media_id)
            if record is None:
                continue  # gone meanwhile
            refs = await self.ledger.refs(self.tenant, media_id)
            sent = any(r.startswith("m:") for r in refs)
            if not sent and now_ms - int(record.get("created_ms", now_ms)) < self.orphan_ms:
                continue  # young and never sent: may still be sent
            # a sent one is looked at whatever its age: a photo recalled a minute after its
            # upload is deleted at this sweep, not an hour later (decision 0139, a newcomer)
            if await self._in_use(refs) or _held_by_send(refs, now_ms, self.orphan_ms):
                result.kept += 1
                continue
            if not await self.ledger.claim(self.tenant, media_id, len(refs)):
                result.kept += 1  # a reference arrived since: look again next time
                continue
            try:
                await self.objects.delete(record["key"])
            except EngineError:
                await self.ledger.record(self.tenant, media_id, record)  # the next sweep retries it
                self.failures.inc()
                result.failed += 1
                continue
            reason = "released" if sent else "orphan"
            (result.released if sent else result.orphans).append(media_id)
            self.deleted.labels(reason).inc()
        return result

    async def run(self, interval_s: float) -> None:
        """Sweep every `interval_s` seconds while this node holds the lease (a supervised
        task: a failed sweep is counted and logged, and the next one runs as usual)."""
        ttl_ms = int(interval_s * 1000 * LEASE_INTERVALS)
        while True:
            await asyncio.sleep(interval_s)
            try:
                if not await self.ledger.lease(self.tenant, self.holder, ttl_ms):
                    continue
                result = await self.sweep_once()
                if result.orphans or result.released:
                    logger.info(
                        "media sweep deleted %d orphan(s), %d released, kept %d",
                        len(result.orphans),
                        len(result.released),
                        result.kept,
                    )
            except (StorageError, EngineError) as exc:
                self.failures.inc()
                logger.warning("media sweep failed (next in %.1f s): %s", interval_s, exc)
