"""Traffic tools of the Redis instance-restart gate (tests/e2e/test_redis_instance_restart.py).

- `Sender`: one conversation's sender through the gateway, each message retried with
  its client_message_id until ACKed (docs/protocol.md: UNAVAILABLE, RATE_LIMITED and
  MAILBOX_DIRTY mean "retry with the same client_message_id"); it records every refusal
  (the ERROR code) and every dropped or timed-out request, and fails on any other
  ERROR code, so a refusal the client would not retry is a test failure, never a loss.
- `Puller`: one receiver device pulling its mailbox from its own cursor again and again
  (a real client's loop); asserts the cursor never goes back and keeps every entry in
  the order served, so a message served twice or skipped across the outage shows.
"""

from __future__ import annotations

import asyncio
import os
import random
from dataclasses import dataclass, field
from typing import Callable

from qim.errors import ErrorCode
from qim.proto.v1 import mailbox_pb2
from qim.protocol import Opcode
from qim.sdk.retry import RETRYABLE
from tests.e2e.rawclient import RawClient

CONTROL = 4  # message_type of a group's control events (not a text message)


@dataclass
class Sender:
    """Sends `name 0`, `name 1`, ... one after the other (conversation order is send
    order) with `build(client, body, cmid) -> (op, reply)`; `acks` body -> (message_id,
    conversation_seq) of `conv`; `refused` the ERROR codes met; `dropped` requests that failed on
    the connection (closed, timed out) and were retried on a new one."""

    stack: object
    user: int
    name: str
    build: Callable
    acks: dict = field(default_factory=dict)
    order: list = field(default_factory=list)
    refused: list = field(default_factory=list)
    refused_at: list = field(default_factory=list)  # loop.time() of each refusal
    dropped: int = 0
    conv: bytes = b""  # the conversation (for the checks)
    client: RawClient | None = None

    async def _conn(self) -> RawClient:
        if self.client is None:
            self.client = await RawClient.login(self.stack, self.user, device=random.getrandbits(31) + 1)
        return self.client

    async def _drop(self) -> None:
        self.dropped += 1
        if self.client is not None:
            await self.client.close()
        self.client = None

    async def send(self, body: bytes, deadline_s: float) -> None:
        """Send `body` until ACKed (same cmid every try); AssertionError on a refusal a
        client must not retry, or when no ACK came within `deadline_s`."""
        cmid = os.urandom(16)
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline_s
        while True:
            try:
                op, reply = await self.build(await self._conn(), body, cmid)
            except (OSError, asyncio.TimeoutError, AssertionError, EOFError):
                await self._drop()  # the gateway or a node went away: reconnect and retry
                self.refused_at.append(loop.time())
            else:
                if op == Opcode.SEND_ACK:
                    self.acks[body] = (reply.message_id, reply.conversation_seq)
                    self.order.append(body)
                    return
                assert op == Opcode.ERROR, (op, reply)
                assert reply.code in RETRYABLE, f"{self.name}: refused for good: {ErrorCode(reply.code).name} {reply.message}"
                self.refused.append(f"{ErrorCode(reply.code).name}: {reply.message[:70]}")
                self.refused_at.append(loop.time())
            assert loop.time() < end, f"{self.name}: {body!r} not acknowledged within {deadline_s} s"
            await asyncio.sleep(0.2 + random.random() * 0.2)

    async def run(self, stop: asyncio.Event, deadline_s: float) -> None:
        """Send until `stop`; the message under way when it is set is finished first."""
        i = 0
        try:
            while not stop.is_set():
                await self.send(f"{self.name} {i}".encode(), deadline_s)
                i += 1
                await asyncio.sleep(0.05)
        finally:
            if self.client is not None:
                await self.client.close()


@dataclass
class Puller:
    """One receiver device pulling from its own cursor (module doc). `entries` every
    entry served, in order; `cursors` every next_cursor served; `refused` ERROR codes."""

    stack: object
    user: int
    cursor: int = 0
    entries: list = field(default_factory=list)
    cursors: list = field(default_factory=list)
    refused: list = field(default_factory=list)
    client: RawClient | None = None

    async def _page(self):
        """One PULL_MAILBOX from the cursor: (op, reply), or None when the connection or
        the login failed (it is dropped and made again at the next call)."""
        try:
            if self.client is None:
                self.client = await RawClient.login(self.stack, self.user, device=7)
            return await self.client.request(
                Opcode.PULL_MAILBOX, mailbox_pb2.PullMailbox(cursor=self.cursor).SerializeToString())
        except (OSError, asyncio.TimeoutError, EOFError, AssertionError) as exc:
            # AssertionError: RawClient's "connection closed" or a login answered with an ERROR
            await self.close()
            self.refused.append(type(exc).__name__)
            return None

    async def pull_once(self) -> None:
        """Pull pages until has_more is false; AssertionError when the cursor goes back or
        a refusal is not one a client retries."""
        while True:
            got = await self._page()
            if got is None:
                return
            op, batch = got
            if op == Opcode.ERROR:
                assert batch.code in RETRYABLE, f"pull refused for good: {ErrorCode(batch.code).name} {batch.message}"
                self.refused.append(ErrorCode(batch.code).name)
                return
            assert op == Opcode.MAILBOX_BATCH, (op, batch)
            assert batch.next_cursor >= self.cursor, \
                f"user {self.user}'s cursor went back: {self.cursor} -> {batch.next_cursor}"
            self.entries.extend(batch.entries)
            self.cursor = batch.next_cursor
            self.cursors.append(batch.next_cursor)
            if not batch.has_more:
                return

    async def run(self, stop: asyncio.Event) -> None:
        """Pull every half second until `stop`."""
        while not stop.is_set():
            await self.pull_once()
            await asyncio.sleep(0.5)

    def texts(self) -> list:
        """The text entries served (control events of a group left out)."""
        return [e for e in self.entries if e.message_type != CONTROL]

    async def close(self) -> None:
        if self.client is not None:
            await self.client.close()
        self.client = None
