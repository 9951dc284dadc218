"""The NotificationService's log consumer (docs/decisions/0135): the Kafka consumer
group `qim-notify` over the dispatch log, offsets committed only after every alert of a
batch reached its end (sent, unregistered, failed, or suppressed), so a SIGKILL, a
pause or a rebalance loses nothing: the partition's next owner replays from the
committed offset. A replay makes no second alert: each (device, message) is claimed with
a Redis SET NX before its send and recorded as made after (NotifyStore.claim / sent);
a claim left by a node that died mid-send ends after QIM_NOTIFY_CLAIM_MS and the alert is
made then: at least once to the provider only for a request in flight when its node
died (its answer never read), and the provider collapses it (apns-collapse-id,
collapse_key, Topic: the conversation). Each alert is recorded as made as soon as its
provider answered, not with its batch.

Per batch: decode; wait (bounded, QIM_NOTIFY_BADGE_WAIT_MS) until the session
projection's checkpoint of each partition is past the batch and the badge marks of its
(user, conversation) pairs are settled, so the badge read next counts these messages;
the verdicts (due.py); the badges (one round trip per instance); claims; the per-device
badge versions (a late alert carries the newest badge the device was sent); send; wait
for every end; record; commit. The next batch is read only then: the batch bounds what
is in flight and a slow provider holds the consumer (back-pressure), never a drop.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from functools import partial
from typing import Any, Callable, Optional

from confluent_kafka import TopicPartition

from qim._core import ids
from qim.consts import CONVERSATION_KIND_GROUP, DISPATCH_TOPIC, KAFKA_BATCH_FETCH
from qim.errors import EngineError
from qim.infra.kafka.consumer import AsyncConsumer
from qim.notify.providers.base import Alert, Notification
from qim.services.notify.due import Due, candidates, provider_registration, verdicts
from qim.services.notify.metrics import NotifyMetrics
from qim.services.notify.sender import Delivery, Sender
from qim.services.notify.text import alert_text
from qim.stores.badges import BadgeStore
from qim.stores.base import Stores
from qim.stores.errors import StoreUnavailable
from qim.stores.notify import AlertKey, NotifyStore
from qim.wire import dispatch as dispatch_codec

logger = logging.getLogger(__name__)

GROUP_ID = "qim-notify"
STORE_RETRY_S = 1.0  # between passes of a batch while a store is unavailable
POLL_S = 0.2  # between reads of the checkpoints, marks, presence and claims while waiting


class GroupConsumer(AsyncConsumer):
    """AsyncConsumer in a consumer group (cooperative-sticky): the nodes share the
    dispatch partitions; a dead node's go to the others."""

    async def subscribe(self, topic: str) -> None:
        """Join the group on `topic`."""
        await self._run(self._consumer.subscribe, [topic])

    async def assigned(self) -> list[int]:
        """The partitions this member holds now."""
        return [tp.partition for tp in await self._run(self._consumer.assignment)]

    async def commit_many(self, topic: str, next_offsets: dict[int, int]) -> None:
        """Synchronously commit {partition: next offset}; EngineError when refused."""
        tps = [TopicPartition(topic, p, o) for p, o in next_offsets.items()]
        await self._run(lambda: self._consumer.commit(offsets=tps, asynchronous=False))


class LogConsumer:
    """`run()` consumes, notifies and commits until cancelled (module doc).
    `online(tenant, user, device)`; `presence_ready(tenant, user)` False while the
    user's presence is still being read."""

    def __init__(self, bootstrap: str, stores: Stores, badges: BadgeStore, notify: NotifyStore, sender: Sender,
                 metrics: NotifyMetrics, online: Callable[[int, int, int], bool],
                 presence_ready: Callable[[int, int], bool], batch: int = 200, claim_ms: int = 30_000,
                 badge_wait_s: float = 30.0, max_age_ms: int = 86_400_000) -> None:
        self.consumer = GroupConsumer(bootstrap, GROUP_ID, {
            **KAFKA_BATCH_FETCH, "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000})
        self._stores, self._badges, self._notify, self._sender, self._m = stores, badges, notify, sender, metrics
        self._online, self._presence_ready = online, presence_ready
        self.batch, self.claim_ms, self.badge_wait_s, self.max_age_ms = batch, claim_ms, badge_wait_s, max_age_ms
        self.joined = False
        self._done: dict[int, int] = {}  # partition -> next offset this node has notified up to

    def not_ready(self) -> Optional[str]:
        """Not ready until the group is joined."""
        return None if self.joined else "joining the notify consumer group"

    async def run(self) -> None:
        """Consume, notify, commit, forever (a broker error ends it: the node restarts; a
        store outage holds the batch, which is notified again: `notify_through`)."""
        await self.consumer.subscribe(DISPATCH_TOPIC)
        self.joined = True
        while True:
            msgs = await self.consumer.consume(self.batch, 0.5)
            if not msgs:
                continue
            await self.notify_through(msgs)
            offsets: dict[int, int] = {}
            for m in msgs:
                offsets[m.partition()] = m.offset() + 1
            self._done.update(offsets)
            try:
                await self.consumer.commit_many(DISPATCH_TOPIC, offsets)
            except EngineError as exc:  # the partitions moved meanwhile: the new owner replays (no double)
                logger.warning("notify commit refused (%s): the records are replayed", type(exc).__name__)

    async def lag_loop(self, period_s: float = 2.0) -> None:
        """qim_notify_lag_records over this node's partitions (high watermark - notified
        position; the committed offset for a partition not notified here yet)."""
        while True:
            await asyncio.sleep(period_s)
            try:
                parts = await self.consumer.assigned()
                high = await self.consumer.high_watermarks(DISPATCH_TOPIC, parts) if parts else {}
                missing = [p for p in parts if p not in self._done]
                done = {**(await self.consumer.committed(DISPATCH_TOPIC, missing) if missing else {}), **self._done}
                self._m.lag.set(sum(max(0, high[p] - max(done.get(p, 0), 0)) for p in parts))
            except EngineError as exc:  # a broker hiccup: the next pass reads it again
                logger.info("notify lag not read (%s)", type(exc).__name__)

    async def notify_through(self, msgs: list[Any]) -> None:
        """`notify(msgs)` again after STORE_RETRY_S while a store is unavailable (a Redis
        instance down, a MailboxShard marked moving: decision 0144) instead of ending the
        node: the batch holds (the log lags), nothing is dropped, and a second pass makes
        no alert twice (the claims: what the first pass sent is "s" or still its claim)."""
        while True:
            try:
                await self.notify(msgs)
                return
            except StoreUnavailable as exc:
                self._m.store_waits.inc()
                logger.warning("notify: a store is unavailable (%s); the batch is notified again", exc)
                await asyncio.sleep(STORE_RETRY_S)

    async def notify(self, msgs: list[Any]) -> None:
        """Every alert of one batch of dispatch messages to its end (module doc)."""
        records: list[dispatch_codec.Dispatch] = []
        ends: dict[int, int] = {}
        for m in msgs:
            try:
                records.append(dispatch_codec.decode(m.value()))
            except dispatch_codec.DispatchDecodeError:
                self._m.bad_records.inc()
                logger.error("notify: undecodable dispatch record at partition %d offset %d skipped",
                             m.partition(), m.offset())
            ends[m.partition()] = max(ends.get(m.partition(), 0), m.offset() + 1)
        cands = candidates(records)
        if not cands:
            return
        while not all(self._presence_ready(c.tenant, c.user) for c in cands):  # noqa: ASYNC110 (a Kafka read, no event)
            await asyncio.sleep(POLL_S)
        dues = await verdicts(self._stores, cands, self._online, int(time.time() * 1000), self.max_age_ms)
        due = [d for d in dues if d.outcome == "due"]
        if due:  # only then: a batch for devices with no registration waits for nothing
            await self._settled(ends, {(d.candidate.tenant, d.candidate.user, d.candidate.conversation_id)
                                       for d in due})
        for tenant in dict.fromkeys(d.candidate.tenant for d in due):
            await self._send(tenant, [d for d in due if d.candidate.tenant == tenant])
        # counted once the pass ended: a pass that met a store outage is counted by the next
        # (notify_through), so the outcomes still add up to what was due
        for d in dues:
            if d.outcome != "due":
                self._m.alerts.labels(d.provider, d.outcome).inc()

    async def _settled(self, ends: dict[int, int], pairs: set[tuple[int, int, bytes]]) -> None:
        """Wait until the session projection passed `ends` and the pairs' marks are settled."""
        deadline = time.monotonic() + self.badge_wait_s
        while time.monotonic() < deadline:
            ckpts = await self._notify.checkpoints(list(ends))
            if all(ckpts.get(p, -1) >= end for p, end in ends.items()):
                pending = False
                for tenant in dict.fromkeys(t for t, _, _ in pairs):
                    if await self._notify.marked(tenant, [(u, c) for t, u, c in pairs if t == tenant]):
                        pending = True
                        break
                if not pending:
                    self._m.badge_waits.labels("settled").inc()
                    return
            await asyncio.sleep(POLL_S)
        self._m.badge_waits.labels("timeout").inc()
        logger.warning("notify: the badge was not settled within %.0f s; alerts carry it as it stands",
                       self.badge_wait_s)

    async def _claim(self, tenant: int, dues: list[Due], token: str) -> list[Due]:
        """The dues claimed here now by the attempt `token`; the ones made before are
        counted as duplicates; a claim held by another attempt is waited for (it ends:
        made, or expired)."""
        mine, waiting = [], dues
        while waiting:
            keys = [AlertKey(d.candidate.user, d.registration.device_id, d.candidate.message_id) for d in waiting]
            states = await self._notify.claim(tenant, keys, self.claim_ms, token)
            held = []
            for d, s in zip(waiting, states):
                if s == "new":
                    mine.append(d)
                elif s == "sent":
                    self._m.alerts.labels(d.provider, "suppressed_duplicate").inc()
                else:
                    held.append(d)
            waiting = held
            if waiting:
                await asyncio.sleep(POLL_S * 5)
        return mine

    async def _send(self, tenant: int, dues: list[Due]) -> None:
        token = "c" + secrets.token_hex(8)  # this batch's attempt: a replay anywhere else has another
        mine = await self._claim(tenant, dues, token)
        if not mine:
            return
        badges = await self._badges.badges_of(tenant, list(dict.fromkeys(d.candidate.user for d in mine)))
        names, titles = await self._labels(tenant, mine)
        deliveries: list[tuple[Due, Delivery]] = []
        loop = asyncio.get_running_loop()
        theirs_of = {u: [d for d in mine if d.candidate.user == u] for u in dict.fromkeys(d.candidate.user for d in mine)}
        rows = {}
        for u, theirs in theirs_of.items():
            badge, version = badges.get(u, (0, 0))
            rows[u] = [(d.registration.device_id, version, badge) for d in theirs]
        # every user's badge versions in one round trip per instance, not one per user (decision 0145)
        chosen_of = await self._notify.badge_versions_of(tenant, rows, silent=False)
        for user, theirs in theirs_of.items():
            badge, version = badges.get(user, (0, 0))
            for d, got in zip(theirs, chosen_of[user]):
                v, b = got if got is not None else (version, badge)
                c = d.candidate
                title, body, generic = alert_text(d.record, c.sender, names.get(c.sender, ""),
                                                  titles.get(c.conversation_id, ""), d.registration.settings.locale)
                alert = Alert(badge=b, badge_version=v, collapse_id=c.conversation_id.hex(), title=title,
                              body=body, generic=generic, message_id=c.message_id.hex())
                note = Notification(provider_registration(d.registration), alert)
                key = AlertKey(user, d.registration.device_id, c.message_id)
                guard = partial(self._notify.renew, tenant, key, token, self.claim_ms)
                deliveries.append((d, Delivery(tenant, user, d.registration.device_id, d.registration.settings.token,
                                               note, loop.create_future(), guard=guard)))
        for _, dl in deliveries:
            await self._sender.submit(dl)
        await asyncio.gather(*(self._finish(tenant, d, dl) for d, dl in deliveries))

    async def _labels(self, tenant: int, dues: list[Due]) -> tuple[dict[int, str], dict[bytes, str]]:
        """The senders' display names and the groups' titles of `dues` (text.py), one
        round trip each (per instance)."""
        senders = list(dict.fromkeys(d.candidate.sender for d in dues))
        groups = list(dict.fromkeys(d.candidate.conversation_id for d in dues
                                    if ids.conversation_kind(d.candidate.conversation_id) == CONVERSATION_KIND_GROUP))
        names, views = await asyncio.gather(self._stores.sessions.display_names(tenant, senders),
                                            self._stores.groups.member_views(tenant, 0, groups))
        return dict(zip(senders, names)), {g: v.title for g, v in zip(groups, views)}

    async def _finish(self, tenant: int, d: Due, dl: Delivery) -> None:
        """Record one alert as made as soon as it ended, not with its batch: a node dying
        mid-batch leaves only the alerts still in flight to be made again (module doc)."""
        end = await dl.done
        if end == "duplicate":  # another attempt made it or holds it (decision 0144): not ours to record
            self._m.alerts.labels(d.provider, "suppressed_duplicate").inc()
            return
        key = AlertKey(d.candidate.user, d.registration.device_id, d.candidate.message_id)
        while True:  # through an outage (a shard move): an unrecorded alert would be made again
            try:
                await self._notify.sent(tenant, [key])
                break
            except EngineError as exc:
                logger.warning("alert not recorded as made yet: %s", type(exc).__name__)
                await asyncio.sleep(POLL_S * 5)
        self._m.alerts.labels(d.provider, end).inc()

    async def close(self) -> None:
        """Leave the group (its partitions go to the other nodes)."""
        await self.consumer.close()
