"""Which live node should own a shard: rendezvous (highest random weight) hashing of
(kind, shard) over the live node ids (docs/design.md §13 "Placement"; seed 000: 分片归属唯一权威是
ShardRegistry).

Deterministic: every node computes the same answer from the same live set, so a joining
node is handed about 1/N of the shards and a leaving one's shards spread over the rest;
no other shard moves. Users never map to nodes directly: a user maps to a shard by its
virtual bucket (qim/_core/ids.pyx), a shard to a node here.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import blake3

DOMAIN = b"qim.shard-placement.v1\0"


def weight(kind: str, shard: int, node_id: str) -> bytes:
    """The rendezvous weight of `node_id` for (kind, shard): 8 bytes, compared as bytes."""
    return blake3.blake3(DOMAIN + kind.encode() + b"\0" + shard.to_bytes(4, "big") + node_id.encode()).digest()[:8]


def owner_of(kind: str, shard: int, live: Sequence[str]) -> str:
    """The live node that should own (kind, shard); "" when nobody is live."""
    if not live:
        return ""
    return max(live, key=lambda n: (weight(kind, shard, n), n))


def shards_of(kind: str, count: int, live: Iterable[str], node_id: str) -> set[int]:
    """The shards 0..count-1 of `kind` that `node_id` should own among `live` (which
    includes `node_id` itself)."""
    nodes = sorted(set(live) | {node_id})
    return {s for s in range(count) if owner_of(kind, s, nodes) == node_id}
