"""Lua scripts by cached SHA and the error boundary of the Redis backend (docs/design.md §8).

Scripts live in qim/stores/redis/lua/*.lua, next to the stores that own them, and are
loaded once: redis-py's `Script` computes the SHA once, calls EVALSHA and reloads on
NOSCRIPT (the seed lost a third of a core re-hashing scripts per call: never do that).
`--#include NAME` lines pull in shared functions (NAME.lua), written once.

`boundary(operation)` wraps every Redis call of a store: a redis-py exception leaves it
as the typed error of qim/stores/redis/errors.py, never raw.

Group commit (docs/decisions/0026): a store built with `coalesce=True` sends the script calls
made in one event-loop iteration as ONE pipelined round trip (EVALSHA each, in call
order) instead of one connection checkout, write and read per call, over one lean
connection (qim/infra/redis/pipe.py, decisions/0068) when the server allows it. Each caller still
gets its own reply or its own typed error; Redis runs every script atomically as before
and (appendfsync always) answers only after the AOF write covering them is fsynced.
"""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
from typing import Any, Iterator, Optional, Sequence

from redis import exceptions as rx

from qim.consts import REDIS_COALESCE_MAX_CALLS
from qim.infra.redis.pipe import pipe_for
from qim.stores.redis.errors import translate

LUA_DIR = pathlib.Path(__file__).with_name("lua")


@contextlib.contextmanager
def boundary(operation: str) -> Iterator[None]:
    """Map any redis-py exception raised inside to its typed store error (`operation`
    names the call in the message)."""
    try:
        yield
    except rx.RedisError as exc:
        raise translate(exc, operation) from exc


def load_source(name: str) -> str:
    """Script text of lua/NAME.lua with `--#include OTHER` lines replaced by OTHER.lua."""
    out = []
    for line in (LUA_DIR / f"{name}.lua").read_text().splitlines():
        if line.startswith("--#include "):
            out.append(load_source(line.split()[1]))
        else:
            out.append(line)
    return "\n".join(out) + "\n"


class Scripts:
    """Named scripts of one client: `await scripts.call("name", keys, args)`. Every error
    leaves as a typed store error (script refusals by their QIM_<REASON>).

    `coalesce`: calls of one event-loop iteration share one pipelined round trip (at most
    REDIS_COALESCE_MAX_CALLS per pipeline; the module doc). Off: one EVALSHA per call."""

    def __init__(self, client: Any, names: Sequence[str], coalesce: bool = False) -> None:
        self._client = client
        self._scripts = {n: client.register_script(load_source(n)) for n in names}
        self._coalesce = coalesce
        # batches go over one lean pipelined connection when the client's server allows
        # it (qim/infra/redis/pipe.py, decisions/0068), else over redis-py's pipeline
        self._pipe = pipe_for(client)
        # calls waiting for this iteration's pipeline: (script name, keys, args, future)
        self._queued: list[tuple[str, list, list, asyncio.Future]] = []
        self._flushing: set[asyncio.Task] = set()

    async def call(self, name: str, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        """EVALSHA of script `name` (loaded on NOSCRIPT)."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        if not self._coalesce:
            if self._pipe is None:
                with boundary(name):
                    return await self._scripts[name](keys=list(keys), args=list(args))
            await self._send([(name, list(keys), list(args), fut)])
            return await fut
        if not self._queued:  # the first call of this iteration schedules the pipeline
            loop.call_soon(self._flush)
        self._queued.append((name, list(keys), list(args), fut))
        return await fut

    def _flush(self) -> None:
        batch, self._queued = self._queued, []
        for i in range(0, len(batch), REDIS_COALESCE_MAX_CALLS):
            task = asyncio.get_running_loop().create_task(self._send(batch[i:i + REDIS_COALESCE_MAX_CALLS]))
            self._flushing.add(task)
            task.add_done_callback(self._flushing.discard)

    async def _send(self, batch: list[tuple[str, list, list, asyncio.Future]]) -> None:
        """One pipeline for `batch`; calls refused with NOSCRIPT (script cache flushed) are
        sent again once after loading their scripts. Never raises: every future gets its
        reply or its typed error."""
        try:
            todo = batch
            for attempt in (0, 1):
                results = await self._pipeline(todo)
                missing = {name for (name, *_), r in zip(todo, results) if isinstance(r, rx.NoScriptError)}
                if attempt == 1 or not missing:
                    break
                for name in missing:  # not executed: safe to send again
                    script = self._scripts[name]
                    script.sha = await self._client.script_load(script.script)
                self._settle([c for c, r in zip(todo, results) if not isinstance(r, rx.NoScriptError)],
                             [r for r in results if not isinstance(r, rx.NoScriptError)])
                todo = [c for c, r in zip(todo, results) if isinstance(r, rx.NoScriptError)]
            self._settle(todo, results)
        except Exception as exc:  # the connection failed: nothing is known of any call
            for name, _, _, fut in batch:
                if not fut.done():
                    fut.set_exception(translate(exc, name) if isinstance(exc, rx.RedisError) else exc)
        except BaseException:  # cancelled (shutdown): the callers are cancelled too
            for *_, fut in batch:
                fut.cancel()
            raise

    async def _pipeline(self, batch: Sequence[tuple[str, list, list, Optional[asyncio.Future]]]) -> list:
        if self._pipe is not None:
            return await self._pipe.execute([("EVALSHA", self._scripts[name].sha, len(keys), *keys, *args)
                                             for name, keys, args, _ in batch])
        async with self._client.pipeline(transaction=False) as pipe:
            for name, keys, args, _ in batch:
                pipe.evalsha(self._scripts[name].sha, len(keys), *keys, *args)
            return await pipe.execute(raise_on_error=False)

    @staticmethod
    def _settle(batch: Sequence[tuple[str, list, list, asyncio.Future]], results: Sequence[Any]) -> None:
        for (name, _, _, fut), r in zip(batch, results):
            if fut.done():  # the caller was cancelled; the script ran (or not) as it would alone
                continue
            if isinstance(r, Exception):
                fut.set_exception(translate(r, name) if isinstance(r, rx.RedisError) else r)
            else:
                fut.set_result(r)

    async def call_many(self, name: str, calls: Sequence[tuple[Sequence[Any], Sequence[Any]]]) -> list:
        """Run one script once per (keys, args) in ONE pipelined round trip by SHA.

        redis-py's pipeline support sends SCRIPT EXISTS before every execute; this sends
        EVALSHA only and loads the script once on NOSCRIPT, then replays the batch (so the
        scripts must be idempotent). The first script error reply is raised, typed."""
        script = self._scripts[name]
        for attempt in (0, 1):
            with boundary(name):
                results = await self._pipeline([(name, list(keys), list(args), None) for keys, args in calls])
            if attempt == 0 and any(isinstance(r, rx.NoScriptError) for r in results):
                with boundary(name):
                    script.sha = await self._client.script_load(script.script)
                continue
            for r in results:
                if isinstance(r, Exception):
                    raise translate(r, name) from r
            return results
        raise AssertionError("unreachable")


def int_score_pairs(reply: list, swap: bool = False) -> list[tuple]:
    """[(member, int score)] from a raw WITHSCORES reply of `execute_command`, RESP3
    (nested [member, double]) or RESP2 (flat member, score bytes). The raw reply skips
    redis-py's per-pair Python callback (~5 µs a member); scores must be integers
    below 2^53 (conversation_seq, created_at_ms). `swap`: [(int score, member)]."""
    if reply and isinstance(reply[0], list):
        return [(int(s), m) for m, s in reply] if swap else [(m, int(s)) for m, s in reply]
    pairs = [(reply[i], int(float(reply[i + 1]))) for i in range(0, len(reply), 2)]
    return [(s, m) for m, s in pairs] if swap else pairs
