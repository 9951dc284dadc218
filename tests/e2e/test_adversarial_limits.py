"""Regression tests for adversarial findings through the public protocol (each one failed
before its fix; the numbered list says what was found).

Every test states what docs/design.md / docs/protocol.md expect and what the stack did when
it was found. They use only the public client protocol (RawClient / raw frames).

1. MAILBOX_BATCH over 4 MiB: the mailbox page byte budget counts the stored mailbox
   member, not the referenced body filled in afterwards, so five 1 MiB messages make the
   reply 5 MiB; the mailbox node's reply raises FrameTooLarge, nothing is sent and the
   client gets UNAVAILABLE after 10 s on every retry (the victim's mailbox is stuck).
2. SESSION_LIST_BATCH over 4 MiB: every SessionEntry carries the head's full body; five
   conversations with a 1 MiB head fail the same way.
3. More than 16 open multi-chunk frames on an internal link: FramedStream interleaves
   every queued frame round-robin, but every receiver refuses more than 16 open frames
   (ChunkOrder) and drops the whole gateway<->writer connection, failing every request in
   flight on it (other users' too) with UNAVAILABLE.
4. A client that pipelines requests and never reads: replies are queued without bound
   (the in-flight permit is released before the reply is written).
5. A client may send message_type CONTROL (4); the stored message can then be neither
   recalled by its sender nor deleted by an operator (moderation treats every CONTROL
   record as a system notice: NOT_FOUND).
6. LEAVE_GROUP retried with the same client_message_id replays a GROUP_OK whose
   membership_version differs from the original reply.
7. A user_id with bit 63 set (accepted by AUTH) wedges the mailbox shards of its
   messages: the event codec refuses sender > 2^63-1, the shard worker task dies
   silently (no dirty flag, /healthz 200) and, after a restart, never catches up.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import time
import urllib.request

import jwt

from qim._core import frame as frame_codec
from qim._core import ids
from qim.errors import ErrorCode
from qim.net.framed import open_framed, parse_addr
from qim.proto.v1 import common_pb2, connection_pb2, group_pb2, history_pb2, mailbox_pb2, message_pb2, session_pb2
from qim.protocol import Opcode
from qim.wire.devtoken import issue_dev_token, load_dev_key
from tests.e2e.rawclient import RawClient, call, client_tls
from tests.net.tlspeer import tls_socket

MIB = 1024 * 1024
MAX_FRAME = 4 * MIB


def users(n: int) -> list[int]:
    base = random.getrandbits(40) + 1
    return [base + i for i in range(n)]


def describe(op: int, reply) -> str:
    if op == Opcode.ERROR:
        return f"ERROR({ErrorCode(reply.code).name}: {reply.message})"
    return Opcode(op).name


def counter(stack, service: str, name: str, label: str = "") -> float:
    text = urllib.request.urlopen(f"http://{stack.metrics[service]}/metrics", timeout=3).read().decode()
    return sum(float(v) for v in re.findall(rf"^{name}(?:\{{[^}}]*{label}[^}}]*\}})? (\S+)$", text, re.M))


async def test_mailbox_pull_pages_large_referenced_bodies_within_the_frame_limit(stack):
    """Expected (docs/design.md §4, §5.5; protocol.md PULL_MAILBOX): MAILBOX_BATCH is paged by
    bytes so a frame stays within 4 MiB; a default pull (and the SDK's
    max_entries=256/max_bytes=512 KiB pull) returns MAILBOX_BATCH with has_more.
    Observed: the 5 MiB reply raises FrameTooLarge in the mailbox node, no reply is
    sent, and the client gets ERROR(UNAVAILABLE) after 10 s, forever."""
    sender, victim = users(2)
    a = await RawClient.login(stack, sender)
    for _ in range(5):
        op, ack = await a.send_text(victim, os.urandom(MIB))
        assert op == Opcode.SEND_ACK, ack
    v = await RawClient.login(stack, victim)
    for _ in range(100):  # wait for materialization, one entry per page
        cursor, n = 0, 0
        while True:
            op, b = await call(v, Opcode.PULL_MAILBOX, mailbox_pb2.PullMailbox(cursor=cursor, max_entries=1))
            assert op == Opcode.MAILBOX_BATCH, b
            n, cursor = n + len(b.entries), b.next_cursor
            if not b.has_more:
                break
        if n >= 5:
            break
        await asyncio.sleep(0.2)
    assert n == 5
    for req in (mailbox_pb2.PullMailbox(cursor=0),
                mailbox_pb2.PullMailbox(cursor=0, max_entries=256, max_bytes=512 * 1024)):
        op, batch = await v.request(Opcode.PULL_MAILBOX, req.SerializeToString(), timeout=20)
        assert op == Opcode.MAILBOX_BATCH, f"{req}: {describe(op, batch)}"
        assert len(batch.SerializeToString()) <= MAX_FRAME
        assert batch.entries
    await a.close()
    await v.close()


async def test_session_list_with_large_heads_stays_within_the_frame_limit(stack):
    """Expected (docs/design.md §4 max frame 4 MiB, §6; protocol.md PULL_SESSION_LIST): the
    first page of the list (default limit 50) is a SESSION_LIST_BATCH within 4 MiB;
    following next_cursor lists every conversation.
    Observed: each SessionEntry.last_message carries the full 1 MiB body, the 5 MiB reply
    raises FrameTooLarge in the session node and the client gets ERROR(UNAVAILABLE)
    after 10 s, forever (any user can do this to any other by adding them to groups)."""
    attacker, victim = users(2)
    a = await RawClient.login(stack, attacker)
    gids = users(5)
    for gid in gids:
        op, ok = await call(a, Opcode.CREATE_GROUP, group_pb2.CreateGroup(
            group_id=gid, members=[victim], client_message_id=os.urandom(16)))
        assert op == Opcode.GROUP_OK, ok
        op, ack = await call(a, Opcode.SEND_MESSAGE, message_pb2.SendMessage(
            client_message_id=os.urandom(16), conversation_id=ids.conversation_id_group(0, gid), message_type=1,
            body=os.urandom(MIB)))
        assert op == Opcode.SEND_ACK, ack
    v = await RawClient.login(stack, victim)
    wanted = {ids.conversation_id_group(0, g) for g in gids}
    for _ in range(50):  # wait for the projection, 2 entries per page
        seen, cursor = set(), b""
        while True:
            op, raw = await v.request(Opcode.PULL_SESSION_LIST,
                                      session_pb2.PullSessionList(limit=2, cursor=cursor).SerializeToString())
            assert op == Opcode.SESSION_LIST_BATCH, raw
            page = session_pb2.SessionListBatch.FromString(raw)
            seen |= {s.conversation_id for s in page.sessions}
            cursor = page.next_cursor
            if not page.has_more:
                break
        if wanted <= seen:
            break
        await asyncio.sleep(0.2)
    assert wanted <= seen
    op, raw = await v.request(Opcode.PULL_SESSION_LIST, session_pb2.PullSessionList().SerializeToString(), timeout=20)
    assert op == Opcode.SESSION_LIST_BATCH, describe(op, raw)
    assert len(raw) <= MAX_FRAME
    await a.close()
    await v.close()


async def test_many_large_replies_do_not_break_the_gateway_writer_link(stack):
    """Expected (docs/design.md §4: chunks of different frames interleave; a receiver allows 16
    open frames; every request gets its reply): 80 pipelined PULL_HISTORY requests whose
    replies are 1 MiB each all get HISTORY_BATCH.
    Observed: the writer interleaves up to 80 multi-chunk replies on its one connection to the
    gateway, the gateway's decoder sees more than 16 open frames (ChunkOrder), drops the
    link, and most requests (of every user on that link) get ERROR(UNAVAILABLE)."""
    me, peer = users(2)
    c = await RawClient.login(stack, me)
    op, ack = await c.send_text(peer, os.urandom(MIB))
    assert op == Opcode.SEND_ACK, ack
    req = history_pb2.PullHistory(conversation_id=ids.conversation_id_direct(0, me, peer), peer_user_id=peer,
                                  limit=1).SerializeToString()
    n = 80
    for i in range(n):
        c.stream.send(Opcode.PULL_HISTORY, 1000 + i, req)
    results = []
    while len(results) < n:
        item = await asyncio.wait_for(c.stream.read_frame(), 30)
        assert item is not None, "connection closed"
        op, rid, body = item
        if rid:
            results.append(Opcode(op).name if op != Opcode.ERROR
                           else f"ERROR({ErrorCode(common_pb2.Error.FromString(body).code).name})")
    assert results == ["HISTORY_BATCH"] * n, {r: results.count(r) for r in set(results)}
    await c.close()


async def test_many_concurrent_large_sends_do_not_break_the_gateway_writer_link(stack):
    """Expected (docs/design.md §4, §12 "a 4 MiB frame does not stall PONG"): 40 users sending
    a 512 KiB message at once all get SEND_ACK.
    Observed: the gateway interleaves 40 multi-chunk WRITER_SEND frames on its one
    connection to the writer, the writer refuses more than 16 open frames (ChunkOrder),
    drops the link, and most senders get ERROR(UNAVAILABLE)."""
    ids_ = users(41)
    peer, senders = ids_[0], ids_[1:]
    clients = [await RawClient.login(stack, u) for u in senders]
    body = os.urandom(512 * 1024)
    replies = await asyncio.gather(*(c.send_text(peer, body) for c in clients))
    outcome = [describe(op, r) for op, r in replies]
    assert outcome == ["SEND_ACK"] * len(clients), {o: outcome.count(o) for o in set(outcome)}
    for c in clients:
        await c.close()


async def test_a_client_that_never_reads_cannot_queue_replies_without_bound(stack):
    """Expected (docs/design.md §4/§5; conn.py "past the in-flight limit the connection stops
    reading, TCP back-pressure"): while a connection reads nothing, the gateway stops
    taking its requests once its unsent replies pass a bound, so a client cannot make the
    gateway hold an unbounded amount of memory for it.
    Observed: 4000 pipelined PULL_HISTORY requests (~320 KB) whose replies are 60 KiB
    each were all accepted; the gateway queued ~235 MiB of replies for one socket
    (RSS grew ~176 MiB per 3000 requests, linearly)."""
    me, peer = users(2)
    c = await RawClient.login(stack, me)
    op, ack = await c.send_text(peer, os.urandom(60 * 1024))
    assert op == Opcode.SEND_ACK, ack
    before = counter(stack, "gateway", "qim_gateway_requests_total", 'opcode="0x0501"')
    # a raw socket with a tiny receive buffer (TLS through memory BIOs: the socket stays ours)
    raw = await tls_socket(parse_addr(stack.gateway_addr), client_tls(stack), rcvbuf=4096)
    token = issue_dev_token(stack.token_key, 0, me, 77)
    await raw.sendall(b"".join(frame_codec.encode_frame(Opcode.AUTH, 1,
                                                         connection_pb2.Auth(token=token).SerializeToString())))
    req = history_pb2.PullHistory(conversation_id=ids.conversation_id_direct(0, me, peer), peer_user_id=peer,
                                  limit=1).SerializeToString()
    n = 4000
    data = b"".join(b"".join(frame_codec.encode_frame(Opcode.PULL_HISTORY, 10 + i, req)) for i in range(n))
    try:
        await asyncio.wait_for(raw.sendall(data), 10)
    except asyncio.TimeoutError:
        pass  # the gateway stopped reading: the back-pressure this test asks for
    await asyncio.sleep(5)
    accepted = counter(stack, "gateway", "qim_gateway_requests_total", 'opcode="0x0501"') - before
    raw.sock.close()
    await c.close()
    queued_mib = accepted * 60 / 1024
    # any sane bound (in-flight limit 1024 plus a few MiB of replies) stays far below n
    assert accepted < n / 2, f"gateway accepted {accepted:.0f} requests = ~{queued_mib:.0f} MiB of unread replies"


async def test_a_client_sent_control_message_can_still_be_recalled(stack):
    """Expected (protocol.md: a CONTROL message carries a ControlEvent and its mailbox entry
    has event_type MEMBERSHIP/RECALL/DELETE; docs/design.md §5/§7 recall by the sender): a
    client either cannot send message_type CONTROL (ERROR) or the message it sent stays a
    normal message its sender can recall.
    Observed: SEND_ACK, delivered with event_type MESSAGE, and the sender's RECALL gets
    ERROR(NOT_FOUND) (qimctl message delete is refused the same way), so abusive
    content sent as "CONTROL" cannot be moderated."""
    me, peer = users(2)
    c = await RawClient.login(stack, me)
    op, ack = await c.send_text(peer, b"user text disguised as a system notice", message_type=4)
    if op == Opcode.ERROR:
        assert ack.code in (ErrorCode.INVALID_ARGUMENT, ErrorCode.FORBIDDEN), ack
        return
    op, ok = await call(c, Opcode.RECALL_MESSAGE, message_pb2.RecallMessage(
        conversation_id=ids.conversation_id_direct(0, me, peer), message_id=ack.message_id,
        client_message_id=os.urandom(16), peer_user_id=peer))
    assert op == Opcode.RECALL_OK, f"send was accepted but its recall got {describe(op, ok)}"
    await c.close()


async def test_leave_group_retry_replays_the_original_group_ok(stack):
    """Expected (docs/design.md §1 "a retried send is never delivered twice", §5.2 an existing
    COMMITTED entry replays the same ACK): LEAVE_GROUP retried with the same
    client_message_id returns the same GROUP_OK as the first attempt.
    Observed: the replay reports membership_version = (current version + 1), i.e. 3
    instead of the original 2, although the membership did not change again."""
    owner, member = users(2)
    o = await RawClient.login(stack, owner)
    m = await RawClient.login(stack, member)
    gid = users(1)[0]
    op, ok = await call(o, Opcode.CREATE_GROUP, group_pb2.CreateGroup(
        group_id=gid, members=[member], client_message_id=os.urandom(16)))
    assert op == Opcode.GROUP_OK, ok
    cmid = os.urandom(16)
    op, first = await call(m, Opcode.LEAVE_GROUP, group_pb2.LeaveGroup(group_id=gid, client_message_id=cmid))
    assert op == Opcode.GROUP_OK, first
    op, again = await call(m, Opcode.LEAVE_GROUP, group_pb2.LeaveGroup(group_id=gid, client_message_id=cmid))
    assert op == Opcode.GROUP_OK, again
    assert again == first
    await o.close()
    await m.close()


async def test_user_id_with_bit_63_cannot_wedge_mailbox_shards(fresh_stack):
    """Expected (docs/design.md §3: user ids are u64 and every u64 that reaches storage has bit
    63 clear, checked at construction; §2 /healthz; §5.4 a failure stops the shard
    visibly): a user_id >= 2^63 is refused at AUTH or at SEND, and in any case other
    users' messages keep arriving.
    Observed: AUTH_OK and SEND_ACK; the mailbox event codec refuses the sender id, the
    shard worker task dies without a log line or dirty flag (/healthz stays 200), and a
    later ordinary message to the same recipient is never materialized. After a mailbox
    restart the node stays 503 "catching up" forever (poison record)."""
    stack = fresh_stack
    victim, bystander = users(2)
    big = (1 << 63) + random.getrandbits(32) + 1
    v = await RawClient.login(stack, victim)
    b = await RawClient.login(stack, bystander)
    # sign the token by hand: the test is about what the server accepts on the wire
    key = load_dev_key(stack.token_key)
    now = int(time.time())
    token = jwt.encode({"iss": "qim-dev", "aud": "qim", "sub": str(big), "tenant": f"{0:032x}", "dev": "1",
                        "iat": now, "nbf": now, "exp": now + 600}, key.private, algorithm=key.alg,
                       headers={"kid": key.kid})
    host, port = parse_addr(stack.gateway_addr)
    x = RawClient(await open_framed(host, port, tls=client_tls(stack), server_hostname=host), big, 1)
    op, _ = await x.request(Opcode.AUTH, connection_pb2.Auth(token=token).SerializeToString())
    if op != Opcode.AUTH_OK:
        await x.close()
        x = None  # refused at AUTH: fine
    if x is not None:
        op, reply = await x.send_text(victim, b"from a user id with bit 63 set")
        assert op in (Opcode.SEND_ACK, Opcode.ERROR), op
        await x.close()
    op, ack = await b.send_text(victim, b"an ordinary message")
    assert op == Opcode.SEND_ACK, ack
    mids = set()
    for _ in range(75):
        entries, _ = await v.pull_all()
        mids = {e.message_id for e in entries}
        if ack.message_id in mids:
            break
        await asyncio.sleep(0.2)
    status = stack.healthz("mailbox")
    assert ack.message_id in mids, f"ordinary message never delivered (mailbox /healthz {status})"
    await v.close()
    await b.close()
