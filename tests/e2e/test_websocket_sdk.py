"""A real conversation between an SDK on WebSocket and an SDK on TCP, through the real
stack (docs/protocol.md "WebSocket"; qim/sdk/transports.py): the gateway serves both with
one connection handler, so what each app is told (bodies, order, unread, read state) is
the same whatever its transport. Once over wss:// on the client port (ALPN http/1.1) and
once over the development ws:// listener (QIM_GATEWAY_WS_ADDR of stack.env)."""

from __future__ import annotations

import os

import pytest

from qim.consts import WS_PATH
from tests.e2e.sdkclient import client, close_all
from tests.sdk.realstack import eventually, users


def endpoints(stack) -> dict[str, str]:
    env = stack.client_env()
    assert env["QIM_GATEWAY_WSS_ADDR"] == f"wss://{stack.gateway_addr}{WS_PATH}"
    return {"wss": env["QIM_GATEWAY_WSS_ADDR"], "ws": env["QIM_GATEWAY_WS_ADDR"]}


@pytest.mark.parametrize("scheme", ["wss", "ws"])
async def test_a_websocket_client_and_a_tcp_client_chat(stack, tmp_path, scheme):
    w, t = users(2)
    web = await client(stack, tmp_path, w, endpoint=endpoints(stack)[scheme])
    tcp = await client(stack, tmp_path, t)
    await web.connect(), await tcp.connect()
    conv = (await web.open_direct(t)).conversation_id
    await tcp.open_direct(w)
    # text in several scripts, a body that crosses several 16 KiB chunks (one WebSocket
    # message per chunk toward the browser side), and replies interleaved
    from_web = ["你好 👋", "second", os.urandom(200_000).hex()[:150_000], "fourth"]
    from_tcp = ["héllo back", "🙂🙃", "third reply"]
    for i in range(max(len(from_web), len(from_tcp))):
        if i < len(from_web):
            await web.send_text(conv, from_web[i])
        if i < len(from_tcp):
            await tcp.send_text(conv, from_tcp[i])
    expected = sorted([(w, x) for x in from_web] + [(t, x) for x in from_tcp], key=lambda m: m[1])
    for c in (web, tcp):
        await eventually(lambda c=c: len(c.told.messages(conv)) >= len(expected), timeout=30,
                         what=f"every message told to {c.user_id}")
    seen = {}
    for c in (web, tcp):
        stored = await c.messages(conv, limit=50)
        seqs = [m.conversation_seq for m in stored]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(expected)
        seen[c.user_id] = [(m.sender_id, m.body.decode()) for m in stored]
        told = [m.conversation_seq for m in c.told.messages(conv)]
        assert told == sorted(told), "told in conversation_seq order"
    assert seen[w] == seen[t], "both apps hold the same conversation in the same order"
    assert sorted(seen[w], key=lambda m: m[1]) == expected
    # each side's own sends keep their order
    assert [b for s, b in seen[w] if s == w] == from_web and [b for s, b in seen[t] if s == t] == from_tcp
    # unread by the one definition: the peer's messages after the read position, which a
    # send of one's own moves to that send
    await eventually(lambda: _unread(web, conv, _after_own(seen[w], w)), what="web unread")
    await eventually(lambda: _unread(tcp, conv, _after_own(seen[t], t)), what="tcp unread")
    assert _after_own(seen[t], t) == 1  # "fourth" came after the TCP side's last reply
    await tcp.mark_read(conv)
    await web.mark_read(conv)
    await eventually(lambda: _unread(web, conv, 0), what="web unread after read")
    await eventually(lambda: _unread(tcp, conv, 0), what="tcp unread after read")
    await close_all(web, tcp)


async def _unread(c, conv: bytes, n: int) -> bool:
    entry = await c.conversation(conv)
    return entry is not None and entry.unread == n


def _after_own(conversation: list[tuple[int, str]], me: int) -> int:
    last_own = max(i for i, (sender, _) in enumerate(conversation) if sender == me)
    return sum(1 for sender, _ in conversation[last_own + 1:] if sender != me)
