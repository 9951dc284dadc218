"""SessionEpochStore: the session_epoch of every login of a (tenant, user, device)
(docs/design.md §13 "Duplicate login"; seed 000: session_epoch 由 Auth/Session 服务分配，
(tenant,user,device) 维度单调递增；ConnectionNode 只校验不生成; docs/decisions/0042-scale-presence.md).

A gateway takes a new epoch for every AUTH; the epochs of one device only grow, across
gateways and restarts, so a second login anywhere is the newer session and the older
one (lower epoch) is the one kicked. Errors: StoreUnavailable.
"""

from __future__ import annotations

from typing import Protocol


class SessionEpochStore(Protocol):
    """Session epochs of devices."""

    async def next_epoch(self, tenant: int, user: int, device: int) -> int:
        """A new session_epoch for a login of the device, above every earlier one (>= 1)."""
        ...
