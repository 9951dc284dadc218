"""Coalesced script calls (qim/stores/redis/scripts.py): calls made
in one event-loop iteration share one pipeline, yet each caller gets its own reply or
its own typed error; a flushed script cache is reloaded; a dead Redis fails every call
of the pipeline with StoreUnavailable (never a raw redis-py error). Real Redis."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio.client import Pipeline

from qim.infra.redis.client import connect
from qim.infra.redis.pipe import PipelinedRedis
from qim.stores.errors import NotFound, StoreUnavailable
from qim.stores.redis.scripts import Scripts


async def test_one_pipeline_per_iteration_with_a_reply_or_error_each(private_redis, monkeypatch):
    client = connect(private_redis.addr)
    scripts = Scripts(client, ("archive_lease", "mark_committed"), coalesce=True)
    pipelines = 0

    def counting(run):
        async def counted(pipe, *args, **kw):
            nonlocal pipelines
            pipelines += 1
            return await run(pipe, *args, **kw)
        return counted

    try:
        # a fresh Redis has no script cache: the first pipeline is refused (NOSCRIPT), the
        # scripts are loaded and the refused calls sent again
        warm = await asyncio.gather(scripts.call("archive_lease", ["t:warm"], ["w", 60_000]),
                                    scripts.call("mark_committed", ["t:none", "t:if", "t:up", "t:own"], [1, 2, 3]),
                                    return_exceptions=True)
        assert warm[0] == 1 and isinstance(warm[1], NotFound)
        # redis-py's pipeline, or the lean connection (qim/infra/redis/pipe.py)
        monkeypatch.setattr(Pipeline, "execute", counting(Pipeline.execute))
        monkeypatch.setattr(PipelinedRedis, "execute", counting(PipelinedRedis.execute))
        calls = [scripts.call("archive_lease", [f"t:lease:{i}"], [f"holder{i}", 60_000]) for i in range(10)]
        calls.append(scripts.call("archive_lease", ["t:lease:0"], ["someone else", 60_000]))
        calls.append(scripts.call("mark_committed", ["t:no-commit", "t:if", "t:up", "t:own"], [1, 2, 3]))
        results = await asyncio.gather(*calls, return_exceptions=True)
        assert results[:10] == [1] * 10  # each lease taken by its own holder
        assert results[10] == 0  # in call order: lease 0 is already held
        assert isinstance(results[11], NotFound)  # QIM_NOT_FOUND, typed, for that call only
        assert pipelines == 1  # twelve calls of one iteration, one round trip

        sync = private_redis.client()
        sync.script_flush()  # a Redis restarted without its script cache
        sync.close()
        assert await asyncio.gather(*(scripts.call("archive_lease", [f"t:lease:{i}"], [f"holder{i}", 60_000])
                                      for i in range(3))) == [1, 1, 1]
    finally:
        await client.aclose()


async def test_a_dead_redis_fails_every_call_of_the_pipeline_typed(private_redis):
    client = connect(private_redis.addr, wait_s=1.0)
    scripts = Scripts(client, ("archive_lease",), coalesce=True)
    try:
        assert await scripts.call("archive_lease", ["t:lease"], ["h", 60_000]) == 1
        private_redis.stop()
        results = await asyncio.gather(*(scripts.call("archive_lease", ["t:lease"], ["h", 60_000])
                                         for _ in range(5)), return_exceptions=True)
        assert all(isinstance(r, StoreUnavailable) for r in results), results
        with pytest.raises(StoreUnavailable):
            await scripts.call("archive_lease", ["t:lease"], ["h", 60_000])
    finally:
        await client.aclose()
