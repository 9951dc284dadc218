"""The automatic reconnect of a ClientRuntime after its connection dropped (DESIGN.md §9).

Backoff doubles from the runtime's reconnect_backoff start to its cap; each attempt is
a whole `_establish` (AUTH, REBUILD when needed, mailbox sync, resends, after-sync
hooks). It stops for good when the token is refused (UNAUTHENTICATED) or the store
belongs to another identity — reconnecting cannot fix either — failing the waiting
sends with that error and telling the app ConnectionState("offline"). Any other
failure (unreachable, transient ERROR, a sync cut short) tries again.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from qim.errors import ErrorCode, QimError
from qim.sdk.events import ServerError
from qim.sdk.model import StoreError

if TYPE_CHECKING:
    from qim.sdk.runtime import ClientRuntime

logger = logging.getLogger(__name__)


async def reconnect_loop(rt: "ClientRuntime") -> None:
    """Reconnect until connected, closed, kicked, or refused for good."""
    delay = rt._backoff[0]
    while not rt._closing:
        await asyncio.sleep(delay)
        try:
            await rt._establish(reconnect=True)
            return
        except ServerError as exc:
            if exc.code == ErrorCode.UNAUTHENTICATED:
                logger.warning("reconnect refused: %s", exc.code.name)
                rt._set_state("offline", "token refused")
                rt._fail_waiters(exc)
                return
            logger.debug("reconnect sync failed: %s", exc.code.name)
        except StoreError as exc:
            rt._set_state("offline", "store identity mismatch")
            rt._fail_waiters(exc)
            return
        except (QimError, asyncio.TimeoutError, OSError) as exc:
            logger.debug("reconnect failed: %s", exc.__class__.__name__)
        if not rt._closing:
            rt._set_state("reconnecting", "attempt failed")
        delay = min(delay * 2, rt._backoff[1])
