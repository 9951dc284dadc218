"""PushRegistrationStore: each device's push registration (docs/decisions/0128-device-
push-registrations.md; docs/protocol.md "Push registrations").

Contract (tests/push/test_store.py runs it on one and on several Redis instances):
- One registration per (tenant, user, device): a `push_pb2.PushRegistration` (provider,
  token, provider fields, preferences, `registered_at_ms`, `token_iat`). `put` replaces
  the device's registration; `unregister` removes it; `remove(.., token)` removes it
  only while the stored token is still `token` (a provider's "unregistered" / 410 for
  an old token never removes a newer registration that raced it).
- Each user's registrations carry one version that grows with every change (put,
  unregister, a remove that removed) and never goes back; every write is one round trip
  to the user's instance and atomic.
- Revoked is gone: a registration whose `token_iat` is at or before its device's (or its
  user's) revocation cutoff (RevocationStore; qimctl token revoke, a moderation ban) is
  left out of every read, so nothing is sent to a revoked device; a newer registration
  (a new token's iat) is live again.
- Reads: `registrations` (one user, for PUSH_LIST) and `registrations_of` (many users,
  for the NotificationService): one round trip per instance holding the users, then one
  read of the revocation cutoffs. Lists are ordered by device_id.

Errors: StoreUnavailable (the instance cannot be reached); StoreCorrupt (a stored value
that does not parse).
"""

from __future__ import annotations

from typing import Protocol, Sequence

from qim.proto.v1.push_pb2 import PushRegistration


class PushRegistrationStore(Protocol):
    """The device push registrations of users (module doc: the contract)."""

    async def put(self, tenant: int, user: int, registration: PushRegistration) -> int:
        """Keep `registration` for (user, registration.device_id), replacing any; the
        user's version after it."""
        ...

    async def unregister(self, tenant: int, user: int, device: int) -> tuple[bool, int]:
        """Remove the device's registration: (whether one was there, the version after)."""
        ...

    async def remove(self, tenant: int, user: int, device: int, token: str) -> bool:
        """Remove the device's registration only while its token is `token` (the
        provider's permanent failure of that token); whether it removed one."""
        ...

    async def registrations(self, tenant: int, user: int) -> tuple[list[PushRegistration], int]:
        """The user's live (unrevoked) registrations by device_id, and the version."""
        ...

    async def registrations_of(self, tenant: int, users: Sequence[int]) -> dict[int, list[PushRegistration]]:
        """Each user's live registrations by device_id ([] for none)."""
        ...
