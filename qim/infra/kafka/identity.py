"""Waiting for a topic's identity at start (the session's durable projection and the
HistoryArchiver bind their checkpoints to cluster id ‖ topic id ‖ partition count).

A broker that is still starting, or a topic not created yet, answers with an error for a
while: waited for, up to `wait_s`. A broker that answers but has no topic id (no KIP-516)
raises TopicWithoutId at once: waiting would not help.
"""

from __future__ import annotations

import asyncio
import logging

from qim.errors import EngineError, TopicWithoutId
from qim.infra.kafka.bridge import topic_identity

logger = logging.getLogger(__name__)
IDENTITY_WAIT_S = 60.0


async def wait_topic_identity(bootstrap: str, topic: str, wait_s: float = IDENTITY_WAIT_S,
                              poll_s: float = 1.0) -> tuple[str, str, int]:
    """(cluster_id, topic_id, partition count) of `topic` once the broker tells them.
    TopicWithoutId at once; EngineError (the last one) when still failing after `wait_s` s."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while True:
        try:
            return await topic_identity(bootstrap, topic)
        except TopicWithoutId:
            raise
        except EngineError as exc:
            if loop.time() > deadline:
                raise
            logger.info("waiting for %s metadata: %s", topic, exc)
            await asyncio.sleep(poll_s)
