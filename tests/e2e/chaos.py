"""Helpers for crash and restart gates: private stacks, a retrying sender, checks."""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys

from qim.errors import ErrorCode
from qim.protocol import Opcode
from tests.e2e.rawclient import LoginRefused, RawClient
from tests.fixtures import start_private_stack


def private_stack(base, **kw):
    """Private engines + services under `base`; the caller stops them."""
    return start_private_stack(base, **kw)


class Conversation:
    """A sender that retries each message with the same cmid until it is ACKed, the way
    the SDK does; records every ACK so the checks can compare coordinates."""

    def __init__(self, stack, sender: int, peer: int) -> None:
        self.stack, self.sender, self.peer = stack, sender, peer
        self.client = None
        self.acks: dict[bytes, object] = {}  # body -> ack
        self.order: list[bytes] = []

    async def _conn(self) -> RawClient:
        if self.client is None:
            try:
                self.client = await RawClient.login(self.stack, self.sender, device=random.getrandbits(31) + 1)
            except LoginRefused as exc:
                # AUTH refused UNAVAILABLE (an engine restarting: the session epoch's Redis
                # is down) is transient, as for the SDK: `send` reconnects and retries
                if exc.code != ErrorCode.UNAVAILABLE:
                    raise
                raise ConnectionError(f"AUTH refused for now: {exc.reply.message}") from None
        return self.client

    async def send(self, body: bytes, deadline_s: float = 60.0) -> None:
        cmid = os.urandom(16)
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline_s
        while True:
            try:
                op, reply = await (await self._conn()).send_text(self.peer, body, cmid=cmid)
                if op == Opcode.SEND_ACK:
                    if body in self.acks:
                        assert (self.acks[body].message_id, self.acks[body].conversation_seq) == \
                            (reply.message_id, reply.conversation_seq)
                    self.acks[body] = reply
                    self.order.append(body)
                    return
                assert reply.code == ErrorCode.UNAVAILABLE, reply
            except AssertionError:
                raise
            except Exception:  # connection dropped or timed out: reconnect and retry
                if self.client is not None:
                    await self.client.close()
                self.client = None
            if loop.time() > end:
                raise AssertionError(f"message {body!r} not acknowledged within {deadline_s}s")
            await asyncio.sleep(0.2)


async def delivered_once(stack, user: int, expected_bodies: list[bytes], timeout: float = 60.0) -> list:
    """Pull user's mailbox until every expected body is there; assert each message once
    (by message_id) and in send order."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    entries = []
    last_error = "none"
    while loop.time() < end:
        client = None
        try:
            client = await RawClient.login(stack, user, device=random.getrandbits(31) + 1)
            entries, _ = await client.pull_all()
        except (AssertionError, OSError, asyncio.TimeoutError) as e:
            entries, last_error = [], f"{type(e).__name__}: {e}"[:300]
        finally:
            if client is not None:  # a pull that timed out must not keep its connection: 16
                await client.close()  # open ones lock the user out (RATE_LIMITED for 60 s)
        if {e.body for e in entries} >= set(expected_bodies):
            break
        await asyncio.sleep(0.3)
    bodies = [e.body for e in entries if e.body in set(expected_bodies)]
    assert bodies == expected_bodies, (
        f"missing or out of order: {len(bodies)} of {len(expected_bodies)} "
        f"({len(entries)} entries pulled last; last login/pull error: {last_error})")
    mids = [e.message_id for e in entries]
    assert len(mids) == len(set(mids)), "a message was delivered twice"
    return entries


def run_audit(stack) -> subprocess.CompletedProcess:
    """`qimctl audit dispatch` against the stack's engines (waits for drain)."""
    env = {**os.environ, **stack.engines.env()}
    return subprocess.run([sys.executable, "-m", "qim.cli.qimctl", "audit", "dispatch", "--timeout", "60"],
                          env=env, capture_output=True, text=True, timeout=120)
