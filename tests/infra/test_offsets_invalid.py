"""An invalid offset in a ListOffsets answer (librdkafka's -1001 while a partition's
leader moves) is an EngineError, never a log end: taken as one, the session's durable
projection found its checkpoint "past the log end -1001" and failed closed for good."""

from __future__ import annotations

import concurrent.futures
from types import SimpleNamespace

import pytest

from qim.errors import EngineError
from qim.infra.kafka.offsets import OffsetReader


class Admin:
    def __init__(self, offsets: dict[int, int]) -> None:
        self.offsets = offsets

    def list_offsets(self, request, isolation_level, request_timeout):
        out = {}
        for tp in request:
            fut: concurrent.futures.Future = concurrent.futures.Future()
            fut.set_result(SimpleNamespace(offset=self.offsets[tp.partition]))
            out[tp] = fut
        return out


async def test_an_invalid_offset_fails_the_query_and_the_next_uses_a_new_client():
    reader = OffsetReader("127.0.0.1:1")
    reader._admin = Admin({0: 12, 1: -1001})
    with pytest.raises(EngineError, match=r"no valid offset for partitions \[1\]"):
        await reader.highs("qim.dispatch", [0, 1])
    assert reader._admin is None  # dropped: the next query asks a new client
    reader._admin = Admin({0: 12, 1: 7})
    assert await reader.highs("qim.dispatch", [0, 1]) == {0: 12, 1: 7}
