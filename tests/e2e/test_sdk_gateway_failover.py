"""A client given several gateways moves to another when its gateway freezes (issue 34
item 2; docs/decisions/0082; qim/sdk/gateways.py), against a real stack with two
gateways. Gateway 2 is SIGSTOPped (no FIN, no RST: the process just stops answering)
while an idle SDK client is on it: the client finds out by its heartbeat, reconnects to
gateway 1 within a bounded time, receives what a peer sent meanwhile and delivers what
it sends. Its store stays the one of the deployment, whichever gateway it uses."""

from __future__ import annotations

import os
import signal
import time

import pytest

from qim.sdk import Client, direct_conversation
from qim.sdk.identity import store_path
from qim.wire.devtoken import issue_dev_token
from tests.e2e.rawclient import sdk_transport
from tests.fixtures import running_stack
from tests.sdk.realstack import eventually, users

FAILOVER_WITHIN_S = 60.0  # heartbeat (2 s) + a probe window (2 s) + backoff, on a loaded machine


@pytest.fixture(scope="module")
def two_gateways(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("failover"), nodes={"gateway": 2},
                       extra_env={"QIM_GATEWAY_HEARTBEAT_S": "4"}) as st:
        yield st


async def open_client(st, data_dir, user: int, endpoints, **kw) -> Client:
    token = issue_dev_token(st.token_key, 0, user, 1)
    return await Client.open(endpoints, token, data_dir=str(data_dir), event_queue=False, send_timeout=60,
                             probe_s=2.0, **sdk_transport(st), **kw)


def test_the_store_is_the_deployments_not_the_gateways(tmp_path):
    g1, g2 = "127.0.0.1:7100", "127.0.0.1:7101"
    d = str(tmp_path)
    assert store_path([g1, g2], 0, 5, d) == store_path(g1, 0, 5, d) == store_path(f"{g1},{g2}", 0, 5, d)
    assert store_path([g2, g1], 0, 5, d, "acme") == store_path(g1, 0, 5, d, "acme") != store_path(g1, 0, 5, d)
    with pytest.raises(ValueError, match="listed twice"):
        store_path([g1, "127.0.0.1:07100"], 0, 5, d)


async def test_a_frozen_gateway_is_left_for_another(two_gateways, tmp_path):
    st = two_gateways
    g1, g2 = st.gateway_addrs
    a, b = users(2)
    alice = await open_client(st, tmp_path / "a", a, [g2, g1], deployment="failover")
    bob = await open_client(st, tmp_path / "b", b, [g1, g2])
    await alice.connect()
    await bob.connect()
    assert alice.endpoint == g2 and bob.endpoint == g1
    conv = direct_conversation(0, a, b)
    await bob.open_direct(a)
    await alice.open_direct(b)
    os.kill(st.pids["gateway2"], signal.SIGSTOP)
    frozen_at = time.monotonic()
    try:
        await bob.send_text(conv, "sent while gateway 2 is frozen")

        async def got_it() -> bool:
            return [m.body for m in await alice.messages(conv)] == [b"sent while gateway 2 is frozen"]

        await eventually(got_it, timeout=FAILOVER_WITHIN_S, what="alice on gateway 1 with bob's message")
        assert alice.endpoint == g1 and alice.runtime.gateways.moves >= 1
        print(f"failover: bob's message at alice {time.monotonic() - frozen_at:.1f} s after the freeze")
        ack = await alice.send_text(conv, "and back")

        async def delivered() -> bool:
            return ack.message_id in {m.message_id for m in await bob.messages(conv)}

        await eventually(delivered, timeout=30, what="alice's reply at bob")
    finally:
        os.kill(st.pids["gateway2"], signal.SIGCONT)
    path = alice.store_path
    await alice.close()
    again = await open_client(st, tmp_path / "a", a, [g1, g2], deployment="failover")
    assert again.store_path == path  # the same device and store on whichever gateway
    await again.close()
    await bob.close()


def test_stack_env_names_every_gateway_and_the_deployment(two_gateways):
    env = two_gateways.client_env()
    assert env["QIM_GATEWAY_ADDRS"].split(",") == two_gateways.gateway_addrs
    ws = env["QIM_GATEWAY_WS_ADDRS"].split(",")
    assert len(ws) == 2 and ws[0] == env["QIM_GATEWAY_WS_ADDR"] and all(u.startswith("ws://") for u in ws)
    assert env["QIM_DEPLOYMENT"] == two_gateways.gateway_addr
