"""Media in the web page, in Chromium, on real engines with a real MediaService (issue 40;
docs/sdk.md "The web page's media"; decision 0146): the page (qim-web on one origin) talks
to the MediaService (another origin, QIM_MEDIA_CORS_ORIGINS naming the page's) by CORS.

- A photo attached through the page's file input arrives in the Python SDK and in
  qim-desktop (another device of the same user, `/save`) byte-exact to the stored object
  (its SHA-256 is the reference's), with a WebP thumbnail in the reference; the page's own
  row shows that thumbnail.
- An image pasted into the composer is attached and sent the same way (a synthetic paste).
- A photo the SDK sends shows its thumbnail in the page (the reference's bytes, drawn with
  no request), and a click opens the full image, whose bytes (read back from the viewer's
  object URL in the page) hash to the reference's SHA-256; the viewer's "save" link is not
  cancelled by the viewer's own click handler (it was: the download never started).
- The page's own photo row offers no "edit" (the server refuses to edit MEDIA).
- A 17 MiB PDF attached in the page goes in presigned parts straight to the object store
  (s3proxy allows the page's origin: qim/dev/s3_engine.py), and the SDK downloads it
  byte-exact; the page's row offers "open".
- An empty file is refused (400): the upload shows the reason, no progress bar and no
  Retry (the same bytes are refused again), only Remove.
- A photo dropped onto the chat (a synthetic drop event) over the user's daily quota is
  refused: the upload stays with "daily upload quota reached", that it renews tomorrow and
  the service's reason, no progress bar, nothing is sent; Retry is refused again and keeps
  it, Remove drops it.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import os

from PIL import Image

from qim.consts import MESSAGE_TYPE_MEDIA
from qim.desktop.app import ChatApp
from qim.dev import lone_gateway
from qim.dev.webserver import serve
from qim.wire.media import decode_ref
from tests.desktop.pilotkit import enter
from tests.e2e.sdkclient import client, close_all
from tests.media.conftest import s3_engine  # noqa: F401  # the module's private s3proxy (a fixture)
from tests.media.helpers import photo_with_gps, running_media
from tests.sdk.realstack import eventually, users
from tests.web.conftest import gateway_ws_url
from tests.web.harness import DIST, WebPage

DOC = 17 * 1024 * 1024 + 12_345  # a PDF above LARGE_BYTES: three presigned parts (the last short)
QUOTA = DOC + 300_000  # bytes a user may upload per day here: the photo and the PDF pass, the noise PNG does not
PAGE_SHA256 = """async (sel) => {
  const src = document.querySelector(sel).src;
  const data = await (await fetch(src)).arrayBuffer();
  return [...new Uint8Array(await crypto.subtle.digest("SHA-256", data))].map(b => b.toString(16).padStart(2, "0")).join("");
}"""
PASTE = """([b64, name]) => {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const dt = new DataTransfer();
  dt.items.add(new File([bytes], name, { type: "image/png" }));
  document.querySelector("[data-testid=composer-text]").dispatchEvent(
    new ClipboardEvent("paste", { clipboardData: dt, bubbles: true, cancelable: true }));
}"""
DROP = """([b64, name]) => {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const dt = new DataTransfer();
  dt.items.add(new File([bytes], name, { type: "image/png" }));
  document.getElementById("chat").dispatchEvent(new DragEvent("drop", { dataTransfer: dt, bubbles: true, cancelable: true }));
}"""
# whether a click on `sel` keeps its default action (a download link's download) once every
# handler on its way up ran: window's listener runs last in the bubble phase
NOT_CANCELLED = """(sel) => new Promise((resolve) => {
  window.addEventListener("click", (ev) => { resolve(!ev.defaultPrevented); ev.preventDefault(); }, { once: true });
  document.querySelector(sel).click();
})"""


async def _count(messages, n: int) -> bool:
    """Whether the coroutine function `messages` lists `n` messages now."""
    return len(await messages()) == n


def free_port() -> int:
    """A port free now on the loopback (qim-web binds it next: the media node's CORS names
    it), outside the ephemeral range."""
    return lone_gateway.free_port()


def noise_png(side: int = 420) -> bytes:
    """A PNG of random pixels: about side² × 3 bytes, which no compression shrinks."""
    out = io.BytesIO()
    Image.frombytes("RGB", (side, side), os.urandom(side * side * 3)).save(out, "PNG")
    return out.getvalue()


async def test_photos_from_and_to_the_page_and_a_refusal_kept(stack, s3_engine, browser, tmp_path) -> None:  # noqa: F811
    a, b = users(2)
    web_port = free_port()
    env = {
        **stack.env,
        **s3_engine.env(bucket="t-web-media-page"),
        "QIM_MEDIA_METRICS_LISTEN": "127.0.0.1:0",
        "QIM_MEDIA_CORS_ORIGINS": f"http://127.0.0.1:{web_port}",
        "QIM_MEDIA_QUOTA_BYTES_PER_DAY": str(QUOTA),
    }
    photo = tmp_path / "beach.jpg"
    photo.write_bytes(photo_with_gps())
    big = noise_png()
    assert len(big) > QUOTA - DOC - len(photo.read_bytes())  # what the photo and the PDF leave
    on = asyncio.to_thread  # the page's calls block: they run off the loop the media node serves on
    async with running_media(env) as (node, _, base):
        httpd = serve("127.0.0.1", web_port, DIST, gateway_ws_url(stack), stack.token_key, media_url=base)
        ctx = await on(lambda: browser.new_context(viewport={"width": 900, "height": 700}))
        try:
            page = WebPage(await on(ctx.new_page), a)
            await on(page.sign_in, f"http://127.0.0.1:{web_port}/", "Ann")
            cb = await client(stack, tmp_path, b)  # b's phone (the SDK) and b's desktop
            desk = ChatApp(await client(stack, tmp_path, b, 2, name="-desktop", event_queue=True, on_event=None), a)
            cb.media_url = desk.client.media_url = base
            await cb.connect()
            await desk.client.connect()
            async with desk.run_test(size=(100, 30)) as pilot:
                await on(page.open_chat, b)
                conv = bytes.fromhex(await on(page.page.get_attribute, "[data-testid=chat-title]", "data-conversation"))

                # 1. the page sends a photo: the SDK and the desktop get the stored bytes and the thumbnail
                await on(page.page.set_input_files, "[data-testid=attach-input]", str(photo))
                sent_thumb = "[data-testid=message][data-state=sent] [data-testid=media-thumb]"
                await on(page.page.wait_for_selector, sent_thumb, timeout=90_000)

                async def media_at_b():
                    if await cb.conversation(conv) is None:
                        return []
                    return [m for m in await cb.messages(conv) if m.message_type == MESSAGE_TYPE_MEDIA]

                await eventually(media_at_b, timeout=90, what="the page's photo reaches the SDK")
                (got,) = await media_at_b()
                ref = decode_ref(got.body)
                stored = await node.objects.get("o/" + ref.media_id)
                assert (ref.owner, ref.name, ref.mime, ref.width, ref.height) == (
                    a,
                    "beach.jpg",
                    "image/jpeg",
                    800,
                    600,
                )
                assert hashlib.sha256(stored).digest() == ref.sha256 and b"QIMCam" not in stored  # EXIF stripped
                assert await cb.download(got) == stored
                assert Image.open(io.BytesIO(ref.thumbnail)).format == "WEBP"
                shown = await on(page.page.get_attribute, sent_thumb, "src")
                assert base64.b64decode(shown.split(",", 1)[1]) == ref.thumbnail  # the page's own row, from the ref
                mine = "[data-testid=message][data-state=sent]:has([data-testid=media-thumb])"
                assert await on(page.page.locator(f"{mine} [data-testid=edit-message]").count) == 0

                await eventually(
                    lambda: "[photo: beach.jpg, 800×600" in desk.transcript_text(),
                    timeout=90,
                    what="the photo's line on the desktop",
                )
                out = tmp_path / "desk-beach.jpg"
                await enter(pilot, desk, f"/save 1 {out}")
                await eventually(lambda: out.exists() and "saved" in desk.notice_text(), timeout=60, what="saved")
                assert out.read_bytes() == stored

                # an image pasted into the composer (a screenshot) is attached and sent the same way
                shot = io.BytesIO()
                Image.new("RGB", (64, 48), (10, 200, 90)).save(shot, "PNG")
                await on(page.page.evaluate, PASTE, [base64.b64encode(shot.getvalue()).decode(), "shot.png"])
                await eventually(lambda: _count(media_at_b, 2), timeout=90, what="the pasted image reaches the SDK")
                pasted = decode_ref((await media_at_b())[1].body)
                assert (pasted.name, pasted.mime, pasted.width, pasted.height) == ("shot.png", "image/png", 64, 48)
                assert await on(page.page.input_value, "[data-testid=composer-text]") == ""  # not pasted as text

                # 2. the SDK sends a photo: its thumbnail in the page, the click opens the full bytes
                sunset = photo_with_gps(640, 480)
                await cb.send_media(conv, sunset, name="sunset.jpg")
                theirs = "[data-testid=message]:not(.mine) [data-testid=media-thumb]"
                await on(page.page.wait_for_selector, theirs, timeout=90_000)

                async def own_at_b():  # b's own copy may reach b's store after the page has it
                    return [m for m in await media_at_b() if m.sender_id == b]

                await eventually(own_at_b, timeout=90, what="b's photo in b's own store")
                (mine_b,) = await own_at_b()
                ref_b = decode_ref(mine_b.body)
                shown = await on(page.page.get_attribute, theirs, "src")
                assert base64.b64decode(shown.split(",", 1)[1]) == ref_b.thumbnail
                await on(page.page.click, theirs)
                await on(page.page.wait_for_selector, "[data-testid=media-full]", timeout=60_000)
                digest = await on(page.page.evaluate, PAGE_SHA256, "[data-testid=media-full]")
                assert digest == ref_b.sha256.hex()
                assert await on(page.page.evaluate, NOT_CANCELLED, "[data-testid=media-save]")
                await on(page.page.click, "[data-testid=media-close]")

                # 3. a large file: presigned parts from the page to the store, joined and checked by the service
                doc = tmp_path / "report.pdf"
                doc.write_bytes(b"%PDF-1.7\n" + os.urandom(DOC - 9))
                await on(page.page.set_input_files, "[data-testid=attach-input]", str(doc))
                await eventually(lambda: _count(media_at_b, 4), timeout=180, what="the PDF reaches the SDK")
                (pdf,) = [m for m in await media_at_b() if decode_ref(m.body).mime == "application/pdf"]
                ref_doc = decode_ref(pdf.body)
                assert (ref_doc.name, ref_doc.size, ref_doc.owner) == ("report.pdf", DOC, a)
                assert await cb.download(pdf) == doc.read_bytes()
                await on(page.page.wait_for_selector, "[data-testid=message][data-state=sent] [data-testid=media-open]")

                # 4. an empty file: refused for good (400), so Remove only (no Retry, no bar)
                failed = "[data-testid=upload][data-state=failed]"
                await on(page.page.evaluate, DROP, ["", "empty.png"])
                await on(page.page.wait_for_selector, failed, timeout=90_000)
                why = await on(page.page.text_content, f"{failed} [data-testid=upload-error]")
                assert why.startswith("file refused: the file is empty"), why
                assert await on(page.page.locator(f"{failed} [data-testid=upload-retry]").count) == 0
                assert await on(page.page.locator(f"{failed} progress").count) == 0
                await on(page.page.click, f"{failed} [data-testid=upload-remove]")
                await on(page.page.wait_for_selector, "[data-testid=upload]", state="detached")

                # 5. a drop over the quota: refused with its reason, kept for a retry, never sent
                await on(page.page.evaluate, DROP, [base64.b64encode(big).decode(), "noise.png"])
                await on(page.page.wait_for_selector, failed, timeout=90_000)
                why = await on(page.page.text_content, f"{failed} [data-testid=upload-error]")
                assert why.startswith("daily upload quota reached (it renews tomorrow; retry then): "), why
                assert "quota" in why.split(": ", 1)[1], why
                assert await on(page.page.locator(f"{failed} progress").count) == 0  # a refusal shows no (full) bar
                await on(page.page.click, f"{failed} [data-testid=upload-retry]")
                await on(page.page.wait_for_selector, failed, timeout=90_000)  # refused again, still kept
                assert await on(page.page.locator("[data-testid=upload]").count) == 1
                await on(page.page.click, f"{failed} [data-testid=upload-remove]")
                await on(page.page.wait_for_selector, "[data-testid=upload]", state="detached")
                assert len(await media_at_b()) == 4  # the refused file was never sent
                await pilot.press("ctrl+q")
            await close_all(cb, desk.client)
        finally:
            await on(ctx.close)
            httpd.shutdown()
