"""Where a direct message waits in the fanout (issue 41; docs/operations.md): its Outbox
record's append (the broker's LogAppendTime) to the fanout's read,
`qim_fanout_direct_read_lag_seconds`, and each of its dispatch records' produce to
delivery, `qim_fanout_direct_delivery_seconds`. A group's records are in neither. Real
Kafka for the dispatches; the Outbox records are handed in as read."""

from __future__ import annotations

import time

from qim._core import ids
from qim.faults import FaultPoints
from qim.services.fanout.coordinator import FanoutCoordinator
from tests.fanout.test_commit import outbox_record
from tests.fanout.test_pipeline import record
from tests.fixtures import TEST_SHARD_COUNT


def shards(*users: int) -> int:
    """How many shards `users` fall in (one dispatch record each)."""
    return len({ids.user_placement(0, u, TEST_SHARD_COUNT)[2] for u in users})


async def test_a_direct_records_read_lag_and_deliveries_are_observed_and_a_groups_are_not(engines):
    coordinator = FanoutCoordinator(engines.env()["QIM_KAFKA_BOOTSTRAP"], TEST_SHARD_COUNT, 512, FaultPoints("", ("after_dispatch",)),
                                    groups=None)  # type: ignore[arg-type]
    try:
        coordinator.positions = {0: 0}
        direct = outbox_record(0)
        direct._appended_ms = int(time.time() * 1000) - 800  # read 0.8 s after its append
        group = record(1, group=True)
        group._appended_ms = direct._appended_ms - 5000
        await coordinator._process([direct, group])
        m = coordinator._m
        delivered = sum(b.get() for b in m.direct_delivery._buckets)
        assert delivered == shards(1, 2)  # the sender's and the recipient's shards; no group dispatch record
        assert m.dispatches._value.get() == shards(1, 2) + shards(1, 2, 3)
        assert sum(b.get() for b in m.direct_read_lag._buckets) == 1
        assert 0.8 <= m.direct_read_lag._sum.get() < 5.0
    finally:
        # never commit this stand-in position for group qim-fanout on the shared broker: the
        # session stack's fanout would start above its own first Outbox records
        coordinator.positions.clear()
        await coordinator.close()
