"""Redis connections (docs/design.md §8). Generic plumbing only: key layouts, Lua scripts and
the error table belong to the stores (qim/stores/redis/)."""

from __future__ import annotations

import hiredis
import redis.asyncio as aioredis
from redis.exceptions import DataError

from qim.wire.addr import parse_addr


class HiredisPackedConnection(aioredis.Connection):
    """redis-py's asyncio connection with its commands packed by hiredis (C) instead of
    redis-py's Python packer, as redis-py's own synchronous client does when hiredis is
    installed (its HiredisRespSerializer). The Python packer re-joins its buffer per
    argument: a group record's mailbox script (three arguments per recipient, 3,000 for
    a 1,000-member group) took about 9 ms to pack, hiredis about 1 ms (docs/perf.md
    "Group fan-out, round four"). Same bytes on the wire for every argument redis-py
    accepts (str as UTF-8, int and float as their repr, bytes as they are); a bool or
    another type is refused with redis-py's DataError, as redis-py's encoder does."""

    def pack_command(self, *args) -> list[bytes]:
        """[the RESP command] for `args` (the first may hold a command name with spaces,
        e.g. "CONFIG GET", sent as separate words like redis-py does). DataError on an
        argument of a type redis-py would refuse."""
        if isinstance(args[0], str):
            args = tuple(args[0].encode().split()) + args[1:]
        elif b" " in args[0]:
            args = tuple(args[0].split()) + args[1:]
        if any(isinstance(a, (bool, bytearray, memoryview)) for a in args):
            args = tuple(_plain(a) for a in args)
        try:
            return [hiredis.pack_command(args)]
        except TypeError as exc:
            raise DataError(f"cannot send this argument to Redis: {exc}") from None


def _plain(arg):
    if isinstance(arg, bool):
        raise DataError("Invalid input of type: 'bool'. Convert to a bytes, string, int or float first.")
    return bytes(arg) if isinstance(arg, (bytearray, memoryview)) else arg


def connect(addr: str, max_connections: int = 64, wait_s: float = 5.0) -> aioredis.Redis:
    """An asyncio Redis client (hiredis parser and packer) for 'host:port'; bytes replies.

    A blocking pool: a call that finds all `max_connections` busy waits up to `wait_s`
    for one (back-pressure) instead of failing with "Too many connections", which
    redis-py's default pool does under load.
    """
    host, port = parse_addr(addr)
    pool = aioredis.BlockingConnectionPool(host=host, port=port, max_connections=max_connections, timeout=wait_s,
                                           socket_connect_timeout=2.0, health_check_interval=30,
                                           connection_class=HiredisPackedConnection)
    return aioredis.Redis(connection_pool=pool)
