"""When the SDK lane (qim/cli/loadgen_sdk.py) reads its clients back: not before every
client's own acknowledged sends are stored messages, bounded by the finish deadline.

The SDK stores its own message only once the mailbox echo is applied (SEND_ACK leaves
the row "acked" in unsent(): tests/sdk/test_runtime.py
test_own_message_is_listed_once_its_echo_is_applied), and the echo may come after the
peer was told. Stub clients stand in for qim.sdk.Client (the lane reads only send,
unsent, messages and conversation), so no gateway runs here.
"""

from __future__ import annotations

import asyncio
import time

from qim.cli.loadgen_sdk import SdkLane
from qim.sdk import events as ev
from qim.sdk.model import PendingSend, StoredMessage

A, B = 101, 102  # the lane's users: base_user + i
CONV = b"\x07" * 16


class StubClient:
    """A client's store as the lane reads it: listed messages, unsent rows, unread."""

    def __init__(self, unread: int) -> None:
        self.rows: list[StoredMessage] = []
        self.pending: dict[bytes, PendingSend] = {}
        self.unread = unread
        self.sent: list[tuple[bytes, bytes]] = []  # (cmid, body)
        self.state = "ready"
        self.stats = {"pages": 3, "pushes": 5}

    async def send(self, conv: bytes, body: bytes, message_type: int, custom_type: bytes, wait: bool) -> bytes:
        cmid = len(self.sent).to_bytes(16, "big")
        self.sent.append((cmid, body))
        self.pending[cmid] = PendingSend(cmid, len(self.sent), conv, 0, message_type, custom_type, body, 0, "pending")
        return cmid

    async def unsent(self, conv: bytes) -> list[PendingSend]:
        return [r for r in self.pending.values() if r.conversation_id == conv]

    async def messages(self, conv: bytes, before_seq: int = 0, limit: int = 50) -> list[StoredMessage]:
        rows = [m for m in self.rows if not before_seq or m.conversation_seq < before_seq]
        return sorted(rows, key=lambda m: m.conversation_seq)[-limit:]

    async def conversation(self, conv: bytes):
        return type("Conversation", (), {"unread": self.unread, "unread_exact": True})()

    async def close(self) -> None:
        pass


async def _lane() -> tuple[SdkLane, dict[int, StubClient], dict[int, StoredMessage]]:
    """A sends seq 1, then B sends seq 2 (the last of the run). Both ACKed; each peer told
    the other's message; A's store lists both, B's only A's: B's own echo is pending."""
    lane = SdkLane("127.0.0.1:1", None, 2, rate=2.0, size=16, base_user=A)
    stubs = {A: StubClient(unread=1), B: StubClient(unread=0)}
    for c in lane.clients:
        c.client, c.conversation_id = stubs[c.user], CONV
    assert await lane.send_due(1.0) == 2  # round robin: A's then B's
    msgs = {}
    for seq, c in enumerate(lane.clients, 1):
        ((cmid, body),) = stubs[c.user].sent
        mid = bytes([seq]) * 16
        msgs[c.user] = StoredMessage(mid, CONV, seq, c.user, 0, 1, b"", body, cmid, 0, 0)
        stubs[c.user].pending[cmid] = PendingSend(cmid, 1, CONV, 0, 1, b"", body, 0, "acked")
        c.on_event(ev.PendingResolved((ev.SendAck(cmid, mid, CONV, seq, 0),)))
        peer = lane.clients[seq % 2]
        peer.on_event(ev.MessagesAdded((msgs[c.user],)))
        stubs[peer.user].rows.append(msgs[c.user])
    _echo(stubs[A], msgs[A])
    return lane, stubs, msgs


def _echo(stub: StubClient, own: StoredMessage) -> None:
    """The client's own mailbox entry applied: listed, and no longer unsent."""
    stub.rows.append(own)
    del stub.pending[own.client_message_id]


async def test_the_read_waits_for_the_last_own_echo() -> None:
    lane, stubs, msgs = await _lane()
    assert lane.settled() and not await lane.own_listed()  # the peers were told; B's echo lags

    async def late_echo() -> None:
        await asyncio.sleep(0.3)
        _echo(stubs[B], msgs[B])

    echo = asyncio.ensure_future(late_echo())
    start = time.monotonic()
    verdict = await lane.finish(timeout=5.0)
    await echo
    assert time.monotonic() - start >= 0.3
    assert verdict.failures == 0 and verdict.acked == 2 and verdict.delivered == 2, verdict.notes
    assert verdict.clients_seen == []  # a passing lane says nothing more
    await lane.close()


async def test_an_echo_that_never_comes_is_a_listing_error_at_the_deadline() -> None:
    lane, _, _ = await _lane()
    start = time.monotonic()
    verdict = await lane.finish(timeout=0.5)
    assert time.monotonic() - start < 5.0  # bounded by the deadline (and the unread read's 1 s floor)
    assert verdict.listing_errors == 1 and verdict.failures == 1, verdict.notes
    assert f"user {B}: 1 sent messages not listed (first seq 2)" in verdict.notes
    # a failed lane says where each client stood: its gateway, states and what it missed
    lane.clients[0].on_event(ev.ConnectionState("reconnecting", "ping timeout"))
    seen = [lane.describe(c) for c in lane.clients]
    assert len(verdict.clients_seen) == 2 and all("on 127.0.0.1:1" in line for line in verdict.clients_seen)
    assert "reconnecting(ping timeout)@-" in seen[0] and "not told 0 of 1" in seen[0], seen
    assert "state ready; pages=3 pushes=5;" in seen[0], seen  # the SDK's counters: a stuck pull shows
    await lane.close()
