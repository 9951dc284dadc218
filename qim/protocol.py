"""Frozen wire numbers: opcodes, event types, kick reasons (docs/protocol.md).

The high byte of an opcode is its category (docs/design.md §4). Two values are anchored by
the design: READ_SYNC = 0x0406 and LEAVE_GROUP = 0x0A04. Error codes live in
`qim.errors.ErrorCode` and in `proto/qim/v1/common.proto` with the same numbers.
Never renumber: add new values only.
"""

from __future__ import annotations

import enum


class Opcode(enum.IntEnum):
    """Frame opcodes. 0x7Fxx are internal (service to service) and refused from clients."""

    AUTH = 0x0101
    AUTH_OK = 0x0102
    PING = 0x0103
    PONG = 0x0104
    KICKED = 0x0105
    ERROR = 0x0106

    SEND_MESSAGE = 0x0201
    SEND_ACK = 0x0202
    RECALL_MESSAGE = 0x0203
    RECALL_OK = 0x0204
    EDIT_MESSAGE = 0x0205
    EDIT_OK = 0x0206

    PULL_MAILBOX = 0x0301
    MAILBOX_BATCH = 0x0302
    PUSH_EVENTS = 0x0303

    PULL_SESSION_LIST = 0x0401
    SESSION_LIST_BATCH = 0x0402
    SESSION_DELTA = 0x0403
    MARK_READ = 0x0404
    MARK_READ_OK = 0x0405
    READ_SYNC = 0x0406
    PULL_PROFILES = 0x0407
    PROFILES_BATCH = 0x0408
    SET_CONVERSATION_STATE = 0x0409
    CONVERSATION_STATE = 0x040A
    CONVERSATION_STATE_SYNC = 0x040B
    SET_RECEIPTS = 0x040C
    RECEIPTS_OK = 0x040D
    READ_RECEIPT = 0x040E
    PULL_READERS = 0x040F
    READERS_BATCH = 0x0410

    PULL_HISTORY = 0x0501
    HISTORY_BATCH = 0x0502

    JOIN_ROOM = 0x0601
    ROOM_JOINED = 0x0602
    ROOM_SEND = 0x0603
    ROOM_ACK = 0x0604
    ROOM_EVENTS = 0x0605
    LEAVE_ROOM = 0x0606
    ROOM_LEFT = 0x0607

    CREATE_GROUP = 0x0A01
    PULL_MEMBERS = 0x0A02
    MEMBERS_BATCH = 0x0A03
    LEAVE_GROUP = 0x0A04
    GROUP_OK = 0x0A05
    SET_GROUP_TITLE = 0x0A06

    REACT = 0x0B01
    REACT_OK = 0x0B02
    REACTION_EVENTS = 0x0B03
    TYPING = 0x0B04
    TYPING_OK = 0x0B05
    TYPING_EVENTS = 0x0B06

    REPORT = 0x0C01  # a member reports a message (docs/decisions/0124-user-reports.md)
    REPORT_OK = 0x0C02

    PUSH_REGISTER = 0x0D01  # device push registrations (docs/decisions/0128-device-push-registrations.md)
    PUSH_REGISTER_OK = 0x0D02
    PUSH_UNREGISTER = 0x0D03
    PUSH_UNREGISTER_OK = 0x0D04
    PUSH_LIST = 0x0D05
    PUSH_LIST_OK = 0x0D06

    WRITER_SEND = 0x7F01
    MAILBOX_PULL = 0x7F02
    PUSH_BATCH = 0x7F03
    WRITER_ADMIN = 0x7F04
    SESSION_CALL = 0x7F05
    DEVICE_FRAMES = 0x7F06
    PROJECTION = 0x7F07
    ROOM_CALL = 0x7F08
    ROOM_PUSH = 0x7F09
    EPHEMERAL_FRAMES = 0x7F0A


INTERNAL_CATEGORY = 0x7F

# The mutating requests the gateway's send-rate token buckets charge (docs/operations.md
# "Rate limits"): the gateway limits exactly these, and the SDK paces exactly these
# through its RateGate after a RATE_LIMITED (qim/sdk/rategate.py).
RATE_LIMITED_OPCODES = frozenset({Opcode.SEND_MESSAGE, Opcode.RECALL_MESSAGE, Opcode.EDIT_MESSAGE, Opcode.CREATE_GROUP,
                                  Opcode.LEAVE_GROUP, Opcode.MARK_READ, Opcode.SET_GROUP_TITLE,
                                  Opcode.JOIN_ROOM, Opcode.ROOM_SEND, Opcode.REACT, Opcode.SET_CONVERSATION_STATE,
                                  Opcode.SET_RECEIPTS})

# The frames a gateway sends on its own, with request_id 0 (docs/protocol.md): a client
# must accept any of them at any time, between the replies to its requests.
SERVER_INITIATED_OPCODES = frozenset({Opcode.KICKED, Opcode.PUSH_EVENTS, Opcode.SESSION_DELTA, Opcode.READ_SYNC,
                                      Opcode.ROOM_EVENTS, Opcode.REACTION_EVENTS, Opcode.TYPING_EVENTS,
                                      Opcode.CONVERSATION_STATE_SYNC, Opcode.READ_RECEIPT})


class EventType(enum.IntEnum):
    """Mailbox event types (one per type per event group)."""

    MESSAGE = 1
    RECALL = 2
    MEMBERSHIP = 3
    DELETE = 4
    EDIT = 5  # an edit's CONTROL message (docs/decisions/0120)


assert Opcode.READ_SYNC == 0x0406 and Opcode.LEAVE_GROUP == 0x0A04
