"""The SDK's side of issue 15: tokens refreshed through the app's token provider (after
KICKED{TOKEN_EXPIRED}, before a stale token is used, once after UNAUTHENTICATED), and
the server's retry_after_ms honoured by the backoff (qim/sdk/credentials.py,
qim/sdk/retry.py; the RateGate: tests/sdk/test_rate_gate.py). Against the in-process
fake gateway (real frames)."""

from __future__ import annotations

import asyncio
import time

import pytest

from qim.errors import ErrorCode
from qim.proto.v1 import connection_pb2
from qim.protocol import Opcode
from qim.sdk import ClientRuntime, LocalStore, ServerError
from qim.sdk.credentials import TokenProviderError, TokenSource
from qim.sdk.retry import Backoff
from qim.wire.devtoken import issue_dev_token
from tests.sdk.fakegateway import FakeGateway
from tests.sdk.test_runtime import KEY, TENANT, wait_for


@pytest.fixture
async def gw():
    g = FakeGateway(KEY)
    g.addr = await g.start()
    yield g
    await g.stop()


def test_a_token_is_refreshed_when_it_expires_soon_or_was_refused():
    now = int(time.time())
    src = TokenSource(issue_dev_token(KEY, 0, 5, 1, ttl_s=3600), (0, 5, 1))
    assert not src.stale()
    assert TokenSource(issue_dev_token(KEY, 0, 5, 1, ttl_s=20, now=now), (0, 5, 1)).stale()
    src.refresh_next = True
    assert src.stale()
    with pytest.raises(ValueError, match="user 6"):
        src.update(issue_dev_token(KEY, 0, 6, 1))


async def test_a_provider_failure_or_a_token_of_another_device_fails_the_attempt():
    src = TokenSource(issue_dev_token(KEY, 0, 5, 1), (0, 5, 1), provider=lambda: issue_dev_token(KEY, 0, 5, 2))
    src.refresh_next = True
    with pytest.raises(TokenProviderError):
        await src.current()

    async def broken() -> str:
        raise OSError("token service down")

    src.provider = broken
    with pytest.raises(TokenProviderError, match="OSError"):
        await src.current()


async def test_kicked_for_token_expiry_reconnects_with_the_providers_token(gw, tmp_path):
    store = LocalStore.open(":memory:", TENANT, 11)
    calls = []

    async def provider() -> str:
        calls.append(1)
        return issue_dev_token(KEY, TENANT, 11, store.device_id)

    rt = ClientRuntime(gw.addr, issue_dev_token(KEY, TENANT, 11, store.device_id), store, token_provider=provider,
                       reconnect_backoff=(0.01, 0.05), plaintext=True)
    await rt.connect()
    assert calls == []  # the token it was given is fresh
    first = rt.core.conn
    (stream,) = gw.online[11]
    stream.send(Opcode.KICKED, 0, connection_pb2.Kicked(reason=connection_pb2.Kicked.TOKEN_EXPIRED).SerializeToString())
    stream.close()
    await wait_for(lambda: rt.connected and rt.core.conn is not first)
    assert calls == [1] and rt.state == "ready"
    await rt.close()


async def test_without_a_provider_an_expired_session_goes_offline_token_refused(gw):
    store = LocalStore.open(":memory:", TENANT, 12)
    short = issue_dev_token(KEY, TENANT, 12, store.device_id, ttl_s=1, now=int(time.time()) - 10 + 1)
    gw.verifier.leeway_s = 30  # the fake accepts it once ...
    rt = ClientRuntime(gw.addr, short, store, reconnect_backoff=(0.01, 0.05), plaintext=True)
    await rt.connect()
    gw.verifier.leeway_s = 0  # ... and then it has expired
    (stream,) = gw.online[12]
    stream.send(Opcode.KICKED, 0, connection_pb2.Kicked(reason=connection_pb2.Kicked.TOKEN_EXPIRED).SerializeToString())
    stream.close()
    await wait_for(lambda: rt.state == "offline")
    assert not rt.connected
    rt.update_token(issue_dev_token(KEY, TENANT, 12, store.device_id))  # the app hands a fresh one over
    await rt.connect()
    assert rt.connected
    await rt.close()


async def test_backoff_never_retries_before_the_servers_hint(monkeypatch):
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)

    monkeypatch.setattr(asyncio, "sleep", sleep)
    b = Backoff(0.05, 2.0, budget=30.0)
    await b.wait(ServerError(ErrorCode.UNAVAILABLE, "x"))
    await b.wait(ServerError(ErrorCode.RATE_LIMITED, "x", retry_after_ms=1500))
    await b.wait(ServerError(ErrorCode.RATE_LIMITED, "x", retry_after_ms=10))
    assert slept == [0.05, 1.5, 0.2]  # the hint when longer, the own schedule otherwise
    with pytest.raises(ServerError):  # a hint beyond the budget surfaces at once
        await Backoff(budget=30.0).wait(ServerError(ErrorCode.RATE_LIMITED, "x", retry_after_ms=60_000))
