"""AUTH at the ConnectionNode (docs/decisions/0021-tokens-and-limits.md; docs/protocol.md AUTH; docs/operations.md
"Tokens and keys").

A token is a signed, expiring JWT (qim/wire/tokens.py) checked against the public keys
of QIM_TOKEN_PUBLIC_KEYS and of the JWKS document of QIM_TOKEN_JWKS (keys.py; selected by
kid: two are valid at once during a rotation),
QIM_TOKEN_AUDIENCE, QIM_TOKEN_ISSUER, QIM_TOKEN_LEEWAY_S and QIM_TOKEN_MAX_TTL_S, and
must name this deployment's tenant (QIM_TENANT_ID). Every refusal is
ERROR(UNAUTHENTICATED) followed by a close (conn.py) and counts in
qim_gateway_auth_refused_total{reason}; the token itself is never logged or echoed.
"""

from __future__ import annotations

from typing import Optional

from qim.config import GatewayConfig
from qim.services.gateway.keys import TokenKeys, initial_jwks
from qim.services.gateway.metrics import GatewayMetrics
from qim.wire.tokens import TokenRefused, TokenVerifier, VerifiedToken


class Authenticator:
    """Verifies AUTH tokens for one gateway (`config`: GatewayConfig). ValueError when
    the configured keys cannot form a verifier (none, duplicate kid)."""

    def __init__(self, config: GatewayConfig, metrics: Optional[GatewayMetrics] = None) -> None:
        self._m = metrics if metrics is not None else GatewayMetrics()
        jwks = initial_jwks(config.token_jwks)  # EngineError when unreadable
        self.verifier = TokenVerifier(tuple(config.token_keys) + jwks, config.token_audience, config.token_issuer,
                                      config.token_leeway_s, config.token_max_ttl_s)
        self.keys = TokenKeys(config, self.verifier, self._m)  # JWKS refreshes: run() as a node task
        self.tenant = config.common.tenant
        self.leeway_s = config.token_leeway_s

    def authenticate(self, token: str) -> tuple[VerifiedToken, str]:
        """The identity and expiry the token proves, and its checked display name ("" when
        none); TokenRefused (UNAUTHENTICATED, counted by reason) for anything else,
        including a token of another tenant."""
        try:
            verified, name = self.verifier.verify_named(token)
            if verified.tenant != self.tenant:
                raise TokenRefused("tenant", "token is for another tenant")
        except TokenRefused as exc:
            self._m.auth_refused.labels(reason=exc.reason).inc()
            if exc.reason == "unknown_kid":
                self.keys.unknown_kid()  # a rotation the gateway has not read yet: read the JWKS again
            raise
        return verified, name
