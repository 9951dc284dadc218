"""The token a ClientRuntime authenticates with, and its refresh (issue 15; docs/sdk.md
"Tokens").

Tokens expire (a development token lives 1 h; the gateway closes a connection whose
token expired with KICKED{TOKEN_EXPIRED}). Before every connect and reconnect the
runtime asks `TokenSource.current()`: the token it holds, or a new one from the app's
`token_provider` when the held one expires within REFRESH_MARGIN_S, the gateway refused
it (UNAUTHENTICATED) or closed the connection for expiry. An app without a provider
calls `update_token()` itself; a token that stays refused leaves the runtime offline
("token refused"). A new token must name the same tenant, user and device as the
store (ValueError otherwise). Tokens are never logged.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from typing import Awaitable, Callable, Optional, Union

from qim.errors import ErrorCode, QimError
from qim.wire.tokens import TokenClaims, token_claims, token_expiry

REFRESH_MARGIN_S = 30.0  # a token closer than this to its exp is refreshed before it is used
PROVIDER_TIMEOUT_S = 15.0  # a coroutine provider that has not answered by then fails the attempt
TokenProvider = Callable[[], Union[str, Awaitable[str]]]


class TokenProviderError(QimError):
    """The app's token provider raised or returned an unusable token (the cause is
    chained); a reconnect tries again later, an explicit connect() raises it."""

    code = ErrorCode.UNAUTHENTICATED


class TokenSource:
    """The current token of one runtime and the app's optional `provider` (a function
    or coroutine function returning a fresh token). `identity` is the (tenant, user,
    device) every token must name."""

    def __init__(self, token: str, identity: tuple[int, int, int], provider: Optional[TokenProvider] = None) -> None:
        self.token = token
        self.identity = TokenClaims(*identity)
        self.provider = provider
        self.refresh_next = False  # set when the server refused or expired the token

    def update(self, token: str) -> None:
        """Use `token` from the next (re)connect on. ValueError when it is not a QIM
        token or names another tenant, user or device."""
        claims = token_claims(token)
        if claims != self.identity:
            raise ValueError(f"the new token names user {claims.user_id} device {claims.device_id}; this client is "
                             f"user {self.identity.user_id} device {self.identity.device_id}")
        self.token = token.strip()
        self.refresh_next = False

    def stale(self, now: Optional[float] = None) -> bool:
        """True when the token must be refreshed before use (see the module docstring)."""
        exp = token_expiry(self.token)
        now = time.time() if now is None else now
        return self.refresh_next or (exp is not None and exp - now <= REFRESH_MARGIN_S)

    async def current(self) -> str:
        """The token to authenticate with: a fresh one from the provider when the held
        one is stale and there is a provider, else the held one (the gateway decides).
        TokenProviderError when the provider fails, returns a token of another identity,
        or (a coroutine provider) has not answered within PROVIDER_TIMEOUT_S: a
        connection attempt is always bounded (qim/sdk/reconnect.py)."""
        if self.provider is not None and self.stale():
            try:
                fresh = self.provider()
                if inspect.isawaitable(fresh):
                    fresh = await asyncio.wait_for(fresh, PROVIDER_TIMEOUT_S)
                if not isinstance(fresh, str):
                    raise TypeError(f"the token provider returned {type(fresh).__name__}, not str")
                self.update(fresh)
            except Exception as exc:  # the app's code: any failure is a failed connect attempt
                raise TokenProviderError(f"token provider failed: {exc.__class__.__name__}: {exc}") from exc
        return self.token
