"""Every Redis key family of QIM, defined once (docs/design.md §3 commit bucket, §8; seed 004
§2). Each family names the one store that owns it (reads and writes it; a family written
inside another store's atomic script says so). docs/decisions/0019-storage-layer.md has
the table.

Every key of one conversation carries the hash tag `{bNNN}` of its commit bucket so a
bucket's keys live on one instance. The idempotency key is in the conversation's bucket
too: a client_message_id reused for another conversation is only detected when both land
in one bucket (docs/decisions/0002-commit-keys.md). Tenants are written as 32 hex digits.
"""

from __future__ import annotations

from typing import Optional

from qim._core import ids


class CommitKeys:
    """Keys of one conversation in one tenant (commit bucket computed once)."""

    __slots__ = ("tag", "tenant_hex", "conv_hex", "bucket")

    def __init__(self, tenant: int, conversation_id: bytes) -> None:
        self.bucket = ids.commit_bucket(tenant, conversation_id)
        self.tag = "{b%03d}" % self.bucket
        self.tenant_hex = "%032x" % tenant
        self.conv_hex = conversation_id.hex()

    # --- CommitStore ------------------------------------------------------------------
    def commit(self, sender_id: int, cmid: bytes) -> str:
        """HASH, CommitStore: state, identity digest, ACK coordinates (expires 2 h, 24 h
        for CONTROL messages, after commit)."""
        return f"qim:commit:{self.tag}:{self.tenant_hex}:{sender_id}:{cmid.hex()}"

    def refusal(self, sender_id: int, cmid: bytes) -> str:
        """HASH, CommitStore: the send policy's kept refusal of this send (identity digest
        `dg`, reason `why`), written only while no commit of it exists, expires
        COMMIT_OP_HELPER_TTL_MS after it (docs/decisions/0099, Amendment)."""
        return f"qim:refused:{self.tag}:{self.tenant_hex}:{sender_id}:{cmid.hex()}"

    def seq(self) -> str:
        """STRING, CommitStore: the conversation's last conversation_seq (INCR)."""
        return f"qim:cseq:{self.tag}:{self.tenant_hex}:{self.conv_hex}"

    def inflight(self) -> str:
        """The in-flight ZSET of this conversation's commit bucket (CommitStore)."""
        return inflight_key(self.bucket)

    def unpublished(self) -> str:
        """ZSET, CommitStore: conversation_seq -> commit hash of reserved commits whose
        Outbox record is not yet known durable (added by the reserve, removed by
        mark_committed; docs/decisions/0017)."""
        return f"qim:unpub:{self.tag}:{self.tenant_hex}:{self.conv_hex}"

    def unpublished_owners(self) -> str:
        """HASH, CommitStore: writer token -> count of its commits in `unpublished`."""
        return f"qim:unpubown:{self.tag}:{self.tenant_hex}:{self.conv_hex}"

    def last_id(self) -> str:
        """STRING, CommitStore: message_id (16 bytes) of the conversation's newest
        reservation; a reserve below it is refused (created_at never decreases)."""
        return f"qim:clast:{self.tag}:{self.tenant_hex}:{self.conv_hex}"

    # --- MessageStore (written inside the CommitStore's reserving scripts) ------------
    def record(self, message_id: bytes) -> str:
        """STRING, MessageStore: the canonical MessageRecord of `message_id`."""
        return f"qim:msg:{self.tag}:{message_id.hex()}"

    def history(self) -> str:
        """ZSET, MessageStore: message_id scored by conversation_seq (existing messages)."""
        return f"qim:hist:{self.tag}:{self.tenant_hex}:{self.conv_hex}"

    def state(self, message_id: bytes) -> str:
        """STRING, MessageStore: RECALLED | DELETED once recalled or deleted (absent:
        NORMAL); read by mailbox pulls to drop inline bodies."""
        return f"qim:msgst:{self.tag}:{message_id.hex()}"

    # --- ArchiveStateStore (docs/decisions/0023-archive-tier.md) -------------------------
    def floor(self) -> str:
        """STRING, ArchiveStateStore: the hot floor: the highest conversation_seq trimmed
        from Redis (every message at or below it is read from CQL); only moves up, in the
        same script that deletes what it covers."""
        return f"qim:histfloor:{self.tag}:{self.tenant_hex}:{self.conv_hex}"

    def archived_states(self) -> str:
        """ZSET, ArchiveStateStore (written by CommitStore's state_change): recalls and
        deletes of messages already trimmed, member = message_id hex, score = seq of the
        CONTROL message announcing it; their state keys are dropped once the trim passes
        that seq (the archive holds the state by then)."""
        return f"qim:archstate:{self.tag}:{self.tenant_hex}:{self.conv_hex}"

    def retention(self) -> str:
        """STRING, ArchiveStateStore: the conversation's retention class (absent: default)."""
        return f"qim:retention:{self.tag}:{self.tenant_hex}:{self.conv_hex}"

    def record_prefix(self) -> str:
        """The record key without the message_id hex (for the trim script)."""
        return f"qim:msg:{self.tag}:"

    def state_prefix(self) -> str:
        """The state key without the message_id hex (for the trim script)."""
        return f"qim:msgst:{self.tag}:"

    # --- ReactionStore (docs/decisions/0121) -------------------------------------------
    def reactions(self, message_id: bytes) -> str:
        """HASH, ReactionStore: emoji -> count (> 0) of one message (MessageReactionSummary)."""
        return f"qim:rx:{self.tag}:{message_id.hex()}"

    def reactors(self, message_id: bytes) -> str:
        """SET, ReactionStore: "<user_id>:<emoji>" of every reaction on one message (idempotence)."""
        return f"qim:rxu:{self.tag}:{message_id.hex()}"

    # --- GroupStore (written inside the CommitStore's group_change script) ------------
    def group_meta(self) -> str:
        """HASH, GroupStore: gid, owner, ver (membership_version), count, cat."""
        return f"qim:grp:{self.tag}:{self.tenant_hex}:{self.conv_hex}"

    def group_members(self) -> str:
        """HASH, GroupStore: user_id -> member intervals (qim/stores/intervals.py)."""
        return f"qim:grpmember:{self.tag}:{self.tenant_hex}:{self.conv_hex}"

    def group_snapshot(self, version: int) -> str:
        """STRING, GroupStore: current members at `version` (qim/stores/groups.py form),
        immutable, 8 days."""
        return f"qim:grpsnap:{self.tag}:{self.tenant_hex}:{self.conv_hex}:{version}"


def inflight_key(bucket: int) -> str:
    """ZSET, CommitStore: commit hashes not yet COMMITTED, scored by last update."""
    return "qim:inflight:{b%03d}" % bucket


def parse_commit_key(key: str) -> Optional[tuple[int, int, bytes]]:
    """(tenant, sender_id, client_message_id) of a commit hash key; None when it is not one."""
    parts = key.split(":")
    if len(parts) != 6 or parts[:2] != ["qim", "commit"]:
        return None
    try:
        return int(parts[3], 16), int(parts[4]), bytes.fromhex(parts[5])
    except ValueError:
        return None


def record_key_for(commit_key: str, message_id: bytes) -> str:
    """The record key in the same bucket as `commit_key`."""
    return f"qim:msg:{commit_key.split(':')[2]}:{message_id.hex()}"


# --- ArchiveStateStore (global families) --------------------------------------------
def archive_checkpoint_key() -> str:
    """HASH, ArchiveStateStore: the HistoryArchiver's single-partition Outbox position of
    before Outbox partitions (bind, p0 = next offset); read once to resume partition 0."""
    return "qim:archive:ckpt"


def archive_watermark_key() -> str:
    """STRING, ArchiveStateStore: the archive watermark (ms; only moves forward)."""
    return "qim:archive:watermark"


def trim_queue_key() -> str:
    """ZSET, ArchiveStateStore: "<tenant hex>:<conversation hex>" of conversations with
    archived messages still in Redis, scored by the created_at_ms of the oldest one."""
    return "qim:archive:trimq"


def lease_key(name: str) -> str:
    """STRING, ArchiveStateStore: holder token of the lease `name` (the trimmer), TTL."""
    return f"qim:archive:lease:{name}"


def ucs_pending_key() -> str:
    """ZSET, SessionStore (the archive tier): first registrations not yet in CQL
    user_conversation_state, member = "<tenant hex>:<user>:<conversation hex>:<peer>",
    score = created_at_ms of the registering message."""
    return "qim:ucs:pending"


# --- ClockLeaseStore ------------------------------------------------------------------
def hlc_key(region_id: int, writer_id: int) -> str:
    """STRING, ClockLeaseStore: end of the last clock window leased by (region, writer_id)."""
    return f"qim:hlc:{region_id}:{writer_id}"


def hlc_cluster_key() -> str:
    """STRING, ClockLeaseStore: the highest HLC issue ceiling any writer published (ms)."""
    return "qim:hlc:cluster"


def writer_lease_key(region_id: int, writer_id: int) -> str:
    """STRING, ClockLeaseStore: token of the process holding (region, writer_id), TTL."""
    return f"qim:writer-lease:{region_id}:{writer_id}"


# --- MailboxStore ---------------------------------------------------------------------
def mailbox_key(tenant: int, user_id: int, day: int) -> str:
    """ZSET, MailboxStore: one user's entries of one UTC day of created_at; score = log
    offset, member = mailbox_seq (8 bytes) ‖ event group; expires at the day's end +
    retention."""
    return f"qim:mbx:{tenant:032x}:{user_id}:d{day}"


def days_key(tenant: int, user_id: int) -> str:
    """ZSET, MailboxStore: the day index, member = a day (decimal), score = the highest
    offset in that day, and member `trim`, score = the highest offset ever removed (the
    persisted trim boundary). A sorted set so an append keeps a day's maximum in one
    ZADD GT; a HASH at this key is the layout before, moved in place by the first script
    that meets it (docs/decisions/0064-day-index-sorted-set.md)."""
    return f"qim:mbxdays:{tenant:032x}:{user_id}"


def dp_key(shard: int, dispatch_id: bytes) -> str:
    """HASH, MailboxStore: DispatchProgress of one dispatch (digest, mailbox_seq, offsets)."""
    return f"qim:dp:{{s{shard}}}:{dispatch_id.hex()}"


def dpidx_key(shard: int) -> str:
    """ZSET, MailboxStore: DispatchProgress keys by highest observed offset (GC)."""
    return f"qim:dpidx:{{s{shard}}}"


def wm_key(shard: int) -> str:
    """HASH, MailboxStore: the shard's packed watermark (blob, layout, epoch)."""
    return f"qim:wm:{{s{shard}}}"


# --- SessionStore and ReadPositionStore -----------------------------------------------
def convs_key(tenant: int, user_id: int) -> str:
    """ZSET, SessionStore: conversation_id hex -> created_at_ms of the newest message (GT)."""
    return f"qim:convs:{tenant:032x}:{user_id}"


def peers_key(tenant: int, user_id: int) -> str:
    """HASH, SessionStore: direct conversation_id hex -> the other participant (HSETNX)."""
    return f"qim:convpeer:{tenant:032x}:{user_id}"


def convs_checked_key(tenant: int, user_id: int) -> str:
    """STRING, SessionStore: present once the user's conversation set was checked against
    CQL user_conversation_state (docs/decisions/0065); lost with the set, never expires."""
    return f"qim:convchecked:{tenant:032x}:{user_id}"


def name_key(tenant: int, user_id: int) -> str:
    """STRING, SessionStore: the user's display name (the newest token `name` claim seen)."""
    return f"qim:name:{tenant:032x}:{user_id}"


def read_key(tenant: int, user_id: int) -> str:
    """HASH, ReadPositionStore: conversation_id hex -> read_conversation_seq (forward
    only; also moved by SessionStore's registration of the user's own sends)."""
    return f"qim:read:{tenant:032x}:{user_id}"


def convstate_key(tenant: int, user_id: int) -> str:
    """HASH, ConversationStateStore: conversation_id hex -> "<pinned>:<muted_until>:<hidden_at>:<version>"
    (the user's own choices, docs/decisions/0122; the version, 0157; absent = all zero)."""
    return f"qim:convstate:{tenant:032x}:{user_id}"


def receipts_key(tenant: int, user_id: int) -> str:
    """STRING, ConversationStateStore: "0" while the user turned read receipts off (absent = on)."""
    return f"qim:receipts:{tenant:032x}:{user_id}"


def push_key(tenant: int, user_id: int) -> str:
    """HASH, PushRegistrationStore (docs/decisions/0128): device_id -> PushRegistration
    bytes, "t:<device_id>" -> its token's digest, "v" -> the user's version."""
    return f"qim:push:{tenant:032x}:{user_id}"


# --- RevocationStore ------------------------------------------------------------------
REVOCATION_CHANNEL = "qim:revocations"  # PUBLISH "tenant_hex:user:device:cutoff" to every gateway


def revocation_key(tenant: int, user_id: int, device_id: int) -> str:
    """STRING, RevocationStore: unix seconds; tokens of (user, device) issued at or before
    it are refused (device 0: every device of the user); expires after the longest token
    lifetime (written by `qimctl token revoke`, read by gateways at AUTH)."""
    return f"qim:revoked:{tenant:032x}:{user_id}:{device_id}"


# --- ShardRegistry (docs/decisions/0040-scale-leases-and-fencing.md) -------------------
def registry_node_key(kind: str, node_id: str) -> str:
    """HASH, ShardRegistry: one node lease (inc = incarnation, beat = renewals, exp = lease
    end in registry ms, since, addr, extra)."""
    return f"qim:reg:node:{kind}:{node_id}"


def registry_nodes_key(kind: str) -> str:
    """ZSET, ShardRegistry: node id -> lease end (registry ms) of every node of a kind."""
    return f"qim:reg:nodes:{kind}"


def registry_shard_key(kind: str, shard: int) -> str:
    """HASH, ShardRegistry: one shard lease (node, inc, epoch = owner_epoch, exp, since).
    Never expires as a key: owner_epoch must only grow."""
    return f"qim:reg:shard:{kind}:{shard}"


def session_shard_checkpoint_key(shard: int) -> str:
    """HASH, SessionStore: the durable projection checkpoint of session shard `shard`
    (bind = "<cluster_id>|<topic_id>|<partitions>", p<shard> = next offset of its dispatch
    partition, oe = the owner_epoch of the last owner that fenced it)."""
    return f"qim:session:ckpt:{{s{shard}}}"


def archive_partition_checkpoint_key(partition: int) -> str:
    """HASH, ArchiveStateStore: the HistoryArchiver's position in Outbox partition
    `partition` (bind, p<partition> = next offset, oe = owner_epoch fence)."""
    return f"qim:archive:ckpt:p{partition}"


def archive_partition_watermark_key(partition: int) -> str:
    """STRING, ArchiveStateStore: the archive watermark of one Outbox partition (ms,
    forward only); the archive watermark is the lowest over the partitions."""
    return f"qim:archive:watermark:p{partition}"


def session_epoch_key(tenant: int, user_id: int, device_id: int) -> str:
    """STRING, SessionEpochStore: the last session_epoch given to a login of the device
    (INCR, never expires; docs/decisions/0042-scale-presence.md)."""
    return f"qim:sepoch:{tenant:032x}:{user_id}:{device_id}"


def room_epoch_key() -> str:
    """STRING, RoomEpochStore: the last epoch base a RoomWriter process took (INCR)."""
    return "qim:room:epoch-base"
