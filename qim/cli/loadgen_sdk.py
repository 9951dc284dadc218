"""The SDK lane of `qim-loadgen rate` (seed 000 "SDK 回归泳道").

A share of the load generator's connections (`--sdk-clients N`, default 5 % of them, 0 =
off, the capacity control) are real `qim.sdk.Client`s, so the SDK's state machine
(store-first sends, resends, mailbox sync, dedup, unread) runs under the same load as
the frame-level lane. They are paired (client 2k and 2k+1 share a direct conversation
and send to each other: a client's own echo only reconciles its send, so only a peer
can observe that a message went the whole way). The lane sends at its
share of the target rate, open loop (`send(..., wait=False)`: stored as pending, ACK
later as PendingResolved). The load generator keeps no copy of the SDK's state
machine, cursor or dedup: qim/cli/loadgen_sdkcheck.py compares what the clients show
with what was sent. Latency figures stay with the frame-level lane (the SDK's events
do not carry the ACK/PUSH instants the segment attribution needs).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from typing import Any, Optional, Sequence, Union

from qim.cli.bodies import body_bytes, digest
from qim.cli.gateways import failover_order
from qim.cli.loadgen_sdkcheck import SdkVerdict, SdkView, check_sdk, check_unread, listed_row
from qim.cli.verify import AppView, Intent
from qim.consts import MESSAGE_TYPE_TEXT
from qim.wire.devtoken import issue_dev_token

LIST_PAGE = 200  # messages() page while reading a client's whole listing back
UNREAD_SETTLE_S = 10.0  # SESSION_DELTA may trail the last message by a moment
STATES_KEPT = 8  # connection states a lane client keeps for a failed verdict's notes


def default_clients(connections: int, share: float = 0.05) -> int:
    """The default lane size: `share` of the frame-level connections, rounded to a
    whole pair, at least one pair."""
    return max(2, 2 * round(connections * share / 2))


class _LaneClient:
    """One lane client: its Client, peer, conversation, view and the acks it was told."""

    def __init__(self, user: int, peer: int) -> None:
        self.user, self.peer = user, peer
        self.client: Any = None  # qim.sdk.Client once started (imported only when the lane is on)
        self.conversation_id = b""
        self.view = AppView(user, f"sdk user {user}")
        self.by_cmid: dict[bytes, Intent] = {}
        self.failed = 0
        self.sent = 0
        self.gateway = ""
        self.states: list[tuple[float, str, str]] = []  # (monotonic s, state, reason), the last STATES_KEPT

    def on_event(self, event) -> None:
        """Runtime hook: the view records messages; acks and refusals fill the intents;
        connection states are kept for the verdict's notes."""
        self.view.on_event(event)
        kind = type(event).__name__
        if kind == "ConnectionState":
            self.states = [*self.states[-(STATES_KEPT - 1):], (time.monotonic(), event.state, event.reason)]
        elif kind == "PendingResolved":
            for ack in event.acks:
                i = self.by_cmid.get(bytes(ack.client_message_id))
                if i is not None:
                    i.message_id, i.conversation_seq = bytes(ack.message_id), ack.conversation_seq
        elif kind == "SendFailed" and bytes(event.client_message_id) in self.by_cmid:
            self.failed += 1


class SdkLane:
    """`n` paired SDK clients over `gateways` (one address or several: client i on
    gateways[i mod len], so the two clients of a pair sit on different gateways when there
    are several), TLS per `ca_file`/`plaintext`, sending `rate` msg/s in all. `start()`,
    `send_due(elapsed)` from the load loop, `finish()`."""

    def __init__(self, gateways: Union[str, Sequence[str]], key, n: int, rate: float, size: int, base_user: int,
                 ca_file: Optional[str] = None, plaintext: bool = False) -> None:
        if n < 2 or n % 2:
            raise ValueError(f"--sdk-clients must be 0 or an even number >= 2 (paired), got {n}")
        self.gateways = (gateways,) if isinstance(gateways, str) else tuple(gateways)
        self.key, self.rate, self.size = key, rate, max(16, size)
        self.ca_file, self.plaintext = ca_file, plaintext
        users = [base_user + i for i in range(n)]
        self.clients = [_LaneClient(u, users[i ^ 1]) for i, u in enumerate(users)]
        for n, c in enumerate(self.clients):
            c.gateway = self.gateways[n % len(self.gateways)]
        self.intents: list[Intent] = []
        self.count = 0
        self._dir = tempfile.TemporaryDirectory(prefix="qim-sdk-lane-")

    async def start(self) -> None:
        """Open, connect and open the direct conversation of every client."""
        from qim.sdk import Client  # the SDK only when the lane is on

        for c in self.clients:
            def fresh(user: int = c.user) -> str:
                return issue_dev_token(self.key, 0, user, 1)
            c.client = await Client.open(failover_order(c.gateway, self.gateways), fresh(), data_dir=self._dir.name,
                                         on_event=c.on_event,
                                         event_queue=False, token_provider=fresh, ca_file=self.ca_file,
                                         plaintext=self.plaintext)
            await c.client.connect()
        for c in self.clients:
            c.conversation_id = (await c.client.open_direct(c.peer)).conversation_id

    async def send_due(self, elapsed: float) -> int:
        """Submit the sends due `elapsed` s after the start (round robin over the
        clients); returns how many were submitted now."""
        due = int(elapsed * self.rate) - self.count
        for _ in range(max(0, due)):
            c = self.clients[self.count % len(self.clients)]
            self.count += 1
            head = f"sdk {c.user} {c.sent} "
            pad = body_bytes(c.user.to_bytes(8, "big") + c.sent.to_bytes(8, "big"), self.size).hex()
            text = (head + pad)[:max(len(head), self.size)].encode()  # TEXT: UTF-8 (ASCII here)
            intent = Intent(c.conversation_id, c.user, c.sent, digest(text), len(text), MESSAGE_TYPE_TEXT, b"",
                            frozenset({c.peer}))
            c.sent += 1
            cmid = await c.client.send(c.conversation_id, text, MESSAGE_TYPE_TEXT, b"", wait=False)
            c.by_cmid[bytes(cmid)] = intent
            self.intents.append(intent)
        return max(0, due)

    def settled(self) -> bool:
        """Every send acknowledged or refused, and every peer told every acked message."""
        if sum(i.message_id is None for i in self.intents) > sum(c.failed for c in self.clients):
            return False
        for c in self.clients:
            want = [i.message_id for i in self.intents if i.sender == c.peer and i.message_id is not None]
            if not c.view.has_all(want):
                return False
        return True

    async def own_listed(self) -> bool:
        """Every client's own acknowledged sends are stored messages, so its listing can
        hold them. The SDK lists its own message only once its mailbox echo is applied
        (SEND_ACK leaves the row "acked" in unsent(): qim/sdk/store.py "pending"), and
        that echo may come after the peer was told (the sender's own mailbox shard, its
        own push), so settled() does not imply it: the last message of a run was read
        too early. Only when to read is decided here; the listing is still checked."""
        for c in self.clients:
            acked = {cmid for cmid, i in c.by_cmid.items() if i.message_id is not None}
            if any(r.state == "acked" and bytes(r.client_message_id) in acked
                   for r in await c.client.unsent(c.conversation_id)):
                return False
        return True

    async def finish(self, timeout: float) -> SdkVerdict:
        """Wait (up to `timeout` s) for the lane to settle and every client's own acked
        sends to be listed (own_listed), read every client's listing and unread back,
        check them (loadgen_sdkcheck.check_sdk); close() closes the clients."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:  # SDK events and mailbox echoes fill what is waited for
            if self.settled() and await self.own_listed():
                break
            await asyncio.sleep(0.1)
        views = [await self._view(c, deadline) for c in self.clients]
        verdict = check_sdk(self.intents, views, send_failures=sum(c.failed for c in self.clients))
        unacked = sum(i.message_id is None for i in self.intents) - verdict.send_failures
        if unacked > 0:
            verdict.send_failures += unacked
            verdict.notes.append(f"{unacked} lane sends neither acknowledged nor refused")
        if verdict.failures:  # what each client went through, so a failed run says where to look
            verdict.clients_seen = [self.describe(c) for c in self.clients]
        return verdict

    def describe(self, c: _LaneClient) -> str:
        """One line of a client's end state: gateway, state, counters, its last states
        (seconds before now) and the messages of its peer it was not told."""
        now = time.monotonic()
        want = [i for i in self.intents if i.sender == c.peer and i.message_id is not None]
        missing = [i.conversation_seq for i in want if i.message_id not in c.view.seen]
        states = ", ".join(f"{s}({r})@-{now - t:.1f}s" for t, s, r in c.states)
        if c.client is None:
            state, stats = "closed", ""
        else:
            state, stats = c.client.state, " ".join(f"{k}={v}" for k, v in sorted(c.client.stats.items()))
        return (f"sdk user {c.user} on {c.gateway}: state {state}; {stats}; "
                f"not told {len(missing)} of {len(want)} (seqs {missing[:3]}...); states: {states}")

    async def _view(self, c: _LaneClient, deadline: float) -> SdkView:
        rows: list = []
        before = 0
        while True:
            page = await c.client.messages(c.conversation_id, before_seq=before, limit=LIST_PAGE)
            rows = [listed_row(m) for m in page] + rows
            if len(page) < LIST_PAGE or page[0].conversation_seq <= 1:
                break
            before = page[0].conversation_seq
        view = SdkView(c.user, c.conversation_id, c.view, rows)
        settle = max(time.monotonic() + 1.0, min(deadline, time.monotonic() + UNREAD_SETTLE_S))
        while True:  # unread comes from SESSION_DELTA and may trail the messages
            conv = await c.client.conversation(c.conversation_id)
            if conv is not None:
                # read_seq stays 0: the lane never marks read, so the expectation must
                # not take the client's own (possibly wrong) read position on trust
                view.unread, view.unread_exact = conv.unread, conv.unread_exact
            if not check_unread(self.intents, view) or time.monotonic() > settle:
                return view
            await asyncio.sleep(0.2)

    async def close(self) -> None:
        """Close every client and remove the stores."""
        for c in self.clients:
            if c.client is not None:
                await c.client.close()
        self._dir.cleanup()
