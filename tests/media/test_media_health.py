"""A MediaService node whose object store goes away is not ready (/healthz 503 naming the
store) and is ready again by itself when the store is back (issue 40; a live but
unhealthy process heals). Its own s3proxy (this module's), stopped and started by pid."""

from __future__ import annotations

import asyncio
import time

from qim.services.media import node as media_node
from tests.media.helpers import running_media


async def _healthz(http, base: str) -> tuple[int, str]:
    async with http.get(f"{base}/healthz") as r:
        return r.status, await r.text()


async def _until(http, base: str, status: int, timeout: float = 90.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        got, text = await _healthz(http, base)
        if got == status:
            return text
        assert time.monotonic() < deadline, f"/healthz stayed {got} ({text!r}), wanted {status}"
        await asyncio.sleep(0.2)


def test_not_ready_while_the_store_is_away_then_heals(media_env, s3_engine, monkeypatch) -> None:
    env, _ = media_env
    monkeypatch.setattr(media_node, "PROBE_S", 0.3)

    async def run() -> None:
        async with running_media(env) as (node, http, base):
            assert (await _until(http, base, 200)).strip() == "ok"
            await asyncio.to_thread(s3_engine.stop)
            try:
                assert "object store unreachable" in await _until(http, base, 503)
            finally:
                await asyncio.to_thread(s3_engine.start)
            assert (await _until(http, base, 200)).strip() == "ok"
            assert node.store_error == ""

    asyncio.run(run())
