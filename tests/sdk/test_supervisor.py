"""The connection supervisor against the in-process fake gateway (qim/sdk/reconnect.py):
a runtime is connected, trying with bounded backoff, or stopped for a reason it told
the app; nothing in an attempt waits without a bound."""

from __future__ import annotations

import asyncio

import pytest

from qim.sdk import ClientRuntime, LocalStore, credentials, direct_conversation
from qim.sdk import events as ev
from qim.sdk.credentials import TokenProviderError
from qim.wire.devtoken import issue_dev_token
from tests.sdk.fakegateway import FakeGateway
from tests.sdk.test_runtime import KEY, TENANT, runtime, wait_for

A, B = 11, 22


@pytest.fixture
async def gw():
    g = FakeGateway(KEY)
    g.addr = await g.start()
    yield g
    await g.stop()


def told_states(rt) -> list[tuple[str, str]]:
    out = []
    while not rt.events.empty():
        e = rt.events.get_nowait()
        if isinstance(e, ev.ConnectionState):
            out.append((e.state, e.reason))
    return out


async def test_an_unexpected_error_in_a_sync_is_a_failed_attempt_not_the_end(gw, tmp_path):
    a = runtime(gw, tmp_path, A, reconnect_backoff=(0.01, 0.05))
    failures = [RuntimeError("a bug in an after-sync hook")]

    async def hook(_conn) -> None:
        if failures and a.stats["reconnects"]:
            raise failures.pop()

    a.after_sync.append(hook)
    await a.connect()
    (stream,) = gw.online[A]
    stream.abort()  # the reconnect's first sync meets the bug
    await wait_for(lambda: not failures and a.connected and a.state == "ready")
    states = told_states(a)
    assert states[-1] == ("ready", "") and "reconnecting" in [s for s, _ in states], states
    ack = await a.send_message(direct_conversation(TENANT, A, B), B, b"still here")
    assert ack.conversation_seq == 1
    await a.close()


async def test_a_loss_without_auto_reconnect_is_told_offline(gw, tmp_path):
    a = runtime(gw, tmp_path, A, auto_reconnect=False)
    await a.connect()
    (stream,) = gw.online[A]
    stream.abort()
    await wait_for(lambda: a.state == "offline")
    assert told_states(a)[-1] == ("offline", "connection lost")
    await a.connect()  # the app connects again when it wants to
    assert a.connected and a.state == "ready"
    await a.close()
    assert told_states(a)[-1] == ("offline", "closed by the app")


async def test_a_token_provider_that_never_answers_fails_the_attempt(gw, tmp_path, monkeypatch):
    monkeypatch.setattr(credentials, "PROVIDER_TIMEOUT_S", 0.2)
    store = LocalStore.open(":memory:", TENANT, A)

    async def stuck() -> str:
        await asyncio.Event().wait()
        return ""

    rt = ClientRuntime(gw.addr, issue_dev_token(KEY, TENANT, A, store.device_id, ttl_s=5), store,
                       token_provider=stuck, plaintext=True)  # 5 s left: stale, the provider is asked
    with pytest.raises(TokenProviderError, match="TimeoutError"):
        await asyncio.wait_for(rt.connect(), 5)
    assert rt.state == "offline" and told_states(rt)[-1] == ("offline", "connect failed")
    await rt.close()
