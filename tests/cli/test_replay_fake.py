"""The replay's client-view checks against the in-process fake gateway (tests/sdk/
fakegateway.py: no session list, no groups, no recall): a clean backend passes, and a backend
that loses, duplicates, corrupts or reorders what an app is told is caught."""

from __future__ import annotations

import argparse

import pytest

from qim.cli import replay
from qim.wire.tokens import SigningKey
from tests.sdk.fakegateway import FakeGateway

KEY = SigningKey.generate()  # the fake gateway trusts it; the replay signs with its file


def cfg(gw, limit: int, *extra: str) -> argparse.Namespace:
    return replay.parser().parse_args(["--gateway", gw.addr, "--token-key", gw.key_file, "--limit", str(limit),
                                       "--sync-timeout", "1.5", "--concurrency", "4", "--group-every", "0",
                                       "--no-unread", "--no-recall", "--no-thresholds", "--plaintext", *extra])


@pytest.fixture
async def gw(tmp_path):
    g = FakeGateway(KEY)
    g.key_file = str(tmp_path / "dev_token_key.pem")
    (tmp_path / "dev_token_key.pem").write_bytes(KEY.private_pem())
    g.addr = await g.start()
    yield g
    await g.stop()


async def test_replay_all_modes_clean_with_binary_bodies(gw):
    total = await replay.replay(cfg(gw, 9, "--blob-rate", "0.5"))
    assert total.conversations == 9 and total.by_mode == {"online": 3, "offline": 3, "cut": 3}
    assert total.messages > 18 and total.ok, total.line()  # 18 text turns and some binary ones
    assert total.delivered == total.messages and not total.not_sent


async def test_replay_all_modes_clean_with_the_default_body_mix(gw):
    """What `make demo` runs: the default blob rate and the binary turns at the threshold sizes."""
    c = cfg(gw, 9)
    c.thresholds, c.blob_rate = True, replay.parser().get_default("blob_rate")
    total = await replay.replay(c)
    assert total.conversations == 9 and total.by_mode == {"online": 3, "offline": 3, "cut": 3}
    assert total.messages > 9 and total.ok, total.line()
    assert total.delivered == total.messages


def wrap_pull(gw, before):
    original = gw._pull

    def pull(stream, rid, user, req):
        before(user, gw.mailboxes.get(user, []), req.cursor)
        original(stream, rid, user, req)

    gw._pull, gw.push = pull, False  # what a push tells would hide what the pull does


async def test_replay_detects_loss(gw):
    wrap_pull(gw, lambda user, box, cursor: box.clear() if user % 7 == 3 else None)
    total = await replay.replay(cfg(gw, 12, "--blob-rate", "0"))
    assert total.lost > 0 and total.delivered < total.messages and not total.ok


async def test_replay_detects_truncated_bodies(gw):
    def truncate(user, box, cursor):
        for e in box:
            if e.sender_id != user and e.mailbox_seq > cursor and len(e.body) > 1 and user % 3 == 1:
                e.body = e.body[:-1]

    wrap_pull(gw, truncate)
    total = await replay.replay(cfg(gw, 12, "--blob-rate", "0"))
    assert total.corrupt > 0 and total.lost == 0 and not total.ok, total.line()


async def test_replay_detects_order_told_against_conversation_seq(gw):
    def swap(user, box, cursor):  # two entries of one conversation, on two pages, change places
        fresh = [i for i, e in enumerate(box) if e.mailbox_seq > cursor]
        if getattr(gw, "swapped", False) or len(fresh) < 4:
            return
        i = fresh[2]  # last of the fake's 3-entry page, then the first of the next page with its conversation
        j = next((k for k in fresh[3:] if box[k].conversation_id == box[i].conversation_id), None)
        if j is not None:
            box[i].mailbox_seq, box[j].mailbox_seq = box[j].mailbox_seq, box[i].mailbox_seq
            box[i], box[j] = box[j], box[i]
            gw.swapped = True

    wrap_pull(gw, swap)
    total = await replay.replay(cfg(gw, 6, "--blob-rate", "1"))  # binary turns: longer dialogues
    assert gw.swapped and total.out_of_order > 0 and not total.ok, total.line()


async def test_replay_detects_duplicate(gw):
    def duplicate(user, box, cursor):  # a second copy of a message under a new message_id
        if len(box) == 1 and box[0].sender_id != user:
            e = type(box[0])()
            e.CopyFrom(box[0])
            e.message_id = bytes(15) + b"\x09"
            e.mailbox_seq += 1000
            box.append(e)

    wrap_pull(gw, duplicate)
    total = await replay.replay(cfg(gw, 6, "--blob-rate", "0"))
    assert total.duplicated > 0 and not total.ok, total.line()
