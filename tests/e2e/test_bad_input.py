"""Bad input at the gateway (issue 2 §7, docs/design.md §4).

Frame-level faults close that connection; request-level faults get an ERROR frame with
the request's id; another client is served normally afterwards; and the writer's
request counter shows that none of the bad requests reached the writer.
"""

from __future__ import annotations

import asyncio
import os
import re
import struct
import urllib.request
import zlib

import pytest

from qim._core import ids
from qim.errors import ErrorCode
from qim.proto.v1 import group_pb2, history_pb2, message_pb2
from qim.protocol import Opcode
from tests.e2e.rawclient import RawClient, end_input, open_raw

USER_A, USER_B = 9_100_001, 9_100_002


def header(flags=0, opcode=Opcode.PING, chunk=0, rid=1, body_len=0, magic=0x5149, version=1, crc=None) -> bytes:
    head = struct.pack(">HBBHHII", magic, version, flags, opcode, chunk, rid, body_len)
    return head + struct.pack(">I", zlib.crc32(head) if crc is None else crc)


def writer_requests(stack) -> float:
    text = urllib.request.urlopen(f"http://{stack.metrics['writer']}/metrics", timeout=2).read().decode()
    return sum(float(v) for v in re.findall(r"^qim_writer_requests_total\{[^}]*\} (\S+)$", text, re.M))


async def closed_after(stack, raw: bytes, authenticate: bool = True) -> bool:
    """Send raw bytes on a (logged-in) connection; True when the server closes it
    without answering anything."""
    if authenticate:
        client = await RawClient.login(stack, USER_A, device=2)
        client.stream._writer.write(raw)
        item = await client.next_frame(5)  # a wake-up PUSH_EVENTS of this login is no answer
        return item is None
    reader, writer = await open_raw(stack)
    started = asyncio.get_running_loop().time()
    writer.write(raw)
    end_input(writer)
    data = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    # closed by the fault itself, not by the unauthenticated-connection timeout (2 s here)
    return data == b"" and asyncio.get_running_loop().time() - started < 1.5


FRAME_FAULTS = {
    "bad magic": header(magic=0x1234),
    "bad crc": header(crc=0xDEADBEEF),
    "bad version": header(version=2),
    "unknown flag": header(flags=0x80),
    "need_ack reserved": header(flags=0x04),
    "oversized chunk": header(opcode=Opcode.SEND_MESSAGE, body_len=65537),
    "truncated body": header(opcode=Opcode.SEND_MESSAGE, body_len=100) + b"x" * 10,
    "truncated header": header()[:11],
    "chunk gap": header(flags=0x02, opcode=Opcode.SEND_MESSAGE, chunk=1, body_len=1) + b"x",
    "zstd garbage": header(flags=0x01, opcode=Opcode.SEND_MESSAGE, body_len=4) + b"abcd",
}


@pytest.mark.parametrize("name", sorted(FRAME_FAULTS))
async def test_frame_faults_close_the_connection(stack, name):
    before = writer_requests(stack)
    raw = FRAME_FAULTS[name]
    if name.startswith("truncated"):
        assert await closed_after(stack, raw, authenticate=False)
    else:
        assert await closed_after(stack, raw)
    assert writer_requests(stack) == before


def send(cmid=None, conv=None, peer=USER_B, **kw) -> bytes:
    kw.setdefault("body", b"x")  # each fault alone: an empty TEXT is a fault of its own
    return message_pb2.SendMessage(
        client_message_id=os.urandom(16) if cmid is None else cmid,
        conversation_id=ids.conversation_id_direct(0, USER_A, USER_B) if conv is None else conv,
        recipient_user_id=peer, message_type=1, **kw).SerializeToString()


REQUEST_FAULTS = {
    "garbage protobuf": (Opcode.SEND_MESSAGE, b"\xff\xff\xff\xff\x0f", ErrorCode.INVALID_ARGUMENT),
    "zero cmid": (Opcode.SEND_MESSAGE, send(cmid=bytes(16)), ErrorCode.INVALID_ARGUMENT),
    "short cmid": (Opcode.SEND_MESSAGE, send(cmid=b"\x01" * 15), ErrorCode.INVALID_ARGUMENT),
    "zero conversation": (Opcode.SEND_MESSAGE, send(conv=bytes(16)), ErrorCode.INVALID_ARGUMENT),
    "oversized custom_type": (Opcode.SEND_MESSAGE, send(custom_type=b"c" * 65), ErrorCode.PAYLOAD_TOO_LARGE),
    "oversized body": (Opcode.SEND_MESSAGE, send(body=b"b" * (1024 * 1024 + 1)), ErrorCode.PAYLOAD_TOO_LARGE),
    "missing recipient": (Opcode.SEND_MESSAGE, send(peer=0), ErrorCode.INVALID_ARGUMENT),
    "empty text": (Opcode.SEND_MESSAGE, send(body=b""), ErrorCode.INVALID_ARGUMENT),
    "white-space text": (Opcode.SEND_MESSAGE, send(body=" \u3000\n\t".encode()), ErrorCode.INVALID_ARGUMENT),
    "foreign conversation": (Opcode.SEND_MESSAGE, send(peer=USER_B + 1), ErrorCode.FORBIDDEN),
    "garbage pull": (Opcode.PULL_MAILBOX, b"\x0a\xff", ErrorCode.INVALID_ARGUMENT),
    "internal opcode": (Opcode.WRITER_SEND, b"", ErrorCode.FORBIDDEN),
    "unknown opcode": (0x0999, b"", ErrorCode.INVALID_ARGUMENT),
    "second auth, refused token": (Opcode.AUTH, b"", ErrorCode.UNAUTHENTICATED),  # a refused refresh (docs/protocol.md)
    "room conversation send": (Opcode.SEND_MESSAGE, send(conv=ids.conversation_id_room(0, 5)), ErrorCode.INVALID_ARGUMENT),
    "garbage create group": (Opcode.CREATE_GROUP, b"\x08", ErrorCode.INVALID_ARGUMENT),
    "group id zero": (Opcode.CREATE_GROUP, group_pb2.CreateGroup(group_id=0, client_message_id=b"\x01" * 16)
                      .SerializeToString(), ErrorCode.INVALID_ARGUMENT),
    "group too large": (Opcode.CREATE_GROUP, group_pb2.CreateGroup(
        group_id=7, members=range(1, 1001), client_message_id=b"\x01" * 16).SerializeToString(),
        ErrorCode.PAYLOAD_TOO_LARGE),
    "leave without cmid": (Opcode.LEAVE_GROUP, group_pb2.LeaveGroup(group_id=7).SerializeToString(),
                           ErrorCode.INVALID_ARGUMENT),
    "history of a zero conversation": (Opcode.PULL_HISTORY, history_pb2.PullHistory(
        conversation_id=bytes(16)).SerializeToString(), ErrorCode.INVALID_ARGUMENT),
    "recall with zero ids": (Opcode.RECALL_MESSAGE, message_pb2.RecallMessage(
        conversation_id=ids.conversation_id_direct(0, USER_A, USER_B), message_id=bytes(16),
        client_message_id=bytes(16)).SerializeToString(), ErrorCode.INVALID_ARGUMENT),
    "garbage mark read": (Opcode.MARK_READ, b"\x0a\x05", ErrorCode.INVALID_ARGUMENT),
    "server opcode upstream": (Opcode.SEND_ACK, b"", ErrorCode.INVALID_ARGUMENT),
}


async def test_request_faults_get_error_with_request_id_and_never_reach_writer(stack):
    before = writer_requests(stack)
    client = await RawClient.login(stack, USER_A, device=3)
    for name, (opcode, body, code) in REQUEST_FAULTS.items():
        op, err = await client.request(opcode, body)  # request() checks the reply's request_id
        assert op == Opcode.ERROR, name
        assert err.code == code, (name, err)
    # the connection survived every request-level fault
    op, ack = await client.send_text(USER_B, b"still served")
    assert op == Opcode.SEND_ACK
    assert writer_requests(stack) == before + 1  # only the good send reached the writer
    await client.close()


async def test_requests_before_auth_are_unauthenticated(stack):
    reader, writer = await open_raw(stack)
    from qim.net.framed import FramedStream

    stream = FramedStream(reader, writer)
    stream.send(Opcode.SEND_MESSAGE, 42, send())
    op, rid, body = await asyncio.wait_for(stream.read_frame(), 5)
    assert (op, rid) == (Opcode.ERROR, 42)
    stream.send(Opcode.AUTH, 43, b"\x0a\x05dev1.")  # a token that does not verify
    op, rid, _ = await asyncio.wait_for(stream.read_frame(), 5)
    assert (op, rid) == (Opcode.ERROR, 43)
    stream.abort()


async def test_other_clients_are_served_after_faults(stack):
    for raw in FRAME_FAULTS.values():
        try:
            await closed_after(stack, raw, authenticate=False)
        except (ConnectionError, asyncio.TimeoutError):
            pass
    a = await RawClient.login(stack, USER_A + 10)
    op, _ = await a.send_text(USER_B + 10, b"after the storm")
    assert op == Opcode.SEND_ACK
    await a.close()


async def test_request_id_zero_is_refused_and_cursors_ahead_of_the_mailbox_too(stack):
    client = await RawClient.login(stack, USER_A, device=4)
    client.stream.send(Opcode.PING, 0, b"")  # 0 marks server frames
    op, rid, body = await client.next_frame(5)  # a wake-up PUSH_EVENTS (rid 0 too) is no reply
    assert (op, rid) == (Opcode.ERROR, 0)
    from qim._core import mailbox_seq
    from qim.proto.v1 import mailbox_pb2

    op, err = await client.request(Opcode.PULL_MAILBOX, mailbox_pb2.PullMailbox(
        cursor=mailbox_seq.compose(1, (1 << 48) - 1)).SerializeToString())
    # a cursor ahead of the mailbox: the device holds what the mailbox does not, REBUILD
    # (docs/decisions/0076), never an error it would retry for ever
    assert op == Opcode.ERROR and err.code == ErrorCode.CURSOR_EXPIRED
    op, err = await client.request(Opcode.PULL_MAILBOX, mailbox_pb2.PullMailbox(cursor=5).SerializeToString())
    assert op == Opcode.ERROR and err.code == ErrorCode.INVALID_ARGUMENT  # shard_epoch 0: not a mailbox_seq
    await client.close()


async def test_a_connection_that_never_authenticates_is_closed(stack):
    from tests.fixtures import AUTH_TIMEOUT_MS

    reader, writer = await open_raw(stack)
    started = asyncio.get_running_loop().time()
    data = await asyncio.wait_for(reader.read(), AUTH_TIMEOUT_MS / 1000 + 5)
    assert data == b"" and asyncio.get_running_loop().time() - started >= AUTH_TIMEOUT_MS / 1000 * 0.9
    writer.close()


async def test_an_anonymous_peer_cannot_park_megabytes_of_partial_frames(stack):
    from qim._core import frame as frame_codec

    reader, writer = await open_raw(stack)
    started = asyncio.get_running_loop().time()
    chunks = frame_codec.encode_frame(Opcode.SEND_MESSAGE, 5, b"x" * (1024 * 1024))
    for chunk in chunks[:8]:  # 512 KiB of an unfinished frame, no AUTH
        writer.write(chunk)
    try:
        data = await asyncio.wait_for(reader.read(), 5)
    except (ConnectionResetError, BrokenPipeError):  # the gateway aborted the socket while we still wrote:
        data = b""  # an RST or EPIPE is a close too
    assert data == b"" and asyncio.get_running_loop().time() - started < 1.5  # closed at once
    writer.close()
    client = await RawClient.login(stack, USER_A, device=6)  # after AUTH, big frames are fine
    op, err = await client.send_text(USER_B, b"y" * (2 * 1024 * 1024))
    assert op == Opcode.ERROR and err.code == ErrorCode.PAYLOAD_TOO_LARGE
    await client.close()
