"""ERROR frames name the client's request opcode on every backend route (fault 8;
docs/protocol.md "ERROR carries the failed request's id").

Expected: an ERROR produced by the writer, the mailbox or the session service reaches
the client with `request_opcode` = the opcode the client sent (SEND_MESSAGE,
PULL_MAILBOX, PULL_SESSION_LIST, ...), the backend's code and message unchanged.
Observed before the fix: the gateway forwarded the backend's ERROR body as is, so it
named the internal opcode (0x7F01 WRITER_SEND, 0x7F02 MAILBOX_PULL, 0x7F05 SESSION_CALL).
"""

from __future__ import annotations

import os
import random

from qim._core import ids, mailbox_seq
from qim.errors import ErrorCode
from qim.proto.v1 import group_pb2, history_pb2, mailbox_pb2, message_pb2, session_pb2
from qim.protocol import Opcode
from tests.e2e.rawclient import RawClient, call


def users(n: int) -> list[int]:
    base = random.getrandbits(40) + 1
    return [base + i for i in range(n)]


async def test_every_backend_error_names_the_clients_request_opcode(stack):
    me, peer = users(2)
    c = await RawClient.login(stack, me)
    missing_group = random.getrandbits(40) + 1
    gconv = ids.conversation_id_group(0, missing_group)
    cases = [
        # mailbox: a cursor the mailbox never handed out (docs/decisions/0076)
        (Opcode.PULL_MAILBOX, mailbox_pb2.PullMailbox(cursor=mailbox_seq.compose(1, (1 << 48) - 1)),
         ErrorCode.CURSOR_EXPIRED),
        # writer: a send to a group the actor is not a member of
        (Opcode.SEND_MESSAGE, message_pb2.SendMessage(client_message_id=os.urandom(16), conversation_id=gconv,
                                                      message_type=1, body=b"x"), ErrorCode.FORBIDDEN),
        (Opcode.PULL_HISTORY, history_pb2.PullHistory(conversation_id=gconv, limit=1), ErrorCode.FORBIDDEN),
        (Opcode.PULL_MEMBERS, group_pb2.PullMembers(group_id=missing_group), None),
        # session: a list cursor that is not 24 bytes
        (Opcode.PULL_SESSION_LIST, session_pb2.PullSessionList(cursor=b"short"), ErrorCode.INVALID_ARGUMENT),
        (Opcode.MARK_READ, session_pb2.MarkRead(conversation_id=ids.conversation_id_direct(0, me, peer),
                                                read_conversation_seq=1), None),
    ]
    seen = []
    for opcode, msg, code in cases:
        op, err = await call(c, opcode, msg)
        assert op == Opcode.ERROR, (Opcode(opcode).name, op, err)
        if code is not None:
            assert err.code == code, (Opcode(opcode).name, err)
        assert err.message, Opcode(opcode).name
        seen.append((Opcode(opcode).name, err.request_opcode))
    assert seen == [(Opcode(op).name, op) for op, _, _ in cases]
    await c.close()
