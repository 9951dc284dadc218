"""A photo the page was still uploading when it reloaded is sent after the reload, once
(issue 40: pending media sends survive an app restart like pending text; qim-js
web/src/sdk/mediaoutbox.ts): Chromium on real engines with a real MediaService across
origins. The upload is held (the request to the MediaService never answered) while the
photo is recorded in the page's store; the page reloads with the service reachable; the
photo is uploaded and sent from the store, and the other user gets exactly one MEDIA
message, byte-exact to the stored object, and the store keeps no media row."""

from __future__ import annotations

import asyncio
import hashlib

from qim.consts import MESSAGE_TYPE_MEDIA
from qim.dev.webserver import serve
from qim.wire.media import decode_ref
from tests.e2e.sdkclient import client, close_all
from tests.media.conftest import s3_engine  # noqa: F401  # the module's private s3proxy (a fixture)
from tests.media.helpers import photo_with_gps, running_media
from tests.sdk.realstack import eventually, users
from tests.web.conftest import gateway_ws_url
from tests.web.harness import DIST, WebPage
from tests.web.test_web_media_page import free_port

MEDIA_ROWS = "async () => await window.qimClient.store.database.count('media')"


async def test_a_photo_cut_by_a_reload_is_sent_after_it_once(stack, s3_engine, browser, tmp_path) -> None:  # noqa: F811
    a, b = users(2)
    web_port = free_port()
    env = {**stack.env, **s3_engine.env(bucket="t-web-media-reload"), "QIM_MEDIA_METRICS_LISTEN": "127.0.0.1:0",
           "QIM_MEDIA_CORS_ORIGINS": f"http://127.0.0.1:{web_port}"}
    photo = tmp_path / "harbour.jpg"
    photo.write_bytes(photo_with_gps())
    on = asyncio.to_thread  # the page's calls block: they run off the loop the media node serves on
    async with running_media(env) as (node, _, base):
        httpd = serve("127.0.0.1", web_port, DIST, gateway_ws_url(stack), stack.token_key, media_url=base)
        ctx = await on(lambda: browser.new_context(viewport={"width": 900, "height": 700}))
        cb = await client(stack, tmp_path, b)
        cb.media_url = base
        try:
            page = WebPage(await on(ctx.new_page), a)
            await on(page.sign_in, f"http://127.0.0.1:{web_port}/", "Ann")
            await cb.connect()
            await on(page.open_chat, b)
            conv = bytes.fromhex(await on(page.page.get_attribute, "[data-testid=chat-title]", "data-conversation"))
            held = f"{base}/v1/media**"
            await on(page.page.route, held, lambda route: None)  # never answered: the upload hangs
            await on(page.page.set_input_files, "[data-testid=attach-input]", str(photo))
            await eventually(lambda: page.page.evaluate(MEDIA_ROWS) == 1, timeout=60, what="the photo in the store")
            await on(page.page.unroute, held)
            await on(page.page.reload)

            async def media_at_b():
                if await cb.conversation(conv) is None:
                    return []
                return [m for m in await cb.messages(conv) if m.message_type == MESSAGE_TYPE_MEDIA]

            await eventually(media_at_b, timeout=90, what="the photo sent after the reload reaches b")
            await eventually(lambda: page.page.evaluate(MEDIA_ROWS) == 0, timeout=60, what="the store's row gone")
            await asyncio.sleep(2)  # a second send would have come by now
            (got,) = await media_at_b()
            ref = decode_ref(got.body)
            stored = await node.objects.get("o/" + ref.media_id)
            assert ref.name == "harbour.jpg" and hashlib.sha256(stored).digest() == ref.sha256
            assert await cb.download(got) == stored
        finally:
            await on(ctx.close)
            httpd.shutdown()
            await close_all(cb)
