"""Helpers for SDK end-to-end tests against the real stack (tests/e2e/test_sdk_*.py).

`runtime()` opens a LocalStore in the test's directory and a ClientRuntime whose events
are recorded by `Told`, so a test asserts what the APP was told (payloads and order)
and not only what the store holds.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Optional

from qim.sdk import ClientRuntime, LocalStore
from qim.sdk import events as ev
from qim.wire.devtoken import issue_dev_token
from tests.e2e.rawclient import sdk_transport


def users(n: int) -> list[int]:
    """n fresh user ids (random 40-bit base: tests share the session stack)."""
    base = random.getrandbits(40) + 1
    return [base + i for i in range(n)]


class Told:
    """Every event a runtime emitted, in order (the app's view)."""

    def __init__(self) -> None:
        self.events: list = []

    def __call__(self, event) -> None:
        self.events.append(event)

    def messages(self, conversation_id: Optional[bytes] = None) -> list:
        """StoredMessages of MessagesAdded events in the order the app was told them."""
        return [m for e in self.events if isinstance(e, ev.MessagesAdded) for m in e.messages
                if conversation_id is None or m.conversation_id == conversation_id]

    def of(self, kind) -> list:
        return [e for e in self.events if isinstance(e, kind)]


def runtime(stack, tmp_path, user: int, *, device: Optional[int] = None, name: str = "",
            endpoint: Optional[str] = None, **kw) -> ClientRuntime:
    """A ClientRuntime for `user` on a store file of its own (name tells two stores of
    one user apart); `rt.told` records its events."""
    store = LocalStore.open(str(tmp_path / f"{user}{name}.sqlite3"), 0, user, device)
    token = issue_dev_token(stack.token_key, 0, user, store.device_id)
    told = Told()
    kw.setdefault("send_timeout", 30)
    for name, value in sdk_transport(stack).items():  # TLS with the stack's CA (also through a proxy)
        kw.setdefault(name, value)
    rt = ClientRuntime(endpoint or stack.gateway_addr, token, store, event_queue=False, on_event=told, **kw)
    rt.told = told
    return rt


async def eventually(pred, timeout: float = 15.0, what: str = "condition") -> None:
    """Poll `pred()` (sync or async) every 20 ms; AssertionError after `timeout` s."""
    end = time.monotonic() + timeout
    while True:
        got = pred()
        if asyncio.iscoroutine(got):
            got = await got
        if got:
            return
        assert time.monotonic() < end, f"{what} not reached within {timeout} s"
        await asyncio.sleep(0.02)


async def shutdown(*rts: ClientRuntime) -> None:
    """Close runtimes and their stores."""
    for rt in rts:
        await rt.close()
        rt.store.close()
