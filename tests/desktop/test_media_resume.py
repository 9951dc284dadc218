"""qim-desktop finishes an attachment a quit cut (issue 40: pending media sends survive an
app restart like pending text; qim/desktop/media.py `resume`): a first run's `/attach`
is under way toward a MediaService that does not answer when the person quits (the send
recorded in the SDK's store, the upload not done); the next start on the same store,
with a MediaService that answers, says it resumes, uploads the photo and sends it once;
the other user gets it byte-exact."""

from __future__ import annotations

import asyncio
import contextlib

from qim.consts import MESSAGE_TYPE_MEDIA
from qim.desktop.app import ChatApp
from qim.wire.media import decode_ref
from tests.e2e.sdkclient import client, close_all
from tests.media.conftest import s3_engine  # noqa: F401  # the module's private s3proxy (a fixture)
from tests.media.helpers import photo_with_gps, running_media
from tests.sdk.realstack import eventually, users


async def _silent_service() -> tuple[asyncio.AbstractServer, str]:
    """A TCP listener that accepts and never answers: an upload toward it hangs."""
    held: list[asyncio.StreamWriter] = []

    async def hold(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        held.append(w)

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


async def test_an_attachment_cut_by_quitting_is_sent_at_the_next_start(stack, s3_engine, tmp_path) -> None:  # noqa: F811
    env = {**stack.env, **s3_engine.env(bucket="t-desktop-resume"), "QIM_MEDIA_METRICS_LISTEN": "127.0.0.1:0"}
    a, b = users(2)
    photo = tmp_path / "harbour.jpg"
    photo.write_bytes(photo_with_gps())
    silent, silent_url = await _silent_service()
    first = await client(stack, tmp_path, a, name="-desktop")
    await first.connect()
    first.media_url = silent_url
    conv = (await first.open_direct(b)).conversation_id
    sending = asyncio.create_task(first.send_media(conv, photo, wait=False))
    await eventually(first.pending_media, timeout=30, what="the send recorded in the store")
    sending.cancel()  # the person quits while the upload hangs
    with contextlib.suppress(asyncio.CancelledError):
        await sending
    await first.close()
    silent.close()

    async with running_media(env) as (node, _, base):
        app = ChatApp(await client(stack, tmp_path, a, name="-desktop", event_queue=True, on_event=None), b)
        cb = await client(stack, tmp_path, b)
        app.client.media_url = cb.media_url = base
        await app.client.connect()
        await cb.connect()
        told: list[str] = []
        tell = app.tell
        app.tell = lambda text, lines=False: (told.append(text), tell(text, lines))[1]
        async with app.run_test(size=(100, 30)) as pilot:
            await eventually(lambda: any(t.startswith("resumed and sent harbour.jpg") for t in told), timeout=90,
                             what="the resumed attachment sent")
            assert "resuming 1 unsent attachment(s)…" in told

            async def received():
                if await cb.conversation(conv) is None:
                    return []
                return [m for m in await cb.messages(conv) if m.message_type == MESSAGE_TYPE_MEDIA]

            await eventually(received, timeout=60, what="the MEDIA message reaches b")
            (got,) = await received()
            ref = decode_ref(got.body)
            assert ref.name == "harbour.jpg" and await cb.download(got) == await node.objects.get("o/" + ref.media_id)
            assert await app.client.pending_media() == []
            await pilot.press("ctrl+q")
        await close_all(app.client, cb)
