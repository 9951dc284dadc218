"""Reads of many rows keep at most CQL_READ_CONCURRENCY statements in flight (issue 14:
the history-seam bench's audit-style read of 45,000 rows put 5,562 in flight at once and
the node timed them out). The session's execute is replaced by a counter: pure logic."""

from __future__ import annotations

import asyncio

from qim.config.tier import ScyllaConfig
from qim.consts import CQL_READ_CONCURRENCY
from qim.stores.cql.archive import CqlArchive
from qim.stores.cql.messages import CqlMessageStore
from qim.stores.cql.session import CqlSession
from qim.stores.messages import MessageRef


class CountingSession(CqlSession):
    """A CqlSession whose statements only count how many run at once."""

    def __init__(self) -> None:
        super().__init__(ScyllaConfig(("127.0.0.1",), 1, "qim_none", allow_single_node_dev=True))
        self.running = self.peak = 0

    async def prepare(self, cql: str):
        return cql

    async def execute(self, stmt, params=None, what: str = "query") -> list:
        self.running += 1
        self.peak = max(self.peak, self.running)
        await asyncio.sleep(0.001)
        self.running -= 1
        return []


async def test_point_reads_are_bounded():
    s = CountingSession()
    conv = b"\x01" * 16
    assert await CqlArchive(s).history_rows(0, conv, list(range(1, 1001))) == {n: None for n in range(1, 1001)}
    assert 1 < s.peak <= CQL_READ_CONCURRENCY
    s.peak = 0
    assert await CqlArchive(s).records(0, [n.to_bytes(16, "big") for n in range(1, 501)]) == [None] * 500
    assert 1 < s.peak <= CQL_READ_CONCURRENCY
    s.peak = 0
    refs = [MessageRef(conv, n.to_bytes(16, "big")) for n in range(1, 501)]
    assert await CqlMessageStore(s).record_sizes(0, refs) == [0] * 500
    assert 1 < s.peak <= CQL_READ_CONCURRENCY
