"""NotifyNode: the qim-notify process, the NotificationService (issue 39;
docs/decisions/0135-notification-service.md).

Its position is the Kafka consumer group `qim-notify` on the dispatch log (consumer.py),
shared by every node, so any number of nodes run side by side and a dead node's
partitions go to the others; the at-most-once record per (device, message) is in Redis
(qim/stores/notify.py), so whichever node replays a record makes no second alert. It
follows the presence of every shard (qim/cluster/presence.py; the live gateways from the
ShardRegistry) to tell connected devices, sends silent badge updates (silent.py), and
sends through the providers configured by QIM_PUSH_* (qim/config/notify.py). Not ready
while it joins the group. Metrics on QIM_NOTIFY_METRICS_LISTEN (9110).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Iterator

from qim._core import ids
from qim.cluster.owners import OwnerTable
from qim.cluster.presence import PresenceFollower
from qim.config.notify import NotifyConfig
from qim.notify.providers.apns import ApnsProvider
from qim.notify.providers.base import PushMetrics, PushProvider
from qim.notify.providers.fcm import FcmProvider
from qim.notify.providers.webpush import WebPushProvider
from qim.obs.node import ServiceNode
from qim.services.notify.consumer import LogConsumer
from qim.services.notify.metrics import NotifyMetrics
from qim.services.notify.sender import Sender
from qim.services.notify.silent import SilentUpdates
from qim.stores.open import open_badges, open_notify, open_registry, open_stores

logger = logging.getLogger(__name__)


class NotifyNode(ServiceNode):
    """Runs the log consumer, the silent badge updates, presence and the gateway table."""

    service = "notify"

    def __init__(self, config: NotifyConfig) -> None:
        super().__init__(config.metrics_listen)
        self.config = config
        self.metrics = NotifyMetrics(self.registry)
        push_metrics = PushMetrics(self.registry)
        providers: dict[str, PushProvider] = {}
        if config.apns is not None:
            providers["apns"] = ApnsProvider(config.apns, metrics=push_metrics)
        if config.fcm is not None:
            providers["fcm"] = FcmProvider(config.fcm, metrics=push_metrics)
        if config.vapid is not None:
            providers["webpush"] = WebPushProvider(config.vapid, metrics=push_metrics)
        self.stores = stores = open_stores(config.common.redis_layout, tier=config.common.tier)
        self.badges, self.notify_store = open_badges(stores), open_notify(stores)
        self.shard_registry = open_registry(config.registry_addr)
        self.owners = OwnerTable(self.shard_registry, {}, ("gateway",))
        live = lambda: {n.node_id: n.since_ms for n in self.owners.nodes("gateway")}  # noqa: E731
        self.presence = PresenceFollower(config.common.kafka_bootstrap, "qim-notify-presence", live)
        self.sender = Sender(providers, stores.push, self.metrics)
        self.consumer = LogConsumer(config.common.kafka_bootstrap, stores, self.badges, self.notify_store, self.sender,
                                    self.metrics, self.online, self.presence_ready, config.batch, config.claim_ms,
                                    config.badge_wait_ms / 1000, config.max_age_ms)
        self.silent = SilentUpdates(self.notify_store, self.badges, stores.push, self.sender, self.metrics,
                                    self.online, self.presence_ready)
        self.closing(self.shard_registry.close, "shard registry")
        self.closing(stores.close, "stores")
        self.closing(self.presence.close, "presence consumer")
        self.closing(self.sender.close, "push senders")
        self.closing(self.consumer.close, "notify consumer")  # first: leave the group

    def _shard(self, tenant: int, user: int) -> int:
        return ids.user_placement(tenant, user, self.config.common.shard_count)[2]

    def online(self, tenant: int, user: int, device: int) -> bool:
        """Whether the device is connected now (PresenceDirectory, from memory)."""
        devices = self.presence.devices_of(self._shard(tenant, user), tenant, user)
        return devices is not None and any(device in held for held in devices.values())

    def presence_ready(self, tenant: int, user: int) -> bool:
        """Whether the user's shard's presence was read to its end (and the gateways are known)."""
        return self.owners.loaded and self.presence.caught_up(self._shard(tenant, user))

    def not_ready(self) -> Iterator[str]:
        """Joining the group."""
        reason = self.consumer.not_ready()
        if reason:
            yield reason

    async def setup(self) -> None:
        """Check the stores, start the providers, follow presence, then consume."""
        await self.stores.check(commit_facts=False, allow_unsafe_dev=self.config.common.allow_unsafe_dev)
        for name, provider in self.sender.providers.items():
            await provider.start()
            logger.info("push provider %s on", name)
        if not self.sender.providers:
            logger.warning("no push provider configured (QIM_PUSH_*): every due alert counts as failed")
        self.sender.start()
        await self.owners.refresh(force=True)
        self.spawn(self.owners.run(), "gateway table")
        # run() assigns nothing first: it must be on the consumer's one thread before the
        # shards are added (the calls run there in order), or it would unassign them
        self.spawn(self.presence.run(), "presence")
        await asyncio.sleep(0)
        for shard in range(self.config.common.shard_count):  # every shard: presence is read, not leased
            await self.presence.add_shard(shard)
        self.spawn(self.consumer.run(), "dispatch consumer")
        self.spawn(self.consumer.lag_loop(), "dispatch lag")
        self.spawn(self.silent.run(), "silent badge updates")
