"""qim/sdk/gateways.py (issue 34 item 2; docs/decisions/0082): the order of several
gateways, the next one when an attempt fails, against the in-process fake gateway (the
frozen-gateway case on a real stack: tests/e2e/test_sdk_gateway_failover.py)."""

from __future__ import annotations

import asyncio

import pytest

from qim.sdk import ClientRuntime, LocalStore
from qim.sdk.gateways import parse_endpoints
from qim.wire.devtoken import issue_dev_token
from tests.sdk.fakegateway import FakeGateway
from tests.sdk.test_runtime import KEY, TENANT


@pytest.fixture
async def gw():
    g = FakeGateway(KEY)
    g.addr = await g.start()
    yield g
    await g.stop()


def test_endpoints_are_a_list_or_a_comma_separated_string():
    assert parse_endpoints("127.0.0.1:1, 127.0.0.1:2") == ("127.0.0.1:1", "127.0.0.1:2")
    assert parse_endpoints(["ws://127.0.0.1:1/qim/ws"]) == ("ws://127.0.0.1:1/qim/ws",)
    for bad, match in ((" , ", "no gateway"), ("127.0.0.1:1,nonsense", "nonsense"),
                       (["127.0.0.1:1", "127.0.0.1:01"], "twice")):
        with pytest.raises(ValueError, match=match):
            parse_endpoints(bad)


async def test_connect_goes_on_to_the_next_gateway_when_one_is_closed_or_silent(gw):
    silent = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)  # accepts, never answers
    silent_addr = "127.0.0.1:%d" % silent.sockets[0].getsockname()[1]
    store = LocalStore.open(":memory:", TENANT, 41)
    token = issue_dev_token(KEY, TENANT, 41, store.device_id)
    rt = ClientRuntime(["127.0.0.1:1", gw.addr], token, store, plaintext=True)
    await rt.connect()  # port 1 is closed: the same attempt tries the next
    assert rt.endpoint == gw.addr and rt.gateways.moves == 1
    await rt.close()
    rt = ClientRuntime([silent_addr, gw.addr], token, store, plaintext=True)
    rt.gateways.connect_timeout_s = 1.0  # CONNECT_TIMEOUT_S (15 s) shortened for the test
    await rt.connect()
    assert rt.endpoint == gw.addr
    await rt.close()
    silent.close()
