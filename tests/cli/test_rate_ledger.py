"""Bookkeeping of `qim-loadgen rate` (qim/cli/rate_receiver.py): the verdict over what the
receivers pulled, latency from the first sighting, percentiles by numpy."""

from __future__ import annotations

import asyncio
import math
import struct

from qim.cli.bodies import digest
from qim.cli.rate_receiver import Ledger, Receiver, Sent, p99, settle, summary
from qim.proto.v1 import mailbox_pb2
from qim.protocol import Opcode

SENDERS, RECEIVERS, CONVS = [1, 2], [3, 4], [b"\x01" * 16, b"\x02" * 16]


def ledger_with(n_per_pair: int = 3) -> Ledger:
    led = Ledger(SENDERS, RECEIVERS, CONVS)
    for n in range(2 * n_per_pair):
        pair = n % 2
        led.sent.append(Sent(pair, 0, digest(b"body%d" % n)))
        led.acked(n, b"m%015d" % n, n // 2 + 1)
    return led


def pull(led: Ledger, n: int, body: bytes | None = None, seq: int | None = None, pair: int | None = None) -> None:
    s = led.sent[n]
    p = s.pair if pair is None else pair
    led.pulled.setdefault(p, []).append((s.message_id, s.conversation_seq if seq is None else seq,
                                         digest(body if body is not None else b"body%d" % n), CONVS[p], SENDERS[p], n))


def test_everything_pulled_once_in_order_is_clean():
    led = ledger_with()
    for n in range(6):
        pull(led, n)
    assert led.all_pulled()
    assert led.verdict() == {"lost": 0, "duplicated": 0, "corrupt": 0, "out_of_order": 0}


def test_each_fault_is_counted():
    led = ledger_with()
    pull(led, 2), pull(led, 0)           # pair 0 pulls seq 2 before seq 1
    pull(led, 0)                         # and seq 1 again
    pull(led, 1, body=b"other")          # pair 1: a body that differs
    pull(led, 3), pull(led, 5, pair=0)   # a message of pair 1 at pair 0's receiver
    v = led.verdict()
    assert not led.all_pulled()
    # lost: 4 never pulled, 5 pulled only by the wrong receiver
    assert v == {"lost": 2, "duplicated": 1, "corrupt": 2, "out_of_order": 1}, v


def test_ack_order_against_submission_order():
    led = Ledger(SENDERS, RECEIVERS, CONVS)
    for n, seq in enumerate((2, 1)):
        led.sent.append(Sent(0, 0, digest(b"x%d" % n)))
        led.acked(n, b"k%015d" % n, seq)
    for n in (1, 0):
        led.pulled.setdefault(0, []).append((led.sent[n].message_id, led.sent[n].conversation_seq,
                                             led.sent[n].digest, CONVS[0], SENDERS[0], n))
    assert led.verdict()["out_of_order"] == 1


def test_a_send_answered_with_an_error_that_committed_is_not_judged():
    led = ledger_with(1)
    led.sent.append(Sent(0, 0, digest(b"late")))  # n = 2: ERROR reply, committed anyway
    pull(led, 0), pull(led, 1)
    led.pulled[0].append((b"z" * 16, 2, digest(b"late"), CONVS[0], SENDERS[0], 2))
    assert led.verdict() == {"lost": 0, "duplicated": 0, "corrupt": 0, "out_of_order": 0}
    led.pulled[0].append((b"y" * 16, 3, digest(b"other"), CONVS[0], SENDERS[0], 2))  # same ordinal, other body
    assert led.verdict()["corrupt"] == 1


def test_latency_from_the_first_sighting_before_or_after_the_ack():
    samples = []
    led = Ledger(SENDERS, RECEIVERS, CONVS, on_latency=samples.append)
    led.sent += [Sent(0, 1_000_000, b""), Sent(1, 2_000_000, b"")]
    led.sighted(b"a" * 16, 5_000_000, push=True)   # push before the ACK
    led.acked(0, b"a" * 16, 1)
    led.acked(1, b"b" * 16, 1)
    led.sighted(b"b" * 16, 4_000_000)              # pull after the ACK
    led.sighted(b"b" * 16, 9_000_000)              # later sightings do not count
    assert samples == [4.0, 2.0] and led.pushed_first == 1


def test_percentiles():
    assert summary([]) == "nan/nan/nan/nan" and math.isnan(p99([]))
    values = list(range(1, 101))
    assert summary(values) == "50.5/95.0/99.0/100.0"
    assert p99(values) == 99.01


class FakeStream:
    """Frames in (`incoming`), frames out (`sent`); answers each PULL_MAILBOX with `pages`."""

    def __init__(self, pages):
        self.incoming, self.sent, self.pages, self.closed = asyncio.Queue(), [], list(pages), False

    def send(self, op, rid, body):
        self.sent.append((op, rid, body))
        if op == Opcode.PULL_MAILBOX:
            page = self.pages.pop(0) if self.pages else mailbox_pb2.MailboxBatch(
                next_cursor=mailbox_pb2.PullMailbox.FromString(body).cursor)
            self.incoming.put_nowait((Opcode.MAILBOX_BATCH, rid, page.SerializeToString()))

    async def read_frame(self):
        return await self.incoming.get()


def entry(led: Ledger, n: int, mseq: int, body: bytes) -> mailbox_pb2.MailboxEntry:
    s = led.sent[n]
    return mailbox_pb2.MailboxEntry(mailbox_seq=mseq, message_id=s.message_id, conversation_id=CONVS[s.pair],
                                    conversation_seq=s.conversation_seq, sender_id=SENDERS[s.pair], message_type=1,
                                    body=body)


async def test_receiver_pulls_on_pushes_coalesced_and_follows_its_cursor():
    led = Ledger(SENDERS, RECEIVERS, CONVS)
    bodies = [struct.pack(">QQ", 0, n) + b"pad" for n in range(3)]
    for n, b in enumerate(bodies):
        led.sent.append(Sent(0, 0, digest(b)))
        led.acked(n, b"r%015d" % n, n + 1)
    page1 = mailbox_pb2.MailboxBatch(entries=[entry(led, 0, 10, bodies[0]), entry(led, 1, 11, bodies[1])],
                                     next_cursor=11, has_more=True)
    page2 = mailbox_pb2.MailboxBatch(entries=[entry(led, 2, 12, bodies[2])], next_cursor=12)
    stream = FakeStream([page1, page2])
    rx = Receiver(0, stream, led, pull_gap_s=0.2)
    tasks = [asyncio.create_task(rx.read_loop()), asyncio.create_task(rx.pull_loop())]
    push = mailbox_pb2.PushEvents(entries=[entry(led, 0, 10, b"")]).SerializeToString()
    for _ in range(5):  # a burst of pushes: one pull round (two pages), not five
        stream.incoming.put_nowait((Opcode.PUSH_EVENTS, 0, push))
    await asyncio.sleep(0.05)
    stream.incoming.put_nowait((Opcode.PUSH_EVENTS, 0, push))  # within the gap: waits for it
    await asyncio.sleep(0.05)
    rx.stop()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    pulls = [mailbox_pb2.PullMailbox.FromString(b).cursor for op, _, b in stream.sent if op == Opcode.PULL_MAILBOX]
    assert pulls == [0, 11] and rx.cursor == 12 and rx.pushes == 6
    assert led.all_pulled() and led.pushed_first == 1
    assert led.verdict() == {"lost": 0, "duplicated": 0, "corrupt": 0, "out_of_order": 0}


async def test_receiver_applies_inline_pushes_at_its_cursor_and_pulls_on_a_gap():
    """decisions/0156: an inline push whose prev_mailbox_seq is the receiver's cursor (its
    lane known from a page) is taken as that page without a pull; one after a withheld
    push, or while a pull is in flight, wakes a pull; the verdict stays exact."""
    led = Ledger(SENDERS, RECEIVERS, CONVS)
    bodies = [struct.pack(">QQ", 0, n) + b"pad" for n in range(4)]
    for n, b in enumerate(bodies):
        led.sent.append(Sent(0, 0, digest(b)))
        led.acked(n, b"r%015d" % n, n + 1)
    lane = 7
    first = mailbox_pb2.MailboxBatch(entries=[entry(led, 0, 10, bodies[0])], next_cursor=10, lane=lane)
    gap = mailbox_pb2.MailboxBatch(entries=[entry(led, 2, 12, bodies[2]), entry(led, 3, 13, bodies[3])],
                                   next_cursor=13, lane=lane)
    stream = FakeStream([first, gap])
    rx = Receiver(0, stream, led, pull_gap_s=0.0)
    tasks = [asyncio.create_task(rx.read_loop()), asyncio.create_task(rx.pull_loop())]

    def push(n: int, seq: int, prev: int) -> None:
        body = mailbox_pb2.PushEvents(lane=lane, mailbox_seq=seq, prev_mailbox_seq=prev,
                                      inline_entries=[entry(led, n, seq, bodies[n])]).SerializeToString()
        stream.incoming.put_nowait((Opcode.PUSH_EVENTS, 0, body))

    push(0, 10, 0)  # lane not known yet: pulls (the first page)
    for _ in range(100):
        if rx.cursor == 10:
            break
        await asyncio.sleep(0.01)
    push(1, 11, 10)  # at the cursor: applied
    await asyncio.sleep(0.05)
    assert rx.cursor == 11 and rx.pushes_applied == 1
    push(3, 13, 12)  # 12 was withheld: a gap, pulled from 11
    for _ in range(100):
        if rx.cursor == 13:
            break
        await asyncio.sleep(0.01)
    rx.stop()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    pulls = [mailbox_pb2.PullMailbox.FromString(b).cursor for op, _, b in stream.sent if op == Opcode.PULL_MAILBOX]
    assert pulls[:2] == [0, 11] and rx.cursor == 13 and rx.pushes_applied == 1
    assert led.all_pulled()
    assert led.verdict() == {"lost": 0, "duplicated": 0, "corrupt": 0, "out_of_order": 0}


async def test_the_timed_window_waits_for_every_receivers_login_wake_and_first_page():
    """rate_receiver.settle (issue 41's cold start): a receiver is settled once its login
    wake-up (a PUSH_EVENTS without a position) came and the pull it woke was answered;
    one that never gets its wake-up is waited for at most the timeout, then reported."""
    led = Ledger(SENDERS, RECEIVERS, CONVS)
    woken, silent = Receiver(0, FakeStream([]), led, pull_gap_s=0.0), Receiver(1, FakeStream([]), led, pull_gap_s=0.0)
    tasks = [asyncio.create_task(f()) for r in (woken, silent) for f in (r.read_loop, r.pull_loop)]
    try:
        assert not woken.settled and not silent.settled
        woken.stream.incoming.put_nowait((Opcode.PUSH_EVENTS, 0, b""))  # the mailbox saw its presence entry
        waited, unsettled = await settle([woken], timeout_s=2.0, poll_s=0.005)
        assert woken.settled and unsettled == 0 and waited < 0.5
        waited, unsettled = await settle([woken, silent], timeout_s=0.3, poll_s=0.005)
        assert unsettled == 1 and waited >= 0.3 and silent.pushes == 0  # no wake-up came: reported
    finally:
        for r in (woken, silent):
            r.stop()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def test_the_first_seconds_by_send_time_with_the_slowest_samples():
    """Ledger.first_seconds: per second of the first window by send time, ACK and E2E P99
    of the messages sent then; the slowest samples with their send time, ACK, E2E and
    whether a push or a page showed them first. Messages after the window are left out."""
    led = Ledger(SENDERS, RECEIVERS, CONVS)
    ms = 1_000_000
    start = 10_000 * ms
    for n, (t_ms, ack_ms, e2e_ms, push) in enumerate([(100, 5, 300, True), (900, 5, 20, True), (1500, 40, 60, False),
                                                      (6000, 5, 999, True)]):
        led.sent.append(Sent(n % 2, start + t_ms * ms, digest(b"b%d" % n)))
        mid = b"f%015d" % n
        led.acked(n, mid, n + 1, start + (t_ms + ack_ms) * ms)
        led.sighted(mid, start + (t_ms + e2e_ms) * ms, push=push)
    got = led.first_seconds(start, seconds=5.0, slowest=2)
    assert [b["count"] for b in got["bins"]] == [2, 1, 0, 0, 0]
    assert got["bins"][1] == {"from_s": 1, "count": 1, "ack_p99_ms": 40.0, "e2e_p99_ms": 60.0}
    assert got["bins"][2]["e2e_p99_ms"] is None
    assert got["slowest"] == [{"t_s": 0.1, "pair": 0, "ack_ms": 5.0, "e2e_ms": 300.0, "pushed": True},
                              {"t_s": 1.5, "pair": 0, "ack_ms": 40.0, "e2e_ms": 60.0, "pushed": False}]
