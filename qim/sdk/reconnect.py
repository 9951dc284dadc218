"""The automatic reconnect of a ClientRuntime after its connection dropped (docs/design.md §9).

Backoff doubles from the runtime's reconnect_backoff start to its cap, each wait jittered
to uniform(½, 1½) of it (so the clients of a gateway that died do not come back to the
others in one burst: docs/design.md §13; a retry-after hint is a floor); each attempt is
a whole `_establish` (AUTH with the current token — a fresh one from the app's token
provider when it expires soon or the gateway closed the connection for expiry:
qim/sdk/credentials.py — REBUILD when needed, mailbox sync, resends, after-sync hooks).
It stops for good when the token is refused (UNAUTHENTICATED; with a provider, after
one more try with a fresh token), the store belongs to another identity, or TLS failed
for good (TlsError: the gateway's certificate is not trusted) — reconnecting cannot fix
any of them — failing the waiting sends with that error and telling
the app ConnectionState("offline", "token refused: <the gateway's reason>", e.g. "token
refused: token expired"). A RATE_LIMITED AUTH (the user's
connection cap) waits its retry-after hint. Any other failure (unreachable, transient
ERROR, a sync cut short) tries again.
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import TYPE_CHECKING

from qim.errors import ErrorCode, QimError, TlsError
from qim.sdk.events import ServerError
from qim.sdk.model import StoreError

if TYPE_CHECKING:
    from qim.sdk.runtime import ClientRuntime

logger = logging.getLogger(__name__)


def jittered(delay: float) -> float:
    """`delay` spread to uniform(½, 1½) of it: reconnects of many clients do not line up."""
    return delay * (0.5 + random.random())


async def reconnect_loop(rt: "ClientRuntime") -> None:
    """Reconnect until connected, closed, kicked, or refused for good."""
    delay, hint = rt._backoff[0], 0.0
    refreshed = False
    while not rt._closing:
        await asyncio.sleep(max(jittered(delay), hint))
        hint = 0.0
        try:
            await rt._establish(reconnect=True)
            return
        except ServerError as exc:
            if exc.code == ErrorCode.UNAUTHENTICATED and rt.tokens.provider is not None and not refreshed:
                refreshed = rt.tokens.refresh_next = True  # once more with a fresh token
                continue
            if exc.code == ErrorCode.UNAUTHENTICATED:
                logger.warning("reconnect refused: %s", exc.code.name)
                rt._set_state("offline", f"token refused: {exc.message}")  # the gateway's reason (expired, key)
                rt._fail_waiters(exc)
                return
            logger.debug("reconnect sync failed: %s", exc.code.name)
            hint = exc.retry_after_ms / 1000  # the server said when (RATE_LIMITED): no earlier attempt
        except StoreError as exc:
            rt._set_state("offline", "store identity mismatch")
            rt._fail_waiters(exc)
            return
        except TlsError as exc:  # an untrusted certificate: retrying would only storm the gateway
            logger.warning("reconnect refused: %s", exc)
            rt._set_state("offline", "tls refused")
            rt._fail_waiters(exc)
            return
        except (QimError, asyncio.TimeoutError, OSError) as exc:  # incl. TokenProviderError: try again
            logger.debug("reconnect failed: %s", exc.__class__.__name__)
        if not rt._closing:
            rt._set_state("reconnecting", "attempt failed")
        delay = min(delay * 2, rt._backoff[1])
