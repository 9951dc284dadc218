"""Every client call is declared once with both ends (qim/wire/calls.py;
docs/decisions/0105-one-declaration-per-call.md): the gateway's check, the backend's
handler and its reply opcode. Pure logic: no engine (the backends' own tests and the
e2e suite send every call through real gateways and backends)."""

from __future__ import annotations

import asyncio

import pytest

from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import internal_pb2, session_pb2
from qim.protocol import INTERNAL_CATEGORY, Opcode
from qim.services.gateway.routes import ROUTES, build_routes
from qim.services.mailbox.pull import MailboxPuller
from qim.services.room.service import RoomService
from qim.services.session.service import SessionService
from qim.services.writer.server_ops import WriterOps
from qim.topology import SERVICES, WRITER, load
from qim.wire.calls import CALLS, Call, Dispatch, calls_of

# the object each backend dispatches on (its Dispatch target)
TARGETS = {"writer": WriterOps, "mailbox": MailboxPuller, "session": SessionService, "room": RoomService}


def test_each_call_names_a_check_of_its_backends_gateway_half_and_a_handler_it_has():
    assert {c.backend for c in CALLS} == {n for n, s in SERVICES.items() if s.gateway is not None} == set(TARGETS)
    for call in CALLS:
        module, _, name = call.check.partition(":")
        assert module == f"qim.services.gateway.backends.{call.backend}", call
        assert callable(load(call.check)), call
        handler = getattr(TARGETS[call.backend], call.handler)
        assert asyncio.iscoroutinefunction(handler), f"{call.backend}.{call.handler} must be async"
        assert INTERNAL_CATEGORY not in (call.opcode >> 8, call.reply_opcode >> 8), call
        assert call.reply_opcode != call.opcode


def test_the_gateway_routes_every_declared_call_and_nothing_else():
    assert set(ROUTES) == {c.opcode for c in CALLS}
    for call in CALLS:
        route = ROUTES[call.opcode]
        assert (route.backend, route.bulk, route.check) == (call.backend, call.bulk, load(call.check))
        assert route.opcode == SERVICES[call.backend].gateway.opcode  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="routed to writer and writer"):
        build_routes((CALLS[0], CALLS[0]))


class Notes:
    """A stand-in backend: one handler, named by the declaration below."""

    async def count_notes(self, actor: internal_pb2.Actor, req: session_pb2.PullProfiles) -> session_pb2.ProfilesBatch:
        return session_pb2.ProfilesBatch(profiles=[session_pb2.Profile(user_id=u, display_name=f"{actor.user_id}")
                                                   for u in req.user_ids])


NOTES = Call(Opcode.PULL_PROFILES, session_pb2.PullProfiles, WRITER,
             "qim.services.gateway.backends.session:profiles_key", "count_notes", Opcode.PROFILES_BATCH,
             session_pb2.ProfilesBatch)


async def test_a_new_stateless_call_is_one_declaration_plus_its_handler():
    """docs/architecture.md "How to add a service": the declaration routes it at the
    gateway and dispatches it at the backend; nothing else is written."""
    route = build_routes((NOTES,))[Opcode.PULL_PROFILES]
    assert (route.backend, route.opcode, route.envelope) == (WRITER, Opcode.WRITER_SEND, internal_pb2.WriterSend)
    dispatch = Dispatch(WRITER, Notes(), (NOTES,))
    actor = internal_pb2.Actor(tenant_id=bytes(16), user_id=7, device_id=1)
    op, body = await dispatch(Opcode.PULL_PROFILES, session_pb2.PullProfiles(user_ids=[3, 4]).SerializeToString(), actor)
    assert op == Opcode.PROFILES_BATCH
    assert [(p.user_id, p.display_name) for p in session_pb2.ProfilesBatch.FromString(body).profiles] == [(3, "7"), (4, "7")]


async def test_an_opcode_the_backend_does_not_serve_and_garbage_are_invalid_argument():
    dispatch = Dispatch(WRITER, Notes(), (NOTES,))
    with pytest.raises(RequestError) as refused:
        await dispatch(Opcode.SEND_MESSAGE, b"", None)
    assert refused.value.code == ErrorCode.INVALID_ARGUMENT and "writer does not serve opcode 0x0201" in refused.value.message
    with pytest.raises(RequestError) as garbage:
        await dispatch(Opcode.PULL_PROFILES, b"\xff\xff", None)
    assert garbage.value.code == ErrorCode.INVALID_ARGUMENT
    assert "PULL_PROFILES body is not a valid PullProfiles" in garbage.value.message


def test_a_declared_handler_the_backend_lacks_stops_its_start():
    with pytest.raises(AttributeError, match="count_notes"):
        Dispatch(WRITER, object(), (NOTES,))
    assert set(calls_of("fanout")) == set()  # a kind with no client calls dispatches none
