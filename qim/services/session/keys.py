"""Redis keys of SessionProjection (DESIGN.md §6, seed 004 §6).

- `qim:convs:<tenant>:<user>` ZSET: member = conversation_id hex, score = created_at_ms
  of the newest message seen (written with ZADD GT by the one registration script).
- `qim:read:<tenant>:<user>` HASH: conversation_id hex -> read_conversation_seq (per
  user, shared by devices, only moves forward).
"""

from __future__ import annotations


def convs_key(tenant: int, user_id: int) -> str:
    return f"qim:convs:{tenant:032x}:{user_id}"


def read_key(tenant: int, user_id: int) -> str:
    return f"qim:read:{tenant:032x}:{user_id}"
