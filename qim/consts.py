"""Contract constants, defined once (docs/design.md §3, §4, §11).

Every other module imports these names; the compiled core re-asserts the immutable
ones at import time so a stale build cannot disagree with this file.
"""

# --- identifiers and sequences (docs/design.md §3) ---------------------------------
LANE_COUNT = 64
VIRTUAL_BUCKET_COUNT = 65536
COMMIT_BUCKET_COUNT = 256
DEFAULT_SHARD_COUNT = 64
MAILBOX_EPOCH_BITS = 16
MAILBOX_OFFSET_BITS = 48
MAILBOX_OFFSET_MASK = (1 << MAILBOX_OFFSET_BITS) - 1
MAILBOX_EPOCH_MAX = (1 << 15) - 1  # bit 63 of a mailbox_seq stays clear
ID_LEN = 16  # u128 ids on the wire: 16 bytes big-endian
U63_MAX = (1 << 63) - 1

CONVERSATION_KIND_DIRECT = 1
CONVERSATION_KIND_GROUP = 2
CONVERSATION_KIND_ROOM = 3

# BLAKE3 domains (docs/design.md §3 table)
DOMAIN_DIRECT = b"qim.direct.v1\0"
DOMAIN_GROUP = b"qim.group.v1\0"
DOMAIN_ROOM = b"qim.room.v1\0"
DOMAIN_VBUCKET = b"qim.vbucket.v1\0"
DOMAIN_COMMIT_BUCKET = b"qim.commit-bucket.v1\0"
DOMAIN_DISPATCH = b"qim.group-dispatch.v1\0"
DOMAIN_EVENT = b"qim.event.v1\0"
DOMAIN_CMID = b"qim.cmid.v2\0"  # v2: store nonce in the input (docs/decisions/0016)
DOMAIN_ENDPOINT_SCOPE = b"qim.endpoint-scope.v1\0"

# --- packed watermark (docs/design.md §3) -------------------------------------------
WM_RECORD_LEN = 19
WM_FULL_LEN = WM_RECORD_LEN * LANE_COUNT  # 1216
WM_FLAG_MATERIALIZED = 0x01
WM_FLAG_RECOMPUTED = 0x02
WM_LAYOUT_V1 = 1

# --- frame (docs/design.md §4) --------------------------------------------------------
FRAME_MAGIC = 0x5149
FRAME_VERSION = 1
FRAME_HEADER_LEN = 20
FLAG_COMPRESSED = 0x01
FLAG_MORE = 0x02
FLAG_NEED_ACK = 0x04  # reserved: must be 0 on the wire
FLAGS_KNOWN = FLAG_COMPRESSED | FLAG_MORE
STREAM_WRITE_CHUNK_BYTES = 64 * 1024
MAX_FRAME_BODY = 4 * 1024 * 1024
WS_PATH = "/qim/ws"  # the one path the gateway upgrades to WebSocket (docs/protocol.md "WebSocket")
# A WebSocket Origin allow-list entry (QIM_GATEWAY_WS_ORIGINS): scheme://host, an
# optional :port, or :* for any port (qim/net/ws_handshake.py origin_patterns)
WS_ORIGIN_PATTERN = r"https?://[A-Za-z0-9.\-]+(:(\d{1,5}|\*))?"
MAX_MESSAGE_BODY = 1024 * 1024
MAX_CUSTOM_TYPE_BYTES = 64
# Replies, mentions, edits (docs/decisions/0120): mentioned users per send; groups above
# MENTION_ALL_OPEN_MEMBERS current members take mention_all from the owner only; the
# quoted preview of a replied TEXT message, in characters.
MAX_MENTIONS = 50
MENTION_ALL_OPEN_MEMBERS = 20
REPLY_PREVIEW_CHARS = 80
# edits per message: a recall rewrites every edit notice in one script call (bounded keys)
MAX_EDITS_PER_MESSAGE = 50

# --- message types (docs/design.md §4; raw values fixed) ------------------------------
MESSAGE_TYPE_UNKNOWN = 0
MESSAGE_TYPE_TEXT = 1
MESSAGE_TYPE_MEDIA = 2
MESSAGE_TYPE_CUSTOM = 3
MESSAGE_TYPE_CONTROL = 4

# --- event groups (docs/design.md §5, seed 000 "事件组硬上限") --------------------------
EVENT_GROUP_MAX_EVENTS = 8
EVENT_GROUP_MAX_BYTES = 8 * 1024
INLINE_BODY_BUDGET_BYTES = 8 * 1024

# --- groups (docs/design.md §7, §11) ---------------------------------------------------
GROUP_MAX_MEMBERS = 1000
MEMBER_INTERVALS_MAX = 16  # member intervals kept per (group, user); older ones are dropped
MEMBERSHIP_EVENT_BROADCAST_MAX = 500
RECALL_WINDOW_MS_DEFAULT = 24 * 3600 * 1000
HISTORY_PAGE_MAX_BYTES = 512 * 1024
HISTORY_PAGE_DEFAULT_LIMIT = 50
HISTORY_PAGE_MAX_LIMIT = 200
UNREAD_EXACT_WINDOW = 200
SESSION_HEAD_BODY_MAX = 4096  # larger head bodies are left out of SESSION_LIST_BATCH

# --- chatrooms (docs/design.md §7, §13; docs/decisions/0045-rooms-phase-one-in-process-ring.md) --------
# Rooms are hashed to room shards (the unit a RoomWriter owns: byte 1 of the room's
# conversation_id); node i of n RoomWriters serves the shards s with s mod n == i.
ROOM_SHARD_COUNT = 256
ROOM_RING_EVENTS_DEFAULT = 1000  # QIM_ROOM_RING_EVENTS: events a room's replay ring holds
ROOM_RING_EVENTS_MAX = 100_000
ROOM_RING_BYTES_DEFAULT = 1024 * 1024  # QIM_ROOM_RING_BYTES: encoded bytes of those events
ROOM_RING_BYTES_MAX = 3 * 1024 * 1024  # a whole ring replays in one ROOM_JOINED (< the 4 MiB frame)
ROOM_IDLE_S_DEFAULT = 600  # QIM_ROOM_IDLE_S: a room without members this long is dropped (its ring too)
ROOM_DEDUP_ENTRIES = 4096  # per room: posts whose ROOM_ACK a retry gets back (client_message_id)
ROOM_DEDUP_WINDOW_S = 600  # and for at most this long
ROOMS_PER_CONNECTION_DEFAULT = 64  # QIM_ROOM_MAX_PER_CONNECTION: rooms one connection may join
ROOM_RECENT_MAX = 1000  # JoinRoom.recent is capped here (and by the ring)
# Outbound bytes of one member connection above which the gateway drops its room events
# (then a ROOM_EVENTS with `rejoin` once it drained), and of one gateway link at the
# RoomWriter (the same for all that gateway's members of the room).
ROOM_MEMBER_QUEUE_BYTES = 2 * 1024 * 1024
ROOM_LINK_QUEUE_BYTES = 16 * 1024 * 1024
ROOM_EPOCH_GENERATION_BITS = 32  # room_epoch = epoch base << 32 | ring generation (bit 63 clear)

# --- session list (docs/design.md §6, §11; seed 000 会话列表) ------------------------------
SESSION_SNAPSHOT_TTL_MS = 5 * 60 * 1000
SESSION_PAGE_DEFAULT_LIMIT = 50
SESSION_PAGE_MAX_LIMIT = 200
PROFILES_PAGE_MAX = 200  # user ids per PULL_PROFILES (docs/protocol.md "Names")
NAME_MAX_BYTES = 64  # a display name (token claim `name`) or a group title, in UTF-8 bytes
SESSION_CONSUME_BATCH = 512  # dispatch records per durable projection batch
# registrations per session_project script call (one durable batch, one round trip);
# bounds how long one script holds Redis (a larger batch sends the rest pipelined first)
SESSION_PROJECT_MAX_REGS = 2048
SESSION_PROJECTION_QUEUE = 65536  # low-latency projections waiting for Redis; past it they drop
# dispatch records the low-latency path registered, remembered until the durable consumer
# reaches them and skips them (qim/services/session/projected.py, docs/decisions/0167):
# the durable consumer trails by about one fetch wait (0.5 s), a few thousand records
# at the group step's rate; one forgotten is written twice, as before the decision
SESSION_PROJECTED_REMEMBERED = 65536

# --- defaults (docs/design.md §11) ----------------------------------------------------
FANOUT_BATCH_DEFAULT = 512
FANOUT_BATCH_MAX = 1024
# dispatch records a FanoutCoordinator keeps in flight while it reads on (batches settled
# in order; docs/decisions/0162): a direct record read during a group's burst does not
# wait for the batches before it to be delivered. Below librdkafka's local queue
# (queue.buffering.max.messages, 100,000), which refuses a produce past it.
FANOUT_WINDOW_DISPATCHES = 32768
MAILBOX_SHARD_FIFO = 128
MAILBOX_GLOBAL_PERMIT = 64
# turns at once in a node on the Redis MailboxStore (docs/decisions/0165): Redis runs one
# call at a time, so calls past a few only queue there (a fused call sat 381 ms in that
# queue with 64 in flight during the group step); 8 keep it busy, and a direct record's
# call waits behind at most 7 (4: the drain fell and the backlog grew; 16: no better)
MAILBOX_REDIS_TURNS = 8
# of those, turns of shards holding no direct record at once (docs/decisions/0148): few
# enough that a direct record's call waits behind a handful, enough to keep Redis busy
MAILBOX_BULK_TURNS = 4
# A shard worker materializes the records queued in its FIFO together, in one fused call
# (docs/decisions/0067): at most this many records and this many bytes of record values
# (about 8 bytes a recipient plus an inline body), so one call holds Redis for a few ms
# at most. A record alone goes at once: the batch never waits for more.
MAILBOX_BATCH_RECORDS = 32
MAILBOX_BATCH_BYTES = 64 * 1024
WRITER_INFLIGHT_DEFAULT = 1024
WRITER_INFLIGHT_MAX = 8192
# Internal requests a mailbox or session node runs at once per gateway connection (past it
# the node stops reading that connection: TCP back-pressure, nothing dropped).
INTERNAL_RPC_INFLIGHT = 1024
COMMIT_HELPER_TTL_MS = 2 * 3600 * 1000
# Group changes and recall/delete keep their commit state as long as the SDK may retry a
# pending operation (docs/design.md §11 pending max age): a retry replays the original reply.
COMMIT_OP_HELPER_TTL_MS = 24 * 3600 * 1000
# Unpublished commits of a conversation a reserve hands back to be published first
# (a crashed writer's reservations; docs/decisions/0017-writer-order-and-time.md).
UNPUBLISHED_SCAN_MAX = 1024
HLC_WINDOW_MS = 60_000
HLC_RENEW_BEFORE_MS = 20_000
WRITER_ID_LEASE_MS = 60_000
# HLC issue ceiling (docs/decisions/0017): a writer publishes now + this to the cluster-wide
# high-water every HLC_CEILING_PERIOD_S and never issues an id above its published
# ceiling; a new window of any writer starts above every ceiling ever published. 5 s: an
# event loop stalled for seconds on a busy 2-core host still issues ids, and a restarted
# writer starts at most this far ahead of wall time.
HLC_CEILING_SLACK_MS = 5_000
HLC_CEILING_PERIOD_S = 0.5
DAY_MS = 86_400_000
# Mailbox retention (QIM_MAILBOX_RETENTION_MS; docs/design.md §8 "mailbox 7 days"): entries
# older than this are never served; a non-zero cursor behind one gets CURSOR_EXPIRED.
MAILBOX_RETENTION_MS_DEFAULT = 7 * DAY_MS
MAILBOX_RETENTION_MS_MIN = 1_000
MAILBOX_RETENTION_MS_MAX = 3650 * DAY_MS
# The per-user day index (and its persisted trim boundary) outlives the newest bucket
# by this much, so a device idle that long still gets CURSOR_EXPIRED, not an empty page.
MAILBOX_INDEX_GRACE_MS = 30 * DAY_MS
MAILBOX_PAGE_MAX_ENTRIES = 256
MAILBOX_PAGE_MAX_BYTES = 512 * 1024
SEND_ACK_PROBE_S = 3.0
HEARTBEAT_START_S = 60.0

# --- tokens and limits of the gateway (docs/decisions/0021; docs/operations.md "Tokens and keys") ---
TOKEN_MAX_BYTES = 8192  # a JWT of this deployment is ~300 bytes; longer is refused as malformed
TOKEN_AUDIENCE_DEFAULT = "qim"  # QIM_TOKEN_AUDIENCE
TOKEN_ISSUER_DEFAULT = "qim-dev"  # QIM_TOKEN_ISSUER; `qimctl token` always issues as this
TOKEN_LEEWAY_S_DEFAULT = 5  # clock difference allowed between issuer and gateway
TOKEN_MAX_TTL_S_DEFAULT = 86_400  # QIM_TOKEN_MAX_TTL_S: exp - iat above this is refused
DEV_TOKEN_TTL_S = 3600  # `qimctl token --ttl` default
# Send-rate token buckets (QIM_RATE_*): generous enough that qim-loadgen rate at 1,000
# msg/s over 20 pairs (50 msg/s per sender connection) and `make demo` never meet them.
RATE_CONN_PER_S_DEFAULT = 200
RATE_CONN_BURST_DEFAULT = 400
RATE_USER_PER_S_DEFAULT = 400
RATE_USER_BURST_DEFAULT = 800
MAX_CONNECTIONS_PER_USER_DEFAULT = 16
# retry-after told to an AUTH over the connection cap: a slot frees only when another
# device of the user disconnects, so the device should not come back every second
CONNECTION_CAP_RETRY_AFTER_MS = 60_000
# the heartbeat the gateway tells clients (AUTH_OK, PONG): a client sends a frame at least
# every half of it (a PING when idle); a connection silent for 1.5 of it is closed
# (qim/services/gateway/keepalive.py; docs/decisions/0077)
HEARTBEAT_S_DEFAULT = 60
# login admission (qim/services/gateway/login.py; docs/decisions/0078): AUTHs verified at
# once, and AUTHs waiting for one of those slots before more are refused with a hint
LOGINS_INFLIGHT_DEFAULT = 32
LOGIN_QUEUE_DEFAULT = 256

# --- several nodes of each kind (docs/design.md §13; docs/decisions/0040-scale-leases-and-fencing.md) ---
SHARD_LEASE_MS_DEFAULT = 10_000  # QIM_SHARD_LEASE_MS; renewed every quarter (QIM_SHARD_RENEW_MS)
# Groups whose (membership_version, member count) a writer keeps to plan sends without a
# read (qim/services/writer/planner.py; the reserve checks them): ~100 B each.
GROUP_PLAN_CACHE_GROUPS = 16_384

OUTBOX_TOPIC = "qim.outbox"
DISPATCH_TOPIC = "qim.dispatch"
# PresenceEntry records, compacted, partition = the user's MailboxShard (docs/decisions/0042)
PRESENCE_TOPIC = "qim.presence"
PRESENCE_TTL_MS_DEFAULT = 3_600_000  # QIM_PRESENCE_TTL_MS: an entry not renewed stops counting
# broker/topic record limit: a 1 MiB body plus envelope fits with room to spare
KAFKA_MAX_RECORD_BYTES = 8 * 1024 * 1024
# Every QIM topic's configuration. LogAppendTime: the broker stamps each record with its
# own clock, so no producer's clock decides a record's retention or gets it refused
# (with CreateTime, Kafka 4 refuses a record stamped more than
# message.timestamp.after.max.ms = 1 h ahead of the broker: a writer whose clock runs
# 2 h ahead could publish nothing; docs/decisions/0032).
KAFKA_TOPIC_CONFIG = {"max.message.bytes": str(KAFKA_MAX_RECORD_BYTES),
                      "message.timestamp.type": "LogAppendTime"}

# --- archive tier (docs/design.md §5 step 7, §8; docs/decisions/0023-archive-tier.md) ---
# Hot window: history stays in Redis at least this long (QIM_HISTORY_HOT_WINDOW_MS).
HISTORY_HOT_WINDOW_MS_DEFAULT = 7 * DAY_MS
# Retention classes of a conversation's history (QIM_DEFAULT_HISTORY_RETENTION_DAYS for
# "default"); a CQL row's TTL is what is left of it after created_at.
HISTORY_RETENTION_DAYS_DEFAULT = 30
HISTORY_RETENTION_DAYS_MAX = 3650
RETENTION_DEFAULT, RETENTION_EPHEMERAL_24H, RETENTION_COMPLIANCE_HOLD = "default", "ephemeral_24h", "compliance_hold"
RETENTION_CLASSES = (RETENTION_DEFAULT, RETENTION_EPHEMERAL_24H, RETENTION_COMPLIANCE_HOLD)
EPHEMERAL_RETENTION_MS = DAY_MS
# The trimmer deletes only what is older than min(now - hot window, archive watermark -
# recovery window (QIM_OUTBOX_RETENTION_MS) - slack (clock skew between hosts)).
OUTBOX_RECOVERY_WINDOW_MS_DEFAULT = 7 * DAY_MS
HISTORY_TRIM_SLACK_MS_DEFAULT = 60_000
HISTORY_TRIM_PERIOD_MS_DEFAULT = 5_000
HISTORY_TRIM_BATCH = 512  # messages of one conversation per trim step
HISTORY_TRIM_CONVERSATIONS = 256  # conversations looked at per trim step
HISTORY_TRIM_BUDGET_S = 2.0  # work per trim period, then the next period
ARCHIVE_BATCH_DEFAULT = 512  # Outbox records per archiver batch
ARCHIVE_BATCH_MAX = 4096
# conversation_seq bucket of a CQL history partition: (tenant, conversation, seq >> 14),
# so a partition holds at most 16384 messages (a conversation may hold millions)
ARCHIVE_BUCKET_BITS = 14
CQL_WRITE_CONCURRENCY = 64  # CQL statements of one archiver batch in flight at once
# history index rows of one partition (conversation, bucket) written as one UNLOGGED batch
# (one mutation at the replica instead of one request each), at most this many rows or
# body bytes per batch (Cassandra warns past 5 KiB of batch, but not for one partition)
CQL_PARTITION_BATCH_ROWS = 64
CQL_PARTITION_BATCH_BYTES = 256 * 1024
CQL_READ_CONCURRENCY = 64  # point reads of one call in flight at once (mailbox fills, audits)
SCYLLA_KEYSPACE_DEFAULT = "qim"
SCYLLA_SCHEMA_VERSION = 2  # what `qimctl schema apply` installs and services require
# The CQL MailboxStore (docs/decisions/0102): its dispatch identity rows live 31 days; start
# refuses a dispatch log retention (QIM_DISPATCH_LOG_RETENTION_MS) that, with the replay
# window (how late a record may still be replayed after it left the log's head), reaches it.
MAILBOX_IDENTITY_TTL_MS = 31 * DAY_MS
DISPATCH_LOG_RETENTION_MS_DEFAULT = 7 * DAY_MS  # Kafka's default retention.ms
DISPATCH_REPLAY_WINDOW_MS = DAY_MS

assert LANE_COUNT & (LANE_COUNT - 1) == 0
assert VIRTUAL_BUCKET_COUNT == 1 << 16
assert MAILBOX_EPOCH_BITS + MAILBOX_OFFSET_BITS == 64

# --- per-message costs (docs/perf-profile.md; docs/decisions/0026) -------------------
# Script calls of one event-loop iteration sent as one pipeline (group commit of the
# writer's reserve and mark_committed): at most this many commands per pipeline.
REDIS_COALESCE_MAX_CALLS = 256
# A batch of script calls on the lean pipelined connection (qim/infra/redis/pipe.py,
# docs/decisions/0068) unanswered this long fails with the connection (outcome unknown:
# the callers repeat or report it) when the client sets no socket_timeout: longer than
# the machine stalls seen on a loaded 2-core VM (1-10 s), short enough that a connection
# which silently died does not hold every caller for ever.
REDIS_PIPE_TIMEOUT_S = 30.0
# Producers (writer Outbox, fanout dispatch): linger before a batch leaves, and ONE
# produce request in flight per broker connection: the broker answers the requests of
# one connection one at a time anyway (and appends to one partition in series), so what
# is enqueued while a request is in flight leaves in the next one instead of as another
# request queued behind it: an idle send leaves at once, a busy stream batches by
# itself (docs/decisions/0053-kafka-idle-and-batching.md).
KAFKA_PRODUCER_LINGER_MS = 1
KAFKA_PRODUCER_IN_FLIGHT = 1
# The producer's poll thread blocks this long at most per poll: it wakes at once on any
# delivery report, so this only bounds idle wake-ups (and how long close() may wait).
KAFKA_PRODUCER_POLL_S = 1.0
# Consumers: the broker holds an empty fetch at most this long and answers it as soon as
# one record arrives (fetch.min.bytes = 1), so this bounds only the idle fetch traffic:
# with static assignment and no fetch sessions in librdkafka, every fetch names every
# assigned partition (64 for the mailbox and the session), and at 20 ms four idle
# consumers cost the broker ~60 ms of CPU a second (docs/perf-profile.md, "Idle").
KAFKA_CONSUMER_FETCH_WAIT_MS = 500
# Consumers whose latency no user waits on (the session's durable projection, the
# archiver): the broker answers a fetch once this many bytes are there or the wait is
# over, so a busy log is read in a few large batches instead of one fetch per append
# (and an idle one costs no more fetches than the others').
KAFKA_BATCH_FETCH = {"fetch.min.bytes": 256 * 1024, "fetch.wait.max.ms": KAFKA_CONSUMER_FETCH_WAIT_MS}
# A broker offsets query (ListOffsets, qim/infra/kafka/offsets.py) is given up after
# KAFKA_OFFSETS_TIMEOUT_S, tried in attempts of at most KAFKA_OFFSETS_ATTEMPT_S, each on a
# new client with fresh metadata. A healthy answer takes milliseconds; while a killed
# broker is still named a partition's leader, librdkafka's admin client reconnects to it
# with no backoff for as long as one request waits (≈10,000 connects/s, most of a core
# per process), so the attempt's length bounds that spin and the next attempt finds the
# new leader (docs/decisions/0066-offsets-query-timeout.md).
KAFKA_OFFSETS_TIMEOUT_S = 10.0
KAFKA_OFFSETS_ATTEMPT_S = 2.0
# A consumer asks for a topic's partition leaders before it is assigned partitions of it
# (qim/infra/kafka/consumer.py `_leaders_then`): at most this long, then it is assigned anyway.
KAFKA_ASSIGN_METADATA_S = 1.0
# How long a service's consume call waits for a first record before it returns empty
# (it returns on the first record): only the idle loop's wake-ups.
KAFKA_CONSUME_WAIT_S = 1.0
# The fanout commits its Outbox position at most this often while busy (at once after an
# idle spell); a crash replays at most this much more (docs/decisions/0026).
FANOUT_COMMIT_INTERVAL_S = 0.1
