"""The replay demo against the in-process fake gateway: all modes pass, and a lossy or
duplicating backend is caught (the checks of qim/cli/replay.py can fail)."""

from __future__ import annotations

import argparse

import pytest

from qim.cli import replay
from qim.wire.tokens import SigningKey
from tests.sdk.fakegateway import FakeGateway

KEY = SigningKey.generate()  # the fake gateway trusts it; the replay signs with its file


def cfg(gw, limit: int) -> argparse.Namespace:
    return replay.parser().parse_args(["--gateway", gw.addr, "--token-key", gw.key_file, "--limit", str(limit),
                                       "--sync-timeout", "1.5", "--concurrency", "4",
                                       "--group-every", "0",  # the fake gateway has no groups
                                       "--no-unread", "--no-recall",  # nor a session list, nor recall
                                       "--plaintext"])  # nor TLS


@pytest.fixture
async def gw(tmp_path):
    g = FakeGateway(KEY)
    g.key_file = str(tmp_path / "dev_token_key.pem")
    (tmp_path / "dev_token_key.pem").write_bytes(KEY.private_pem())
    g.addr = await g.start()
    yield g
    await g.stop()


async def test_replay_all_modes_clean(gw):
    total = await replay.replay(cfg(gw, 9))
    assert total.conversations == 9 and total.by_mode == {"online": 3, "offline": 3, "cut": 3}
    assert total.messages > 9 and total.ok, total.line()
    assert total.delivered == total.messages


async def test_replay_detects_loss(gw):
    original = gw._pull

    def lossy(stream, rid, user, req):  # drop every entry of one unlucky recipient
        if user % 7 == 3:
            gw.mailboxes[user] = []
        original(stream, rid, user, req)

    gw._pull, gw.push = lossy, False
    total = await replay.replay(cfg(gw, 12))
    assert total.lost > 0 and total.delivered < total.messages and not total.ok


async def test_replay_detects_duplicate(gw):
    original = gw._pull

    def duplicating(stream, rid, user, req):  # a second copy under a new message_id
        box = gw.mailboxes.get(user, [])
        if box and not getattr(box[-1], "_dup", False) and len(box) == 1 and box[0].sender_id != user:
            e = type(box[0])()
            e.CopyFrom(box[0])
            e.message_id = bytes(15) + b"\x09"
            e.mailbox_seq += 1000
            box.append(e)
        original(stream, rid, user, req)

    gw._pull = duplicating
    total = await replay.replay(cfg(gw, 6))
    assert total.duplicated > 0 and not total.ok
