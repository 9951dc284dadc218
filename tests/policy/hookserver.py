"""A real moderation webhook for the tests (issue 38; docs/decisions/0114): an aiohttp
server on loopback, HTTPS with a certificate of a development CA (qim/dev/certs.py), in
a thread of its own so a test's loop and the stack's processes both reach it.

It checks every request's X-QIM-Signature over "<X-QIM-Timestamp>." + body with the
shared secret (401 when it does not match or the timestamp is stale: the receiver's side
of the protocol) and answers by the send's text, so every outcome can be steered from a
send: "refuse" -> 403 {"reason": REFUSAL}; "mask" -> 200 {"body": base64 of the text with
every "mask" replaced by MASKED} (a replaced body, decision 0126); "boom" -> 500;
"garbage" -> 200 with a body that is not JSON; "broken" -> the connection closed without
an answer; "hang" -> no answer for HANG_S; anything else -> 200 (empty). `mode`, when
set, answers every request that way. `calls` counts requests per client_message_id (hex).
"""

from __future__ import annotations

import asyncio
import base64
import collections
import hashlib
import hmac
import json
import ssl
import threading
import time
from pathlib import Path
from typing import Optional

from aiohttp import web

from qim.dev.certs import CLIENT_PORT, ensure_dev_pki

SECRET = "test-webhook-secret-0123456789"
REFUSAL = "not on this server, friend"
MASKED = "****"
HANG_S = 5.0
STALE_S = 300


class HookServer:
    """`url` (https://127.0.0.1:<port>/verdict), `ca_file` (the CA to trust), `calls`,
    `requests` (the decoded JSON of each), `bad_signatures`; `mode` overrides the text rule."""

    def __init__(self, cert_dir: Path) -> None:
        pki = ensure_dev_pki(cert_dir, services=())
        files = pki.files(CLIENT_PORT)
        self.ca_file = pki.ca_file
        self._ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._ssl.load_cert_chain(files.cert, files.key)
        self.calls: collections.Counter = collections.Counter()
        self.requests: list[dict] = []
        self.bad_signatures = 0
        self.mode: Optional[str] = None
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="hookserver")
        self._runner: Optional[web.AppRunner] = None

    def start(self) -> "HookServer":
        """Serve on a free loopback port; returns self."""
        self._thread.start()
        port = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(30)
        self.url = f"https://127.0.0.1:{port}/verdict"
        return self

    def stop(self) -> None:
        """Stop serving and end the thread."""
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def calls_for(self, cmid: bytes) -> int:
        """How many requests asked about this client_message_id."""
        return self.calls[cmid.hex()]

    async def _start(self) -> int:
        app = web.Application()
        app.router.add_post("/verdict", self._verdict)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self._ssl)
        await site.start()
        return site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _verdict(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        ts = request.headers.get("X-QIM-Timestamp", "")
        mac = hmac.new(SECRET.encode(), ts.encode() + b"." + raw, hashlib.sha256).hexdigest()
        fresh = ts.isdigit() and abs(time.time() - int(ts)) < STALE_S
        if not fresh or not hmac.compare_digest("sha256=" + mac, request.headers.get("X-QIM-Signature", "")):
            self.bad_signatures += 1
            return web.Response(status=401)
        facts = json.loads(raw)
        self.requests.append(facts)
        self.calls[facts["client_message_id"]] += 1
        rule = self.mode or next((w for w in ("refuse", "mask", "boom", "garbage", "broken", "hang")
                                  if w in (facts.get("text") or "")), "accept")
        if rule == "refuse":
            return web.json_response({"reason": REFUSAL}, status=403)
        if rule == "mask":
            masked = (facts.get("text") or "").replace("mask", MASKED).encode()
            return web.json_response({"body": base64.b64encode(masked).decode()})
        if rule == "boom":
            return web.Response(status=500, text="internal error")
        if rule == "garbage":
            return web.Response(status=200, text="<html>this is not JSON</html>")
        if rule == "broken":
            assert request.transport is not None
            request.transport.close()
            return web.Response(status=200)
        if rule == "hang":
            await asyncio.sleep(HANG_S)
        return web.Response(status=200)
