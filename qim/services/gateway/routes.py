"""The gateway's routing table: client opcode -> (validator, backend, routing key)
(DESIGN.md §4 "Gateway validation", §5.1; issue 11 "table-driven gateway routing").

Each route's `check(conn, body)` parses the upstream bytes, rejects what needs no
storage to reject (INVALID_ARGUMENT, PAYLOAD_TOO_LARGE: qim/services/gateway/requests.py)
and returns the routing key of its backend:
- WRITER: the conversation_id, routed by rendezvous hash over QIM_WRITER_ADDRS;
- SESSION and MAILBOX: the user's shard (virtual bucket -> MailboxShard), whose owner
  in the ShardRegistry serves it (qim/services/gateway/router.py).
The bytes are forwarded unchanged inside the backend's envelope with the actor from
AUTH (`forward`). `bulk` routes answer with pages: the connection fetches at most
BULK_INFLIGHT of them at a time and only while its reply backlog has room
(qim/services/gateway/conn.py). PING and AUTH are answered by the connection itself.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Callable, Union

from qim.proto.v1 import internal_pb2, mailbox_pb2, session_pb2
from qim.protocol import Opcode
from qim.services.gateway import requests as rq

RouteKey = Union[bytes, int]


class Backend(enum.Enum):
    """Which internal service serves a route, and with which envelope opcode."""

    WRITER = Opcode.WRITER_SEND
    SESSION = Opcode.SESSION_CALL
    MAILBOX = Opcode.MAILBOX_PULL


@dataclass(frozen=True)
class Route:
    """One client opcode: `check(conn, body)` -> routing key (raises RequestError)."""

    backend: Backend
    check: Callable[[Any, bytes], RouteKey]
    bulk: bool = False


def _session_list_key(conn: Any, body: bytes) -> int:
    rq.parse(session_pb2.PullSessionList, body, "PULL_SESSION_LIST")
    return conn.shard


def _mark_read_key(conn: Any, body: bytes) -> int:
    req = rq.parse(session_pb2.MarkRead, body, "MARK_READ")
    rq.check_conversation(req.conversation_id)
    return conn.shard


def _pull_mailbox_key(conn: Any, body: bytes) -> int:
    rq.parse(mailbox_pb2.PullMailbox, body, "PULL_MAILBOX")
    return conn.shard


ROUTES: dict[int, Route] = {
    Opcode.SEND_MESSAGE: Route(Backend.WRITER, rq.send_key),
    Opcode.RECALL_MESSAGE: Route(Backend.WRITER, rq.recall_key),
    Opcode.PULL_HISTORY: Route(Backend.WRITER, rq.history_key, bulk=True),
    Opcode.CREATE_GROUP: Route(Backend.WRITER, rq.create_group_key),
    Opcode.LEAVE_GROUP: Route(Backend.WRITER, rq.leave_group_key),
    Opcode.PULL_MEMBERS: Route(Backend.WRITER, rq.members_key, bulk=True),
    Opcode.PULL_SESSION_LIST: Route(Backend.SESSION, _session_list_key, bulk=True),
    Opcode.MARK_READ: Route(Backend.SESSION, _mark_read_key),
    Opcode.PULL_MAILBOX: Route(Backend.MAILBOX, _pull_mailbox_key, bulk=True),
}
# Frozen but not served yet (chatrooms), and server-to-client opcodes of those
# categories sent upstream: "not supported yet" rather than "unknown".
RESERVED = frozenset(op.value for op in Opcode if (op >> 8) in (0x04, 0x05, 0x06, 0x0A)) - set(ROUTES)


def envelope(backend: Backend, actor: internal_pb2.Actor, opcode: int, upstream: bytes) -> bytes:
    """The internal request that carries `upstream` (unchanged) to `backend`."""
    if backend is Backend.WRITER:
        return internal_pb2.WriterSend(actor=actor, upstream=upstream, opcode=opcode).SerializeToString()
    if backend is Backend.SESSION:
        return internal_pb2.SessionCall(actor=actor, opcode=opcode, upstream=upstream).SerializeToString()
    return internal_pb2.MailboxPull(actor=actor, upstream=upstream).SerializeToString()


async def forward(router: Any, route: Route, key: RouteKey, actor: internal_pb2.Actor, opcode: int,
                  upstream: bytes) -> tuple[int, bytes]:
    """Send one validated request to its backend through `router` (BackendRouter:
    `call_writer`, `call_session`, `call_mailbox`); the backend's reply. Raises
    RequestError (UNAVAILABLE, or the backend's own ERROR as RemoteError)."""
    body = envelope(route.backend, actor, opcode, upstream)
    internal = route.backend.value
    if route.backend is Backend.WRITER:
        return await router.call_writer(key, internal, body)
    if route.backend is Backend.SESSION:
        return await router.call_session(key, internal, body)
    return await router.call_mailbox(key, internal, body)
