"""MediaLedger: what the MediaService keeps besides the objects (issue 40;
docs/decisions/0138): each user's bytes uploaded per UTC day (the quota) and one record per
stored object (its owner, object key, type, size, hash). The Redis implementation is
qim/stores/redis/media.py, on the home instance. Errors: StoreUnavailable when the store
cannot be reached.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Protocol

if TYPE_CHECKING:
    from qim.config.redislayout import RedisLayout


class MediaLedger(Protocol):
    """Quota counters and object records, shared by every MediaService node."""

    async def charge(self, tenant: int, user: int, day: int, nbytes: int, limit: int) -> bool:
        """Add `nbytes` to the user's bytes of UTC day `day` (days since the epoch) unless
        that would pass `limit`: True when charged, False (nothing changed) when over."""
        ...

    async def refund(self, tenant: int, user: int, day: int, nbytes: int) -> None:
        """Take back a charge whose upload was then refused or failed."""
        ...

    async def record(self, tenant: int, media_id: str, fields: dict[str, str], ttl_s: int = 0) -> None:
        """Store the record of a stored object (owner, key, mime, size, sha256, ...) or of an
        upload under way ("u" + its id), expiring after `ttl_s` seconds (0: never)."""
        ...

    async def forget(self, tenant: int, media_id: str) -> None:
        """Delete a record (an upload finished or refused)."""
        ...

    async def get(self, tenant: int, media_id: str) -> Optional[dict[str, str]]:
        """The record of `media_id`, None when there is none."""
        ...

    async def refer(self, tenant: int, media_id: str, ref: str, replaces: str = "") -> bool:
        """Add a reference to the object and drop `replaces` ("" none) at once (decision
        0139): False when it has no record."""
        ...

    async def refs(self, tenant: int, media_id: str) -> set[str]:
        """The object's references (decision 0139)."""
        ...

    async def claim(self, tenant: int, media_id: str, seen: int) -> bool:
        """Delete the record and references while there are still `seen` references."""
        ...

    async def media_ids(self, tenant: int) -> list[str]:
        """Every recorded media_id of `tenant`."""
        ...

    async def lease(self, tenant: int, holder: str, ttl_ms: int) -> bool:
        """Take or renew the sweeper's lease: False while another node holds it."""
        ...

    async def close(self) -> None:
        """Close the client when the ledger owns it."""
        ...


def open_media_ledger(layout: "RedisLayout | str") -> Any:
    """The MediaLedger on the home instance of `layout`, with a client of its own."""
    from qim.config.redislayout import RedisLayout
    from qim.infra.redis.client import connect
    from qim.stores.redis.media import RedisMediaLedger

    home = layout.home if isinstance(layout, RedisLayout) else RedisLayout.single(layout).home
    return RedisMediaLedger(connect(home, max_connections=8))
