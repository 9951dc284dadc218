"""Typing state in qim.sdk without a network (qim/sdk/reactions.py; docs/sdk.md "Reactions
and typing"): a message from the typist, arriving in a mailbox pull, ends its typing in
that conversation at once (told stopped), long before the indication would expire; a
message from someone else, in another conversation, or a recall leaves it; an expiry that
comes later tells nothing twice."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from qim.proto.v1 import mailbox_pb2, reaction_pb2
from qim.protocol import EventType, Opcode
from qim.sdk.reactions import Reactions, TypingChanged

CONV, OTHER_CONV = b"\x01" * 16, b"\x02" * 16
TYPIST, SOMEONE = 11, 12


def fake_runtime() -> SimpleNamespace:
    """What Reactions uses of a ClientRuntime: core.emit (kept) and store.user_id."""
    told: list = []
    return SimpleNamespace(
        told=told,
        core=SimpleNamespace(emit=told.append, on_ephemeral=None, on_pulled=None),
        store=SimpleNamespace(user_id=99),
    )


def typing_frame(conv: bytes, user: int, expires_in_ms: int) -> bytes:
    return reaction_pb2.TypingEvents(
        conversation_id=conv, user_id=user, expires_in_ms=expires_in_ms
    ).SerializeToString()


def entry(conv: bytes, sender: int, event_type: int = EventType.MESSAGE) -> mailbox_pb2.MailboxEntry:
    return mailbox_pb2.MailboxEntry(event_type=event_type, conversation_id=conv, sender_id=sender, body=b"hi")


def stops(rt: SimpleNamespace) -> list[tuple[bytes, int]]:
    return [(t.conversation_id, t.user_id) for t in rt.told if isinstance(t, TypingChanged) and not t.typing]


async def test_a_message_from_the_typist_ends_its_typing_at_once() -> None:
    rt = fake_runtime()
    r = Reactions(rt)
    r.attach()
    r.on_frame(Opcode.TYPING_EVENTS, typing_frame(CONV, TYPIST, 60_000))  # would last a minute
    r.on_frame(Opcode.TYPING_EVENTS, typing_frame(OTHER_CONV, TYPIST, 60_000))
    r.on_frame(Opcode.TYPING_EVENTS, typing_frame(CONV, SOMEONE, 60_000))
    assert r.typing_in(CONV) == [TYPIST, SOMEONE]

    # a recall by the typist and a message of someone else in another conversation change nothing
    rt.core.on_pulled([entry(CONV, TYPIST, EventType.RECALL), entry(OTHER_CONV, SOMEONE)])
    assert r.typing_in(CONV) == [TYPIST, SOMEONE] and stops(rt) == []

    rt.core.on_pulled([entry(CONV, TYPIST)])  # what the typist typed has arrived
    assert r.typing_in(CONV) == [SOMEONE]
    assert r.typing_in(OTHER_CONV) == [TYPIST]  # only in the message's conversation
    assert stops(rt) == [(CONV, TYPIST)]

    rt.core.on_pulled([entry(CONV, TYPIST)])  # another message: nothing more to tell
    assert stops(rt) == [(CONV, TYPIST)]


async def test_an_expiry_after_the_message_tells_nothing_twice() -> None:
    rt = fake_runtime()
    r = Reactions(rt)
    r.attach()
    r.on_frame(Opcode.TYPING_EVENTS, typing_frame(CONV, TYPIST, 50))  # expires 50 ms on
    rt.core.on_pulled([entry(CONV, TYPIST)])
    assert stops(rt) == [(CONV, TYPIST)]
    await asyncio.sleep(0.5)  # past the expiry's timer (call_later): it finds nothing to end
    assert stops(rt) == [(CONV, TYPIST)] and r.typing_in(CONV) == []
