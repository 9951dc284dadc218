"""The Redis client's command packer (qim/infra/redis/client.py): hiredis packs what
redis-py's own Python packer would send, byte for byte, sends a subclass of str, bytes,
int or float as its base value, refuses what redis-py refuses, and a real Redis answers
the commands it packs."""

from __future__ import annotations

import pytest
from redis.asyncio.connection import Connection
from redis.exceptions import DataError

from qim.infra.redis.client import HiredisPackedConnection, connect

SAMPLES = [
    ("SET", "k", b"v\x00\xff"),
    ("EVALSHA", "abc", 2, b"k1", "k2", "strü", 1.5, 0.1, -7, 2**47, 10**30),
    ("CONFIG GET", "maxmemory"),  # a command name of two words
    (b"CLIENT SETNAME", "qim"),
    ("SET", "k", memoryview(b"view"), "PX", 5),
    ("SET", "k", bytearray(b"array")),
]


@pytest.mark.parametrize("args", SAMPLES)
def test_the_bytes_are_redis_pys_own(args):
    assert HiredisPackedConnection().pack_command(*args) == [b"".join(Connection().pack_command(*args))]


class UserId(int):
    pass


class Name(str):
    pass


def test_subclasses_go_as_their_base_value():
    got = HiredisPackedConnection().pack_command("SET", Name("k"), UserId(5))
    assert got == [b"".join(Connection().pack_command("SET", "k", 5))]


@pytest.mark.parametrize("bad", [True, None, object(), [1, 2]])
def test_what_redis_py_refuses_is_refused(bad):
    with pytest.raises(DataError):
        Connection().pack_command("SET", "k", bad)  # the reference refuses it too
    with pytest.raises(DataError):
        HiredisPackedConnection().pack_command("SET", "k", bad)


async def test_a_real_redis_answers_what_it_packs(private_redis):
    r = connect(private_redis.addr)
    try:
        big = [b"m%d" % i * 20 for i in range(3000)]
        sha = await r.script_load("return {#ARGV, ARGV[#ARGV]}")
        async with r.pipeline(transaction=False) as pipe:
            pipe.set("qim:test:k", b"v\x00\xff")
            pipe.get("qim:test:k")
            pipe.evalsha(sha, 0, *big)
            got = await pipe.execute()
        assert got == [True, b"v\x00\xff", [3000, big[-1]]]
        assert await r.incrbyfloat("qim:test:f", 1.5) == 1.5
    finally:
        await r.aclose()
