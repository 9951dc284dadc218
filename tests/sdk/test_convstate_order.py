"""Pin, mute and hide reach a device three ways (the reply, another device's
CONVERSATION_STATE_SYNC, SESSION_DELTA / list entries), and a SESSION_DELTA summarized
before a change can arrive after it: a CI run hid a chat and the unmute's late delta
showed it again. qim/sdk/convstate.py keeps the state of the highest version seen
(docs/decisions/0157)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from qim.proto.v1 import convstate_pb2, history_pb2, session_pb2
from qim.protocol import Opcode
from qim.sdk import events as ev
from qim.sdk.convstate import ConvStates

CONV = b"\x02" * 16


def _states() -> tuple[ConvStates, list]:
    told: list = []
    loop_tasks: list = []

    async def run(fn, *args):
        return fn(*args)

    store = SimpleNamespace(run=run, conversation=lambda conv: SimpleNamespace(last_conversation_seq=4))
    core = SimpleNamespace(emit=told.append, frame_handlers={}, tell=lambda result, read_source="local": None,
                           store=store, spawn=lambda coro: loop_tasks.append(asyncio.ensure_future(coro)))
    states = ConvStates(SimpleNamespace(core=core))
    states.attach(SimpleNamespace(note=None))
    states.tasks = loop_tasks  # type: ignore[attr-defined]
    return states, told


def _entry(hidden: bool, version: int, mentioned: bool = False) -> session_pb2.SessionEntry:
    return session_pb2.SessionEntry(conversation_id=CONV, hidden=hidden, state_version=version, mentioned=mentioned,
                                    last_message=history_pb2.HistoryItem(conversation_seq=4))


async def _sync(states: ConvStates, hidden: bool, version: int) -> None:
    body = convstate_pb2.ConversationState(conversation_id=CONV, hidden=hidden, version=version)
    states._core.frame_handlers[Opcode.CONVERSATION_STATE_SYNC](body.SerializeToString())
    await asyncio.gather(*states.tasks)  # type: ignore[attr-defined]


def _changes(told: list) -> int:
    return sum(isinstance(e, ev.ConversationStateChanged) for e in told)


async def test_a_delta_summarized_before_the_hide_does_not_show_the_chat_again():
    states, _ = _states()
    states.note_entries([_entry(False, 1)])
    await _sync(states, True, 2)
    assert states.get(CONV).hidden and states.get(CONV).hidden_upto == 4
    states.note_entries([_entry(False, 1, mentioned=True)])  # late: its choices ignored, its mention not
    st = states.get(CONV)
    assert st.hidden and st.mentioned and st.version == 2


async def test_a_later_version_applies_and_a_late_sync_changes_nothing():
    states, _ = _states()
    await _sync(states, True, 2)
    states.note_entries([_entry(False, 3)])
    assert not states.get(CONV).hidden
    await _sync(states, True, 2)
    assert not states.get(CONV).hidden and states.get(CONV).version == 3


async def test_the_same_state_under_a_new_version_is_kept_but_not_told():
    states, told = _states()
    states.note_entries([_entry(True, 1)])
    assert _changes(told) == 1
    states.note_entries([_entry(True, 2)])
    assert _changes(told) == 1 and states.get(CONV).version == 2


def test_an_older_server_without_versions_applies_every_state():
    states, _ = _states()
    states.note_entries([_entry(True, 0)])
    states.note_entries([_entry(False, 0)])
    assert not states.get(CONV).hidden
