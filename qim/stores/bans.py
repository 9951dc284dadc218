"""A moderation ban as the services tell it to a device (docs/decisions/0123, Amendment 2;
the Redis records: qim/stores/redis/bans.py)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import NamedTuple

__all__ = ["Ban"]


class Ban(NamedTuple):
    """A ban in force: `until_ms` (unix ms; 0 = until unbanned) and the operator's `reason`."""

    until_ms: int
    reason: str

    def message(self) -> str:
        """What the user is told: "banned until 2026-12-31 00:00 UTC: <reason>" (or
        "banned by a moderator: <reason>" without an end)."""
        if not self.until_ms:
            return f"banned by a moderator: {self.reason}"
        end = datetime.fromtimestamp(self.until_ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        return f"banned until {end}: {self.reason}"
