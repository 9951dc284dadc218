"""The gateway's half of the MailboxNode: the check its declared call names
(qim/wire/calls.py; docs/design.md §4, §7): a valid PULL_MAILBOX, routed to the
live owner of the user's mailbox shard (`conn.shard` from AUTH).
"""

from __future__ import annotations

from qim.proto.v1 import mailbox_pb2
from qim.services.gateway.context import ClientSession
from qim.wire.validate import parse_request


def pull_mailbox_key(conn: ClientSession, body: bytes) -> int:
    """PULL_MAILBOX: a valid request; the key is the user's mailbox shard."""
    parse_request(mailbox_pb2.PullMailbox, body, "PULL_MAILBOX")
    return conn.shard
