"""The development engine set's object store (qim/dev/engines_s3.py; issue 40,
docs/decisions/0137, 0139): s3proxy recorded in the engine directory, reused while
healthy, restarted on its port and data, its QIM_S3_* variables in the engine env only
while it runs; and a stack on engines with it runs one MediaService node whose base URL
stack.env gives the SDK (QIM_MEDIA_URL), which sends and downloads a photo through it."""

from __future__ import annotations

import pytest

from qim.dev.engines import EngineSet
from qim.dev.engines_s3 import s3_env, s3_of, s3_up, s3_wanted
from qim.dev.stack import stack_up
from qim.errors import EngineError
from qim.topology import MEDIA
from tests.e2e.sdkclient import client, close_all
from tests.media.helpers import photo_with_gps
from tests.sdk.realstack import eventually, users


def test_s3_wanted_reads_its_variable(monkeypatch) -> None:
    monkeypatch.delenv("QIM_DEV_WITH_S3", raising=False)
    assert s3_wanted(default=True) and not s3_wanted()
    monkeypatch.setenv("QIM_DEV_WITH_S3", "yes")
    with pytest.raises(EngineError, match="QIM_DEV_WITH_S3 must be 0 or 1"):
        s3_wanted()


def test_s3_recorded_reused_restarted_and_in_the_env(tmp_path) -> None:
    first = s3_up(tmp_path, die_with_parent=True)
    try:
        assert s3_env(first)["QIM_S3_ENDPOINT"] == first.endpoint and s3_env(first)["QIM_S3_BUCKET"] == "qim-media"
        again = s3_up(tmp_path, die_with_parent=True)
        assert again.pid == first.pid  # healthy: left alone
        recorded = s3_of(tmp_path)
        assert recorded is not None and recorded.pid == first.pid and recorded.ports == first.ports
        first.stop()
        assert s3_env(s3_of(tmp_path)) == {}  # not running: no variables pointing at a dead port
        back = s3_up(tmp_path, die_with_parent=True)
        assert back.ports == first.ports and back.pid != first.pid and back.healthy()
    finally:
        eng = s3_of(tmp_path)
        if eng is not None:
            eng.stop()


async def test_stack_on_an_object_store_runs_media_for_the_sdk(engines, tmp_path) -> None:
    store = s3_up(tmp_path / "engines", die_with_parent=True)
    st = None
    try:
        st = stack_up(tmp_path / "stack", {**engines.env(), **s3_env(store)}, die_with_parent=True)
        assert MEDIA in st.names
        url = st.client_env()["QIM_MEDIA_URL"]
        assert f"QIM_MEDIA_URL={url}" in (tmp_path / "stack" / "stack.env").read_text()
        a, b = users(2)
        ca, cb = await client(st, tmp_path, a), await client(st, tmp_path, b)
        await ca.connect()
        await cb.connect()
        ca.media_url = cb.media_url = url
        conv = (await ca.open_direct(b)).conversation_id
        await cb.open_direct(a)
        ack = await ca.send_media(conv, photo_with_gps(), name="p.jpg")

        async def got():
            return [m for m in await cb.messages(conv) if m.message_id == ack.message_id]

        await eventually(got, timeout=60, what="b has the photo")
        (msg,) = await got()
        assert (await cb.download(msg))[:3] == b"\xff\xd8\xff"
        await close_all(ca, cb)
    finally:
        if st is not None:
            st.down()
        store.stop()


def test_engine_set_without_s3_has_no_s3_variables(engines) -> None:
    assert engines.s3 is None and not any(k.startswith("QIM_S3_") for k in engines.env())
    loaded = EngineSet.load(engines.dir)
    assert loaded is not None and loaded.s3 is None
