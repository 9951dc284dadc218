"""Helpers for tests of qim.sdk.Client against the real stack."""

from __future__ import annotations

from typing import Optional

from qim.proto.v1 import session_pb2
from qim.protocol import Opcode
from qim.sdk import Client
from qim.wire.devtoken import issue_dev_token
from tests.e2e.rawclient import sdk_transport
from tests.sdk.realstack import Told


async def client(stack, tmp_path, user: int, device: int = 1, *, name: str = "", display_name: str = "",
                 endpoint: str = "", **kw) -> Client:
    """A Client of `user` on `device` with a data directory of its own (name tells two
    installs apart; `display_name` is the token's name claim) at `endpoint` (default the
    stack's host:port; a ws:// or wss:// endpoint takes the WebSocket transport);
    `c.told` records every event in order."""
    token = issue_dev_token(stack.token_key, 0, user, device, name=display_name)
    told = Told()
    kw.setdefault("send_timeout", 30)
    kw.setdefault("event_queue", False)
    kw.setdefault("on_event", told)
    endpoint = endpoint or stack.gateway_addr
    transport = {} if endpoint.startswith("ws://") else sdk_transport(stack)  # ws:// is plaintext by its scheme
    for key, value in transport.items():  # TLS with the stack's CA
        kw.setdefault(key, value)
    c = await Client.open(endpoint, token, data_dir=str(tmp_path / f"data-{user}-{device}{name}"), **kw)
    c.told = told
    return c


async def server_list(c: Client) -> dict[bytes, session_pb2.SessionEntry]:
    """The server's session list of the client's user (raw PULL_SESSION_LIST pages)."""
    out, cursor = {}, b""
    while True:
        _, body = await c.runtime.request(Opcode.PULL_SESSION_LIST,
                                          session_pb2.PullSessionList(cursor=cursor, limit=200).SerializeToString())
        batch = session_pb2.SessionListBatch.FromString(body)
        out.update({bytes(s.conversation_id): s for s in batch.sessions})
        if not batch.has_more:
            return out
        cursor = batch.next_cursor


async def unread_pair(c: Client, conv: bytes) -> tuple[Optional[tuple[int, bool]], Optional[tuple[int, bool]]]:
    """((unread, exact) the SDK shows, (unread, exact) the server lists) for `conv`."""
    mine = await c.conversation(conv)
    theirs = (await server_list(c)).get(conv)
    return ((mine.unread, mine.unread_exact) if mine else None,
            (theirs.unread, theirs.unread_exact) if theirs else None)


async def close_all(*clients: Client) -> None:
    for c in clients:
        await c.close()
