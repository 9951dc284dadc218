"""ReportStore: the users' reports of messages (docs/decisions/0124-user-reports.md), the
interface the writer (REPORT) and the ModerationService (delivery) talk to; the Redis
implementation is qim/stores/redis/reports.py (the home instance, next to the moderation
log). A report is a dict of strings: id, at_ms, tenant, reporter, device,
conversation_id and message_id (hex), peer, sender, reason, text, state (open|resolved)
and, once resolved, action, operator, resolution.

Errors: StoreUnavailable when the store cannot be reached.
"""

from __future__ import annotations

from typing import Any, Optional, Protocol


class ReportStore(Protocol):
    """Reports: stored once per (tenant, reporter, client_report_id), listed, resolved,
    and kept undelivered until the operator's webhook accepted them."""

    async def add(
        self, tenant: int, reporter: int, client_report_id: bytes, fields: dict[str, str]
    ) -> tuple[str, bool]:
        """Store one report unless this (tenant, reporter, client_report_id) was: (id, duplicate)."""
        ...

    async def get(self, report_id: str) -> Optional[dict[str, str]]:
        """One report, None when there is none with this id."""
        ...

    async def listing(self, count: int, open_only: bool = False) -> list[dict[str, str]]:
        """The newest `count` reports (only the open ones with `open_only`), newest first."""
        ...

    async def claim(self, report_id: str, operator: str, action: str, reason: str, at_ms: int) -> Optional[Any]:
        """Resolve an open report once (atomically): None when this call did, else who
        did (at_ms, operator, action); NotFound when there is no such report."""
        ...

    async def reopen(self, report_id: str, operator: str, at_ms: int) -> bool:
        """Open again the report this (operator, at_ms) claim resolved (its action failed)."""
        ...

    async def undelivered(self, count: int) -> list[dict[str, str]]:
        """The oldest `count` reports the webhook has not accepted yet."""
        ...

    async def delivered(self, ids: list[str]) -> None:
        """The webhook accepted these: never delivered again."""
        ...

    async def close(self) -> None:
        """Close the store's own client (a store opened on the stores' client: nothing)."""
        ...
