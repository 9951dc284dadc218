"""`qimctl redis where`: where a user's and a conversation's Redis keys live, from the
live placement map (docs/decisions/0104 and 0113; docs/operations.md "Moving a
MailboxShard"). A user's mailbox, day indexes, conversation sets, read positions and
session epochs are on its MailboxShard's mailbox instance; a conversation's commits,
idempotency keys, conversation_seq, hot history and group state are on its commit
bucket's core instance. The instance is the map's entry (`shard:<s>`, `bucket:<b>`),
else the default of the current lists (`s mod n`, `b*n//256`).
"""

from __future__ import annotations

from typing import Optional

from qim._core import ids
from qim.config.redislayout import RedisLayout
from qim.errors import ConfigError


def _place(entry: Optional[str], default: str, moving: Optional[str], field: str, rule: str,
           valid: tuple[str, ...], variable: str) -> str:
    """The "on ADDR (why)" of one entry plus a move in progress; ConfigError for an address
    outside `valid`."""
    addr = entry if entry is not None else default
    if addr not in valid:
        raise ConfigError(f"the placement map names {addr} ({field}), not one of {variable} "
                          f"({','.join(valid)}): the services refuse this map; fix {variable} or the map")
    how = f"placement map entry {field}" if entry is not None else f"no map entry: {rule} of {variable}"
    line = f"on {addr} ({how})"
    if moving is not None:
        line += f"; being moved to {moving}: its calls are refused until the move finishes"
    return line


async def where(layout: RedisLayout, tenant: int, user: Optional[int], conversation: Optional[bytes]) -> list[str]:
    """The lines to print: the user's MailboxShard and instance (when `user` is given),
    the conversation's commit bucket and instance (when `conversation`, 16 bytes, is
    given), read from the map on the home now (one HGETALL). ConfigError when the map
    names an address outside the deployment's lists; the client's errors when the home
    cannot be read."""
    from qim.infra.redis.client import connect
    from qim.stores.redis.placement import read_placement

    home = connect(layout.home)
    try:
        placement = await read_placement(home)
    finally:
        await home.aclose()
    lines = []
    if user is not None:
        s = layout.user_shard(tenant, user)
        place = _place(placement.shards.get(s), layout.mailbox[layout.mailbox_index(s)], placement.moving.get(s),
                       f"shard:{s}", "S mod n", layout.mailbox, "QIM_REDIS_MAILBOX_ADDRS")
        lines.append(f"tenant {tenant} user {user}: MailboxShard {s} of {layout.shard_count}, {place}")
    if conversation is not None:
        b = ids.commit_bucket(tenant, conversation)
        place = _place(placement.buckets.get(b), layout.core[layout.core_index(b)], placement.buckets_moving.get(b),
                       f"bucket:{b}", "B*n//256", layout.core, "QIM_REDIS_CORE_ADDRS")
        lines.append(f"tenant {tenant} conversation {conversation.hex()}: commit bucket {b}, {place}")
    lines.append(f"(placement map v{placement.version} on the home {layout.home})")
    return lines
