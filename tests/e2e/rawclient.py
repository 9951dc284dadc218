"""A minimal frame-level client for end-to-end tests (no SDK logic, no retries), over
TLS 1.3 with the stack's CA like every client (plaintext only toward a plaintext stack).

`client_tls(stack)` is the context, `open_raw(stack)` a TLS connection to the client
port before AUTH, `end_input(writer)` the end of what a raw test sends (TLS has no
half-close in asyncio: close_notify plays the FIN's part)."""

from __future__ import annotations

import asyncio
import os
import random
import ssl
import time
from typing import Optional

from qim._core import ids
from qim.errors import ErrorCode
from qim.net.framed import FramedStream, open_framed, parse_addr
from qim.net.tls import client_port_context
from qim.net.tls import connect as tls_connect
from qim.proto.v1 import common_pb2, connection_pb2, mailbox_pb2, message_pb2
from qim.protocol import Opcode
from qim.wire.devtoken import issue_dev_token


def client_tls(stack) -> Optional[ssl.SSLContext]:
    """What a client of `stack` verifies the gateway with (None: a plaintext stack)."""
    ca_file = getattr(stack, "ca_file", None)
    return client_port_context(ca_file) if ca_file else None


async def open_raw(stack, addr: Optional[str] = None) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to the client port (or `addr`, a proxy in front of it), TLS done, no AUTH."""
    host, port = parse_addr(addr or stack.gateway_addr)
    tls = client_tls(stack)
    if tls is None:
        return await asyncio.open_connection(host, port)
    return await tls_connect(host, port, tls, server_hostname=host, chunk_bytes=64 * 1024, timeout=10)


def sdk_transport(stack) -> dict:
    """Client.open / ClientRuntime keywords that reach `stack`'s gateway: its CA, or
    plaintext toward a plaintext stack."""
    ca_file = getattr(stack, "ca_file", None)
    return {"ca_file": ca_file} if ca_file else {"plaintext": True}


def end_input(writer: asyncio.StreamWriter) -> None:
    """No more bytes from this side: FIN on plaintext, close_notify over TLS (the reader
    still sees what the server sends until it closes)."""
    if writer.can_write_eof():
        writer.write_eof()
    else:
        writer.close()


class LoginRefused(AssertionError):
    """AUTH answered with something other than AUTH_OK: `code` is the ERROR's ErrorCode
    (None for another frame), `reply` the parsed frame. An AssertionError, as before, for
    the tests that expect a refusal; a caller that treats UNAVAILABLE (an engine
    restarting) as transient checks `code`, not the message text."""

    def __init__(self, op: int, reply) -> None:
        super().__init__(f"AUTH refused: opcode {op:#06x}: {reply}")
        self.op, self.reply = op, reply
        self.code = ErrorCode(reply.code) if op == Opcode.ERROR else None


class RawClient:
    """One authenticated connection; `request()` returns (opcode, parsed reply)."""

    def __init__(self, stream: FramedStream, user: int, device: int) -> None:
        self.stream = stream
        self.user = user
        self.device = device
        self._rid = 100
        self.pushes: list = []

    @classmethod
    async def login(cls, stack, user: int, device: int = 1, addr: str | None = None) -> "RawClient":
        """AUTH as (user, device) on the stack's first gateway, or on `addr`. LoginRefused
        when the gateway answers anything but AUTH_OK; OSError / TimeoutError on the way."""
        host, port = parse_addr(addr or stack.gateway_addr)
        stream = await open_framed(host, port, tls=client_tls(stack), server_hostname=host)
        client = cls(stream, user, device)
        token = issue_dev_token(stack.token_key, 0, user, device)
        try:
            op, reply = await client.request(Opcode.AUTH, connection_pb2.Auth(token=token).SerializeToString())
            if op != Opcode.AUTH_OK:
                raise LoginRefused(op, reply)
        except BaseException:
            stream.abort()  # a login that failed or timed out keeps no connection (16 lock a user out)
            raise
        return client

    async def request(self, opcode: int, body: bytes, timeout: float = 10.0):
        self._rid += 1
        rid = self._rid
        self.stream.send(opcode, rid, body)
        while True:
            item = await asyncio.wait_for(self.stream.read_frame(), timeout)
            assert item is not None, "connection closed"
            op, got_rid, reply = item
            if got_rid == 0:
                self.pushes.append((op, reply))
                continue
            assert got_rid == rid, (got_rid, rid)
            return op, parse_reply(op, reply)

    async def next_frame(self, timeout: float = 10.0):
        """The next frame that is not a PUSH_EVENTS (those are kept in `pushes`: a device
        may be woken at any time, its own login included, since pushes follow the
        PresenceDirectory); None when the connection closed."""
        while True:
            item = await asyncio.wait_for(self.stream.read_frame(), timeout)
            if item is None or item[0] != Opcode.PUSH_EVENTS:
                return item
            self.pushes.append((item[0], item[2]))

    async def send_text(self, peer: int, body: bytes, cmid: bytes | None = None, **kw):
        msg = message_pb2.SendMessage(client_message_id=cmid or os.urandom(16),
                                      conversation_id=ids.conversation_id_direct(0, self.user, peer),
                                      recipient_user_id=peer, message_type=kw.pop("message_type", 1), body=body, **kw)
        return await self.request(Opcode.SEND_MESSAGE, msg.SerializeToString())

    async def pull_all(self, cursor: int = 0, timeout: float = 10.0) -> tuple[list, int]:
        """Pull until has_more is false; returns (entries, cursor). UNAVAILABLE (a mailbox
        shard between owners, e.g. after a node's restart) is pulled again for up to
        `timeout` s, as every client does; any other answer fails."""
        entries = []
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            op, batch = await self.request(Opcode.PULL_MAILBOX, mailbox_pb2.PullMailbox(cursor=cursor).SerializeToString())
            if (op == Opcode.ERROR and batch.code == ErrorCode.UNAVAILABLE
                    and asyncio.get_running_loop().time() < deadline):
                await asyncio.sleep(0.1)
                continue
            assert op == Opcode.MAILBOX_BATCH, batch
            entries.extend(batch.entries)
            cursor = batch.next_cursor
            if not batch.has_more:
                return entries, cursor

    async def close(self) -> None:
        self.stream.abort()


def parse_reply(op: int, body: bytes):
    table = {Opcode.AUTH_OK: connection_pb2.AuthOk, Opcode.ERROR: common_pb2.Error, Opcode.SEND_ACK: message_pb2.SendAck,
             Opcode.MAILBOX_BATCH: mailbox_pb2.MailboxBatch, Opcode.PONG: connection_pb2.Pong,
             Opcode.PUSH_EVENTS: mailbox_pb2.PushEvents, Opcode.KICKED: connection_pb2.Kicked}
    cls = table.get(op)
    return cls.FromString(body) if cls else parse_more(op, body)


async def wait_for_entries(client: RawClient, count: int, timeout: float = 15.0) -> list:
    """Pull from 0 until at least `count` entries are visible (materialization is async)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        entries, _ = await client.pull_all()
        if len(entries) >= count or asyncio.get_running_loop().time() > deadline:
            return entries
        await asyncio.sleep(0.1)


async def call(client: RawClient, opcode: int, message) -> tuple[int, object]:
    """Send a protobuf request and return (reply opcode, parsed reply)."""
    return await client.request(opcode, message.SerializeToString())


def parse_more(op: int, body: bytes):
    from qim.proto.v1 import group_pb2, history_pb2
    from qim.proto.v1 import message_pb2 as m

    table = {Opcode.GROUP_OK: group_pb2.GroupOk, Opcode.MEMBERS_BATCH: group_pb2.MembersBatch,
             Opcode.HISTORY_BATCH: history_pb2.HistoryBatch, Opcode.RECALL_OK: m.RecallOk}
    return table[op].FromString(body) if op in table else body


async def first_pull_after(stack, user: int, since: float, addr: Optional[str] = None,
                           timeout: float = 60.0) -> float:
    """Seconds from `since` (time.monotonic) until a pull of `user`'s mailbox is served
    through `addr` (default: the stack's first gateway): a dead owner's shard answers
    UNAVAILABLE until a survivor took it over. Fails after `timeout` s."""
    client = await RawClient.login(stack, user, device=random.getrandbits(31) + 1, addr=addr)
    try:
        while True:
            op, reply = await client.request(Opcode.PULL_MAILBOX, mailbox_pb2.PullMailbox().SerializeToString())
            if op == Opcode.MAILBOX_BATCH:
                return time.monotonic() - since
            assert time.monotonic() - since < timeout, reply
            await asyncio.sleep(0.05)
    finally:
        await client.close()
