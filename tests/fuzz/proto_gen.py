"""Protobuf request bodies for the request targets (tests/fuzz/target_requests.py).

`body(d, cls, ctx)` -> bytes: a message of class `cls` built from its descriptor with
edge values (ids of 0, 15, 16 and 17 bytes, the conversation ids the actor may use,
bit 63, 2**64 - 1, negative enum values, sizes around every limit), then sometimes
mutated (cut, a byte flipped, junk or an unknown field appended, a field repeated),
or raw wire-format records with any field number and wire type, or plain junk.
`ctx` supplies the ids that make a request valid enough to reach the deep checks.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from google.protobuf import message_factory
from google.protobuf.descriptor import FieldDescriptor as F

from qim._core import ids
from qim.consts import MAX_CUSTOM_TYPE_BYTES, MAX_MESSAGE_BODY, U63_MAX
from tests.fuzz.draw import Draw

U64_EDGES = (0, 1, 2, U63_MAX, U63_MAX + 1, (1 << 64) - 1)
I32_EDGES = (0, 1, -1, 2, 3, 4, 5, 99, (1 << 31) - 1, -(1 << 31))


@dataclass(frozen=True)
class Ctx:
    """Ids of the fuzzed connection: its tenant, user and a peer, and a group."""

    tenant: int
    user: int
    peer: int
    group: int

    def convs(self) -> tuple[bytes, ...]:
        """Conversation ids: the actor's direct one, the group's, a room's, another pair's."""
        return (ids.conversation_id_direct(self.tenant, self.user, self.peer),
                ids.conversation_id_group(self.tenant, self.group),
                ids.conversation_id_room(self.tenant, 5),
                ids.conversation_id_direct(self.tenant, self.peer, self.peer + 1))


def varint(n: int) -> bytes:
    """Protobuf base-128 varint of a non-negative int (any size: overlong on purpose)."""
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _bytes_value(d: Draw, field: F, ctx: Ctx) -> bytes:
    name = field.name
    if name == "body" or name == "upstream":
        size = d.choice((0, 1, 100, MAX_MESSAGE_BODY, MAX_MESSAGE_BODY + 1))
        return d.sized(size) if size > 100 else d.blob(size)
    if name == "custom_type":
        return d.sized(d.choice((0, 1, MAX_CUSTOM_TYPE_BYTES, MAX_CUSTOM_TYPE_BYTES + 1, 300)))
    if name == "tenant_id":
        return d.choice((ctx.tenant.to_bytes(16, "big"), bytes(16), b"\x01" * 16, b"", b"\0" * 17, b"\xff" * 16))
    if name == "token":
        return d.blob(40)
    pick = d.below(8)
    if pick < 3 and name.endswith("conversation_id"):
        return d.choice(ctx.convs())
    if pick < 5:
        return d.choice((b"\x01" * 16, d.take(16), bytes(16), b"\x02" + bytes(15)))
    return d.choice((b"", d.blob(15), d.blob(17), d.blob(24), d.take(24), d.blob(64)))


def _scalar(d: Draw, field: F, ctx: Ctx) -> Any:
    t = field.type
    if t == F.TYPE_BYTES:
        return _bytes_value(d, field, ctx)
    if t == F.TYPE_STRING:
        return d.blob(20).decode("utf-8", "replace")
    if t == F.TYPE_BOOL:
        return d.chance(128)
    if t in (F.TYPE_UINT64, F.TYPE_FIXED64):
        if field.name.endswith("user_id") or field.name in ("members", "add", "remove"):
            return d.choice((ctx.user, ctx.peer, *U64_EDGES))
        if field.name == "group_id":
            return d.choice((ctx.group, *U64_EDGES))
        return d.choice((*U64_EDGES, d.uint(8), d.uint(2), 1 << 48))
    if t in (F.TYPE_UINT32, F.TYPE_FIXED32):
        return d.choice((0, 1, 0xFFFFFFFF, d.uint(4), d.uint(2), 0x0201, 0x0301, 0x0401, 0x0404, 0x0501, 0x0A02))
    if t in (F.TYPE_INT32, F.TYPE_SINT32, F.TYPE_SFIXED32, F.TYPE_ENUM):
        return d.choice(I32_EDGES)
    if t in (F.TYPE_INT64, F.TYPE_SINT64, F.TYPE_SFIXED64):
        return d.choice((0, 1, -1, (1 << 63) - 1, -(1 << 63)))
    if t in (F.TYPE_DOUBLE, F.TYPE_FLOAT):
        return d.choice((0.0, -1.0, float("inf"), float("nan"), 1e300))
    return None


def build(d: Draw, cls: Any, ctx: Ctx, depth: int = 0) -> Any:
    """A message of `cls` with drawn fields (each set or not, edge values)."""
    msg = cls()
    oneofs_done: set[str] = set()
    for field in cls.DESCRIPTOR.fields:
        if not d.chance(200):
            continue
        if field.containing_oneof is not None:
            if field.containing_oneof.name in oneofs_done:
                continue
            oneofs_done.add(field.containing_oneof.name)
        if field.type == F.TYPE_MESSAGE:
            if depth > 3:
                continue
            sub = message_factory.GetMessageClass(field.message_type)
            if field.is_repeated:
                for _ in range(d.below(3)):
                    getattr(msg, field.name).add().CopyFrom(build(d, sub, ctx, depth + 1))
            else:
                getattr(msg, field.name).CopyFrom(build(d, sub, ctx, depth + 1))
            continue
        if field.is_repeated:
            n = d.choice((0, 1, 2, 5, 1000, 1001))
            getattr(msg, field.name).extend(_scalar(d, field, ctx) for _ in range(n))
            continue
        try:
            setattr(msg, field.name, _scalar(d, field, ctx))
        except (ValueError, TypeError):
            pass  # a value the field's type cannot hold (e.g. an enum it does not know in a closed enum)
    return msg


def raw_records(d: Draw, cls: Any) -> bytes:
    """Wire-format records with drawn field numbers (mostly the message's own) and any
    wire type: wrong types, overlong varints, lengths past the end, groups."""
    numbers = [f.number for f in cls.DESCRIPTOR.fields] or [1]
    out = bytearray()
    for _ in range(d.between(1, 6)):
        number = d.choice(numbers) if d.chance(200) else d.choice((0, 19000, 536870911, d.uint(2)))
        wire = d.below(8)
        out += varint(number << 3 | wire)
        if wire == 0:
            out += varint(d.choice((0, 1, (1 << 64) - 1, 1 << 70, d.uint(8))))
        elif wire == 1:
            out += d.take(8)
        elif wire == 2:
            blob = d.blob(40)
            out += varint(d.choice((len(blob), len(blob), len(blob) + 5, 1 << 31))) + blob
        elif wire == 5:
            out += d.take(4)
    return bytes(out)


def mutate(d: Draw, raw: bytes) -> bytes:
    """One change to serialized bytes."""
    how = d.below(5)
    if how == 0 and raw:
        return raw[:d.below(len(raw))]
    if how == 1 and raw:
        b = bytearray(raw)
        b[d.below(len(b))] ^= d.between(1, 255)
        return bytes(b)
    if how == 2:
        return raw + varint(d.between(1, 40) << 3 | 2) + varint(3) + b"xyz"  # an unknown or repeated field
    if how == 3:
        return raw + raw  # every field again (last one wins, repeated ones double)
    return raw + d.blob(8)


def body(d: Draw, cls: Any, ctx: Ctx) -> bytes:
    """The bytes of one request body for `cls` (see the module doc)."""
    how = d.below(16)
    if how < 10:
        return build(d, cls, ctx).SerializeToString()
    if how < 13:
        return mutate(d, build(d, cls, ctx).SerializeToString())
    if how < 15:
        return raw_records(d, cls)
    return d.blob(64) if d.chance(200) else struct.pack(">Q", d.uint(8))
