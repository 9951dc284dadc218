"""Request/reply operations of the SDK besides sending: groups, history, recall.

Mutating operations are idempotent on retry, like sends: each
keeps its client_message_id in the LocalStore `ops` table, keyed by the operation and
its arguments, until it has an answer. A call after a lost reply (ConnectionLost,
timeout) sends the same cmid again and the writer replays the original answer (the
same conversation_seq and membership_version; the recall's control seq), instead of
CONFLICT, FORBIDDEN or a recall reply with control seq 0. Once answered:
create_group and recall return the stored answer on a repeated call (a group is
created once, a message recalled once); a later leave_group is a new operation (the
user may have re-joined). A permanent ERROR is an answer too: it is raised and the
next call starts afresh. Transient ERRORs are retried with bounded backoff.

Errors: NotConnected, ServerError (with the wire ErrorCode), ConnectionLost.
"""

from __future__ import annotations

import functools
import struct
from typing import Callable, Optional, Protocol, TypeVar

import blake3
from google.protobuf.message import Message

from qim.proto.v1 import group_pb2, history_pb2, message_pb2
from qim.protocol import Opcode
from qim.sdk.events import ServerError
from qim.sdk.retry import RETRYABLE, Backoff, with_retry
from qim.sdk.store import LocalStore

M = TypeVar("M", bound=Message)


class Requester(Protocol):
    """What these operations need of a runtime (ClientRuntime is one): its store, its
    retry budget (seconds) and `request` on the live connection (through the RateGate
    for the opcodes the gateway charges)."""

    @property
    def store(self) -> LocalStore:
        """The runtime's LocalStore."""
        ...

    @property
    def retry_budget_s(self) -> float:
        """Seconds transient errors are retried."""
        ...

    async def request(self, opcode: int, body: bytes, timeout: Optional[float] = None) -> tuple[int, bytes]:
        """(reply opcode, body); NotConnected, ServerError, ConnectionLost."""
        ...


async def new_cmid(rt: Requester) -> bytes:
    """A client_message_id from an ordinal reserved durably in SQLite (docs/design.md §3)."""
    ordinal = await rt.store.run(rt.store.reserve_ordinal)
    return rt.store.cmid_for(ordinal)


async def _operation(rt: Requester, kind: str, key: bytes, replay_answer: bool, opcode: int,
                     build: Callable[[bytes], bytes], reply_type: type[M]) -> M:
    """Run one idempotent operation: reuse its open cmid, or return its stored answer."""
    cmid, stored = await rt.store.run(rt.store.op_begin, kind, key, replay_answer)
    if stored is not None:
        return reply_type.FromString(stored)
    body = build(cmid)
    try:
        _, answer = await with_retry(lambda: rt.request(opcode, body), Backoff(budget=rt.retry_budget_s))
    except ServerError as exc:
        if exc.code not in RETRYABLE:
            await rt.store.run(rt.store.op_end, kind, key, cmid, None)
        raise
    await rt.store.run(rt.store.op_end, kind, key, cmid, answer)
    return reply_type.FromString(answer)


async def create_group(rt: Requester, group_id: int, members: list[int], title: str = "") -> group_pb2.GroupOk:
    """CREATE_GROUP (named `title` when given); ServerError(CONFLICT) when the group
    exists (created by anyone else, or by this store with other members)."""
    wanted = sorted(set(members))
    key = struct.pack(f">Q{len(wanted)}Q", group_id, *wanted) + title.encode("utf-8")
    return await _operation(rt, "create_group", key, True, Opcode.CREATE_GROUP,
                            lambda cmid: group_pb2.CreateGroup(group_id=group_id, members=wanted, title=title,
                                                               client_message_id=cmid).SerializeToString(),
                            group_pb2.GroupOk)


async def leave_group(rt: Requester, group_id: int) -> group_pb2.GroupOk:
    """LEAVE_GROUP of the user itself; FORBIDDEN when it is no member."""
    return await _operation(rt, "leave_group", struct.pack(">Q", group_id), False, Opcode.LEAVE_GROUP,
                            lambda cmid: group_pb2.LeaveGroup(group_id=group_id,
                                                              client_message_id=cmid).SerializeToString(),
                            group_pb2.GroupOk)


async def pull_history(rt: Requester, conversation_id: bytes, peer_user_id: int = 0, anchor_seq: int = 0,
                       newer: bool = False, limit: int = 50, max_bytes: int = 0) -> history_pb2.HistoryBatch:
    """One HISTORY_BATCH page (OLDER from the latest by default). Items carry
    body_included and state: body_included=false means no body (recalled/deleted)."""
    req = history_pb2.PullHistory(conversation_id=conversation_id, peer_user_id=peer_user_id, anchor_seq=anchor_seq,
                                  direction=history_pb2.NEWER if newer else history_pb2.OLDER, limit=limit,
                                  max_bytes=max_bytes)
    _, body = await with_retry(lambda: rt.request(Opcode.PULL_HISTORY, req.SerializeToString()),
                               Backoff(budget=rt.retry_budget_s))
    return history_pb2.HistoryBatch.FromString(body)


async def recall(rt: Requester, conversation_id: bytes, message_id: bytes,
                 peer_user_id: int = 0) -> message_pb2.RecallOk:
    """RECALL_MESSAGE of one of the user's own messages (peer_user_id: the peer of a
    direct conversation)."""
    return await _operation(rt, "recall", bytes(conversation_id) + bytes(message_id), True, Opcode.RECALL_MESSAGE,
                            lambda cmid: message_pb2.RecallMessage(
                                conversation_id=conversation_id, message_id=message_id, client_message_id=cmid,
                                peer_user_id=peer_user_id).SerializeToString(),
                            message_pb2.RecallOk)


async def edit(rt: Requester, conversation_id: bytes, message_id: bytes, body: bytes,
               peer_user_id: int = 0) -> message_pb2.EditOk:
    """EDIT_MESSAGE of one of the user's own messages (docs/decisions/0120); one idempotency
    key per (message, body) while unanswered: a retry after a lost reply keeps its cmid (the
    writer replays the EditOk); once answered, the same body again is a new edit."""
    key = bytes(conversation_id) + bytes(message_id) + blake3.blake3(body).digest()
    return await _operation(rt, "edit", key, False, Opcode.EDIT_MESSAGE,
                            lambda cmid: message_pb2.EditMessage(
                                conversation_id=conversation_id, message_id=message_id, client_message_id=cmid,
                                peer_user_id=peer_user_id, body=body).SerializeToString(),
                            message_pb2.EditOk)


async def pull_members(rt: Requester, group_id: int, page: int = 1000) -> list[group_pb2.Member]:
    """Every current member of the group (PULL_MEMBERS, all pages, by user id).
    ServerError(FORBIDDEN) for a non-member."""
    out: list[group_pb2.Member] = []
    after = 0
    while True:
        req = group_pb2.PullMembers(group_id=group_id, after_user_id=after, limit=page).SerializeToString()
        _, body = await with_retry(functools.partial(rt.request, Opcode.PULL_MEMBERS, req),
                                   Backoff(budget=rt.retry_budget_s))
        batch = group_pb2.MembersBatch.FromString(body)
        out.extend(batch.members)
        if not batch.has_more or not batch.members:
            return out
        after = batch.members[-1].user_id
