"""ConversationWriter: internal RPC front of the MessageCommitter (docs/design.md §2, §5.2).

Serves WRITER_SEND from gateways (and qimctl group create) and WRITER_ADMIN from qimctl,
over mutual TLS with the allow-list of qim/net/allow.py (a mailbox or gateway
certificate calling WRITER_ADMIN gets FORBIDDEN before anything here runs); counts every
request received (the bad-input test
reads `qim_writer_requests_total` to prove malformed client input never got here).
Readiness: the stores reachable, HLC window held, Outbox topic confirmed by broker
metadata. Storage comes from qim.stores.open (no driver here).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Iterator

from google.protobuf.message import DecodeError

from qim.config import WriterConfig
from qim.consts import COMMIT_BUCKET_COUNT, CONVERSATION_KIND_DIRECT, CONVERSATION_KIND_GROUP, OUTBOX_TOPIC
from qim.errors import EngineError, ErrorCode, RequestError
from qim.faults import FaultPoints
from qim.infra.kafka.bridge import AsyncProducer, topic_partitions
from qim.obs import otel
from qim.obs.logcontext import bind
from qim.obs.node import ServiceNode
from qim.policy import PolicySeam, load_policy
from qim.proto.v1 import internal_pb2
from qim.protocol import Opcode
from qim.services.writer.committer import AudiencePlanner, MessageCommitter
from qim.services.writer.edits import Edits
from qim.services.writer.groups import Groups
from qim.services.writer.hlc import HlcClock, set_clock_skew
from qim.services.writer.metrics import WriterMetrics
from qim.services.writer.moderation import Moderation
from qim.services.writer.planner import DirectAudience, GroupAudience
from qim.services.writer.reactions import Reactions
from qim.services.writer.recovery import CommitRecovery
from qim.services.writer.replies import SendExtras
from qim.services.writer.reports import Reports
from qim.services.writer.server_ops import WriterOps
from qim.services.writer.trimmer import HistoryTrimmer
from qim.stores.errors import StorageError
from qim.stores.media import open_media_ledger
from qim.stores.open import open_reactions, open_reports, open_stores

logger = logging.getLogger(__name__)

REDIS_WATCH_S = 2.0


class ConversationWriter(ServiceNode):
    """Wires Redis, the Outbox producer, the HLC clock and the committer; serves
    WRITER_SEND and WRITER_ADMIN. Its clock, recovery and Redis watch loops are
    supervised tasks."""

    service = "writer"

    def __init__(self, config: WriterConfig) -> None:
        super().__init__(config.metrics_listen)
        self.config = config
        self.metrics = WriterMetrics(self.registry)
        # first: a certificate that does not load stops the start before any client exists
        self.internal_tls = self.tls_contexts(config.internal_tls, "internal", "QIM_INTERNAL_CA/TLS_CERT/TLS_KEY")
        set_clock_skew(config.clock_skew_ms)
        self.stores = stores = open_stores(config.common.redis_layout, tier=config.common.tier)
        self.producer = AsyncProducer(config.common.kafka_bootstrap)
        self.clock = HlcClock(stores.leases, config.region_id, config.writer_id)
        planners: dict[int, AudiencePlanner] = {CONVERSATION_KIND_DIRECT: DirectAudience(),
                                                CONVERSATION_KIND_GROUP: GroupAudience(stores.groups)}
        # the send policy loads at start: one that does not load stops the start (ConfigError)
        policy = PolicySeam(load_policy(config.send_policy), self.registry)
        self.committer = MessageCommitter(stores.commits, self.producer, self.clock, config.common.shard_count,
                                          FaultPoints(config.fault_point), planners, self.metrics, config.max_body,
                                          policy, SendExtras(stores.messages, stores.groups), stores.messages)
        self.recovery = CommitRecovery(stores.commits, self.committer, config.recovery_stale_ms)
        self.groups = Groups(stores.groups, stores.commits, stores.messages, self.committer)
        self.ops = WriterOps(stores.messages, stores.groups, self.committer, self.groups,
                             Moderation(stores.messages, stores.groups, stores.commits, self.committer,
                                        config.recall_window_ms),
                             reactions := Reactions(stores.messages, stores.groups, open_reactions(stores)))
        # user reports (decision 0124): on the home instance, next to the moderation log
        self.ops.reports = Reports(reactions, open_reports(stores))
        self.ops.media_key = config.media_ref_key  # MEDIA bodies (decision 0138)
        if config.media_ref_key:  # which media a message references, for the sweeper (decision 0139)
            self.ops.media_refs = ledger = open_media_ledger(config.common.redis_layout)
            self.closing(ledger.close, "media ledger")
        # replies, mentions and edits (docs/decisions/0120): an edit is a send for the policy
        self.ops.edits = Edits(stores.messages, stores.groups, stores.commits, self.committer,
                               config.recall_window_ms, config.max_body, policy)
        # the hot-window trimmer (docs/decisions/0023): only where reads are tiered, else history
        # trimmed from Redis would vanish from every read
        tier = stores.archive_tier
        self.trimmer = (HistoryTrimmer(tier.state, tier.archive, config.common.tier, self.metrics)
                        if tier is not None and config.common.tier.tiered else None)
        self._outbox_ok = False
        self._redis_ok = False
        self.closing(stores.close, "stores")
        self.closing(self.producer.close, "outbox producer")

    def not_ready(self) -> Iterator[str]:
        """Reasons the writer is not ready (/healthz 503 while any)."""
        if not self._redis_ok:
            yield "redis unreachable"
        if not self.clock.ready:
            yield "hlc window not held"
        if not self._outbox_ok:
            yield "outbox topic not confirmed"

    async def handle(self, opcode: int, body: bytes) -> tuple[int, bytes]:
        """One internal request -> (reply opcode, reply bytes); RequestError for an ERROR.
        Nothing awaits before WriterOps takes the conversation's turn (arrival order)."""
        self.metrics.requests.labels(opcode=f"0x{opcode:04x}").inc()
        try:
            if opcode == Opcode.WRITER_ADMIN:
                return await self.ops.admin(internal_pb2.AdminRequest.FromString(body))
            if opcode != Opcode.WRITER_SEND:
                raise RequestError(ErrorCode.INVALID_ARGUMENT, f"writer does not serve opcode 0x{opcode:04x}")
            req = internal_pb2.WriterSend.FromString(body)
        except DecodeError:
            raise RequestError(ErrorCode.INVALID_ARGUMENT, "bad internal request") from None
        started = time.perf_counter()
        kind = Opcode(req.opcode).name if req.opcode in Opcode._value2member_map_ else "SEND_MESSAGE"
        try:
            # a store error is a RequestError with its wire code (qim/stores/errors.py)
            # every log line of this request says which one; its span under the gateway's (0140)
            with bind(op=kind), otel.writer_span(req.traceparent, kind):
                reply = await self.ops.client(req.actor, req.opcode, req.upstream)
        except RequestError as exc:
            self.metrics.results.labels(result=exc.code.name).inc()
            raise
        self.metrics.results.labels(result="OK").inc()
        self.metrics.request_seconds.labels(op=kind).observe(time.perf_counter() - started)
        return reply

    async def _watch_redis(self) -> None:
        while True:
            try:
                await self.stores.ping()
                self._redis_ok = True
            except StorageError:  # not reachable: readiness says so
                self._redis_ok = False
            await asyncio.sleep(REDIS_WATCH_S)

    async def setup(self) -> None:
        """Check engines, lease the clock, start the loops and the RPC listener.
        EngineError when not possible."""
        await self.stores.check(commit_facts=True, allow_unsafe_dev=self.config.common.allow_unsafe_dev)
        self._redis_ok = True
        partitions = await topic_partitions(self.config.common.kafka_bootstrap, OUTBOX_TOPIC)
        if not 1 <= partitions <= COMMIT_BUCKET_COUNT:
            raise EngineError(f"{OUTBOX_TOPIC} has {partitions} partitions: 1..{COMMIT_BUCKET_COUNT} (one conversation "
                              "per commit bucket, docs/decisions/0033)")
        self.committer.outbox.partitions = partitions
        self._outbox_ok = True
        await self.clock.start()
        self.spawn(self.clock.maintain(), "hlc window")
        self.spawn(self.recovery.recovery_loop(), "commit recovery")
        self.spawn(self._watch_redis(), "redis watch")
        if self.trimmer is not None:
            self.spawn(self.trimmer.run(), "history trim")
        await self.serve_rpc(self.config.listen, self.handle, self.config.inflight_limit, tls=self.internal_tls)
        logger.info("writer %d listening on %s", self.clock.writer_id, self.config.listen)
