"""Redis keys of SessionProjection (DESIGN.md §6, seed 004 §6).

- `qim:convs:<tenant>:<user>` ZSET: member = conversation_id hex, score = created_at_ms
  of the newest message seen (written with ZADD GT by the one registration script).
- `qim:read:<tenant>:<user>` HASH: conversation_id hex -> read_conversation_seq (per
  user, shared by devices, only moves forward).
- `qim:convpeer:<tenant>:<user>` HASH: direct conversation_id hex -> the other
  participant (written once, HSETNX, by the registration script when it is known).
- `qim:session:ckpt:<index>of<count>` HASH: the durable projection checkpoint of session
  node `index` of `count` (bind = "<cluster_id>|<topic_id>|<partitions>", p<N> = next
  offset of dispatch partition N).
"""

from __future__ import annotations


def convs_key(tenant: int, user_id: int) -> str:
    return f"qim:convs:{tenant:032x}:{user_id}"


def read_key(tenant: int, user_id: int) -> str:
    return f"qim:read:{tenant:032x}:{user_id}"


def peers_key(tenant: int, user_id: int) -> str:
    return f"qim:convpeer:{tenant:032x}:{user_id}"


def checkpoint_key(node_index: int, node_count: int) -> str:
    return f"qim:session:ckpt:{node_index}of{node_count}"
