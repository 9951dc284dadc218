"""The media audit (issue 40; docs/decisions/0139): the object store against the media
records, both ways, for `qimctl audit media` (qim/cli/qimctl_media.py).

- a reference without an object: a media record (what a MEDIA message's reference
  resolves to) whose object `o/<media_id>` is not in the store; a download of it fails;
- an object without a reference: an object `o/<media_id>` with no record, or whose record
  has no reference (no message sent it, no send under way); uploads younger than
  QIM_MEDIA_ORPHAN_MS are left out (they may still be sent, and the sweeper leaves them).

Objects in the store under other prefixes are not the MediaService's and are not counted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Optional

EXAMPLES = 5  # media_ids shown per finding


@dataclass
class MediaAudit:
    """The findings: `dangling` (references without objects) and `orphans` (objects
    without references): media_ids, sorted; `objects` and `records` the totals seen."""

    dangling: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    objects: int = 0
    records: int = 0

    @property
    def clean(self) -> bool:
        """True when both findings are 0."""
        return not self.dangling and not self.orphans

    def lines(self) -> list[str]:
        """The report: up to EXAMPLES examples of each finding, then the summary line
        `audit media: objects=N records=R references_without_objects=A objects_without_references=B`."""
        out = [f"reference without object: {m}" for m in self.dangling[:EXAMPLES]]
        out += [f"object without reference: o/{m}" for m in self.orphans[:EXAMPLES]]
        out.append(
            f"audit media: objects={self.objects} records={self.records} "
            f"references_without_objects={len(self.dangling)} objects_without_references={len(self.orphans)}"
        )
        return out


async def audit_media(
    ledger: Any, objects: Any, tenant: int, orphan_ms: int, now_ms: Optional[int] = None
) -> MediaAudit:
    """Compare the store's `o/` objects with `tenant`'s media records (module doc). Raises
    StorageError / EngineError when Redis or the store cannot be read."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    stored = {key[2:]: mtime for key, mtime in await objects.listing("o/")}
    result = MediaAudit(objects=len(stored))
    recorded: set[str] = set()
    for media_id in await ledger.media_ids(tenant):
        record = await ledger.get(tenant, media_id)
        if record is None:
            continue  # swept meanwhile
        recorded.add(media_id)
        if media_id not in stored:
            result.dangling.append(media_id)
        elif now_ms - int(record.get("created_ms", now_ms)) >= orphan_ms and not await ledger.refs(tenant, media_id):
            result.orphans.append(media_id)
    result.records = len(recorded)
    result.orphans += [m for m, mtime in stored.items() if m not in recorded and now_ms - mtime >= orphan_ms]
    result.dangling.sort()
    result.orphans.sort()
    return result
