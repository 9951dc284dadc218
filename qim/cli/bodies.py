"""Message bodies of the load generator: deterministic pseudo-random bytes and the sizes
at and around every threshold a body crosses on its way to an app (each threshold is where a body was once cut or lost).

Thresholds, each from the code that applies it:
  inline budget     N x body <= INLINE_BODY_BUDGET_BYTES (8 KiB) and body +
                    EVENT_OVERHEAD_MAX <= EVENT_GROUP_MAX_BYTES: the writer's
                    inline_decision (qim/services/writer/committer.py); N counts every
                    member of the audience, the sender included (direct: N = 2 -> 4096)
  event group       EVENT_GROUP_MAX_BYTES (8 KiB) and the largest inline body beside
                    the event overhead (8192 - EVENT_OVERHEAD_MAX)
  session head      SESSION_HEAD_BODY_MAX (4 KiB): larger heads carry no body
  chunk             STREAM_WRITE_CHUNK_BYTES (64 KiB) as a body, and the body lengths
                    whose SEND_MESSAGE (with and without previous_client_message_id)
                    or one-entry MAILBOX_BATCH serialises to exactly 64 KiB
  body limit        MAX_MESSAGE_BODY (1 MiB): accepted; one byte more is refused
                    locally by the SDK with PAYLOAD_TOO_LARGE (never sent)
Bodies are SHAKE-256 output of a seed, never all-zero, so a lost, truncated or swapped
body cannot pass as another; the verdict compares SHA-256 digests (qim/cli/verify.py).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from functools import lru_cache

from qim.consts import (
    EVENT_GROUP_MAX_BYTES,
    INLINE_BODY_BUDGET_BYTES,
    MAX_MESSAGE_BODY,
    MESSAGE_TYPE_CUSTOM,
    SESSION_HEAD_BODY_MAX,
    STREAM_WRITE_CHUNK_BYTES,
)
from qim.proto.v1 import mailbox_pb2, message_pb2
from qim.services.writer.committer import EVENT_OVERHEAD_MAX

BLOB_CUSTOM_TYPE = b"qim.loadgen.blob"  # binary turns are CUSTOM messages (never media in a body: docs/design.md §10)
BLOB_MESSAGE_TYPE = MESSAGE_TYPE_CUSTOM
OVER_LIMIT = MAX_MESSAGE_BODY + 1
_DOMAIN = b"qim.loadgen.body.v1\0"


def body_bytes(seed: bytes, size: int) -> bytes:
    """`size` deterministic pseudo-random bytes of `seed` (SHAKE-256), never all zero."""
    if size <= 0:
        raise ValueError("a body has at least one byte")
    body = hashlib.shake_256(_DOMAIN + seed).digest(size)
    if body.count(0) == size:  # 1 in 256 for one byte: a zero body would hide a lost one
        body = b"\x01" + body[1:]
    return body


def digest(body: bytes) -> bytes:
    """SHA-256 of a body: what the sender intended and what an app was told are compared by it."""
    return hashlib.sha256(body).digest()


def inline_limit(audience: int) -> int:
    """Largest body the writer inlines for an audience of `audience` users (sender included)."""
    return min(INLINE_BODY_BUDGET_BYTES // audience, EVENT_GROUP_MAX_BYTES - EVENT_OVERHEAD_MAX)


def _overhead(make) -> int:
    probe = 60_000  # same 3-byte length varint as every body near 64 KiB
    return make(probe).ByteSize() - probe


@lru_cache(maxsize=1)
def chunk_edges() -> tuple[int, int, int]:
    """Body lengths whose SEND_MESSAGE without / with previous_client_message_id and whose
    one-entry MAILBOX_BATCH serialise to exactly STREAM_WRITE_CHUNK_BYTES (ids at full
    width, 62-bit users, a realistic mailbox_seq: the batch edge is exact to a few bytes)."""
    ident, user = b"\x7f" * 16, (1 << 62) + 1

    def send(prev: bytes):
        return lambda n: message_pb2.SendMessage(client_message_id=ident, conversation_id=ident,
                                                 recipient_user_id=user, message_type=BLOB_MESSAGE_TYPE,
                                                 custom_type=BLOB_CUSTOM_TYPE, body=b"x" * n,
                                                 previous_client_message_id=prev)

    def batch(n: int):
        entry = mailbox_pb2.MailboxEntry(
            mailbox_seq=(1 << 48) + 10**6, event_type=1, event_id=ident, message_id=ident, conversation_id=ident,
            conversation_seq=100, sender_id=user, created_at_ms=1_790_000_000_000, message_type=BLOB_MESSAGE_TYPE,
            custom_type=BLOB_CUSTOM_TYPE, body=b"x" * n)
        return mailbox_pb2.MailboxBatch(entries=[entry], next_cursor=(1 << 48) + 10**6, lane=63, shard_epoch=1)

    c = STREAM_WRITE_CHUNK_BYTES
    return c - _overhead(send(b"")), c - _overhead(send(ident)), c - _overhead(batch)


def threshold_sizes(audience: int) -> list[int]:
    """Every accepted body size at and around each threshold for an audience of
    `audience` users (2 for direct), most telling first; the refused OVER_LIMIT is not
    in it (see module docstring for the sources)."""
    inline = inline_limit(audience)
    event = EVENT_GROUP_MAX_BYTES - EVENT_OVERHEAD_MAX
    head = SESSION_HEAD_BODY_MAX
    send_plain, send_prev, batch = chunk_edges()
    chunk = STREAM_WRITE_CHUNK_BYTES
    sizes = [inline, inline + 1, MAX_MESSAGE_BODY, inline - 1, head, head + 1,
             EVENT_GROUP_MAX_BYTES - 1, EVENT_GROUP_MAX_BYTES, EVENT_GROUP_MAX_BYTES + 1,
             chunk - 1, chunk, chunk + 1, send_plain - 1, send_plain, send_plain + 1, send_prev, batch,
             event - 1, event, event + 1, MAX_MESSAGE_BODY - 1, head - 1]
    return list(dict.fromkeys(s for s in sizes if s > 0))


@dataclass(frozen=True)
class Blob:
    """One binary turn of a dialogue: inserted before text turn `position`."""

    position: int
    size: int


def random_blob_size(rng: random.Random) -> int:
    """The mix of large bodies: mostly 4-64 KiB, some up to 256 KiB, a few near 1 MiB."""
    x = rng.random()
    if x < 0.75:
        return rng.randint(4097, 65536)
    if x < 0.95:
        return rng.randint(65537, 262144)
    return rng.randint(MAX_MESSAGE_BODY - 128 * 1024, MAX_MESSAGE_BODY)


def plan_blobs(turns: int, thresholds: list[int], mix_rate: float, rng: random.Random) -> list[Blob]:
    """Binary turns of one dialogue of `turns` text turns: every size of `thresholds`
    plus, per text turn, one random-mix body with probability `mix_rate`; sorted by
    position (ties keep insertion order)."""
    blobs = [Blob(rng.randint(0, turns), size) for size in thresholds]
    blobs += [Blob(rng.randint(0, turns), random_blob_size(rng)) for _ in range(turns) if rng.random() < mix_rate]
    return sorted(blobs, key=lambda b: b.position)


def deal(sizes: list[int], slots: int, per_slot: int) -> list[list[int]]:
    """Deal `sizes` in order over `slots` dialogues, at most `per_slot` each (the first
    dialogues of a run get them all when there is room: `--limit 10` covers every size)."""
    if slots <= 0:
        return []
    per = max(per_slot, -(-len(sizes) // slots))
    return [sizes[i * per:(i + 1) * per] for i in range(slots)]
