"""Lua scripts by cached SHA and the error boundary of the Redis backend (DESIGN.md §8).

Scripts live in qim/stores/redis/lua/*.lua, next to the stores that own them, and are
loaded once: redis-py's `Script` computes the SHA once, calls EVALSHA and reloads on
NOSCRIPT (the seed lost a third of a core re-hashing scripts per call: never do that).
`--#include NAME` lines pull in shared functions (NAME.lua), written once.

`boundary(operation)` wraps every Redis call of a store: a redis-py exception leaves it
as the typed error of qim/stores/redis/errors.py, never raw.
"""

from __future__ import annotations

import contextlib
import pathlib
from typing import Any, Iterator, Sequence

from redis import exceptions as rx

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
    leaves as a typed store error (script refusals by their QIM_<REASON>)."""

    def __init__(self, client: Any, names: Sequence[str]) -> None:
        self._client = client
        self._scripts = {n: client.register_script(load_source(n)) for n in names}

    async def call(self, name: str, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        """EVALSHA of script `name` (loaded on NOSCRIPT by redis-py)."""
        with boundary(name):
            return await self._scripts[name](keys=list(keys), args=list(args))

    async def call_many(self, name: str, calls: Sequence[tuple[Sequence[Any], Sequence[Any]]]) -> list:
        """Run one script once per (keys, args) in ONE pipelined round trip by SHA.

        redis-py's pipeline support sends SCRIPT EXISTS before every execute; this sends
        EVALSHA only and loads the script once on NOSCRIPT, then replays the batch (so the
        scripts must be idempotent). The first script error reply is raised, typed."""
        script = self._scripts[name]
        for attempt in (0, 1):
            with boundary(name):
                async with self._client.pipeline(transaction=False) as pipe:
                    for keys, args in calls:
                        pipe.evalsha(script.sha, len(keys), *keys, *args)
                    results = await pipe.execute(raise_on_error=False)
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
