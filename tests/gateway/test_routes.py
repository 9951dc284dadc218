"""The gateway's routing table and validators (qim/services/gateway/routes.py,
requests.py) and the writer choice (router.py): pure logic, a stand-in router records
what would go to which backend."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from qim._core import ids
from qim.cluster.owners import OwnerTable
from qim.consts import GROUP_MAX_MEMBERS
from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import group_pb2, history_pb2, internal_pb2, mailbox_pb2, message_pb2, room_pb2, session_pb2
from qim.protocol import Opcode
from qim.services.gateway.device_session import BULK_OPS
from qim.services.gateway.router import BackendRouter, rendezvous_order
from qim.services.gateway.routes import RESERVED, ROUTES, forward
from qim.stores.registry import Owner

TENANT, USER, DEVICE, SHARD = 0, 5, 1, 3
CONV = ids.conversation_id_direct(TENANT, USER, 6)
GROUP_CONV = ids.conversation_id_group(TENANT, 77)


def conn(max_body: int = 1 << 20) -> SimpleNamespace:
    return SimpleNamespace(tenant=TENANT, user_id=USER, device_id=DEVICE, shard=SHARD,
                           gw=SimpleNamespace(config=SimpleNamespace(max_body=max_body)))


def send(**kw) -> bytes:
    fields = dict(client_message_id=os.urandom(16), conversation_id=CONV, recipient_user_id=6, body=b"hi")
    fields.update(kw)
    return message_pb2.SendMessage(**fields).SerializeToString()


def rejected(opcode: int, body: bytes, c=None) -> RequestError:
    with pytest.raises(RequestError) as exc:
        ROUTES[opcode].check(c or conn(), body)
    return exc.value


def test_every_client_request_opcode_has_one_route_to_its_backend():
    backends = {op: route.backend for op, route in ROUTES.items()}
    assert backends == {
        Opcode.SEND_MESSAGE: "writer", Opcode.RECALL_MESSAGE: "writer", Opcode.PULL_HISTORY: "writer",
        Opcode.CREATE_GROUP: "writer", Opcode.LEAVE_GROUP: "writer", Opcode.PULL_MEMBERS: "writer",
        Opcode.SET_GROUP_TITLE: "writer", Opcode.EDIT_MESSAGE: "writer", Opcode.REACT: "writer", Opcode.TYPING: "writer",
        Opcode.REPORT: "writer",  # decision 0124
        Opcode.PULL_SESSION_LIST: "session", Opcode.MARK_READ: "session", Opcode.PULL_PROFILES: "session",
        Opcode.SET_CONVERSATION_STATE: "session", Opcode.SET_RECEIPTS: "session", Opcode.PULL_READERS: "session",
        Opcode.PUSH_REGISTER: "session", Opcode.PUSH_UNREGISTER: "session", Opcode.PUSH_LIST: "session",  # 0128
        Opcode.PULL_MAILBOX: "mailbox",
        Opcode.JOIN_ROOM: "room", Opcode.ROOM_SEND: "room", Opcode.LEAVE_ROOM: "room"}
    assert BULK_OPS == {Opcode.PULL_HISTORY, Opcode.PULL_MEMBERS, Opcode.PULL_SESSION_LIST, Opcode.PULL_MAILBOX}
    # reserved = frozen opcodes of the served categories that have no route (replies)
    assert Opcode.JOIN_ROOM not in RESERVED and Opcode.ROOM_JOINED in RESERVED and Opcode.READ_SYNC in RESERVED and Opcode.SESSION_LIST_BATCH in RESERVED
    assert not RESERVED & set(ROUTES) and Opcode.MAILBOX_BATCH not in RESERVED
    assert {Opcode.REACT_OK, Opcode.REACTION_EVENTS, Opcode.TYPING_EVENTS} <= RESERVED  # decision 0121


def test_routing_keys_are_the_conversation_the_user_and_the_shard():
    c = conn()
    assert ROUTES[Opcode.SEND_MESSAGE].check(c, send()) == CONV
    assert ROUTES[Opcode.PULL_HISTORY].check(c, history_pb2.PullHistory(conversation_id=CONV).SerializeToString()) == CONV
    create = group_pb2.CreateGroup(group_id=77, client_message_id=os.urandom(16), members=[6, 7]).SerializeToString()
    assert ROUTES[Opcode.CREATE_GROUP].check(c, create) == GROUP_CONV
    assert ROUTES[Opcode.PULL_MEMBERS].check(c, group_pb2.PullMembers(group_id=77).SerializeToString()) == GROUP_CONV
    # session calls go to the owner of the user's shard (virtual bucket), never user mod n
    assert ROUTES[Opcode.PULL_SESSION_LIST].check(c, session_pb2.PullSessionList().SerializeToString()) == SHARD
    assert ROUTES[Opcode.MARK_READ].check(c, session_pb2.MarkRead(conversation_id=CONV).SerializeToString()) == SHARD
    assert ROUTES[Opcode.PULL_MAILBOX].check(c, mailbox_pb2.PullMailbox().SerializeToString()) == SHARD
    # rooms: the room shard, byte 1 of the room's conversation_id (qim/wire/room.py)
    room_shard = ids.conversation_id_room(TENANT, 99)[1]
    assert ROUTES[Opcode.JOIN_ROOM].check(c, room_pb2.JoinRoom(room_id=99).SerializeToString()) == room_shard
    assert ROUTES[Opcode.LEAVE_ROOM].check(c, room_pb2.LeaveRoom(room_id=99).SerializeToString()) == room_shard
    post = room_pb2.RoomSend(room_id=99, client_message_id=os.urandom(16), message_type=1, body=b"hi")
    assert ROUTES[Opcode.ROOM_SEND].check(c, post.SerializeToString()) == room_shard


def test_garbage_bodies_are_invalid_argument_naming_the_request():
    for opcode, name in [(Opcode.SEND_MESSAGE, "SEND_MESSAGE"), (Opcode.PULL_MAILBOX, "PULL_MAILBOX"),
                         (Opcode.MARK_READ, "MARK_READ"), (Opcode.CREATE_GROUP, "CREATE_GROUP"),
                         (Opcode.PULL_SESSION_LIST, "PULL_SESSION_LIST")]:
        err = rejected(opcode, b"\xff\xff\xff")
        assert err.code == ErrorCode.INVALID_ARGUMENT and err.message.startswith(f"{name} body is not a valid")


def test_id_shapes_sizes_and_limits_are_refused_before_any_backend():
    assert rejected(Opcode.SEND_MESSAGE, send(client_message_id=bytes(16))).code == ErrorCode.INVALID_ARGUMENT
    assert rejected(Opcode.SEND_MESSAGE, send(conversation_id=b"short")).code == ErrorCode.INVALID_ARGUMENT
    assert rejected(Opcode.SEND_MESSAGE, send(body=b"x" * 11), conn(max_body=10)).code == ErrorCode.PAYLOAD_TOO_LARGE
    room = ids.conversation_id_room(TENANT, 9)
    err = rejected(Opcode.MARK_READ, session_pb2.MarkRead(conversation_id=room).SerializeToString())
    assert err.message == "rooms are not served through this opcode"
    err = rejected(Opcode.PULL_MEMBERS, group_pb2.PullMembers(group_id=1 << 63).SerializeToString())
    assert err.message == "group_id must be non-zero with bit 63 clear"
    too_many = group_pb2.CreateGroup(group_id=77, client_message_id=os.urandom(16),
                                     members=range(100, 100 + GROUP_MAX_MEMBERS)).SerializeToString()
    assert rejected(Opcode.CREATE_GROUP, too_many).code == ErrorCode.PAYLOAD_TOO_LARGE  # + the creator
    recall = message_pb2.RecallMessage(conversation_id=CONV, message_id=bytes(16), client_message_id=os.urandom(16))
    assert rejected(Opcode.RECALL_MESSAGE, recall.SerializeToString()).message == "message_id must be 16 non-zero bytes"


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, object, int, bytes]] = []

    async def call(self, backend, key, opcode, body):
        return await getattr(self, f"call_{backend}")(key, opcode, body)

    async def call_writer(self, key, opcode, body):
        self.calls.append(("writer", key, opcode, body))
        return Opcode.SEND_ACK, b""

    async def call_session(self, key, opcode, body):
        self.calls.append(("session", key, opcode, body))
        return Opcode.MARK_READ_OK, b""

    async def call_mailbox(self, key, opcode, body):
        self.calls.append(("mailbox", key, opcode, body))
        return Opcode.MAILBOX_BATCH, b""


async def test_forward_wraps_the_unchanged_upstream_bytes_with_the_actor_from_auth():
    actor = internal_pb2.Actor(tenant_id=bytes(16), user_id=USER, device_id=DEVICE)
    rec = Recorder()
    upstream = send() + b"\x98\x06\x01"  # an unknown field (99): forwarded untouched
    await forward(rec, ROUTES[Opcode.SEND_MESSAGE], CONV, actor, Opcode.SEND_MESSAGE, upstream)
    await forward(rec, ROUTES[Opcode.MARK_READ], USER, actor, Opcode.MARK_READ, b"m")
    await forward(rec, ROUTES[Opcode.PULL_MAILBOX], SHARD, actor, Opcode.PULL_MAILBOX, b"p")
    (w, wk, wop, wbody), (s, sk, sop, sbody), (m, mk, mop, mbody) = rec.calls
    sent = internal_pb2.WriterSend.FromString(wbody)
    assert (w, wk, wop) == ("writer", CONV, Opcode.WRITER_SEND)
    assert sent.upstream == upstream and sent.opcode == Opcode.SEND_MESSAGE and sent.actor == actor
    call = internal_pb2.SessionCall.FromString(sbody)
    assert (s, sk, sop, call.upstream, call.opcode) == ("session", USER, Opcode.SESSION_CALL, b"m", Opcode.MARK_READ)
    pull = internal_pb2.MailboxPull.FromString(mbody)
    assert (m, mk, mop, pull.upstream, pull.actor) == ("mailbox", SHARD, Opcode.MAILBOX_PULL, b"p", actor)


def test_rendezvous_order_is_stable_per_key_and_spreads_keys():
    addrs = ("127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3")
    order = rendezvous_order(CONV, addrs)
    assert sorted(order) == [0, 1, 2] and rendezvous_order(CONV, addrs) == order
    # a writer's removal keeps every other key's order (affinity only moves for its keys)
    firsts = {rendezvous_order(os.urandom(16), addrs)[0] for _ in range(200)}
    assert firsts == {0, 1, 2}
    for _ in range(50):
        key = os.urandom(16)
        full = [addrs[i] for i in rendezvous_order(key, addrs)]
        fewer = [addrs[i] for i in rendezvous_order(key, addrs[:2])]
        assert [a for a in full if a in addrs[:2]] == fewer


class NoOwners:
    """A ShardRegistry reading no live owner of any shard (a takeover in progress)."""

    def __init__(self) -> None:
        self.reads = 0

    async def owners(self, kind: str, count: int) -> list[Owner]:
        self.reads += 1
        return [Owner(s, "", 3, 0) for s in range(count)]

    async def nodes(self, kind: str) -> list:
        return []


async def test_the_router_fails_over_to_the_next_writer_only_when_one_is_unreachable():
    registry = NoOwners()
    owners = OwnerTable(registry, {"mailbox": 8, "session": 8})  # type: ignore[arg-type]
    router = BackendRouter({"writer": ("127.0.0.1:1", "127.0.0.1:2"), "mailbox": ("127.0.0.1:3",),
                            "session": ()}, owners=owners)
    with pytest.raises(RequestError) as exc:
        await router.call("writer", CONV, Opcode.WRITER_SEND, b"")  # both unreachable
    assert exc.value.code == ErrorCode.UNAVAILABLE
    with pytest.raises(RequestError) as exc:
        await router.call("session", SHARD, Opcode.SESSION_CALL, b"")  # nobody holds the shard now
    assert exc.value.code == ErrorCode.UNAVAILABLE and "session shard 3 has no live owner" in exc.value.message
    assert registry.reads == 2  # the cached table was empty: read the registry again once
    await router.close()


def test_titles_and_profile_requests_are_checked_before_a_backend():
    def title(t: str, **kw) -> bytes:
        fields = dict(group_id=77, title=t, client_message_id=os.urandom(16))
        fields.update(kw)
        return group_pb2.SetGroupTitle(**fields).SerializeToString()

    assert ROUTES[Opcode.SET_GROUP_TITLE].check(conn(), title("周末 hiking 🥾")) == GROUP_CONV
    assert ROUTES[Opcode.SET_GROUP_TITLE].check(conn(), title("")) == GROUP_CONV  # removes the title
    for bad, code in ((title(" x"), ErrorCode.INVALID_ARGUMENT), (title("a\u202eb"), ErrorCode.INVALID_ARGUMENT),
                      (title("名" * 22), ErrorCode.PAYLOAD_TOO_LARGE), (title("x", group_id=0), ErrorCode.INVALID_ARGUMENT),
                      (title("x", client_message_id=b""), ErrorCode.INVALID_ARGUMENT)):
        assert rejected(Opcode.SET_GROUP_TITLE, bad).code == code
    create = group_pb2.CreateGroup(group_id=77, client_message_id=os.urandom(16), title="tab\there")
    assert rejected(Opcode.CREATE_GROUP, create.SerializeToString()).code == ErrorCode.INVALID_ARGUMENT
    ask = session_pb2.PullProfiles
    assert ROUTES[Opcode.PULL_PROFILES].check(conn(), ask(user_ids=[6, 7]).SerializeToString()) == SHARD  # the actor's session shard: its owner answers
    for bad in ([], [0], list(range(1, 202)), [1 << 63]):
        assert rejected(Opcode.PULL_PROFILES, ask(user_ids=bad).SerializeToString()).code == ErrorCode.INVALID_ARGUMENT
