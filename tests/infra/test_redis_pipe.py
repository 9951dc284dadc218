"""The lean pipelined Redis connection (qim/infra/redis/pipe.py, docs/decisions/0068):
batches from many callers get their own replies in order, error replies come back in
their slot as redis-py's classes, a lost or silent server fails exactly the batches in
flight and the next batch opens a new connection. Real Redis."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest
import redis.asyncio as aioredis
from redis import exceptions as rx

from qim.infra.redis.client import connect
from qim.infra.redis.pipe import PipelinedRedis, pipe_for


async def test_concurrent_batches_get_their_own_replies_and_errors_in_their_slots(private_redis):
    pipe = PipelinedRedis("127.0.0.1", private_redis.port)
    try:
        async def caller(i: int) -> list:
            return await pipe.execute([("SET", f"k{i}", i), ("INCR", f"k{i}"), ("EVALSHA", "0" * 40, 0),
                                       ("GET", f"k{i}"), ("LPUSH", f"k{i}", "x")])
        results = await asyncio.gather(*(caller(i) for i in range(50)))
        for i, (ok, incr, noscript, got, wrongtype) in enumerate(results):
            assert (ok, incr, got) == (b"OK", i + 1, str(i + 1).encode())
            assert isinstance(noscript, rx.NoScriptError)  # the class redis-py raises, in its slot
            assert isinstance(wrongtype, rx.ResponseError) and "WRONGTYPE" in str(wrongtype)
        with pytest.raises(rx.DataError):  # refused before anything is sent: a bool
            await pipe.execute([("SET", "k", True)])
        assert await pipe.execute([("GET", "k0")]) == [b"1"]  # the connection is still in step
    finally:
        pipe.close()


async def test_a_lost_server_fails_the_batches_in_flight_and_the_next_reconnects(private_redis):
    pipe = PipelinedRedis("127.0.0.1", private_redis.port)
    try:
        assert await pipe.execute([("PING",)]) == [b"PONG"]
        private_redis.stop()
        with pytest.raises(rx.ConnectionError):
            await pipe.execute([("PING",)])
        private_redis.start()
        assert await pipe.execute([("PING",)]) == [b"PONG"]
    finally:
        pipe.close()


async def test_a_silent_server_times_out_and_a_late_reply_never_reaches_a_later_batch(private_redis):
    pipe = PipelinedRedis("127.0.0.1", private_redis.port, timeout_s=0.3)
    try:
        await pipe.execute([("SET", "n", 1)])
        os.kill(private_redis.pid, signal.SIGSTOP)
        try:
            with pytest.raises(rx.TimeoutError):
                await pipe.execute([("INCR", "n")])
        finally:
            os.kill(private_redis.pid, signal.SIGCONT)
        # the stalled INCR still applies (its reply went to the abandoned connection)
        assert await pipe.execute([("GET", "n")]) == [b"2"]
    finally:
        pipe.close()


async def test_pipe_for_takes_only_plain_connections(private_redis):
    plain = connect(private_redis.addr)
    assert isinstance(pipe_for(plain), PipelinedRedis)
    for kw in ({"password": "secret"}, {"db": 3}, {"connection_class": aioredis.SSLConnection}):
        pool = aioredis.ConnectionPool(host="127.0.0.1", port=private_redis.port, **kw)
        assert pipe_for(aioredis.Redis(connection_pool=pool)) is None, kw
    assert pipe_for(object()) is None
    await plain.aclose()


async def test_an_empty_batch_and_a_cancelled_caller_leave_the_connection_in_step(private_redis):
    pipe = PipelinedRedis("127.0.0.1", private_redis.port)
    try:
        assert await pipe.execute([]) == []
        first = asyncio.ensure_future(pipe.execute([("DEBUG", "SLEEP", "0.2"), ("SET", "c", 1)]))
        await asyncio.sleep(0.05)
        first.cancel()  # its replies still come and are dropped
        assert await pipe.execute([("INCR", "c")]) == [2]
        connecting = asyncio.ensure_future(pipe.execute([("PING",)]))
        await asyncio.sleep(0)
        connecting.cancel()  # cancelled while nothing else waits for the connection
        private_redis.stop()  # blocks the loop: the close is seen only by the next batch
        private_redis.start()
        outcomes = []
        for _ in range(2):  # the batch written into the dead connection fails; the next reconnects
            try:
                outcomes.append(await pipe.execute([("PING",)]))
            except rx.ConnectionError:
                outcomes.append("lost")
        assert outcomes in ([[b"PONG"], [b"PONG"]], ["lost", [b"PONG"]])
    finally:
        pipe.close()
