"""ModerationNode: the qim-moderation process, the ModerationService (issue 38;
docs/decisions/0123-moderation-notify.md). Stateless: its position is the Kafka consumer
group of the Notifier (qim/services/moderation/notify.py), shared by every node, so any
number of nodes run side by side and a dead node's partitions move to the others. Not
ready while it joins the group (a failing receiver shows in the lag metrics instead).
Metrics on QIM_MODERATION_METRICS_LISTEN (9109)."""

from __future__ import annotations

import logging
from typing import Iterator, Optional

from qim.config.moderation_service import ModerationConfig
from qim.obs.node import ServiceNode
from qim.services.moderation.notify import Notifier, NotifyMetrics
from qim.services.moderation.reports import ReportDelivery, ReportMetrics
from qim.stores.open import open_report_store

logger = logging.getLogger(__name__)


class ModerationNode(ServiceNode):
    """Runs the Notifier and the ReportDelivery as supervised tasks."""

    service = "moderation"

    def __init__(self, config: ModerationConfig) -> None:
        super().__init__(config.metrics_listen)
        self.config = config
        self.metrics = NotifyMetrics(self.registry)
        self.always_zero(self.metrics.dropped)
        # no QIM_MODERATION_NOTIFY_URL: notifications are off, the node idles
        self.notifier: Optional[Notifier] = None
        if config.url:
            self.notifier = Notifier(
                config.common.kafka_bootstrap,
                config.url,
                config.secret,
                config.ca_file,
                config.batch,
                config.timeout_ms,
                self.metrics,
            )
            self.closing(self.notifier.close, "notify consumer")
        # user reports (decision 0124): from the Redis home instance to the same receiver
        self.reports: Optional[ReportDelivery] = None
        if config.url:
            store = open_report_store(config.common.redis_layout)
            self.reports = ReportDelivery(store, config.url, config.secret, config.ca_file, config.batch,
                                          config.timeout_ms, ReportMetrics(self.registry))
            self.closing(self.reports.close, "report delivery")

    def not_ready(self) -> Iterator[str]:
        """Joining the group."""
        reason = self.notifier.not_ready() if self.notifier is not None else None
        if reason:
            yield reason

    async def setup(self) -> None:
        """Join the consumer group and deliver (a supervised task: its death restarts the node)."""
        if self.notifier is None:
            logger.info("QIM_MODERATION_NOTIFY_URL unset: after-send notifications are off")
            return
        self.spawn(self.notifier.run(), "notifier")
        if self.reports is not None:
            self.spawn(self.reports.run(), "report delivery")
