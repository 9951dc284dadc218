"""Redis key layout of the commit path (DESIGN.md §3 commit bucket, seed 004 §2).

Every key of one conversation carries the hash tag `{bNNN}` of its commit bucket so a
bucket's keys live on one instance (DESIGN.md §8). The idempotency key is in the
conversation's bucket too: a client_message_id reused for another conversation is only
detected when both land in one bucket (docs/decisions/0002-commit-keys.md).
"""

from __future__ import annotations

from qim._core import ids


class CommitKeys:
    """Keys of one conversation in one tenant. `bucket` is computed once per request."""

    __slots__ = ("tag", "tenant_hex", "conv_hex", "bucket")

    def __init__(self, tenant: int, conversation_id: bytes) -> None:
        self.bucket = ids.commit_bucket(tenant, conversation_id)
        self.tag = "{b%03d}" % self.bucket
        self.tenant_hex = "%032x" % tenant
        self.conv_hex = conversation_id.hex()

    def commit(self, sender_id: int, cmid: bytes) -> str:
        """Commit hash: state, identity digest, ACK coordinates (2 h after commit)."""
        return f"qim:commit:{self.tag}:{self.tenant_hex}:{sender_id}:{cmid.hex()}"

    def seq(self) -> str:
        """STRING: the conversation's last conversation_seq (INCR)."""
        return f"qim:cseq:{self.tag}:{self.tenant_hex}:{self.conv_hex}"

    def record(self, message_id: bytes) -> str:
        """STRING: the canonical MessageRecord of `message_id`."""
        return f"qim:msg:{self.tag}:{message_id.hex()}"

    def history(self) -> str:
        """ZSET: message_id scored by conversation_seq (existing messages only)."""
        return f"qim:hist:{self.tag}:{self.tenant_hex}:{self.conv_hex}"

    def inflight(self) -> str:
        """The in-flight ZSET of this conversation's commit bucket."""
        return inflight_key(self.bucket)

    def unpublished(self) -> str:
        """ZSET conversation_seq -> commit hash of reserved commits whose Outbox record is
        not yet known durable (added by the reserve, removed by mark_committed): a reserve
        that finds older ones of another writer publishes them first (Outbox order =
        conversation_seq order, docs/decisions/0017)."""
        return f"qim:unpub:{self.tag}:{self.tenant_hex}:{self.conv_hex}"

    def unpublished_owners(self) -> str:
        """HASH writer token -> count of its commits in `unpublished` (the O(1) check
        "only this writer has unpublished commits here")."""
        return f"qim:unpubown:{self.tag}:{self.tenant_hex}:{self.conv_hex}"

    def last_id(self) -> str:
        """STRING: message_id (16 bytes) of the conversation's newest reservation; a
        reserve below it is refused, so created_at never decreases with conversation_seq."""
        return f"qim:clast:{self.tag}:{self.tenant_hex}:{self.conv_hex}"

    def state(self, message_id: bytes) -> str:
        """STRING RECALLED | DELETED once a message is recalled or deleted (absent: NORMAL).
        Read by mailbox pulls to drop inline bodies and by the session list for unread."""
        return f"qim:msgst:{self.tag}:{message_id.hex()}"

    # --- groups (DESIGN.md §7): keys of the group conversation's commit bucket ---------
    def group_meta(self) -> str:
        """HASH gid, owner, ver (membership_version), count (current members), cat."""
        return f"qim:grp:{self.tag}:{self.tenant_hex}:{self.conv_hex}"

    def group_members(self) -> str:
        """HASH user_id -> member intervals "<joined_at>:<left_at>[,...]", oldest first, at
        most MEMBER_INTERVALS_MAX (conversation_seq bounds; left_at 0 = current member). A
        member sees seq with joined_at < seq and (left_at == 0 or seq <= left_at) for some
        interval (qim/services/writer/intervals.py)."""
        return f"qim:grpmember:{self.tag}:{self.tenant_hex}:{self.conv_hex}"

    def group_snapshot(self, version: int) -> str:
        """STRING: current members at `version`, sorted, u64 big-endian each (immutable)."""
        return f"qim:grpsnap:{self.tag}:{self.tenant_hex}:{self.conv_hex}:{version}"


def inflight_key(bucket: int) -> str:
    """ZSET of commit hashes not yet COMMITTED, scored by last update (CommitRecovery)."""
    return "qim:inflight:{b%03d}" % bucket


def record_key_for(commit_key: str, message_id: bytes) -> str:
    """The record key in the same bucket as `commit_key`."""
    tag = commit_key.split(":")[2]
    return f"qim:msg:{tag}:{message_id.hex()}"


def hlc_key(region_id: int, writer_id: int) -> str:
    """STRING: end of the last clock window leased by (region, writer_id)."""
    return f"qim:hlc:{region_id}:{writer_id}"


def hlc_cluster_key() -> str:
    """STRING: the highest HLC issue ceiling any writer of this cluster published (ms); a
    new window starts above it (docs/decisions/0017)."""
    return "qim:hlc:cluster"


def writer_lease_key(region_id: int, writer_id: int) -> str:
    """STRING: token of the process holding (region, writer_id), with a TTL."""
    return f"qim:writer-lease:{region_id}:{writer_id}"
