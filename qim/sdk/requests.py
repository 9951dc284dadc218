"""Request/reply operations of the SDK besides sending (issue 6): groups, history, recall.

Each takes a connected ClientRuntime, reserves a client_message_id from the LocalStore
where the server needs one for idempotency (CONTROL messages), and returns the parsed
reply. Errors: NotConnected, ServerError (with the wire ErrorCode), ConnectionLost.
"""

from __future__ import annotations

from qim._core import ids
from qim.proto.v1 import group_pb2, history_pb2, message_pb2
from qim.protocol import Opcode
from qim.sdk.runtime import ClientRuntime


async def new_cmid(rt: ClientRuntime) -> bytes:
    """A client_message_id from an ordinal reserved durably in SQLite (DESIGN.md §3)."""
    ordinal = await rt.store.run(rt.store.reserve_ordinal)
    return ids.client_message_id(rt.store.device_id, ordinal)


async def create_group(rt: ClientRuntime, group_id: int, members: list[int]) -> group_pb2.GroupOk:
    """CREATE_GROUP; ServerError(CONFLICT) when the group exists."""
    req = group_pb2.CreateGroup(group_id=group_id, members=members, client_message_id=await new_cmid(rt))
    _, body = await rt.request(Opcode.CREATE_GROUP, req.SerializeToString())
    return group_pb2.GroupOk.FromString(body)


async def leave_group(rt: ClientRuntime, group_id: int) -> group_pb2.GroupOk:
    req = group_pb2.LeaveGroup(group_id=group_id, client_message_id=await new_cmid(rt))
    _, body = await rt.request(Opcode.LEAVE_GROUP, req.SerializeToString())
    return group_pb2.GroupOk.FromString(body)


async def pull_history(rt: ClientRuntime, conversation_id: bytes, peer_user_id: int = 0, anchor_seq: int = 0,
                       newer: bool = False, limit: int = 50, max_bytes: int = 0) -> history_pb2.HistoryBatch:
    """One HISTORY_BATCH page (OLDER from the latest by default)."""
    req = history_pb2.PullHistory(conversation_id=conversation_id, peer_user_id=peer_user_id, anchor_seq=anchor_seq,
                                  direction=history_pb2.NEWER if newer else history_pb2.OLDER, limit=limit,
                                  max_bytes=max_bytes)
    _, body = await rt.request(Opcode.PULL_HISTORY, req.SerializeToString())
    return history_pb2.HistoryBatch.FromString(body)


async def recall(rt: ClientRuntime, conversation_id: bytes, message_id: bytes,
                 peer_user_id: int = 0) -> message_pb2.RecallOk:
    """RECALL_MESSAGE of one of the user's own messages."""
    req = message_pb2.RecallMessage(conversation_id=conversation_id, message_id=message_id,
                                    client_message_id=await new_cmid(rt), peer_user_id=peer_user_id)
    _, body = await rt.request(Opcode.RECALL_MESSAGE, req.SerializeToString())
    return message_pb2.RecallOk.FromString(body)
