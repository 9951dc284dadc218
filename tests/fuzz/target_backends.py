"""Fuzz target 3b: the internal request bodies at the backends' parse sites.

WriterSend and AdminRequest at ConversationWriter.handle (with the real WriterOps,
MessageCommitter, Groups and Moderation), MailboxPull at MailboxNode.handle (the real
MailboxPuller), SessionCall at SessionNode.handle (the real SessionService). Storage,
the broker and the clock are ReachedStore stand-ins (stubs.py): touching one ends the
input as "validation passed". Envelopes and their upstream bodies come from
proto_gen.py (actors with bad tenants, user 0, bit 63; upstream of every client class).
Property: each request ends in a reply, a RequestError with a code other than INTERNAL,
or Reached; nothing else escapes (the RPC server would answer ERROR(INTERNAL) and log a
traceback), and nothing hangs (a conversation turn left held would: stubs.run).
"""

from __future__ import annotations

import struct
from types import SimpleNamespace
from typing import Any, Optional

from qim.consts import CONVERSATION_KIND_DIRECT, CONVERSATION_KIND_GROUP
from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import internal_pb2
from qim.protocol import Opcode
from tests.fuzz.draw import Draw, Finding
from tests.fuzz.proto_gen import Ctx, body, build, mutate
from tests.fuzz.stubs import Reached, ReachedStore, run
from tests.fuzz.target_requests import REQUEST_CLASSES

WRITER_OPS = (0, Opcode.SEND_MESSAGE, Opcode.RECALL_MESSAGE, Opcode.CREATE_GROUP, Opcode.LEAVE_GROUP,
              Opcode.PULL_HISTORY, Opcode.PULL_MEMBERS, Opcode.PULL_MAILBOX, 0xFFFF)
SESSION_OPS = (Opcode.PULL_SESSION_LIST, Opcode.MARK_READ, Opcode.SEND_MESSAGE, 0)


class _AnyShard:
    """The materializer's shard table: every shard served, with the state of this input."""

    def __init__(self) -> None:
        self.state = SimpleNamespace(epoch=1, dirty=False, blob=b"", shard=0)

    def get(self, shard: int) -> Any:
        return self.state


class Backends:
    """The three services' request handlers around ReachedStore stand-ins (built once)."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry

        from qim.faults import FaultPoints
        from qim.services.mailbox.pull import MailboxPuller
        from qim.services.session.metrics import SessionMetrics
        from qim.services.session.service import SessionService
        from qim.services.writer.committer import MessageCommitter
        from qim.services.writer.groups import Groups
        from qim.services.writer.metrics import WriterMetrics
        from qim.services.writer.moderation import Moderation
        from qim.services.writer.planner import DirectAudience, GroupAudience
        from qim.services.writer.server_ops import WriterOps

        def store(name: str) -> Any:
            return ReachedStore(name)

        metrics = WriterMetrics(CollectorRegistry())
        committer = MessageCommitter(store("commits"), store("producer"), store("clock"), 64, FaultPoints(""),
                                     {CONVERSATION_KIND_DIRECT: DirectAudience(),
                                      CONVERSATION_KIND_GROUP: GroupAudience(store("groups"))}, metrics)
        self.writer = SimpleNamespace(metrics=metrics, ops=WriterOps(
            store("messages"), store("groups"), committer,
            Groups(store("groups"), store("commits"), store("messages"), committer),
            Moderation(store("messages"), store("groups"), store("commits"), committer, 86_400_000)))
        self.shards = _AnyShard()
        self.mailbox = SimpleNamespace(puller=MailboxPuller(store("messages"), store("mailboxes"),
                                                            SimpleNamespace(shards=self.shards), 64))
        self.session = SimpleNamespace(sessions=SessionService(
            store("messages"), store("groups"), store("sessions"), store("reads"), store("cache"),
            store("device_send"), lambda tenant, user, pages: None, SessionMetrics(CollectorRegistry())))


_B: Optional[Backends] = None


def backends() -> Backends:
    """The process's Backends (built on first use)."""
    global _B
    if _B is None:
        _B = Backends()
    return _B


def _actor(d: Draw, ctx: Ctx) -> internal_pb2.Actor:
    if d.chance(200):
        return internal_pb2.Actor(tenant_id=ctx.tenant.to_bytes(16, "big"), user_id=ctx.user, device_id=1)
    return build(d, internal_pb2.Actor, ctx)


def _envelope(d: Draw, ctx: Ctx, service: str) -> tuple[int, bytes]:
    """(opcode, body) of one internal request to `service`."""
    if service == "admin":
        req = build(d, internal_pb2.AdminRequest, ctx)
        return Opcode.WRITER_ADMIN, req.SerializeToString() if d.chance(220) else mutate(d, req.SerializeToString())
    ops = WRITER_OPS if service == "writer" else SESSION_OPS
    opcode = d.choice(ops)
    cls = REQUEST_CLASSES.get(opcode) or d.choice(tuple(REQUEST_CLASSES.values()))
    upstream = body(d, cls, ctx)
    actor = _actor(d, ctx)
    if service == "writer":
        env: Any = internal_pb2.WriterSend(actor=actor, upstream=upstream, opcode=opcode)
        internal = Opcode.WRITER_SEND
    elif service == "session":
        env = internal_pb2.SessionCall(actor=actor, upstream=upstream, opcode=opcode)
        internal = Opcode.SESSION_CALL
    else:
        env = internal_pb2.MailboxPull(actor=actor, upstream=upstream)
        internal = Opcode.MAILBOX_PULL
    raw = env.SerializeToString()
    if d.chance(40):
        raw = mutate(d, raw)
    if d.chance(10):
        internal = d.choice((Opcode.WRITER_SEND, Opcode.MAILBOX_PULL, Opcode.SESSION_CALL, Opcode.WRITER_ADMIN, 0))
    return internal, raw


def handle(service: str, opcode: int, raw: bytes) -> Any:
    """The service's real `handle(opcode, body)` coroutine on the stand-ins."""
    from qim.services.mailbox.node import MailboxNode
    from qim.services.session.node import SessionNode
    from qim.services.writer.server import ConversationWriter

    b = backends()
    if service in ("writer", "admin"):
        return ConversationWriter.handle(b.writer, opcode, raw)  # type: ignore[arg-type]
    if service == "mailbox":
        return MailboxNode.handle(b.mailbox, opcode, raw)  # type: ignore[arg-type]
    return SessionNode.handle(b.session, opcode, raw)  # type: ignore[arg-type]


def one_input(data: bytes) -> None:
    """One internal request (see the module doc); raises Finding."""
    d = Draw(data)
    ctx = Ctx(tenant=0, user=d.choice((7, 8, 1 << 40)), peer=d.choice((9, 7, (1 << 63) - 1)),
              group=d.choice((11, 1 << 62)))
    service = d.choice(("writer", "writer", "admin", "mailbox", "session"))
    state = backends().shards.state
    state.dirty = d.chance(20)
    state.blob = struct.pack(">BQQH", 1, d.choice((0, 5, (1 << 48) - 1)), 0, 0)
    opcode, raw = _envelope(d, ctx, service)
    try:
        run(handle(service, opcode, raw))
    except Reached:
        return
    except RequestError as exc:
        if exc.code == ErrorCode.INTERNAL:
            raise Finding(f"{service}: INTERNAL for a bad request: {exc.message}") from exc
    except Exception as exc:  # noqa: BLE001 - anything else is the finding
        raise Finding(f"{service} 0x{opcode:04x}: {type(exc).__name__}: {exc}") from exc
