"""Several standalone Redis instances of a development engine set (issue 35 §1,
docs/decisions/0096 and 0098): `qim-dev engines up --redis-instances N`.

Each instance is a RedisEngine of its own (own port, own directory `redis`, `redis2`,
`redis3`, ..., AOF always, noeviction, stopped by its recorded pid). The development
layout of N instances (decision 0098):

    core    = every instance, in order        (commit bucket b -> instance b*N//256)
    mailbox = every instance, rotated by one  (MailboxShard s -> instance (s+1) % N)

so every instance holds both roles, and the core range of one instance is not where its
own MailboxShards live: a conversation's commit and its recipients' mailboxes are on
different instances as soon as N > 1, which is what the tests and `make perf` want to
exercise. QIM_REDIS_ADDR is the first core instance (qim/config/common.py requires it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from qim.config.redislayout import RedisLayout
from qim.dev.redis_engine import RedisEngine, redis_instance
from qim.errors import EngineError

MAX_INSTANCES = 16  # a development machine; production lists its own instances


def check_count(asked: int | None, recorded: int | None = None, dir: Path | str = "") -> None:
    """EngineError unless `asked` (None: not asked) is 1..MAX_INSTANCES (0 is refused,
    never taken as the default) and, for a set already `recorded` in `dir`, its count:
    the placement of live keys is never rehashed by a restart."""
    if asked is None:
        return
    if not 1 <= asked <= MAX_INSTANCES:
        raise EngineError(f"--redis-instances must be 1..{MAX_INSTANCES}, got {asked}")
    if recorded is not None and asked != recorded:
        raise EngineError(f"engines in {dir} were created with {recorded} Redis instance(s), not {asked}; "
                          f"run `down` and remove {dir} to change it")


def engines_of(dir: Path, ports: Sequence[int]) -> list[RedisEngine]:
    """One RedisEngine per port: the first in `dir/redis` (as a one-instance set always
    had), the i-th (1-based) in `dir/redis{i}`."""
    return [redis_instance(Path(dir) / ("redis" if i == 0 else f"redis{i + 1}"), {"main": p}, i)
            for i, p in enumerate(ports)]


def layout_of(addrs: Sequence[str], shard_count: int) -> RedisLayout:
    """The development RedisLayout of these instances (module doc): core all of them in
    order, mailbox all of them rotated by one."""
    addrs = tuple(addrs)
    return RedisLayout(addrs, addrs[1:] + addrs[:1], shard_count)


def layout_env(addrs: Sequence[str]) -> dict[str, str]:
    """The variables naming the layout: none for one instance (QIM_REDIS_ADDR alone, the
    development default), else QIM_REDIS_CORE_ADDRS and QIM_REDIS_MAILBOX_ADDRS."""
    if len(addrs) <= 1:
        return {}
    layout = layout_of(addrs, 1)
    return {"QIM_REDIS_CORE_ADDRS": ",".join(layout.core), "QIM_REDIS_MAILBOX_ADDRS": ",".join(layout.mailbox)}
