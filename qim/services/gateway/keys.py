"""The gateway's token verification keys: the PEM files of QIM_TOKEN_PUBLIC_KEYS and the
JWKS document of QIM_TOKEN_JWKS (a file or an http(s) URL; qim/wire/jwks.py), merged by
kid into the verifier's key set (docs/operations.md "Tokens and keys").

The JWKS is read at start (`initial_jwks`, blocking, before the gateway serves: a
document that cannot be read or is refused stops the start with EngineError), then every
QIM_TOKEN_JWKS_REFRESH_S by `run()` off the event loop, and at once when a token names a
kid nobody knows (`unknown_kid()`, at most every MIN_REFRESH_S, so a flood of forged kids
costs one read per interval). A failed refresh keeps the keys in use, is logged and
counted (`qim_gateway_jwks_refresh_failures_total`); the set in use has
`qim_gateway_token_keys` keys.
"""

from __future__ import annotations

import asyncio
import logging
import time

from qim.config import GatewayConfig
from qim.errors import EngineError
from qim.services.gateway.metrics import GatewayMetrics
from qim.wire.jwks import MIN_REFRESH_S, parse_jwks, read_jwks
from qim.wire.tokens import TokenVerifier, VerifyKey

logger = logging.getLogger(__name__)


def initial_jwks(location: str) -> tuple[VerifyKey, ...]:
    """The keys of the JWKS at `location` ("" = none: ()), read now (blocking: at start,
    before the gateway serves). EngineError naming QIM_TOKEN_JWKS when unreadable or refused."""
    if not location:
        return ()
    try:
        return parse_jwks(read_jwks(location))
    except (OSError, ValueError) as exc:
        raise EngineError(f"QIM_TOKEN_JWKS={location}: {exc}") from None


class TokenKeys:
    """Keeps `verifier`'s keys = file keys ∪ the JWKS keys (config: GatewayConfig; the
    verifier starts with both, from initial_jwks)."""

    def __init__(self, config: GatewayConfig, verifier: TokenVerifier, metrics: GatewayMetrics) -> None:
        self.files: tuple[VerifyKey, ...] = tuple(config.token_keys)
        self.location: str = config.token_jwks
        self.period_s = float(config.token_jwks_refresh_s)
        self.verifier = verifier
        self._m = metrics
        self._wake = asyncio.Event()
        self._last = time.monotonic()  # initial_jwks() read it just now
        self._m.token_keys.set(len(self.verifier.keys))

    def _install(self, jwks: tuple[VerifyKey, ...]) -> None:
        self.verifier.replace_keys(self.files + jwks)  # ValueError: a kid in both, the old set kept
        self._last = time.monotonic()
        self._m.token_keys.set(len(self.verifier.keys))

    def unknown_kid(self) -> None:
        """A token named an unknown kid: read the JWKS again soon (rate-limited)."""
        if self.location:
            self._wake.set()

    async def refresh(self) -> bool:
        """Read and install the JWKS now; False (logged, counted) when it failed."""
        try:
            jwks = parse_jwks(await asyncio.to_thread(read_jwks, self.location))
            before = set(self.verifier.keys)
            self._install(jwks)
        except (OSError, ValueError) as exc:
            self._last = time.monotonic()
            self._m.jwks_failures.inc()
            logger.warning("JWKS %s not refreshed (keys in use kept): %s", self.location, exc)
            return False
        if set(self.verifier.keys) != before:
            logger.info("token keys now %s", ", ".join(sorted(self.verifier.keys)))
        return True

    async def run(self) -> None:
        """Refresh every period and on demand, never more often than MIN_REFRESH_S."""
        if not self.location:
            await asyncio.Event().wait()  # nothing to refresh: a task that lives as long as the node
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), self.period_s)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()
            await asyncio.sleep(max(0.0, self._last + MIN_REFRESH_S - time.monotonic()))
            await self.refresh()
