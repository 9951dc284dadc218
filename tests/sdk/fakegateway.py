"""An in-process stand-in for the gateway + writer + mailbox, for SDK tests only.

It speaks the real frames (FramedStream) and the protocol of docs/protocol.md closely
enough to drive ClientRuntime: AUTH with signed tokens (its `key`), PING, SEND_MESSAGE idempotent on
(sender, cmid) with CONFLICT on other content, per-user mailboxes with the cmid only in
the sender's own entry, PULL_MAILBOX paging with has_more, best-effort PUSH_EVENTS.
Knobs: `drop_acks` (commit but never answer), `drop_frames` (lose the next
SEND_MESSAGE frames entirely: no commit, no answer), `materialize_delay` (entries
become visible later, like a lagging watermark), `push` on/off, `push_reference`
(push entries carry no body, like referenced ones), `require_previous` (refuse a send
whose previous_client_message_id holds no commit yet: UNAVAILABLE, as the writer does),
`pull_errors` (ErrorCodes answered to the next PULL_MAILBOXes), `drop_pulls` (user ->
how many of the user's next PULL_MAILBOXes are read and never answered; PINGs still are), `limiter` (the gateway's
own SendLimiter: SEND_MESSAGE and MARK_READ are charged per user and refused with
RATE_LIMITED + retry_after_ms, counted in `refusals`; with `advertise` its limit goes
out in AUTH_OK as the gateway's does), `stall_after_refusal_s` (after
its first refusal the connection reads nothing for that long, like a gateway the
machine did not schedule). `frames` records every SendMessage received, in arrival order.
"""

from __future__ import annotations

import asyncio
import hashlib
import time

from qim.consts import TOKEN_AUDIENCE_DEFAULT, TOKEN_ISSUER_DEFAULT
from qim.errors import ErrorCode, RequestError
from qim.net.framed import FramedStream
from qim.proto.v1 import common_pb2, connection_pb2, mailbox_pb2, message_pb2, session_pb2
from qim.protocol import Opcode
from qim.services.gateway.ratelimit import RateLimited, SendLimiter
from qim.wire.tokens import SigningKey, TokenVerifier

LANE, EPOCH = 5, 1


class FakeGateway:
    def __init__(self, key: SigningKey) -> None:
        self.key = key
        self.verifier = TokenVerifier([key.verify_key()], TOKEN_AUDIENCE_DEFAULT, TOKEN_ISSUER_DEFAULT)
        self.committed: dict[tuple[int, bytes], tuple[bytes, message_pb2.SendAck]] = {}
        self.mailboxes: dict[int, list[mailbox_pb2.MailboxEntry]] = {}
        self.conv_seq: dict[bytes, int] = {}
        self.online: dict[int, list[FramedStream]] = {}
        self.drop_acks = 0          # this many next SEND_MESSAGEs commit without reply
        self.materialize_delay = 0.0
        self.push = True
        self.push_reference = False
        self.require_previous = False
        self.drop_frames = 0
        self.pull_errors: list[int] = []
        self.drop_pulls: dict[int, int] = {}
        self.frames: list[message_pb2.SendMessage] = []
        self.silent = False
        self.sends_seen = 0
        self.limiter: SendLimiter | None = None
        self.refusals = 0
        self.advertise = False
        self.stall_after_refusal_s = 0.0
        self._offset = 0
        self.server: asyncio.AbstractServer | None = None
        self._handlers: set[asyncio.Task] = set()

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def stop(self) -> None:
        self.server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)

    async def _serve(self, reader, writer) -> None:
        task = asyncio.current_task()
        self._handlers.add(task)
        try:
            await self._serve_stream(FramedStream(reader, writer))
        except asyncio.CancelledError:
            writer.transport.abort()
        finally:
            self._handlers.discard(task)

    async def _serve_stream(self, stream: FramedStream) -> None:
        user = None
        try:
            while True:
                frame = await stream.read_frame()
                if frame is None:
                    return
                op, rid, body = frame
                if op == Opcode.AUTH:
                    try:
                        tenant, user, device, *_ = self.verifier.verify(connection_pb2.Auth.FromString(body).token)
                    except RequestError as exc:
                        self._error(stream, rid, exc.code, op)
                        stream.close()
                        return
                    self.online.setdefault(user, []).append(stream)
                    rate, burst = self.limiter.advertised() if self.advertise and self.limiter else (0, 0)
                    stream.send(Opcode.AUTH_OK, rid, connection_pb2.AuthOk(
                        tenant_id=tenant.to_bytes(16, "big"), user_id=user, device_id=device,
                        server_time_ms=int(time.time() * 1000), heartbeat_s=60, mailbox_lane=LANE,
                        send_rate_per_s=rate, send_burst=burst).SerializeToString())
                elif self.silent:
                    continue  # a half-open peer: reads everything, answers nothing
                elif user is None:
                    self._error(stream, rid, 2, op)
                elif self._refused(stream, rid, user, op):
                    if self.stall_after_refusal_s:
                        stall, self.stall_after_refusal_s = self.stall_after_refusal_s, 0.0
                        await asyncio.sleep(stall)
                elif op == Opcode.PING:
                    stream.send(Opcode.PONG, rid, connection_pb2.Pong(server_time_ms=1).SerializeToString())
                elif op == Opcode.SEND_MESSAGE:
                    await self._send(stream, rid, user, body)
                elif op == Opcode.PULL_MAILBOX and self.drop_pulls.get(user):
                    self.drop_pulls[user] -= 1
                elif op == Opcode.PULL_MAILBOX and self.pull_errors:
                    self._error(stream, rid, self.pull_errors.pop(0), op)
                elif op == Opcode.PULL_MAILBOX:
                    self._pull(stream, rid, user, mailbox_pb2.PullMailbox.FromString(body))
                elif op == Opcode.MARK_READ:
                    req = session_pb2.MarkRead.FromString(body)
                    stream.send(Opcode.MARK_READ_OK, rid, session_pb2.MarkReadOk(
                        conversation_id=req.conversation_id,
                        read_conversation_seq=req.read_conversation_seq).SerializeToString())
                else:
                    self._error(stream, rid, 5, op)
        except (ConnectionError, OSError):
            return
        finally:
            if user is not None and stream in self.online.get(user, []):
                self.online[user].remove(stream)
            stream.close()

    def _refused(self, stream, rid, user, op) -> bool:
        """With a `limiter`: charge a SEND_MESSAGE / MARK_READ, or answer RATE_LIMITED."""
        if self.limiter is None or op not in (Opcode.SEND_MESSAGE, Opcode.MARK_READ):
            return False
        try:
            self.limiter.admit(user, None)
            return False
        except RateLimited as exc:
            self.refusals += 1
            stream.send(Opcode.ERROR, rid, common_pb2.Error(code=ErrorCode.RATE_LIMITED, message="x", request_opcode=op,
                                                            retry_after_ms=exc.retry_after_ms).SerializeToString())
            return True

    def _error(self, stream, rid, code, op) -> None:
        stream.send(Opcode.ERROR, rid, common_pb2.Error(code=code, message="x", request_opcode=op).SerializeToString())

    async def _send(self, stream, rid, user, body) -> None:
        self.sends_seen += 1
        req = message_pb2.SendMessage.FromString(body)
        self.frames.append(req)
        if self.drop_frames:
            self.drop_frames -= 1
            return
        prev = req.previous_client_message_id
        if self.require_previous and prev and (user, prev) not in self.committed:
            stream.send(Opcode.ERROR, rid, common_pb2.Error(code=11, message="previous send not yet sequenced",
                                                            request_opcode=Opcode.SEND_MESSAGE).SerializeToString())
            return
        ident = message_pb2.SendMessage()
        ident.CopyFrom(req)
        ident.previous_client_message_id = b""  # not part of the identity (a retry may name another)
        digest = hashlib.sha256(ident.SerializeToString()).digest()
        key = (user, req.client_message_id)
        if key in self.committed:
            old_digest, ack = self.committed[key]
            if old_digest != digest:
                self._error(stream, rid, 8, Opcode.SEND_MESSAGE)
            else:
                stream.send(Opcode.SEND_ACK, rid, ack.SerializeToString())
            return
        seq = self.conv_seq.get(req.conversation_id, 0) + 1
        self.conv_seq[req.conversation_id] = seq
        mid = (int(time.time() * 1000) << 80 | len(self.committed) + 1).to_bytes(16, "big")
        ack = message_pb2.SendAck(client_message_id=req.client_message_id, message_id=mid,
                                  conversation_id=req.conversation_id, conversation_seq=seq,
                                  created_at_ms=int(time.time() * 1000))
        self.committed[key] = (digest, ack)
        common = dict(event_type=1, message_id=mid, conversation_id=req.conversation_id, conversation_seq=seq,
                      sender_id=user, created_at_ms=ack.created_at_ms, message_type=req.message_type,
                      custom_type=req.custom_type, body=req.body)
        own = dict(common, client_message_id=req.client_message_id)
        targets = [(req.recipient_user_id, common), (user, own)]

        async def materialize() -> None:
            if self.materialize_delay:
                await asyncio.sleep(self.materialize_delay)
            for target, fields in targets:
                self._offset += 1
                e = mailbox_pb2.MailboxEntry(mailbox_seq=(EPOCH << 48) | self._offset, **fields)
                self.mailboxes.setdefault(target, []).append(e)
                if self.push:
                    pushed = mailbox_pb2.MailboxEntry()
                    pushed.CopyFrom(e)
                    if self.push_reference:
                        pushed.body = b""  # a reference: the body comes with the pull
                    for s in list(self.online.get(target, [])):
                        if not s.closed:
                            s.send(Opcode.PUSH_EVENTS, 0, mailbox_pb2.PushEvents(entries=[pushed]).SerializeToString())

        asyncio.get_running_loop().create_task(materialize())
        if self.drop_acks:
            self.drop_acks -= 1
            return
        stream.send(Opcode.SEND_ACK, rid, ack.SerializeToString())

    def _pull(self, stream, rid, user, req) -> None:
        box = [e for e in self.mailboxes.get(user, []) if e.mailbox_seq > req.cursor]
        page = box[: min(req.max_entries or 256, 3)]  # small pages to exercise has_more
        batch = mailbox_pb2.MailboxBatch(entries=page, next_cursor=page[-1].mailbox_seq if page else req.cursor,
                                         has_more=len(box) > len(page), lane=LANE, shard_epoch=EPOCH)
        stream.send(Opcode.MAILBOX_BATCH, rid, batch.SerializeToString())
