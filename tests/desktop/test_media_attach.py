"""qim-desktop sends and saves media (issue 40; qim/desktop/media.py; docs/desktop.md
"Commands"): `/attach PATH` uploads a photo through a real MediaService (s3proxy, the
session stack's Redis and token key) with progress on the notice line and sends it; the
other user receives the MEDIA message byte-exact to the stored object; the transcript
shows `[photo: name, W×H, size]`; `/save N PATH` writes the stored bytes (their SHA-256 is
the reference's). A missing file, an existing target and the service's refusal (a
decompression bomb: 422) are one-line refusals naming the reason, the typed command kept.
A photo attached after paging back (/older) brings the newest messages into view, as a
text send does.
Textual's pilot at 100x30; what the person reads is taken from the screen's widgets.
"""

from __future__ import annotations

import hashlib

from textual.containers import VerticalScroll

from qim.consts import MESSAGE_TYPE_MEDIA
from qim.desktop.app import ChatApp
from qim.desktop.widgets import Composer
from qim.wire.media import decode_ref
from tests.desktop.pilotkit import enter
from tests.e2e.sdkclient import client, close_all
from tests.media.conftest import s3_engine  # noqa: F401  # the module's private s3proxy (a fixture)
from tests.media.helpers import bomb_png, photo_with_gps, running_media
from tests.sdk.realstack import eventually, users

SIZE = (100, 30)


async def test_attach_sends_a_photo_the_peer_downloads_and_save_writes_it(stack, s3_engine, tmp_path) -> None:  # noqa: F811
    env = {**stack.env, **s3_engine.env(bucket="t-desktop-media"), "QIM_MEDIA_METRICS_LISTEN": "127.0.0.1:0"}
    a, b = users(2)
    photo = tmp_path / "beach.jpg"
    photo.write_bytes(photo_with_gps())
    async with running_media(env) as (node, _, base):
        app = ChatApp(await client(stack, tmp_path, a, name="-desktop", event_queue=True, on_event=None), b)
        cb = await client(stack, tmp_path, b)
        app.client.media_url = cb.media_url = base
        await app.client.connect()
        await cb.connect()
        told: list[str] = []
        tell = app.tell
        app.tell = lambda text, lines=False: (told.append(text), tell(text, lines))[1]
        async with app.run_test(size=SIZE) as pilot:
            await eventually(lambda: app.current is not None, timeout=60, what="the chat with b open")
            await cb.open_direct(a)
            for i in range(40):  # more lines than the chat pane holds: paging back scrolls
                await cb.send(app.current, f"line {i}".encode())
            await eventually(lambda: "line 39" in app.transcript_text(), timeout=60, what="b's lines shown")
            scroll = app.query_one("#scroll", VerticalScroll)
            await enter(pilot, app, "/older")
            await eventually(lambda: scroll.scroll_y < scroll.max_scroll_y, what="paged back")
            await enter(pilot, app, f"/attach {photo}")
            await eventually(lambda: "sent beach.jpg" in app.notice_text(), timeout=60, what="the photo sent")
            assert any(t.startswith("uploading beach.jpg: 100% of") for t in told), told
            await eventually(lambda: scroll.scroll_y == scroll.max_scroll_y, what="the newest in view after /attach")

            async def received():  # b's store learns the chat with the message (no history pull before)
                if await cb.conversation(app.current) is None:
                    return []
                return [m for m in await cb.messages(app.current) if m.message_type == MESSAGE_TYPE_MEDIA]

            await eventually(received, timeout=60, what="the MEDIA message reaches b")
            (got,) = await received()
            ref = decode_ref(got.body)
            stored = await node.objects.get("o/" + ref.media_id)
            assert (ref.name, ref.width, ref.height, ref.owner) == ("beach.jpg", 800, 600, a)
            assert await cb.download(got) == stored
            await eventually(
                lambda: "me: [photo: beach.jpg, 800×600, " in app.transcript_text(),
                timeout=60,
                what="the photo's line in the transcript",
            )

            out = tmp_path / "saved.jpg"
            await enter(pilot, app, f"/save 1 {out}")
            await eventually(lambda: "saved [photo: beach.jpg" in app.notice_text(), timeout=60, what="saved")
            assert out.read_bytes() == stored and hashlib.sha256(stored).digest() == ref.sha256

            composer = app.query_one(Composer)
            again = f"/save 1 {out}"
            await enter(pilot, app, again)
            await eventually(lambda: "exists; give another path" in app.notice_text(), what="no overwrite")
            assert composer.text == again and out.read_bytes() == stored
            await enter(pilot, app, f"/attach {tmp_path / 'missing.png'}")
            await eventually(lambda: "/attach: no file" in app.notice_text(), what="a missing file refused")
            bomb = tmp_path / "bomb.png"
            bomb.write_bytes(bomb_png())
            await enter(pilot, app, f"/attach {bomb}")
            await eventually(
                lambda: "refused by the media service (422)" in app.notice_text(), timeout=60, what="the bomb refused"
            )
            assert composer.text == f"/attach {bomb}"
            assert len(await received()) == 1  # nothing else was sent
            await pilot.press("ctrl+q")
        await close_all(app.client, cb)
