"""A read tick is told once per newer READ_RECEIPT, whatever the list said before it
(qim/sdk/convstate.py, docs/decisions/0122): the peer's read position rides on READ_RECEIPT
and on the user's SESSION_DELTA entry; a CI run saw the delta first, and the receipt that
followed was not newer than the position it had set, so PeerRead was never told."""

from __future__ import annotations

from types import SimpleNamespace

from qim.proto.v1 import convstate_pb2, session_pb2
from qim.protocol import Opcode
from qim.sdk import events as ev
from qim.sdk.convstate import ConvStates

CONV, PEER = b"\x01" * 16, 42


def _states() -> tuple[ConvStates, list]:
    told: list = []
    core = SimpleNamespace(emit=told.append, frame_handlers={}, tell=lambda result, read_source="local": None)
    states = ConvStates(SimpleNamespace(core=core))
    states.attach(SimpleNamespace(note=None))
    return states, told


def _entry(peer_read_seq: int) -> session_pb2.SessionEntry:
    return session_pb2.SessionEntry(conversation_id=CONV, peer_user_id=PEER, peer_read_seq=peer_read_seq)


def _receipt(states: ConvStates, seq: int) -> None:
    body = convstate_pb2.ReadReceipt(conversation_id=CONV, reader_user_id=PEER, read_conversation_seq=seq)
    states._core.frame_handlers[Opcode.READ_RECEIPT](body.SerializeToString())


def _ticks(told: list) -> list[tuple[bytes, int, int]]:
    return [(e.conversation_id, e.reader_user_id, e.read_conversation_seq) for e in told if isinstance(e, ev.PeerRead)]


def test_the_delta_first_then_the_receipt_tells_the_tick_once():
    states, told = _states()
    states.note_entries([_entry(3)])
    assert _ticks(told) == []  # the list's position is state, not a tick
    _receipt(states, 3)
    _receipt(states, 3)  # the same receipt again: nothing more
    assert _ticks(told) == [(CONV, PEER, 3)]
    assert states.get(CONV).peer_read_seq == 3


def test_the_receipt_first_tells_the_tick_and_the_delta_after_it_nothing_more():
    states, told = _states()
    _receipt(states, 3)
    states.note_entries([_entry(3)])
    _receipt(states, 2)  # an older receipt: no tick, the position stays
    assert _ticks(told) == [(CONV, PEER, 3)] and states.get(CONV).peer_read_seq == 3
