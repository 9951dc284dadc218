"""The signed POST both delivery loops of the ModerationService use (after-send
notifications, notify.py; user reports, reports.py): the body signed like the before-send
request (`qim.policy.webhook.sign`: an HMAC over the timestamp and the body, decision
0114), TLS verified against the system's or the given CA bundle, no redirects. It answers
an outcome, never raises, so each loop keeps its own "retry until a 2xx" rule
(decisions 0123, 0124)."""

from __future__ import annotations

import asyncio
import ssl
import time
from typing import Optional

import aiohttp

from qim.policy.webhook import sign


class SignedPoster:
    """POST JSON bodies to one receiver URL. `start()` opens the HTTP session (in the
    running loop), `close()` ends it; `post(body)` -> "ok" (a 2xx), "status" (another
    status), "timeout" (none within `timeout_s` seconds) or "unreachable"."""

    def __init__(self, url: str, secret: str, ca_file: str, timeout_s: float) -> None:
        self.url, self.secret, self.timeout_s = url, secret, timeout_s
        self._ssl = ssl.create_default_context(cafile=ca_file or None)
        self._session: Optional[aiohttp.ClientSession] = None

    def start(self) -> None:
        """Open the HTTP session (call from the event loop that will post)."""
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s))

    async def close(self) -> None:
        """Close the HTTP session (a poster never started closes nothing)."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def post(self, body: bytes) -> str:
        """One signed POST of `body` (module doc); the outcome, never an exception."""
        assert self._session is not None, "SignedPoster.start() first"
        ts = int(time.time())
        headers = {
            "Content-Type": "application/json",
            "X-QIM-Timestamp": str(ts),
            "X-QIM-Signature": sign(self.secret, ts, body),
        }
        try:
            async with self._session.post(
                self.url,
                data=body,
                headers=headers,
                allow_redirects=False,
                ssl=self._ssl if self.url.startswith("https://") else True,
            ) as resp:
                await resp.read()
                return "ok" if 200 <= resp.status < 300 else "status"
        except asyncio.TimeoutError:
            return "timeout"
        except (aiohttp.ClientError, OSError):
            return "unreachable"
