"""RedisConversationStates on a real Redis (docs/decisions/0122, 0157): every change grows
the state's version by one, a state back at its defaults keeps its version (a device
orders what it is told by it, so it must never start again from 0), and a value of the
older shape (no version) reads as version 0 and grows from there."""

from __future__ import annotations

import pytest

from qim.infra.redis.client import connect
from qim.stores.convstate import MUTE_FOREVER, ConvState, StateChange
from qim.stores.errors import StoreCorrupt
from qim.stores.redis.convstate import RedisConversationStates, parse_state
from qim.stores.redis.keys import convs_key, convstate_key

T, USER, CONV = 7, 1001, b"\x01" + b"\x33" * 15


@pytest.fixture
async def states(private_redis):
    client = connect(private_redis.addr)
    yield RedisConversationStates(client), client
    await client.aclose()


async def test_every_change_grows_the_version_and_defaults_keep_it(states):
    store, client = states
    await client.zadd(convs_key(T, USER), {CONV.hex(): 1_700_000_000_123})
    assert (await store.states(T, USER, [CONV])) == [ConvState()]
    got = [await store.change(T, USER, CONV, StateChange(pinned=True)),
           await store.change(T, USER, CONV, StateChange(muted_until=MUTE_FOREVER)),
           await store.change(T, USER, CONV, StateChange(hide=True)),
           await store.change(T, USER, CONV, StateChange(pinned=False, muted_until=0, hide=False))]
    assert [s.version for s in got] == [1, 2, 3, 4]
    assert got[2] == ConvState(True, MUTE_FOREVER, 1_700_000_000_123, 3)
    assert got[3] == ConvState(False, 0, 0, 4)
    # back at the defaults, the version stays: the next change is 5, not 1
    assert (await store.states(T, USER, [CONV])) == [ConvState(False, 0, 0, 4)]
    assert (await store.change(T, USER, CONV, StateChange(pinned=True))).version == 5


async def test_an_older_value_reads_as_version_0_and_grows_from_there(states):
    store, client = states
    await client.hset(convstate_key(T, USER), CONV.hex(), "1:0:0")
    assert (await store.states(T, USER, [CONV])) == [ConvState(True, 0, 0, 0)]
    assert (await store.change(T, USER, CONV, StateChange(muted_until=5))) == ConvState(True, 5, 0, 1)
    assert (await store.read_states(T, [(USER, CONV)])) == [(0, ConvState(True, 5, 0, 1))]


@pytest.mark.parametrize("raw", [b"1:0", b"1:0:0:1:2", b"x:0:0:1", b"\xff"])
def test_a_value_of_no_known_shape_is_corrupt(raw):
    with pytest.raises(StoreCorrupt):
        parse_state(raw)


async def test_the_script_refuses_a_corrupt_stored_value(states):
    store, client = states
    await client.hset(convstate_key(T, USER), CONV.hex(), "pinned")
    with pytest.raises(StoreCorrupt):
        await store.change(T, USER, CONV, StateChange(pinned=True))
