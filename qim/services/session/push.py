"""PUSH_REGISTER, PUSH_UNREGISTER and PUSH_LIST of SessionProjection (docs/decisions/
0128-device-push-registrations.md; docs/protocol.md "Push registrations").

The owner of the user's session shard serves them, like the user's other own state
(conversation state, decision 0122): the gateway routes them by `conn.shard`, and a node
that is not the owner answers UNAVAILABLE (the client retries; the gateway re-reads the
owner). The device is the AUTH token's (`actor.device_id`); the registration keeps the
token's iat, so a later revocation of that device or user hides it (the store's
contract, qim/stores/push.py). QIM has no logout frame: PUSH_UNREGISTER is the logout
path (the SDK's `client.push.unregister()` before the app forgets the token).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import push_pb2
from qim.stores.push import PushRegistrationStore
from qim.wire.push import check_register

# (tenant, user, pages) -> why this node must not serve the user now, or None (service.py)
Unserved = Callable[[int, int, bool], Optional[str]]


class PushCalls:
    """The three calls over a PushRegistrationStore for the users this node serves."""

    def __init__(self, store: PushRegistrationStore, unserved: Unserved) -> None:
        self._store = store
        self._unserved = unserved

    def _who(self, actor: Any) -> tuple[int, int, int]:
        """(tenant, user, device) of the actor; UNAVAILABLE when this node does not own the
        user's session shard (a moving owner), INVALID_ARGUMENT without a device."""
        tenant, user = int.from_bytes(actor.tenant_id, "big"), actor.user_id
        reason = self._unserved(tenant, user, False)
        if reason:
            raise RequestError(ErrorCode.UNAVAILABLE, f"push registrations not served here: {reason}")
        if actor.device_id == 0:
            raise RequestError(ErrorCode.INVALID_ARGUMENT, "push registrations need a device token")
        return tenant, user, actor.device_id

    async def register(self, actor: Any, req: push_pb2.PushRegister) -> push_pb2.PushRegisterOk:
        """PUSH_REGISTER: validate (qim/wire/push.py), keep it for the actor's device
        (replacing any), answer it with the user's version."""
        check_register(req)
        tenant, user, device = self._who(actor)
        reg = push_pb2.PushRegistration(device_id=device, settings=req, registered_at_ms=int(time.time() * 1000),
                                        token_iat=actor.token_iat)
        version = await self._store.put(tenant, user, reg)
        return push_pb2.PushRegisterOk(registration=reg, version=version)

    async def unregister(self, actor: Any, req: push_pb2.PushUnregister) -> push_pb2.PushUnregisterOk:
        """PUSH_UNREGISTER: remove the actor's device's registration (`removed` False when none)."""
        tenant, user, device = self._who(actor)
        removed, version = await self._store.unregister(tenant, user, device)
        return push_pb2.PushUnregisterOk(removed=removed, version=version)

    async def list(self, actor: Any, req: push_pb2.PushList) -> push_pb2.PushListOk:
        """PUSH_LIST: the user's live registrations (every device), by device_id."""
        tenant, user, _ = self._who(actor)
        regs, version = await self._store.registrations(tenant, user)
        return push_pb2.PushListOk(registrations=regs, version=version)


class PushHandlers:
    """The Dispatch handlers SessionService inherits (qim/wire/calls.py names them);
    `_push` is its PushCalls, None when the node was built without the store."""

    _push: Optional[PushCalls] = None

    def _push_calls(self) -> PushCalls:
        if self._push is None:
            raise RequestError(ErrorCode.UNAVAILABLE, "push registrations are not served by this node")
        return self._push

    async def push_register(self, actor: Any, req: push_pb2.PushRegister) -> push_pb2.PushRegisterOk:
        """PUSH_REGISTER (PushCalls.register)."""
        return await self._push_calls().register(actor, req)

    async def push_unregister(self, actor: Any, req: push_pb2.PushUnregister) -> push_pb2.PushUnregisterOk:
        """PUSH_UNREGISTER (PushCalls.unregister)."""
        return await self._push_calls().unregister(actor, req)

    async def push_list(self, actor: Any, req: push_pb2.PushList) -> push_pb2.PushListOk:
        """PUSH_LIST (PushCalls.list)."""
        return await self._push_calls().list(actor, req)
