"""Redis connections and Lua scripts (DESIGN.md §8).

Scripts are loaded from `qim/infra/redis/lua/*.lua` once; redis-py's `Script` computes
the SHA once, calls EVALSHA and reloads on NOSCRIPT (the seed lost a third of a core
re-hashing scripts per call: never do that).
"""

from __future__ import annotations

import pathlib
from typing import Any, Sequence

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from qim.errors import EngineError
from qim.net.framed import parse_addr

LUA_DIR = pathlib.Path(__file__).with_name("lua")


def connect(addr: str, max_connections: int = 64) -> aioredis.Redis:
    """An asyncio Redis client (hiredis parser when installed) for 'host:port'; bytes replies."""
    host, port = parse_addr(addr)
    return aioredis.Redis(host=host, port=port, max_connections=max_connections,
                          socket_connect_timeout=2.0, health_check_interval=30)


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


class ScriptError(Exception):
    """A Lua script refused the call with `QIM_<REASON> ...` (domain error, not an outage)."""

    @property
    def reason(self) -> str:
        return str(self).split()[0]
