"""Receivers and bookkeeping of `qim-loadgen rate` (qim/cli/loadgen_rate.py).

A receiver is one raw authenticated connection of a user that only receives. PUSH_EVENTS
are a wake-up and the first sighting of a message for latency (pushes may be dropped by
design); what is verified is what the receiver takes with its own cursor: PULLed
(PULL_MAILBOX -> MAILBOX_BATCH) after a push (pushes within PULL_GAP_S are coalesced
into one pull, so verification does not multiply the server's pull load) and at least
every PULL_EVERY_S, or applied from an inline push (docs/decisions/0156) under the SDK's
rule: on the receiver's lane (learnt from its first page), its cursor equal to the
push's prev_mailbox_seq, no pull in flight; the entries are then taken exactly as the
page {inline_entries, next_cursor = mailbox_seq} (`pushes_applied`). Any other push
wakes a pull, so the checks below see every entry once whichever way it came.

Before the timed window, `settle` waits (at most SETTLE_S) until every receiver is
`settled`: its login's wake-up came (the mailbox saw its presence entry; decision 0042)
and its first page was answered. After the run, `Ledger.first_seconds` says where the
first segment's latency went (per second of send time, and its slowest samples).

`Ledger` holds what the senders intended (per message ordinal n: pair, send time, body
digest, and after the ACK its message_id and conversation_seq) and what the receivers
pulled, and computes lost / duplicated / corrupt / out_of_order:
  lost          acknowledged, never pulled by its own receiver
  duplicated    pulled twice (same message_id) by one receiver
  corrupt       pulled with a body whose SHA-256 differs, or with another sender,
                conversation or conversation_seq than sent (or by the wrong receiver);
                a message whose send got an ERROR or no reply but committed anyway is
                recognised by its body (ordinal in the header, digest) and not judged
  out_of_order  per receiver, a message pulled after one with a higher or equal
                conversation_seq; per pair, an ACK whose conversation_seq is not above
                the one of the send submitted before it
"""

from __future__ import annotations

import asyncio
import struct
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from qim.cli.bodies import digest
from qim.cli.loadgen_stats import percentiles
from qim.consts import MESSAGE_TYPE_CONTROL
from qim.net.framed import FramedStream
from qim.proto.v1 import mailbox_pb2
from qim.protocol import Opcode
from qim.wire.errors import decode_error

PULL_EVERY_S = 1.0  # a receiver pulls at least this often: a dropped push costs at most this much latency
PULL_GAP_S = 0.25  # and at most this often: pushes in between are coalesced (latency comes from the push)
SETTLE_S = 5.0  # the longest wait for every receiver's login to settle before the timed window


def summary(values) -> str:
    """'p50/p95/p99/max' of `values` in ms with one decimal ('nan' when empty), via
    qim/cli/loadgen_stats.py (np.percentile)."""
    return "/".join(f"{x:.1f}" for x in percentiles(values))


def p99(values) -> float:
    """The 99th percentile of `values` (NaN when empty)."""
    return percentiles(values, (99.0,))[0]


def _p99_or_none(values) -> Optional[float]:
    """The 99th percentile of `values` rounded to 0.1 ms, None when empty (JSON has no NaN)."""
    return round(p99(values), 1) if len(values) else None


@dataclass
class Sent:
    """One send of the rate lane: pair, send time (ns), body digest, message_id once acked."""

    pair: int
    sent_ns: int
    digest: bytes
    message_id: Optional[bytes] = None
    conversation_seq: int = 0
    acked_ns: int = 0  # perf_counter_ns of its SEND_ACK (0: none yet)


@dataclass
class Ledger:
    """Intended sends and pulled entries of one run (see module docstring)."""

    senders: list
    receivers: list
    conversations: list
    sent: list = field(default_factory=list)                 # index n -> Sent
    by_mid: dict = field(default_factory=dict)                # message_id -> n
    first_seen: dict = field(default_factory=dict)            # message_id -> perf_counter_ns of first sighting
    pulled: dict = field(default_factory=dict)                # pair -> [(message_id, seq, digest, conv, sender, n)]
    on_latency: Optional[Callable[[float], None]] = None  # callable(ms) for the segment statistics
    pushed_first: int = 0                                     # messages first sighted in a push
    pulled_first: set = field(default_factory=set)            # message_ids first sighted in a page
    ack_inversions: int = 0                                   # out_of_order parts (set by verdict)
    pull_inversions: int = 0

    def acked(self, n: int, message_id: bytes, conversation_seq: int, now_ns: int = 0) -> None:
        """SEND_ACK of message `n` (received at perf_counter_ns `now_ns`): its
        coordinates, and its latency if already sighted."""
        s = self.sent[n]
        s.message_id, s.conversation_seq, s.acked_ns = message_id, conversation_seq, now_ns
        self.by_mid[message_id] = n
        seen = self.first_seen.get(message_id)
        if seen is not None and self.on_latency is not None:
            self.on_latency((seen - s.sent_ns) / 1e6)

    def sighted(self, message_id: bytes, now_ns: int, push: bool = False) -> None:
        """First sighting (push or pull) of a message: the end-to-end latency sample."""
        if message_id in self.first_seen:
            return
        self.first_seen[message_id] = now_ns
        self.pushed_first += push
        if not push:
            self.pulled_first.add(message_id)
        n = self.by_mid.get(message_id)
        if n is not None and self.on_latency is not None:
            self.on_latency((now_ns - self.sent[n].sent_ns) / 1e6)

    def first_seconds(self, start_ns: int, seconds: float = 5.0, slowest: int = 10) -> dict:
        """Where the first `seconds` of sends went (the cold start), by send time from
        `start_ns` (perf_counter_ns of the timed window's start): {"bins": one per second,
        {from_s, count, ack_p99_ms, e2e_p99_ms} (None when empty), "slowest": the
        `slowest` largest end-to-end samples, {t_s (send), pair, ack_ms, e2e_ms, pushed:
        first sighted in a push, not a page}}. Read after the run, from the ledger: no
        cost per message."""
        rows = []  # (t_s, pair, ack_ms, e2e_ms, pushed) of the window's sighted messages
        for s in self.sent:
            t = (s.sent_ns - start_ns) / 1e9
            seen = self.first_seen.get(s.message_id) if s.message_id is not None else None
            if t < seconds and seen is not None:
                rows.append((t, s.pair, (s.acked_ns - s.sent_ns) / 1e6 if s.acked_ns else None,
                             (seen - s.sent_ns) / 1e6, s.message_id not in self.pulled_first))
        bins = []
        for b in range(int(seconds + 0.999)):
            inside = [r for r in rows if b <= r[0] < b + 1]
            acks = [r[2] for r in inside if r[2] is not None]
            bins.append({"from_s": b, "count": len(inside), "ack_p99_ms": _p99_or_none(acks),
                         "e2e_p99_ms": _p99_or_none([r[3] for r in inside])})
        top = sorted(rows, key=lambda r: -r[3])[:slowest]
        return {"bins": bins, "slowest": [{"t_s": round(t, 3), "pair": pair, "ack_ms": None if a is None else round(a, 1),
                                           "e2e_ms": round(e, 1), "pushed": p} for t, pair, a, e, p in top]}

    def unanswered(self, n: int, dig: bytes, pair: int) -> bool:
        """True when message `n` (from the body header) was sent by `pair` with this
        digest and never acknowledged."""
        if not 0 <= n < len(self.sent):
            return False
        s = self.sent[n]
        return s.message_id is None and s.digest == dig and s.pair == pair

    def _got(self) -> dict[int, set]:
        return {pair: {mid for mid, *_ in rows} for pair, rows in self.pulled.items()}

    def all_pulled(self) -> bool:
        """Every acknowledged message pulled by its own receiver."""
        got = self._got()
        return all(s.message_id in got.get(s.pair, ()) for s in self.sent if s.message_id is not None)

    def verdict(self) -> dict:
        """{'lost', 'duplicated', 'corrupt', 'out_of_order'} over everything pulled so far."""
        lost = duplicated = corrupt = out_of_order = 0
        for pair, rows in self.pulled.items():
            seen, last = set(), 0
            for mid, seq, dig, conv, sender, n_hint in rows:
                if mid in seen:
                    duplicated += 1
                    continue
                seen.add(mid)
                if seq <= last:
                    out_of_order += 1
                last = max(last, seq)
                n = self.by_mid.get(mid)
                if n is None and self.unanswered(n_hint, dig, pair):
                    continue  # its send got an ERROR or no reply, yet it committed: not ours to judge
                s = self.sent[n] if n is not None else None
                if (s is None or s.digest != dig or s.pair != pair or s.conversation_seq != seq
                        or conv != self.conversations[pair] or sender != self.senders[pair]):
                    corrupt += 1
        got = self._got()
        per_pair: dict[int, list[int]] = {}
        for s in self.sent:
            if s.message_id is not None:
                per_pair.setdefault(s.pair, []).append(s.conversation_seq)
                lost += s.message_id not in got.get(s.pair, ())
        self.ack_inversions = sum(1 for seqs in per_pair.values() for a, b in zip(seqs, seqs[1:]) if b <= a)
        self.pull_inversions = out_of_order
        return {"lost": lost, "duplicated": duplicated, "corrupt": corrupt,
                "out_of_order": out_of_order + self.ack_inversions}


class Receiver:
    """One receiving connection (pair index `pair`); `run()` until `stop()`."""

    def __init__(self, pair: int, stream: FramedStream, ledger: Ledger, pull_gap_s: float = PULL_GAP_S) -> None:
        self.pair, self.stream, self.ledger, self.pull_gap_s = pair, stream, ledger, pull_gap_s
        self.user = ledger.receivers[pair]
        self.cursor = 0
        self.lane: Optional[int] = None  # the lane of its pages (None before the first)
        self.pushes = 0
        self.pushes_applied = 0
        self.pulls = 0  # PULL_MAILBOX requests sent
        self._pulling = False  # from a PULL_MAILBOX sent until its page is taken
        self.pull_errors: dict[str, int] = {}
        self.wake = asyncio.Event()
        self._rid = 1
        self._reply: Optional[asyncio.Future] = None
        self._running = True
        ledger.pulled.setdefault(pair, [])

    @property
    def settled(self) -> bool:
        """Logged in and idle: its login's wake-up came (the mailbox saw its presence
        entry, so what is materialized for it from now on is pushed) and its first page
        was answered (its lane is known, no pull in flight)."""
        return self.pushes > 0 and self.lane is not None and not self._pulling

    def stop(self) -> None:
        """Stop the read loop after the current frame."""
        self._running = False
        self.wake.set()

    async def read_loop(self) -> None:
        """Frames of this connection: pushes (sighting + wake-up) and pull replies."""
        while True:
            item = await self.stream.read_frame()
            if item is None:
                if self._reply is not None and not self._reply.done():
                    self._reply.set_exception(ConnectionError("receiver connection closed"))
                return
            op, rid, body = item
            if rid == 0:
                if op == Opcode.PUSH_EVENTS:
                    now = time.perf_counter_ns()
                    self.pushes += 1
                    push = mailbox_pb2.PushEvents.FromString(body)
                    # a push is a position with the ids of its messages (docs/decisions/0033);
                    # a gateway from before positions sent whole entries
                    for mid in [*push.message_ids, *(e.message_id for e in push.entries)]:
                        self.ledger.sighted(mid, now, push=True)
                    if not self._apply_inline(push, now):
                        self.wake.set()
                continue
            if self._reply is not None and not self._reply.done() and rid == self._rid:
                self._reply.set_result((op, body))

    async def pull_loop(self) -> None:
        """Pull on a wake-up (at most every `pull_gap_s`) and at least every PULL_EVERY_S
        until stopped. A failed
        pull is counted in `pull_errors` (what it never brought shows up as lost); a closed
        connection ends the loop."""
        loop = asyncio.get_running_loop()
        while self._running:
            try:
                await asyncio.wait_for(self.wake.wait(), PULL_EVERY_S)
            except asyncio.TimeoutError:
                pass
            started = loop.time()
            self.wake.clear()
            try:
                while self._running and await self.pull_page():
                    pass
            except (asyncio.TimeoutError, ConnectionError) as exc:
                name = exc.__class__.__name__
                self.pull_errors[name] = self.pull_errors.get(name, 0) + 1
                if self.stream.closed:
                    return
            await asyncio.sleep(max(0.0, started + self.pull_gap_s - loop.time()))

    def _apply_inline(self, push: mailbox_pb2.PushEvents, now: int) -> bool:
        """Take an inline push's entries as the page it stands for when they follow the
        cursor and no pull is in flight (module doc); False when it must pull instead
        (nothing is taken then). Runs between two awaits: never beside a pull."""
        if (not push.inline_entries or self._pulling or push.mailbox_seq <= self.cursor
                or self.lane is None or push.lane != self.lane or push.prev_mailbox_seq != self.cursor):
            return False
        self._take(push.inline_entries, now)
        self.cursor = push.mailbox_seq
        self.pushes_applied += 1
        return True

    def _take(self, entries, now: int) -> None:
        """Record the entries of one page (pulled or applied from a push) in the ledger."""
        rows = self.ledger.pulled[self.pair]
        for e in entries:
            if e.message_type == MESSAGE_TYPE_CONTROL:
                continue
            self.ledger.sighted(e.message_id, now)
            n_hint = struct.unpack_from(">Q", e.body, 8)[0] if len(e.body) >= 16 else -1
            rows.append((e.message_id, e.conversation_seq, digest(e.body), e.conversation_id, e.sender_id, n_hint))

    async def pull_page(self) -> bool:
        """One PULL_MAILBOX from the own cursor; True when the server has more."""
        self._rid += 1
        self._reply = asyncio.get_running_loop().create_future()
        req = mailbox_pb2.PullMailbox(cursor=self.cursor)
        self._pulling = True  # until its page is taken: an inline push meanwhile wakes a pull instead
        self.pulls += 1
        try:
            self.stream.send(Opcode.PULL_MAILBOX, self._rid, req.SerializeToString())
            op, body = await asyncio.wait_for(self._reply, 30.0)
            if op != Opcode.MAILBOX_BATCH:
                code = decode_error(body).code.name if op == Opcode.ERROR else hex(op)
                self.pull_errors[code] = self.pull_errors.get(code, 0) + 1
                await asyncio.sleep(0.2)
                return False
            batch = mailbox_pb2.MailboxBatch.FromString(body)
            self._take(batch.entries, time.perf_counter_ns())
            self.cursor = batch.next_cursor or self.cursor
            self.lane = batch.lane
            return batch.has_more
        finally:
            self._pulling = False


async def settle(receivers: list, timeout_s: float = SETTLE_S, poll_s: float = 0.02) -> tuple[float, int]:
    """Wait until every receiver is `settled`, at most `timeout_s` (their read and pull
    loops running). Returns (seconds waited, receivers still not settled): a receiver
    whose wake-up never came is measured as it is, and reported."""
    t0 = time.perf_counter()
    while any(not r.settled for r in receivers) and time.perf_counter() - t0 < timeout_s:  # noqa: ASYNC110 — set by many tasks
        await asyncio.sleep(poll_s)
    return time.perf_counter() - t0, sum(1 for r in receivers if not r.settled)
