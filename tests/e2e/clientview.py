"""One scenario of the body-size matrix (tests/e2e/test_client_view_bodies.py): every
threshold size sent in one conversation kind through the real stack, and what the apps
and the public requests tell about each message, per (presence, path, size).

Users: R_on (connected while messages arrive: push + pull), R_off (connects afterwards:
login pull), R_rb (held a cursor, goes away, its cursor expires: REBUILD). Conversations:
one per size and recipient group (`size` convs: the size's message is the head of the
list) and one `mixed` conv per recipient group holding every size in order (history
pages across the 512 KiB budget, order as told). Direct: a fresh sender per size
conversation; groups: one sender owning every group, padded with offline fillers to the
kind's member count. What the apps are told is recorded by qim/cli/verify.AppView from
MessagesAdded events; history and session heads come from requests through the
runtime's request(); nothing reads the SDK's LocalStore for a verdict.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections import defaultdict
from dataclasses import dataclass, field

import redis.asyncio as aioredis

from qim._core import ids
from qim.cli.bodies import BLOB_CUSTOM_TYPE, BLOB_MESSAGE_TYPE, OVER_LIMIT, body_bytes, digest
from qim.cli.verify import AppView, Intent, mismatch
from qim.proto.v1 import group_pb2
from qim.protocol import Opcode
from qim.sdk import ClientRuntime, LocalStore
from qim.stores.redis.keys import days_key, mailbox_key
from qim.wire.devtoken import issue_dev_token
from tests.e2e import clientview_reads as reads
from tests.e2e.rawclient import sdk_transport

WAIT_S = 60.0
SEND_CONCURRENCY = 6


@dataclass
class Conv:
    label: str               # "size" or "mixed"
    conversation_id: bytes
    sender: int
    recipients: tuple        # the observed recipients (R_on, R_off, R_rb) in this conversation
    group_id: int = 0
    sizes: list = field(default_factory=list)

    def peer(self, user: int) -> int:
        """PULL_HISTORY / MARK_READ peer of `user` (direct only)."""
        return 0 if self.group_id else (self.sender if user != self.sender else self.recipients[0])


class Device:
    def __init__(self, stack, tmp, user: int, events: list) -> None:
        self.user, self.view, self.events = user, AppView(user, f"user {user}"), events
        self.store = LocalStore.open(str(tmp / f"{user}.sqlite3"), 0, user)
        token = issue_dev_token(stack.token_key, 0, user, self.store.device_id)
        self.rt = ClientRuntime(stack.gateway_addr, token, self.store, event_queue=False, send_timeout=40,
                                **sdk_transport(stack),
                                on_event=self.on_event)

    def on_event(self, event) -> None:
        self.events.append((self.user, type(event).__name__))
        self.view.on_event(event)

    async def told_all(self, message_ids: list, timeout: float = WAIT_S) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        await self.rt.connect()
        while not self.view.has_all(message_ids) and loop.time() < deadline:
            await self.rt.pull_mailbox()
            await asyncio.sleep(0.1)

    async def close(self) -> None:
        if self.store is None:
            return
        try:
            await self.rt.close()
        finally:
            self.store.close()
            self.store = None


class Scenario:
    """Run with `await run()`; then `problems[(presence, path, size)]` lists what was
    wrong (empty: told whole), `order[(presence, path)]` the order faults and
    `over_limit` the outcome of the 1 MiB + 1 send."""

    def __init__(self, stack, redis_addr: str, tmp, kind: str, members: int, sizes: list) -> None:
        self.stack, self.redis_addr, self.tmp, self.kind = stack, redis_addr, tmp, kind
        self.members, self.sizes = members, sizes
        base = random.getrandbits(40) << 12
        self._next = iter(range(base + 1, base + 4000))
        self.on, self.off, self.rb = next(self._next), next(self._next), next(self._next)
        self.events: list = []
        self.devices: dict[int, Device] = {}
        self.convs: list[Conv] = []
        self.intents: list[tuple[Conv, Intent]] = []
        self.problems: dict = defaultdict(list)
        self.order: dict = defaultdict(list)
        self.over_limit: object = None
        self.phases: list[str] = []  # progress, for the failure message of a stuck scenario

    def device(self, user: int) -> Device:
        if user not in self.devices:
            self.devices[user] = Device(self.stack, self.tmp, user, self.events)
        return self.devices[user]

    def plan(self) -> None:
        """Conversations of the kind; groups hold `members` users (fillers stay offline)."""
        watched = [self.on, self.off, self.rb]
        if self.members == 2:
            for size in self.sizes:
                sender = next(self._next)
                self.convs += [Conv("size", ids.conversation_id_direct(0, sender, r), sender, (r,), sizes=[size])
                               for r in watched]
            mixer = next(self._next)
            self.convs += [Conv("mixed", ids.conversation_id_direct(0, mixer, r), mixer, (r,), sizes=list(self.sizes))
                           for r in watched]
            return
        sender = next(self._next)
        per_group = min(len(watched), self.members - 1)
        chunks = [tuple(watched[i:i + per_group]) for i in range(0, len(watched), per_group)]
        for label, sizes in [("size", [s]) for s in self.sizes] + [("mixed", list(self.sizes))]:
            for chunk in chunks:
                gid = next(self._next)
                self.convs.append(Conv(label, ids.conversation_id_group(0, gid), sender, chunk, gid, sizes))

    async def run(self) -> None:
        try:
            await self._run()
        finally:
            for d in self.devices.values():
                await d.close()

    async def _run(self) -> None:
        self.plan()
        on, rb = self.device(self.on), self.device(self.rb)
        await on.rt.connect()
        await self.hold_a_cursor(rb)
        self.phases.append("cursor held")
        await self.create_groups()
        for sender in dict.fromkeys(c.sender for c in self.convs):  # one login per device, before the sends
            await self.device(sender).rt.connect()
        sem = asyncio.Semaphore(SEND_CONCURRENCY)
        await asyncio.gather(*(self.send_conv(c, sem) for c in self.convs))
        self.phases.append("sent")
        await self.send_over_limit()
        wanted = defaultdict(list)
        for conv, i in self.intents:
            for r in conv.recipients:
                wanted[r].append(i.message_id)
        await asyncio.gather(on.told_all(wanted[self.on]), self.device(self.off).told_all(wanted[self.off]))
        self.phases.append("told online/offline")
        await self.expire_cursor()
        await rb.told_all(wanted[self.rb])
        self.phases.append("rebuilt")
        await self.collect()

    async def hold_a_cursor(self, rb: Device) -> None:
        """R_rb applies one message through MAILBOX_BATCH (a non-zero cursor), then leaves."""
        peer = next(self._next)
        p = self.device(peer)
        await p.rt.connect()
        await asyncio.gather(rb.rt.connect(), p.rt.send_message(ids.conversation_id_direct(0, peer, self.rb), self.rb,
                                                                 b"prelude"))
        await rb.told_all([])
        for _ in range(100):
            await rb.rt.pull_mailbox()
            if any(t.size == len(b"prelude") for t in rb.view.told):
                break
            await asyncio.sleep(0.05)
        await rb.rt.pull_mailbox()
        await rb.rt.close()

    async def create_groups(self) -> None:
        groups = [c for c in self.convs if c.group_id]
        if not groups:
            return
        s = self.device(groups[0].sender)
        await s.rt.connect()
        for c in groups:
            fillers = [next(self._next) for _ in range(self.members - 1 - len(c.recipients))]
            req = group_pb2.CreateGroup(group_id=c.group_id, members=[*c.recipients, *fillers],
                                        client_message_id=os.urandom(16))
            await s.rt.request(Opcode.CREATE_GROUP, req.SerializeToString())

    async def send_conv(self, c: Conv, sem: asyncio.Semaphore) -> None:
        async with sem:
            s = self.device(c.sender)
            for order, size in enumerate(c.sizes):
                body = body_bytes(c.conversation_id + order.to_bytes(4, "big"), size)
                ack = await s.rt.send_message(c.conversation_id, 0 if c.group_id else c.recipients[0], body,
                                              BLOB_MESSAGE_TYPE, BLOB_CUSTOM_TYPE)
                self.intents.append((c, Intent(c.conversation_id, c.sender, order, digest(body), size,
                                               BLOB_MESSAGE_TYPE, BLOB_CUSTOM_TYPE, frozenset(c.recipients),
                                               ack.message_id, ack.conversation_seq)))

    async def send_over_limit(self) -> None:
        c = self.convs[0]
        try:
            await self.device(c.sender).rt.send_message(
                c.conversation_id, 0 if c.group_id else c.recipients[0], body_bytes(b"over", OVER_LIMIT),
                BLOB_MESSAGE_TYPE, BLOB_CUSTOM_TYPE)
            self.over_limit = "accepted"
        except Exception as exc:
            self.over_limit = exc

    async def expire_cursor(self) -> None:
        """Retention took everything R_rb had not read: as the mailbox trim does, its
        entries are removed and the trim boundary moves past them, so its (non-zero)
        cursor gets CURSOR_EXPIRED and only history holds the messages."""
        host, port = self.redis_addr.rsplit(":", 1)
        r = aioredis.Redis(host=host, port=int(port))
        try:
            top = 0
            async for key in r.scan_iter(mailbox_key(0, self.rb, 0)[:-1] + "*"):
                for _member, score in await r.zrange(key, -1, -1, withscores=True):
                    top = max(top, int(score))
                await r.delete(key)
            await r.zadd(days_key(0, self.rb), {"trim": top})
        finally:
            await r.aclose()

    async def collect(self) -> None:
        presences = {self.on: "online", self.off: "offline"}
        for conv, i in self.intents:
            for r in conv.recipients:
                label = presences.get(r, "rebuild")
                self.check_told(label, "mailbox" if r in presences else "rebuild", r, i)
            told = [t for t in self.devices[conv.sender].view.told if t.message_id == i.message_id]
            for t in told[:1]:  # own messages: not required, whole when told
                bad = mismatch(i, t)
                if bad:
                    self.problems[("sender", "mailbox", i.size)].append(f"own message told with {bad}")
        for user, label in [*presences.items(), (self.rb, "rebuild")]:
            self.order[(label, "mailbox")] += reads.order_faults(self.devices[user].view)
        if (self.rb, "CursorReset") not in self.events:
            self.problems[("rebuild", "rebuild", None)].append("no CURSOR_EXPIRED rebuild happened")
        for user, label in presences.items():
            rt = self.devices[user].rt
            await reads.check_history(self, rt, user, label)
            await reads.check_heads(self, rt, user, label)

    def check_told(self, presence: str, path: str, user: int, i: Intent) -> None:
        told = [t for t in self.devices[user].view.told if t.message_id == i.message_id]
        where = (presence, path, i.size)
        if not told:
            self.problems[where].append(f"seq {i.conversation_seq} never told")
        elif len(told) > 1:
            self.problems[where].append(f"seq {i.conversation_seq} told {len(told)} times")
        for t in told[:1]:
            bad = mismatch(i, t)
            if bad:
                self.problems[where].append(f"seq {i.conversation_seq} told with {bad}")
