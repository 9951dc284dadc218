"""A newcomer on the web page mentions a Chinese-named friend the way Chinese is typed:
a full-width comma right after the name ("@张三，明天见") or no space at all ("@张三你好").
The friend's SDK is told both as mentions of them (docs/decisions/0120); before, the
page matched only a whole space-delimited word equal to the name, so neither was a
mention. "@allx" stays neither @all nor anyone (a Latin word needs its end)."""

from __future__ import annotations

import functools
import time

from qim._core import ids
from qim.sdk import MessagesAdded
from tests.web import harness
from tests.web.harness import SdkPeer, new_user


def _until(pred, what: str, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, f"{what} not reached within {timeout} s"
        time.sleep(0.05)


def _told(peer: SdkPeer, body: str):
    return next(
        (m for e in list(peer.told) if isinstance(e, MessagesAdded) for m in e.messages if m.body == body.encode()),
        None,
    )


def test_chinese_name_mentions_on_the_page(pages, stack, tmp_path, monkeypatch):
    ada, zhang = new_user(), new_user()
    # the peer's token carries its display name (the harness's peer has none)
    monkeypatch.setattr(harness, "issue_dev_token", functools.partial(harness.issue_dev_token, name="张三"))
    peer = SdkPeer(stack, tmp_path / "zhang", zhang)
    conv = ids.conversation_id_direct(0, ada, zhang)
    try:
        peer.run(peer.client.open_direct(ada))
        peer.run(peer.client.send_text(conv, "在吗？"))
        a = pages(ada, "Ada")
        a.open_chat(zhang)
        a.wait_rows("rows => rows.length === 1")

        # the page learns 张三's name from the message shown (the @ list offers it)
        def offered() -> bool:
            a.page.fill("[data-testid=composer-text]", "@张")  # fill fires `input`
            return a.page.locator("[data-testid=mention-option]", has_text="张三").count() > 0

        _until(offered, "张三 offered after @张")
        for text in ("@张三，明天见", "@张三你好", "@allx 不是所有人"):
            a.send(text)
            _until(lambda text=text: _told(peer, text) is not None, f"{text} reached 张三")
        assert _told(peer, "@张三，明天见").mentions == (zhang,)
        assert _told(peer, "@张三你好").mentions == (zhang,)
        nobody = _told(peer, "@allx 不是所有人")
        assert nobody.mentions == () and not nobody.mention_all
    finally:
        peer.close()
