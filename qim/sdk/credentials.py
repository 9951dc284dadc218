"""The token a ClientRuntime authenticates with, and its refresh (docs/sdk.md
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
import logging
import time
from typing import Any, Awaitable, Callable, Optional, Union

from qim.errors import ErrorCode, QimError
from qim.proto.v1 import connection_pb2
from qim.protocol import Opcode
from qim.wire.tokens import TokenClaims, token_claims, token_expiry

logger = logging.getLogger(__name__)

REFRESH_MARGIN_S = 30.0  # a token closer than this to its exp is refreshed before it is used
PROVIDER_RETRY_S = 5.0  # a live refresh whose provider failed is tried again after this
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
        self._asking: Optional["asyncio.Task[None]"] = None  # the provider call in flight

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
        connection attempt is always bounded (qim/sdk/reconnect.py).

        One provider call at a time per TokenSource (issue 34): a caller that finds a
        call in flight (the live refresh's, when the link was cut under it) awaits that
        call and shares its token or its error instead of asking again. A caller that
        is cancelled leaves the call running for the others (shielded)."""
        if self.provider is None or not self.stale():
            return self.token
        if self._asking is None:
            self._asking = asyncio.get_running_loop().create_task(self._ask(self.provider))
            self._asking.add_done_callback(self._asked)
        await asyncio.shield(self._asking)
        return self.token

    async def _ask(self, provider: TokenProvider) -> None:
        try:
            fresh = provider()
            if inspect.isawaitable(fresh):
                fresh = await asyncio.wait_for(fresh, PROVIDER_TIMEOUT_S)
            if not isinstance(fresh, str):
                raise TypeError(f"the token provider returned {type(fresh).__name__}, not str")
            self.update(fresh)
        except Exception as exc:  # the app's code: any failure is a failed connect attempt
            raise TokenProviderError(f"token provider failed: {exc.__class__.__name__}: {exc}") from exc

    def _asked(self, task: "asyncio.Task[None]") -> None:
        if self._asking is task:
            self._asking = None
        if not task.cancelled():
            task.exception()  # retrieved here: every awaiter may have been cancelled meanwhile


def refresh_delay(token: str, now: Optional[float] = None) -> Optional[float]:
    """Seconds until a live connection should refresh `token`: REFRESH_MARGIN_S before its
    exp, or half its remaining life when that is shorter (at least 1 s); None without exp
    or with no margin (REFRESH_MARGIN_S 0: the token is used to its end, the reconnect
    after KICKED{TOKEN_EXPIRED} refreshes it)."""
    exp = token_expiry(token)
    if exp is None or REFRESH_MARGIN_S <= 0:
        return None
    left = exp - (time.time() if now is None else now)
    return max(1.0, left - REFRESH_MARGIN_S if left > 2 * REFRESH_MARGIN_S else left / 2)


async def keep_fresh(conn: Any, tokens: TokenSource) -> None:
    """With a provider: ahead of each expiry, AUTH again on the live connection `conn`
    (qim.sdk.connection.Connection) with a fresh token, so the gateway's KICKED
    {TOKEN_EXPIRED} and the reconnect never happen (docs/sdk.md "Tokens"). A gateway
    that refuses a refresh (an older one answers INVALID_ARGUMENT) leaves the connection
    as it is: it ends at the old expiry and the reconnect uses the fresh token. Ends
    with the connection; a failing provider is retried after PROVIDER_RETRY_S."""
    while tokens.provider is not None and conn.is_open:
        delay = refresh_delay(tokens.token)
        if delay is None:
            return
        await asyncio.sleep(delay)
        if not conn.is_open:
            return
        tokens.refresh_next = True
        try:
            token = await tokens.current()
        except TokenProviderError as exc:
            logger.warning("token refresh: %s; retrying in %.0fs", exc, PROVIDER_RETRY_S)
            await asyncio.sleep(PROVIDER_RETRY_S)
            continue
        op, _ = await conn.request(Opcode.AUTH, connection_pb2.Auth(token=token).SerializeToString(), 10.0)
        if op != Opcode.AUTH_OK:
            logger.info("the gateway did not take a live token refresh; the next reconnect uses the fresh token")
            return
