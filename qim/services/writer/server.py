"""ConversationWriter: internal RPC front of the MessageCommitter (DESIGN.md §2, §5.2).

Serves WRITER_SEND from gateways; counts every request received (the bad-input test
reads `qim_writer_requests_total` to prove malformed client input never got here).
Readiness: Redis reachable, HLC window held, Outbox topic confirmed by broker metadata.
"""

from __future__ import annotations

import asyncio
import logging
import time

from google.protobuf.message import DecodeError
from prometheus_client import Counter, Histogram
from redis.exceptions import RedisError

from qim.config import WriterConfig
from qim.consts import OUTBOX_TOPIC
from qim.errors import EngineError, ErrorCode, RequestError
from qim.infra.kafka.bridge import AsyncProducer, topic_partitions
from qim.infra.redis.checks import check_deployment
from qim.infra.redis.client import LuaScripts, connect
from qim.net.framed import parse_addr
from qim.net.rpc import serve_rpc
from qim.obs.http import serve_http
from qim.proto.v1 import internal_pb2
from qim.protocol import Opcode
from qim.services.writer.committer import MessageCommitter
from qim.faults import FaultPoints
from qim.services.writer.groups import Groups
from qim.services.writer.hlc import HlcClock, set_clock_skew
from qim.services.writer.moderation import Moderation
from qim.services.writer.recovery import CommitRecovery
from qim.services.writer.server_ops import WriterOps

logger = logging.getLogger(__name__)

REQUESTS = Counter("qim_writer_requests", "Internal requests received by the writer", ["opcode"])
COMMITS = Counter("qim_writer_results", "Client requests by result code", ["result"])
COMMIT_SECONDS = Histogram("qim_writer_request_seconds", "Time from request to reply", ["op"])
SCRIPTS = ("reserve_and_record", "reserve_group_send", "group_change", "state_change", "record", "mark_committed",
           "hlc_lease", "lease_renew")


class ConversationWriter:
    """Wires Redis, the Outbox producer, the HLC clock and the committer; `run()` serves."""

    def __init__(self, config: WriterConfig) -> None:
        self.config = config
        set_clock_skew(config.clock_skew_ms)
        self.redis = connect(config.common.redis_addr)
        self.scripts = LuaScripts(self.redis, SCRIPTS)
        self.producer = AsyncProducer(config.common.kafka_bootstrap)
        self.clock = HlcClock(self.redis, self.scripts, config.region_id, config.writer_id)
        self.committer = MessageCommitter(self.redis, self.scripts, self.producer, self.clock,
                                          config.common.shard_count, FaultPoints(config.fault_point))
        self.recovery = CommitRecovery(self.redis, self.committer, config.recovery_stale_ms)
        self.groups = Groups(self.redis, self.committer)
        self.committer.group_sender = self.groups.send
        self.ops = WriterOps(self.redis, self.committer, self.groups,
                             Moderation(self.redis, self.committer, self.groups, config.recall_window_ms))
        self._outbox_ok = False
        self._redis_ok = False
        self._tasks: list[asyncio.Task] = []

    def not_ready(self):
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
        REQUESTS.labels(opcode=f"0x{opcode:04x}").inc()
        try:
            if opcode == Opcode.WRITER_ADMIN:
                try:
                    return await self.ops.admin(internal_pb2.AdminRequest.FromString(body))
                except RedisError as exc:
                    raise RequestError(ErrorCode.UNAVAILABLE, "store unavailable") from exc
            if opcode != Opcode.WRITER_SEND:
                raise RequestError(ErrorCode.INVALID_ARGUMENT, f"writer does not serve opcode 0x{opcode:04x}")
            req = internal_pb2.WriterSend.FromString(body)
        except DecodeError:
            raise RequestError(ErrorCode.INVALID_ARGUMENT, "bad internal request") from None
        started = time.perf_counter()
        kind = Opcode(req.opcode).name if req.opcode in Opcode._value2member_map_ else "SEND_MESSAGE"
        try:
            try:
                reply = await self.ops.client(req.actor, req.opcode, req.upstream)
            except RedisError as exc:  # any read path that met a Redis outage: retryable
                raise RequestError(ErrorCode.UNAVAILABLE, "store unavailable") from exc
        except RequestError as exc:
            COMMITS.labels(result=exc.code.name).inc()
            raise
        COMMITS.labels(result="OK").inc()
        COMMIT_SECONDS.labels(op=kind).observe(time.perf_counter() - started)
        return reply

    async def _watch_redis(self) -> None:
        while True:
            try:
                await self.redis.ping()
                self._redis_ok = True
            except Exception:
                self._redis_ok = False
            await asyncio.sleep(2.0)

    async def start(self) -> asyncio.AbstractServer:
        """Check engines, lease the clock, start listeners. EngineError when not possible."""
        await check_deployment(self.redis, self.config.common.redis_addr, commit_facts=True,
                               allow_unsafe_dev=self.config.common.allow_unsafe_dev)
        self._redis_ok = True
        if await topic_partitions(self.config.common.kafka_bootstrap, OUTBOX_TOPIC) != 1:
            raise EngineError(f"{OUTBOX_TOPIC} must have exactly 1 partition")
        self._outbox_ok = True
        await self.clock.start()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self.clock.maintain()), loop.create_task(self.recovery.recovery_loop()),
                       loop.create_task(self._watch_redis())]
        await serve_http(self.config.metrics_listen, self.not_ready)
        host, port = parse_addr(self.config.listen)
        server = await serve_rpc(host, port, self.handle, self.config.inflight_limit)
        logger.info("writer %d listening on %s", self.clock.writer_id, self.config.listen)
        return server
