"""The HTTPS/1.1 base of the FCM and Web Push fakes: an aiohttp server on a free loopback
port in the test's loop, and the answer every `mode` gives (tests/notify/fakes/__init__.py)."""

from __future__ import annotations

import asyncio
import ssl
import time
from typing import Optional

from aiohttp import web

from tests.notify.fakes import HANG_S


class HttpsFake:
    """`base_url` once started; `mode`, `retry_after` (the 429's header); `modes` (a
    device key -> its own mode, over `mode`); `accepted` (what was answered "ok", with the
    monotonic time, key "at"); subclasses add routes in `routes(app)` and call
    `by_mode(request, ok, errors, key, entry)` for a request that passed their checks."""

    def __init__(self, ssl_context: ssl.SSLContext) -> None:
        self.ssl_context = ssl_context
        self.mode = "ok"
        self.modes: dict[str, str] = {}
        self.retry_after = "7"
        self.accepted: list[dict] = []
        self.base_url = ""
        self._runner: Optional[web.AppRunner] = None

    def routes(self, app: web.Application) -> None:
        """Add the provider's routes."""
        raise NotImplementedError

    async def start(self) -> "HttpsFake":
        """Serve HTTPS on a free loopback port."""
        app = web.Application()
        self.routes(app)
        # handler_cancellation: a handler still hanging is cancelled when its client goes
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True,
                                    shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self.ssl_context)
        await site.start()
        self.base_url = f"https://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        """Stop serving."""
        if self._runner is not None:
            await self._runner.cleanup()

    async def by_mode(self, request: web.Request, ok: web.Response, errors: dict[str, web.Response],
                      key: str = "", entry: Optional[dict] = None) -> web.StreamResponse:
        """By the mode of device `key` (`modes`, else `mode`): `ok` in mode "ok" (`entry`
        then recorded in `accepted`); `errors[mode]` for "400"/"410" (provider-specific
        bodies); 429 with Retry-After; 500; "hang" answers nothing for HANG_S; "close" drops
        the connection."""
        mode = self.modes.get(key, self.mode)
        if mode == "ok":
            if entry is not None:
                self.accepted.append({**entry, "at": time.monotonic()})
            return ok
        if mode in errors:
            return errors[mode]
        if mode == "429":
            return web.Response(status=429, headers={"Retry-After": self.retry_after})
        if mode == "500":
            return web.Response(status=500, text="internal error")
        if mode == "hang":
            await asyncio.sleep(HANG_S)
            return ok
        assert mode == "close", mode
        assert request.transport is not None
        request.transport.abort()
        return ok
