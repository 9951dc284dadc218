"""Redis connections and Lua scripts (DESIGN.md §8).

Scripts are loaded from `qim/infra/redis/lua/*.lua` once; redis-py's `Script` computes
the SHA once, calls EVALSHA and reloads on NOSCRIPT (the seed lost a third of a core
re-hashing scripts per call: never do that).
"""

from __future__ import annotations

import pathlib
from typing import Any, Sequence

import redis.asyncio as aioredis
from redis.exceptions import NoScriptError, RedisError

from qim.errors import EngineError
from qim.net.framed import parse_addr

LUA_DIR = pathlib.Path(__file__).with_name("lua")


def connect(addr: str, max_connections: int = 64, wait_s: float = 5.0) -> aioredis.Redis:
    """An asyncio Redis client (hiredis parser when installed) for 'host:port'; bytes replies.

    A blocking pool: a call that finds all `max_connections` busy waits up to `wait_s`
    for one (back-pressure) instead of failing with "Too many connections", which
    redis-py's default pool does under load.
    """
    host, port = parse_addr(addr)
    pool = aioredis.BlockingConnectionPool(host=host, port=port, max_connections=max_connections, timeout=wait_s,
                                           socket_connect_timeout=2.0, health_check_interval=30)
    return aioredis.Redis(connection_pool=pool)


def load_source(name: str) -> str:
    """Script text with `--#include NAME` lines replaced by NAME.lua, so shared Lua
    functions are written once (the fused and the step-wise mailbox scripts share them)."""
    out = []
    for line in (LUA_DIR / f"{name}.lua").read_text().splitlines():
        if line.startswith("--#include "):
            out.append(load_source(line.split()[1]))
        else:
            out.append(line)
    return "\n".join(out) + "\n"


class LuaScripts:
    """Named scripts of one client: `await scripts.call("name", keys, args)`.

    Raises EngineError when Redis fails; a script's own error reply (redis.error_reply)
    is re-raised as ScriptError with its message so callers can map it.
    """

    def __init__(self, client: aioredis.Redis, names: Sequence[str]) -> None:
        self._client = client
        self._scripts = {n: client.register_script(load_source(n)) for n in names}

    async def call(self, name: str, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        try:
            return await self._scripts[name](keys=list(keys), args=list(args))
        except RedisError as exc:
            message = str(exc)
            if "QIM_" in message:
                raise ScriptError(message[message.index("QIM_"):]) from None
            raise EngineError(f"redis script {name} failed: {exc.__class__.__name__}") from exc

    def script(self, name: str):
        """The redis-py Script object (for pipelines: script(keys, args, client=pipe))."""
        return self._scripts[name]

    async def call_many(self, name: str, calls: Sequence[tuple[Sequence[Any], Sequence[Any]]]) -> list:
        """Run one script once per (keys, args) in ONE pipelined round trip by SHA.

        redis-py's pipeline support sends SCRIPT EXISTS before every execute; this sends
        EVALSHA only and loads the script once on NOSCRIPT, then replays the batch (so
        the scripts must be idempotent). Raises EngineError when Redis fails and
        ScriptError for the first script error reply."""
        script = self._scripts[name]
        for attempt in (0, 1):
            try:
                async with self._client.pipeline(transaction=False) as pipe:
                    for keys, args in calls:
                        pipe.evalsha(script.sha, len(keys), *keys, *args)
                    results = await pipe.execute(raise_on_error=False)
            except RedisError as exc:
                raise EngineError(f"redis script {name} failed: {exc.__class__.__name__}") from exc
            if attempt == 0 and any(isinstance(r, NoScriptError) for r in results):
                try:
                    script.sha = await self._client.script_load(script.script)
                except RedisError as exc:
                    raise EngineError(f"redis script {name} could not load: {exc.__class__.__name__}") from exc
                continue
            for r in results:
                if isinstance(r, Exception):
                    message = str(r)
                    if "QIM_" in message:
                        raise ScriptError(message[message.index("QIM_"):])
                    raise EngineError(f"redis script {name} failed: {r.__class__.__name__}")
            return results
        raise AssertionError("unreachable")


class ScriptError(Exception):
    """A Lua script refused the call with `QIM_<REASON> ...` (domain error, not an outage)."""

    @property
    def reason(self) -> str:
        return str(self).split()[0]


def int_score_pairs(reply: list, swap: bool = False) -> list[tuple]:
    """[(member, int score)] from a raw WITHSCORES reply of `execute_command`, RESP3
    (nested [member, double]) or RESP2 (flat member, score bytes). The raw reply skips
    redis-py's per-pair Python callback (~5 µs a member); scores must be integers
    below 2^53 (conversation_seq, created_at_ms). `swap`: [(int score, member)]."""
    if reply and isinstance(reply[0], list):
        return [(int(s), m) for m, s in reply] if swap else [(m, int(s)) for m, s in reply]
    pairs = [(reply[i], int(float(reply[i + 1]))) for i in range(0, len(reply), 2)]
    return [(s, m) for m, s in pairs] if swap else pairs
