"""Fuzz target 3a: the gateway's request handling in-process, AUTH included.

Each input is one client connection (qim.services.gateway.conn.ClientConnection on the
unit-test stand-in of tests/gateway/standin.py: real config, Authenticator, registry;
no engines): maybe an AUTH (a valid token, a token signed over drawn claims, a valid
token mutated, hand-built JWT parts, junk), then a few requests (any opcode, bodies from
proto_gen.py), each through the connection's own dispatch. Properties:
- every request ends in a reply or a RequestError with a code other than INTERNAL;
  nothing else escapes (conn.py would answer ERROR(INTERNAL) and log a traceback);
- AUTH_OK only for a token signed by the trusted key, with exactly its identity (a
  mutated token that still verifies must name the same identity);
- before AUTH nothing reaches a backend; what reaches one is the client's body
  unchanged inside its envelope, with the actor of the AUTH, and passed validation.
Backends answer from a stub router (target_backends.py fuzzes their parse sites).
"""

from __future__ import annotations

from typing import Any, Optional

from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import connection_pb2, group_pb2, history_pb2, internal_pb2, mailbox_pb2, message_pb2, session_pb2
from qim.protocol import Opcode
from qim.topology import gateway_backends
from tests.fuzz import token_gen
from tests.fuzz.draw import Draw, Finding
from tests.fuzz.proto_gen import Ctx, body
from tests.fuzz.stubs import StubStream, run

REQUEST_CLASSES: dict[int, Any] = {
    Opcode.AUTH: connection_pb2.Auth, Opcode.PING: connection_pb2.Ping,
    Opcode.SEND_MESSAGE: message_pb2.SendMessage, Opcode.RECALL_MESSAGE: message_pb2.RecallMessage,
    Opcode.PULL_MAILBOX: mailbox_pb2.PullMailbox, Opcode.PULL_HISTORY: history_pb2.PullHistory,
    Opcode.CREATE_GROUP: group_pb2.CreateGroup, Opcode.LEAVE_GROUP: group_pb2.LeaveGroup,
    Opcode.PULL_MEMBERS: group_pb2.PullMembers, Opcode.PULL_SESSION_LIST: session_pb2.PullSessionList,
    Opcode.MARK_READ: session_pb2.MarkRead,
}
OTHER_OPCODES = (Opcode.WRITER_SEND, Opcode.SESSION_CALL, Opcode.SEND_ACK, Opcode.JOIN_ROOM, Opcode.READ_SYNC, 0,
                 0x0999, 0xFFFF)
# internal opcode -> its envelope message, from the service table (one row per backend)
ENVELOPES = {s.gateway.opcode: getattr(internal_pb2, s.gateway.envelope) for s in gateway_backends()}


class StubRouter:
    """BackendRouter stand-in: records (internal opcode, key, envelope) and answers an empty reply."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, Any, bytes]] = []

    async def _call(self, key: Any, internal: int, envelope: bytes) -> tuple[int, bytes]:
        self.calls.append((internal, key, envelope))
        return Opcode.GROUP_OK, b""

    async def call(self, backend: str, key: Any, internal: int, envelope: bytes) -> tuple[int, bytes]:
        return await self._call(key, internal, envelope)


_GW: Optional[Any] = None


def gateway() -> Any:
    """One stand-in ConnectionNode for the process (no rate limits: they are part B's)."""
    global _GW
    if _GW is None:
        from tests.gateway import standin

        _GW = standin.gateway(StubRouter(), rate_user_per_s=0, rate_conn_per_s=0)
    return _GW


def _outcome(coro) -> tuple[str, Any]:
    """("ok", (reply opcode, body)) or ("error", RequestError); Finding for anything else."""
    try:
        return "ok", run(coro)
    except RequestError as exc:
        if exc.code not in ErrorCode.__members__.values() or exc.code == ErrorCode.INTERNAL:
            raise Finding(f"RequestError with code {exc.code!r}: {exc.message}") from exc
        return "error", exc
    except Finding:
        raise
    except Exception as exc:  # noqa: BLE001 - anything else is the finding
        raise Finding(f"dispatch raised {type(exc).__name__}: {exc}") from exc


def _auth(d: Draw, conn: Any, ctx: Ctx) -> None:
    token, signed = token_gen.token(d, ctx)
    raw = connection_pb2.Auth(token=token).SerializeToString() if d.chance(240) else body(d, connection_pb2.Auth, ctx)
    kind, result = _outcome(conn._dispatch(Opcode.AUTH, raw))
    if kind == "error":
        if conn.user_id:
            raise Finding("AUTH refused but the connection kept an identity")
        return
    if signed is None:
        raise Finding("AUTH_OK for a token the trusted key never signed")
    got = (conn.tenant, conn.user_id, conn.device_id)
    if got != signed:
        raise Finding(f"AUTH_OK with identity {got}, the token names {signed}")
    if result[0] != Opcode.AUTH_OK:
        raise Finding(f"AUTH answered 0x{result[0]:04x}")


def _request(d: Draw, conn: Any, router: StubRouter, ctx: Ctx) -> None:
    opcode = d.choice(tuple(REQUEST_CLASSES)) if d.chance(220) else d.choice(OTHER_OPCODES)
    cls = REQUEST_CLASSES.get(opcode) or d.choice(tuple(REQUEST_CLASSES.values()))
    raw = body(d, cls, ctx)
    authed = bool(conn.user_id)
    before = len(router.calls)
    kind, _ = _outcome(conn._dispatch(opcode, raw))
    calls = router.calls[before:]
    if not calls:
        return
    if not authed:
        raise Finding(f"opcode 0x{opcode:04x} reached a backend before AUTH")
    if kind != "ok" or len(calls) != 1:
        raise Finding(f"{len(calls)} backend calls for one request ({kind})")
    internal, _, envelope = calls[0]
    env = ENVELOPES[internal].FromString(envelope)
    if env.upstream != raw:
        raise Finding("the body was not forwarded unchanged")
    actor = env.actor
    if (int.from_bytes(actor.tenant_id, "big"), actor.user_id, actor.device_id) != (
            conn.tenant, conn.user_id, conn.device_id):
        raise Finding("the forwarded actor is not the authenticated one")


def one_input(data: bytes) -> None:
    """One connection's worth of AUTH and requests (see the module doc); raises Finding."""
    from qim.services.gateway.conn import ClientConnection

    d = Draw(data)
    gw = gateway()
    ctx = Ctx(tenant=0, user=d.choice((7, 8, 1 << 40)), peer=d.choice((9, 7, (1 << 63) - 1)),
              group=d.choice((11, 1 << 62)))
    conn = ClientConnection(StubStream(), gw).session  # the DeviceSession serves the requests
    try:
        if d.chance(200):
            _auth(d, conn, ctx)
        for _ in range(d.between(1, 4)):
            _request(d, conn, gw.router, ctx)
    finally:
        if getattr(conn, "_expiry", None) is not None:
            conn._expiry.cancel()
        if conn.user_id:
            gw.online.unregister(conn)
        del gw.router.calls[:]
