"""Every QIM_* variable, one row each: name, type, default, who reads it and what it means
(docs/operations.md "Configuration reference" is rendered from this table by
`render_reference()` and checked against it by tests/config/test_variables.py, which
also checks that each service's configuration reads exactly the rows that name it and
that no QIM_* name in the code is missing here).

Rows of listeners, metrics addresses, address lists and node index/count are derived
from the service table (qim/topology.py), never written twice. Readers are service
names of that table, or `qimctl`, `clients` (qim-loadgen, qim-desktop, the SDK's
helpers, examples), `dev` (qim-dev, qim-web), `all` (every service process).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from qim.consts import (
    DEFAULT_SHARD_COUNT,
    HEARTBEAT_S_DEFAULT,
    LOGIN_QUEUE_DEFAULT,
    LOGINS_INFLIGHT_DEFAULT,
    MAX_CONNECTIONS_PER_USER_DEFAULT,
    PRESENCE_TTL_MS_DEFAULT,
    RATE_CONN_BURST_DEFAULT,
    RATE_CONN_PER_S_DEFAULT,
    RATE_USER_BURST_DEFAULT,
    RATE_USER_PER_S_DEFAULT,
    ROOM_IDLE_S_DEFAULT,
    ROOM_RING_BYTES_DEFAULT,
    ROOM_RING_EVENTS_DEFAULT,
    ROOMS_PER_CONNECTION_DEFAULT,
    SHARD_LEASE_MS_DEFAULT,
    TOKEN_AUDIENCE_DEFAULT,
    TOKEN_ISSUER_DEFAULT,
    TOKEN_LEEWAY_S_DEFAULT,
    TOKEN_MAX_TTL_S_DEFAULT,
    WRITER_INFLIGHT_DEFAULT,
)
from qim.topology import (
    ARCHIVER,
    FANOUT,
    GATEWAY,
    MAILBOX,
    MEDIA,
    MODERATION,
    MODULO,
    NOTIFY,
    QIMCTL,
    ROOM,
    SERVICES,
    SESSION,
    WRITER,
    dials,
    engine_readers,
    processes,
)

ALL, CLIENTS, DEV = "all", "clients", "dev"
# derived from the service table (hand lists came back after the RoomWriter: issue 36)
_RPC = tuple(n for n, s in SERVICES.items() if s.serves)  # the services with an internal certificate
_LEASED = tuple(n for n, s in SERVICES.items() if s.leases)  # the kinds holding ShardRegistry leases (qim/config/registry.py)
_ENGINES = engine_readers()  # the services reading the shared engine variables (qim/config/common.py)
_CQL = (*_ENGINES, QIMCTL)  # every service reads the tier (qim/config/common.py) even when it has no CQL work


@dataclass(frozen=True)
class Var:
    """One variable: `type` as an operator reads it ("int 1..65536", "addr", "flag"...),
    `default` ("required", "unset" or the value), `readers` (module doc), `meaning`."""

    name: str
    type: str
    default: str
    readers: tuple[str, ...]
    meaning: str


def _v(name: str, type: str, default: object, readers: tuple[str, ...] | str, meaning: str) -> Var:
    return Var(name, type, str(default), (readers,) if isinstance(readers, str) else tuple(readers), meaning)


_WRITTEN: tuple[Var, ...] = (
    # shared by the services (qim/config/common.py)
    _v("QIM_REDIS_ADDR", "addr", "required", (*_ENGINES, ROOM, QIMCTL), "the commit Redis (host:port)"),
    _v("QIM_REDIS_CORE_ADDRS", "addrs", "QIM_REDIS_ADDR", (*_ENGINES, QIMCTL),
       "the core Redis instances (commit buckets, contiguous ranges; the first holds keys of no bucket)"),
    _v("QIM_REDIS_MAILBOX_ADDRS", "addrs", "QIM_REDIS_ADDR", (*_ENGINES, QIMCTL),
       "the mailbox Redis instances (MailboxShard s on instance s mod n, with its users' session state)"),
    _v("QIM_KAFKA_BOOTSTRAP", "text", "required", (*_ENGINES, QIMCTL), "Kafka-API bootstrap servers"),
    _v("QIM_MAILBOX_SHARD_COUNT", "int 1..65536, power of two", DEFAULT_SHARD_COUNT, (*_ENGINES, QIMCTL),
       "mailbox shards = partitions of qim.dispatch, validated identically everywhere"),
    _v("QIM_TENANT_ID", "u128", 0, (*_ENGINES, ROOM, QIMCTL), "tenant of this deployment"),
    _v("QIM_REDIS_ALLOW_UNSAFE_DEV", "flag", 0, (*_ENGINES, ROOM), "accept a Redis without AOF fsync (development only)"),
    _v("QIM_MAX_MESSAGE_BODY", "int 1..1048576", 1048576, (GATEWAY, WRITER, ROOM), "body limit in bytes"),
    _v("QIM_SEND_POLICY", "module:callable", "unset", (WRITER, ROOM),
       "the send policy every direct, group and room send passes before it commits; empty: accept all "
       "(docs/decisions/0099)"),
    _v("QIM_MODERATION_WEBHOOK_URL", "URL", "unset", (WRITER, ROOM),
       "the before-send moderation webhook (QIM_SEND_POLICY=qim.policy.webhook:policy; docs/decisions/0114)"),
    _v("QIM_MODERATION_WEBHOOK_SECRET", "text, 16+ characters", "required with the URL", (WRITER, ROOM),
       "HMAC-SHA256 key of the webhook requests' X-QIM-Signature"),
    _v("QIM_MODERATION_WEBHOOK_CA_FILE", "path", "the system's CAs", (WRITER, ROOM),
       "CA bundle verifying the webhook's TLS certificate (a private CA)"),
    _v("QIM_MODERATION_SYNC_TIMEOUT_MS", "int 10..900", 500, (WRITER, ROOM),
       "the webhook's answer deadline per send (a concurrency slot's wait included); past it the fail policy decides"),
    _v("QIM_WEBHOOK_FAIL_POLICY", "open, closed or kind=mode,...", "closed", (WRITER, ROOM),
       "what a send gets when the webhook gives no answer, per kind direct/group/room (open: accept; closed: refuse)"),
    _v("QIM_MODERATION_WEBHOOK_CONCURRENCY", "int 1..4096", 64, (WRITER, ROOM),
       "webhook requests in flight per process (more wait, within the timeout)"),
    _v("QIM_MODERATION_BREAKER_FAILURES", "int 1..1000", 5, (WRITER, ROOM),
       "consecutive webhook failures that open its circuit breaker"),
    _v("QIM_MODERATION_BREAKER_OPEN_MS", "int 100..600000", 5000, (WRITER, ROOM),
       "how long the breaker stays open (every send: no answer) before one trial request"),
    _v("QIM_WRITER_REQUEST_INFLIGHT_LIMIT", "int 1..8192", WRITER_INFLIGHT_DEFAULT, (GATEWAY, WRITER),
       "requests in flight per connection to a writer"),
    # every process (qim/app/run.py, qim/_core)
    _v("QIM_LOG_LEVEL", "DEBUG|INFO|WARNING|ERROR", "INFO", ALL, "log level"),
    _v("QIM_NODE_NAME", "text", "the service name", ALL, "node name in every log line (`node=`)"),
    _v("QIM_LOG_TRACE", "flag", 0, ALL, "per-message stage lines (`qim.trace`, DEBUG) with their trace id"),
    _v("QIM_KAFKA_DEBUG", "text", "", ALL, "librdkafka debug contexts for every Kafka client (e.g. `broker,metadata`; diagnosis only)"),
    _v("QIM_EVENT_LOOP", "uvloop|asyncio", "uvloop", ALL, "event loop"),
    _v("QIM_PUREPYTHON", "flag", 0, ALL, "pure-Python twins of qim._core (tests only)"),
    _v("QIM_FAULT_INJECTION", "flag", 0, (WRITER, MAILBOX, FANOUT, ARCHIVER), "allow a *_FAULT_POINT (crash tests, loopback only)"),
    _v("QIM_METRICS_TLS_CERT", "path", "unset", ALL, "HTTPS on /metrics and /healthz with this certificate (TLS 1.3)"),
    _v("QIM_METRICS_TLS_KEY", "path", "unset", ALL, "its key"),
    _v("QIM_METRICS_CLIENT_CA", "path", "unset", ALL, "with the two above: scrapers must present a certificate of this CA"),
    # TLS (qim/config/tls.py)
    _v("QIM_GATEWAY_TLS_CERT", "path", "required", GATEWAY, "client-port certificate chain (TLS 1.3)"),
    _v("QIM_GATEWAY_TLS_KEY", "path", "required", GATEWAY, "its key"),
    _v("QIM_GATEWAY_PLAINTEXT_DEV", "flag", 0, GATEWAY, "plaintext client port on a loopback address (development)"),
    _v("QIM_INTERNAL_CA", "path", "required", (*_RPC, QIMCTL), "CA bundle of service certificates"),
    _v("QIM_INTERNAL_TLS_CERT", "path", "required", _RPC, "this process's service certificate (qim://service/NAME)"),
    _v("QIM_INTERNAL_TLS_KEY", "path", "required", _RPC, "its key"),
    _v("QIM_INTERNAL_PLAINTEXT_DEV", "flag", 0, _RPC, "plaintext internal RPC, loopback only (development)"),
    _v("QIM_GATEWAY_WS_ORIGINS", "origins", "unset (no browser)", GATEWAY, "browser origins allowed to open a WebSocket"),
    # gateway: tokens and limits
    _v("QIM_TOKEN_PUBLIC_KEYS", "paths", "unset", (GATEWAY, MEDIA), "PEM public keys trusted by kid (this or QIM_TOKEN_JWKS)"),
    _v("QIM_TOKEN_JWKS", "path or http(s) URL", "unset", GATEWAY, "JWKS document of the token service's keys, by kid"),
    _v("QIM_TOKEN_JWKS_REFRESH_S", "int 5..86400", 300, GATEWAY, "how often the JWKS is read again"),
    _v("QIM_TOKEN_AUDIENCE", "text", TOKEN_AUDIENCE_DEFAULT, (GATEWAY, MEDIA, CLIENTS), "`aud` every token must carry"),
    _v("QIM_TOKEN_ISSUER", "text", TOKEN_ISSUER_DEFAULT, (GATEWAY, MEDIA), "`iss` every token must carry"),
    _v("QIM_TOKEN_LEEWAY_S", "int 0..300", TOKEN_LEEWAY_S_DEFAULT, (GATEWAY, MEDIA), "clock difference allowed for exp/nbf/iat"),
    _v("QIM_TOKEN_MAX_TTL_S", "int 60..2592000", TOKEN_MAX_TTL_S_DEFAULT, (GATEWAY, MEDIA), "longest token lifetime accepted"),
    _v("QIM_AUTH_TIMEOUT_MS", "int 100..600000", 10000, GATEWAY, "a connection not authenticated by then is closed"),
    _v("QIM_RATE_CONN_PER_S", "int 0..1000000", RATE_CONN_PER_S_DEFAULT, GATEWAY, "per-connection refill (0 = no limit)"),
    _v("QIM_RATE_CONN_BURST", "int 1..1000000", RATE_CONN_BURST_DEFAULT, GATEWAY, "per-connection bucket"),
    _v("QIM_RATE_USER_PER_S", "int 0..1000000", RATE_USER_PER_S_DEFAULT, GATEWAY, "per-user refill (0 = no limit)"),
    _v("QIM_RATE_USER_BURST", "int 1..1000000", RATE_USER_BURST_DEFAULT, GATEWAY, "per-user bucket"),
    _v("QIM_MAX_CONNECTIONS_PER_USER", "int 1..65536", MAX_CONNECTIONS_PER_USER_DEFAULT, GATEWAY,
       "one user's connections to one gateway"),
    _v("QIM_GATEWAY_HEARTBEAT_S", "int 2..600", HEARTBEAT_S_DEFAULT, GATEWAY,
       "told to clients (PING at least every half); a connection silent for 1.5 of it is closed"),
    _v("QIM_GATEWAY_LOGINS_INFLIGHT", "int 1..10000", LOGINS_INFLIGHT_DEFAULT, GATEWAY, "AUTHs verified at once"),
    _v("QIM_GATEWAY_LOGIN_QUEUE", "int 0..1000000", LOGIN_QUEUE_DEFAULT, GATEWAY,
       "AUTHs waiting for a slot; past it an AUTH gets UNAVAILABLE with retry_after_ms"),
    # writer
    _v("QIM_WRITER_ID", "int 0..65535", 0, WRITER, "0 = lease one"),
    _v("QIM_REGION_ID", "int 0..65535", 0, WRITER, "region bits of message ids"),
    _v("QIM_COMMIT_RECOVERY_STALE_MS", "int 100..3600000", 5000, WRITER, "a pending commit older than this is recovered"),
    _v("QIM_RECALL_WINDOW_MS", "int 0..2592000000", 86400000, WRITER, "how long a sender may recall"),
    _v("QIM_CLOCK_SKEW_MS", "int ±86400000", 0, WRITER, "shift of the writer's clock (tests only, loopback)"),
    _v("QIM_WRITER_FAULT_POINT", "name", "unset", WRITER, "crash point (tests only)"),
    # mailbox, session, fanout
    _v("QIM_DISPATCH_PROGRESS_GC_SAFETY_MS", "int ms", 0, MAILBOX, "dispatch-progress GC safety (0 = GC off)"),
    _v("QIM_MAILBOX_RETENTION_MS", "int 1000..3650 days", 604800000, MAILBOX, "entries older are not served"),
    _v("QIM_MAILBOX_OVERTAKE", "flag", 1, MAILBOX, "direct records overtake a shard's group backlog (Redis store; decisions 0142, 0165)"),
    _v("QIM_MAILBOX_FAULT_POINT", "name", "unset", MAILBOX, "crash point (tests only)"),
    _v("QIM_SESSION_SNAPSHOT_TTL_MS", "int 0..3600000", 300000, SESSION, "session-list snapshot lifetime"),
    _v("QIM_FANOUT_BATCH_SIZE", "int 1..1024", 512, FANOUT, "Outbox records per fanout batch"),
    _v("QIM_FANOUT_FAULT_POINT", "name", "unset", FANOUT, "crash point (tests only)"),
    # the ShardRegistry (qim/config/registry.py; docs/decisions/0040-scale-leases-and-fencing.md)
    _v("QIM_NODE_ID", "1-128 of A-Z a-z 0-9 . _ : @ -", "service@listen address", _LEASED,
       "this node's id, unique among the nodes of its kind (a second node with it refuses to start)"),
    _v("QIM_REGISTRY_REDIS_ADDR", "addr", "QIM_REDIS_ADDR", _LEASED + (NOTIFY,), "the registry's Redis"),
    _v("QIM_SHARD_LEASE_MS", "int 500..600000", SHARD_LEASE_MS_DEFAULT, _LEASED,
       "how long a node's leases last without renewal (takeover time is about this)"),
    _v("QIM_SHARD_RENEW_MS", "int 50..300000, at most half the lease", "a quarter of the lease", _LEASED,
       "how often leases are renewed"),
    _v("QIM_PRESENCE_TTL_MS", "int 10000..2592000000", PRESENCE_TTL_MS_DEFAULT, _LEASED,
       "a PresenceEntry not renewed stops counting after this"),
    # chatrooms (qim/config/room.py; docs/decisions/0045-rooms-phase-one-in-process-ring.md)
    _v("QIM_ROOM_RING_EVENTS", "int", ROOM_RING_EVENTS_DEFAULT, ROOM, "events a room's replay ring holds"),
    _v("QIM_ROOM_RING_BYTES", "int", ROOM_RING_BYTES_DEFAULT, ROOM, "encoded bytes of those events"),
    _v("QIM_ROOM_IDLE_S", "int", ROOM_IDLE_S_DEFAULT, ROOM, "a room without members this long is dropped (its ring too)"),
    _v("QIM_ROOM_MAX_PER_CONNECTION", "int", ROOMS_PER_CONNECTION_DEFAULT, GATEWAY, "rooms one connection may join"),
    # archive tier (qim/config/tier.py, archiver.py)
    _v("QIM_SCYLLA_ADDRS", "addrs", "unset (no archive tier)", _CQL, "ScyllaDB contact points"),
    _v("QIM_SCYLLA_KEYSPACE", "name", "qim", _CQL, "keyspace"),
    _v("QIM_SCYLLA_LOCAL_DC", "name", "datacenter1", _CQL, "local datacenter"),
    _v("QIM_SCYLLA_ALLOW_SINGLE_NODE_DEV", "flag", 0, _CQL, "replication factor 1 (development)"),
    _v("QIM_MESSAGE_STORE_BACKEND", "redis|tiered", "tiered with QIM_SCYLLA_ADDRS", _CQL, "MessageStore backend"),
    _v("QIM_MAILBOX_STORE", "redis|cql", "redis", _CQL, "MailboxStore backend (cql needs QIM_SCYLLA_ADDRS)"),
    _v("QIM_DISPATCH_LOG_RETENTION_MS", "int ms", "7 days", _CQL,
       "the qim.dispatch topic's retention.ms (with QIM_MAILBOX_STORE=cql: + 1 day below 31 days)"),
    _v("QIM_HISTORY_HOT_WINDOW_MS", "int ms", "7 days", _CQL, "history kept hot in Redis"),
    _v("QIM_DEFAULT_HISTORY_RETENTION_DAYS", "int 1..3650", 30, _CQL, "archive retention"),
    _v("QIM_OUTBOX_RETENTION_MS", "int ms", "7 days", _CQL, "Outbox records kept (the recovery window)"),
    _v("QIM_HISTORY_TRIM_SLACK_MS", "int ms", 60000, _CQL, "trim slack"),
    _v("QIM_HISTORY_TRIM_PERIOD_MS", "int ms", 5000, _CQL, "trim period"),
    _v("QIM_ARCHIVER_BATCH_SIZE", "int", 512, ARCHIVER, "rows per archive batch"),
    _v("QIM_ARCHIVER_FAULT_POINT", "name", "unset", ARCHIVER, "crash point (tests only)"),
    # the MediaService (qim-media; issue 40, docs/decisions/0137 and 0138)
    _v("QIM_MEDIA_MAX_FILE_BYTES", "int 1..67108864", 16777216, MEDIA, "largest file uploaded through the service"),
    _v("QIM_MEDIA_MAX_UPLOAD_BYTES", "int 1..8000000000", 1073741824, MEDIA,
       "largest file uploaded in presigned parts (8 MiB each, at most 1000)"),
    _v("QIM_MEDIA_QUOTA_BYTES_PER_DAY", "int", 1073741824, MEDIA, "bytes each user may upload per UTC day"),
    _v("QIM_MEDIA_MAX_PIXELS", "int", 50000000, MEDIA, "largest image (pixels); more is refused as a decompression bomb"),
    _v("QIM_MEDIA_ORPHAN_MS", "int ms 1000..30 days", "1 hour", MEDIA,
       "an upload no message references is deleted after it (docs/decisions/0139)"),
    _v("QIM_MEDIA_SWEEP_INTERVAL_MS", "int ms 100..1 day", 60000, MEDIA,
       "how often the sweeper deletes orphans and released media (one node at a time)"),
    _v("QIM_MEDIA_CORS_ORIGINS", "origins, comma-separated", "unset (no CORS)", MEDIA,
       "web pages of these origins (scheme://host[:port]) may upload and download (docs/decisions/0146)"),
    _v("QIM_MEDIA_REF_KEY", "text, 32+ characters", "required (media); unset: the writer refuses MEDIA",
       (MEDIA, WRITER), "HMAC key signing media references (MEDIA message bodies); the same on media and writers"),
    _v("QIM_S3_ENDPOINT", "URL", "unset (AWS S3)", MEDIA, "the S3-compatible object store"),
    _v("QIM_S3_BUCKET", "S3 bucket name", "required", MEDIA, "the bucket of the media originals"),
    _v("QIM_S3_REGION", "text", "us-east-1", MEDIA, "the region requests are signed for"),
    _v("QIM_S3_ACCESS_KEY", "text", "unset (boto3's credential chain)", MEDIA, "access key id"),
    _v("QIM_S3_SECRET_KEY", "text", "unset (boto3's credential chain)", MEDIA, "secret access key (never logged)"),
    # the ModerationService (qim-moderation; docs/decisions/0123)
    _v("QIM_MODERATION_NOTIFY_URL", "URL", "unset (notifications off)", MODERATION,
       "the operator's receiver of after-send notifications (batched, signed POSTs)"),
    _v("QIM_MODERATION_NOTIFY_SECRET", "text, 16+ characters", "required with the URL", MODERATION,
       "HMAC-SHA256 key of the notifications' X-QIM-Signature"),
    _v("QIM_MODERATION_NOTIFY_CA_FILE", "path", "the system's CAs", MODERATION,
       "CA bundle verifying the receiver's TLS certificate"),
    _v("QIM_MODERATION_NOTIFY_BATCH", "int 1..10000", 100, MODERATION, "notifications per POST at most"),
    _v("QIM_OPERATOR", "text", "the login name", QIMCTL,
       "who `qimctl moderation ban` and `unban` name in the moderation log"),
    _v("QIM_MODERATION_NOTIFY_TIMEOUT_MS", "int 100..120000", 5000, MODERATION,
       "one POST's deadline; past it the batch is retried with backoff"),
    # the NotificationService (qim-notify; docs/decisions/0130, 0135; docs/operations.md "Offline push")
    _v("QIM_PUSH_APNS_TEAM_ID", "text", "unset (APNs off)", NOTIFY, "Apple team id (the provider JWT's iss)"),
    _v("QIM_PUSH_APNS_KEY_ID", "text", "unset", NOTIFY, "the APNs signing key's id (the JWT's kid)"),
    _v("QIM_PUSH_APNS_KEY_FILE", "path", "unset", NOTIFY, "the APNs .p8 signing key (P-256, PEM)"),
    _v("QIM_PUSH_APNS_TOPIC", "text", "unset", NOTIFY, "the app's bundle id (apns-topic) for registrations naming none"),
    _v("QIM_PUSH_APNS_ENDPOINT", "production, sandbox or an https URL", "production", NOTIFY,
       "where APNs requests go (a development build's registration goes to the sandbox)"),
    _v("QIM_PUSH_APNS_CA_FILE", "path", "the system's CAs", NOTIFY, "CA bundle verifying the APNs endpoint"),
    _v("QIM_PUSH_FCM_SERVICE_ACCOUNT_FILE", "path", "unset (FCM off)", NOTIFY,
       "the Firebase service account JSON (project, e-mail, private key, token URI)"),
    _v("QIM_PUSH_FCM_ENDPOINT", "https URL", "https://fcm.googleapis.com", NOTIFY, "the FCM HTTP v1 endpoint"),
    _v("QIM_PUSH_FCM_CA_FILE", "path", "the system's CAs", NOTIFY, "CA bundle verifying FCM and its token URI"),
    _v("QIM_PUSH_VAPID_PRIVATE_KEY_FILE", "path", "unset (Web Push off)", (NOTIFY, DEV),
       "the VAPID P-256 private key (PEM); qim-web hands the page its public key"),
    _v("QIM_PUSH_VAPID_SUBJECT", "mailto: or https: URL", "unset", NOTIFY, "the VAPID contact (RFC 8292 sub)"),
    _v("QIM_PUSH_VAPID_CA_FILE", "path", "the system's CAs", NOTIFY, "CA bundle verifying the push services"),
    _v("QIM_PUSH_TIMEOUT_MS", "int 100..120000", 10000, NOTIFY,
       "one provider request's deadline, the wait for a slot included (a hang past it is retried)"),
    _v("QIM_PUSH_CONCURRENCY", "int 1..4096", 64, NOTIFY, "requests in flight per provider and process"),
    _v("QIM_NOTIFY_BATCH", "int 1..10000", 200, NOTIFY,
       "dispatch records per batch (what is in flight: the next batch waits for this one)"),
    _v("QIM_NOTIFY_CLAIM_MS", "int 1000..3600000", 30000, NOTIFY,
       "how long an alert's claim lasts: a node that died mid-send has it made again after this"),
    _v("QIM_NOTIFY_BADGE_WAIT_MS", "int 0..600000", 30000, NOTIFY,
       "how long a batch waits for its messages to be settled into the badge before sending"),
    _v("QIM_NOTIFY_MAX_AGE_MS", "int 60000..2592000000", 86400000, NOTIFY,
       "a message older than this makes no alert (a first start replays the log's retention)"),
    # clients and qimctl
    _v("QIM_GATEWAY_ADDR", "addr", "127.0.0.1:7100", (CLIENTS, QIMCTL), "the gateway a client dials"),
    _v("QIM_GATEWAY_ADDRS", "addrs", "QIM_GATEWAY_ADDR", CLIENTS,
       "every gateway's client address (qim-loadgen and the replay spread their devices over them; qim-desktop fails over)"),
    _v("QIM_GATEWAY_WS_ADDR", "ws:// URL", "unset", (CLIENTS, DEV), "the development WebSocket endpoint"),
    _v("QIM_GATEWAY_WS_ADDRS", "ws:// URLs", "QIM_GATEWAY_WS_ADDR", (CLIENTS, DEV),
       "every gateway's development WebSocket endpoint (qim-web hands the page all of them)"),
    _v("QIM_MEDIA_URL", "http:// URLs", "unset", (CLIENTS, DEV),
       "the MediaService's base URL, or several comma separated (qim.sdk moves to the next on an outage; "
       "stack.env; the app sets client.media_url)"),
    _v("QIM_DEPLOYMENT", "name", "the first gateway", CLIENTS,
       "the name local stores are kept under, whichever gateway a client uses"),
    _v("QIM_GATEWAY_WSS_ADDR", "wss:// URL", "unset", CLIENTS, "the WebSocket endpoint on the client port"),
    _v("QIM_CA_FILE", "path", "system trust", (CLIENTS, QIMCTL), "CA that verifies the gateway"),
    _v("QIM_DEV_TOKEN_KEY", "path", "unset", (CLIENTS, QIMCTL, DEV), "development token signing key"),
    _v("QIM_TOKEN", "text", "unset", CLIENTS, "a token for qim-desktop"),
    _v("QIM_DATA_DIR", "path", "$XDG_DATA_HOME/qim", CLIENTS, "the SDK's local stores"),
    _v("QIM_MACHINE_ID", "text", "/etc/machine-id", CLIENTS,
       "this machine, for the SDK's check that a local store was not copied from another (0081)"),
    _v("QIM_QIMCTL_TLS_CERT", "path", "unset", QIMCTL, "qimctl's service certificate"),
    _v("QIM_QIMCTL_TLS_KEY", "path", "unset", QIMCTL, "its key"),
    # development engines and pages
    _v("QIM_KAFKA_CACHE", "path", "~/.cache/qim", DEV, "broker jar cache"),
    _v("QIM_S3PROXY_CACHE", "path", "~/.cache/qim/s3proxy-<version>", DEV,
       "s3proxy jar cache (the development object store; decision 0137)"),
    _v("QIM_KAFKA_LOG_LEVEL", "level", "WARN", DEV, "broker log level"),
    _v("QIM_KAFKA_JVM_OPTS", "text", "", DEV, "extra JVM options of the development broker (e.g. "
       "`-XX:TieredStopAtLevel=1`: docs/perf.md \"The broker's JIT\")"),
    _v("QIM_KAFKA_WARMUP_S", "int 0..120", 10, DEV, "seconds of produce and fetch a development broker just "
       "started by `qim-dev engines up` serves on a topic of its own before the engines report ready, so its JIT "
       "compiles before the stack's first traffic (0 skips; docs/decisions/0159)"),
    _v("QIM_CASSANDRA_CACHE", "path", "~/.cache/qim", DEV, "Cassandra tarball cache"),
    _v("QIM_CASSANDRA_HEAP_MB", "int", 512, DEV, "Cassandra heap"),
    _v("QIM_CASSANDRA_JVM_OPTS", "text", "", DEV, "extra JVM options of the development Cassandra node, after "
       "its own (the tests run `-XX:TieredStopAtLevel=1`: tests/conftest.py)"),
    _v("QIM_CASSANDRA_LOG_LEVEL", "level", "WARN", DEV, "Cassandra log level"),
    _v("QIM_DEV_WITH_CASSANDRA", "flag", 1, DEV, "qim-dev engines up starts Cassandra"),
    _v("QIM_DEV_WITH_S3", "flag", 1, DEV, "qim-dev engines up starts s3proxy (then stack up a MediaService node)"),
    _v("QIM_WEB_PORT", "int", 8088, DEV, "qim-web's port"),
    _v("QIM_DEV_TENANT", "int", 0, DEV, "tenant of qim-web's development tokens"),
)


def _derived() -> tuple[Var, ...]:
    """Listener, metrics, address-list and node rows of every process (qim/topology.py)."""
    out: list[Var] = []
    for row in processes():
        for ln in row.listeners:
            default = "unset (none)" if ln.suffix == "_ws" else f"127.0.0.1:{ln.port}"
            out.append(Var(ln.var, "addr", default, (row.name,), f"{row.name} listener"))
        out.append(Var(row.metrics_var, "addr", f"127.0.0.1:{row.metrics_port}", (row.name,),
                       f"{row.name} /metrics and /healthz (HTTP on loopback unless QIM_METRICS_TLS_CERT)"))
        if row.node_index:
            out.append(Var(f"QIM_{row.env}_NODE_INDEX", "int", "0", (row.name,), "this node's index among its kind"))
            # a kind the gateway routes MODULO over its address list counts that list instead
            if row.gateway is None or row.gateway.routing != MODULO:
                out.append(Var(f"QIM_{row.env}_NODE_COUNT", "int", "1", (row.name,), "nodes of this kind"))
    for row in SERVICES.values():  # address lists: read by every service that dials the kind
        listener = row.internal_listener
        if listener is None:
            continue
        readers = tuple(s.name for s in SERVICES.values() if row in dials(s.name))
        own = (row.name,) if row.name == ROOM else ()  # a room's shard mod len(list) names its RoomWriter
        out.append(Var(row.addrs_var, "addrs", f"127.0.0.1:{listener.port}", (*readers, *own),
                       f"every {row.name} node's internal address, in node order"))
    return tuple(out)


def variables() -> dict[str, Var]:
    """Every row by name (written ones first; a derived row of the same name adds its readers)."""
    out: dict[str, Var] = {}
    for v in (*_WRITTEN, *_derived()):
        if v.name in out:
            old = out[v.name]
            out[v.name] = Var(v.name, old.type, old.default, tuple(dict.fromkeys(old.readers + v.readers)), old.meaning)
        else:
            out[v.name] = v
    return out


BEGIN, END = "<!-- BEGIN configuration reference (qim/config/variables.py) -->", "<!-- END configuration reference -->"


def render_reference() -> str:
    """The markdown table of docs/operations.md "Configuration reference", between BEGIN and END."""
    lines = [BEGIN, "", "| variable | type | default | read by | meaning |", "|---|---|---|---|---|"]
    for v in sorted(variables().values(), key=lambda v: v.name):
        lines.append(f"| `{v.name}` | {v.type} | {v.default} | {', '.join(v.readers)} | {v.meaning} |")
    return "\n".join([*lines, "", END])


def update_doc(text: str) -> str:
    """`text` (docs/operations.md) with its reference block replaced by render_reference();
    ValueError when the markers are missing."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"no {BEGIN!r} ... {END!r} block")
    return text[:start] + render_reference() + text[end + len(END):]


def main(argv: list[str]) -> int:
    """`python -m qim.config.variables DOC`: rewrite DOC's reference block; exit 0, or 2
    with one line (no argument, an unreadable file, no block in it)."""
    from pathlib import Path

    if len(argv) != 1:
        print("usage: python -m qim.config.variables docs/operations.md", file=sys.stderr)
        return 2
    doc = Path(argv[0])
    try:
        doc.write_text(update_doc(doc.read_text()))
    except (OSError, ValueError) as exc:
        print(f"qim.config.variables: {doc}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
