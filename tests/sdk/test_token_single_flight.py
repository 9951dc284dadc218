"""Issue 34 item 4: one token-provider call at a time per runtime, its result shared
(qim/sdk/credentials.py TokenSource.current). Short tokens, a slow provider, the link
cut while the live refresh (keep_fresh) waits on the provider: the reconnect must join
that call, not ask again. Against the in-process fake gateway (real frames)."""

from __future__ import annotations

import asyncio

import pytest

from qim.sdk import ClientRuntime, LocalStore
from qim.sdk.credentials import TokenProviderError, TokenSource
from qim.wire.devtoken import issue_dev_token
from tests.sdk.fakegateway import FakeGateway
from tests.sdk.test_runtime import KEY, TENANT, wait_for

PROVIDER_S = 1.5  # the provider's own latency, as in the report


@pytest.fixture
async def gw():
    g = FakeGateway(KEY)
    g.addr = await g.start()
    yield g
    await g.stop()


class SlowProvider:
    """An async token provider taking PROVIDER_S; counts calls and the most in flight."""

    def __init__(self, user: int, device: int, ttl_s: int, tenant: int = TENANT) -> None:
        self.tenant, self.user, self.device, self.ttl_s = tenant, user, device, ttl_s
        self.calls = self.inflight = self.most = 0
        self.entered = asyncio.Event()

    async def __call__(self) -> str:
        self.calls += 1
        self.inflight += 1
        self.most = max(self.most, self.inflight)
        self.entered.set()
        try:
            await asyncio.sleep(PROVIDER_S)
            return issue_dev_token(KEY, self.tenant, self.user, self.device, ttl_s=self.ttl_s)
        finally:
            self.inflight -= 1


async def test_a_reconnect_during_a_live_refresh_shares_the_providers_call(gw):
    user = 31
    store = LocalStore.open(":memory:", TENANT, user)
    provider = SlowProvider(user, store.device_id, ttl_s=4)  # stale at once (REFRESH_MARGIN_S 30)
    rt = ClientRuntime(gw.addr, issue_dev_token(KEY, TENANT, user, store.device_id, ttl_s=4), store,
                       token_provider=provider, reconnect_backoff=(0.01, 0.05), plaintext=True)
    await rt.connect()  # the given token is stale: one call
    assert provider.calls == 1 and provider.most == 1
    first = rt.core.conn
    provider.entered.clear()
    # keep_fresh refreshes half-way to the 4 s expiry: wait until it is inside the provider
    await asyncio.wait_for(provider.entered.wait(), 10)
    await asyncio.sleep(0.3)
    for stream in list(gw.online[user]):  # the link is cut 0.3 s into the provider call
        stream.close()
    await wait_for(lambda: rt.connected and rt.core.conn is not first, timeout=15)
    assert provider.most == 1, f"{provider.most} provider calls in flight at once"
    assert provider.calls == 2, f"{provider.calls} calls: the reconnect asked again instead of sharing"
    await rt.close()


async def test_concurrent_callers_share_one_call_and_its_error():
    calls = []

    async def broken() -> str:
        calls.append(1)
        await asyncio.sleep(0.2)
        raise OSError("token service down")

    src = TokenSource(issue_dev_token(KEY, 0, 5, 1), (0, 5, 1), provider=broken)
    src.refresh_next = True
    got = await asyncio.gather(src.current(), src.current(), src.current(), return_exceptions=True)
    assert len(calls) == 1
    assert all(isinstance(e, TokenProviderError) for e in got), got
    # a caller cancelled while it waits leaves the call running for the others
    slow = SlowProvider(5, 1, ttl_s=3600, tenant=0)
    src.provider = slow
    first = asyncio.ensure_future(src.current())
    await asyncio.wait_for(slow.entered.wait(), 5)
    second = asyncio.ensure_future(src.current())
    first.cancel()
    assert await asyncio.wait_for(second, 10) == src.token
    assert slow.calls == 1 and not src.stale()
