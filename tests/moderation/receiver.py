"""A real receiver of after-send notifications for the tests (docs/decisions/0123): an
aiohttp server on loopback (plain HTTP) in a thread of its own, so a test's loop and the
stack's processes both reach it. It checks X-QIM-Signature over "<X-QIM-Timestamp>." +
body with SECRET (401 when it does not match) and keeps every notification it accepted;
`down = True` answers 503 to every POST (a receiver that is down), so nothing is accepted."""

from __future__ import annotations

import asyncio
import collections
import hashlib
import hmac
import json
import threading
from typing import Optional

from aiohttp import web

SECRET = "test-notify-secret-0123456789"


class Receiver:
    """`url`, `down`, `accepted` (message_id hex -> times accepted), `posts` (POSTs seen),
    `bad_signatures`, `reports` (the user reports accepted)."""

    def __init__(self) -> None:
        self.down = False
        self.accepted: collections.Counter = collections.Counter()
        self.posts = 0
        self.reports: list[dict] = []  # every report accepted, in arrival order
        self.bad_signatures = 0
        self.url = ""
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="notify-receiver")
        self._runner: Optional[web.AppRunner] = None

    def start(self) -> "Receiver":
        """Serve on a free loopback port; returns self."""
        self._thread.start()
        port = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(30)
        self.url = f"http://127.0.0.1:{port}/notify"
        return self

    async def _start(self) -> int:
        app = web.Application()
        app.router.add_post("/notify", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        return site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        with self._lock:
            self.posts += 1
        ts = request.headers.get("X-QIM-Timestamp", "")
        want = "sha256=" + hmac.new(SECRET.encode(), ts.encode() + b"." + body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(want, request.headers.get("X-QIM-Signature", "")):
            with self._lock:
                self.bad_signatures += 1
            return web.Response(status=401)
        if self.down:
            return web.Response(status=503)
        doc = json.loads(body)
        with self._lock:
            self.accepted.update(i["message_id"] for i in doc.get("notifications", []))
            self.reports.extend(doc.get("reports", []))  # user reports (decision 0124)
        return web.Response(status=204)

    def count(self, message_ids: set[str]) -> dict[str, int]:
        """{message_id: times accepted} for `message_ids`."""
        with self._lock:
            return {m: self.accepted[m] for m in message_ids}

    def stop(self) -> None:
        """Stop serving and end the thread."""
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
