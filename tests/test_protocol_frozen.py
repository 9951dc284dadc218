"""docs/protocol.md, qim/protocol.py, qim/errors.py and the .proto enums agree."""

from __future__ import annotations

import pathlib
import re

from qim.errors import ErrorCode
from qim.proto.v1 import common_pb2, connection_pb2
from qim.protocol import EventType, Opcode

DOC = (pathlib.Path(__file__).resolve().parent.parent / "docs/protocol.md").read_text()


def doc_rows(pattern: str) -> dict[str, int]:
    return {name: int(num, 0) for num, name in re.findall(pattern, DOC, re.M)}


def test_every_opcode_is_documented_with_its_number():
    documented = doc_rows(r"^\| (0x[0-9A-F]{4}) \| ([A-Z_]+) \|")
    assert documented == {op.name: op.value for op in Opcode}


def test_error_codes_match_doc_and_proto():
    section = DOC.split("## Error codes")[1].split("##")[0]
    documented = {name: int(num) for num, name in re.findall(r"^\| (\d+) \| ([A-Z_]+) \|", section, re.M)}
    assert documented == {c.name: c.value for c in ErrorCode}
    proto = {v.name: v.number for v in common_pb2.ErrorCode.DESCRIPTOR.values if v.number}
    assert proto == documented


def test_event_types_match_doc():
    section = DOC.split("## Mailbox event types")[1].split("##")[0]
    documented = {name: int(num) for num, name in re.findall(r"^\| (\d+) \| ([A-Z_]+) \|", section, re.M)}
    assert documented == {e.name: e.value for e in EventType}


def test_anchored_values_and_message_types():
    assert Opcode.READ_SYNC == 0x0406 and Opcode.LEAVE_GROUP == 0x0A04
    assert {v.name: v.number for v in common_pb2.MessageType.DESCRIPTOR.values} == {
        "MESSAGE_TYPE_UNKNOWN": 0, "MESSAGE_TYPE_TEXT": 1, "MESSAGE_TYPE_MEDIA": 2,
        "MESSAGE_TYPE_CUSTOM": 3, "MESSAGE_TYPE_CONTROL": 4}
    assert connection_pb2.Kicked.REPLACED == 1 and "REPLACED = 1" in DOC


def test_every_kick_reason_is_documented_with_its_number():
    section = DOC.split("## Kick reasons")[1].split("\n## ")[0]
    documented = {name: int(num) for name, num in re.findall(r"\b([A-Z_]+) = (\d+)", section)}
    assert documented == {v.name: v.number for v in connection_pb2.Kicked.Reason.DESCRIPTOR.values if v.number}


def test_opcode_categories_follow_the_design():
    categories = {"AUTH": 0x01, "SEND_MESSAGE": 0x02, "PULL_MAILBOX": 0x03, "MARK_READ": 0x04,
                  "PULL_HISTORY": 0x05, "JOIN_ROOM": 0x06, "CREATE_GROUP": 0x0A, "WRITER_SEND": 0x7F}
    for name, cat in categories.items():
        assert Opcode[name] >> 8 == cat, name
