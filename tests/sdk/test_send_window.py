"""The send window and the RateGate keep one conversation's frames in ordinal order
under a refusal (qim/sdk/window.py, qim/sdk/rategate.py, docs/decisions/0056).

The writer refuses a send whose previous one holds no commit state, so a frame that
overtakes its previous one is refused together with every send behind it. These are
the three ways one refusal became hundreds (CI: 900 sends cost 1,381 frames and 481
ERRORs): a later ticket passing the gate before a waiter it had just let through, a
window grown to hundreds while the gate kept it nearly empty, and a fresh send leaving
while a refused earlier one waited to be sent again.
"""

from __future__ import annotations

import asyncio
import time
import types

from qim.sdk import rategate
from qim.sdk.ledger import SendLedger
from qim.sdk.model import PendingSend
from qim.sdk.rategate import RateGate
from qim.sdk.window import START, SendWindows
from tests.sdk.test_runtime import CONV as DIRECT
from tests.sdk.test_runtime import A, B, runtime
from tests.sdk.test_send_order import gw

__all__ = ["gw"]  # the fixture: the fake gateway with the writer's previous-send rule
CONV = b"c" * 16


def rows(n: int, ledger: SendLedger) -> list[PendingSend]:
    out = [PendingSend(bytes([i + 1]) * 16, i + 1, CONV, 2, 1, b"", b"x", 0, "pending") for i in range(n)]
    for r in out:
        ledger.track(r)
    return out


async def test_a_waiter_let_through_goes_before_a_later_ticket_that_finds_a_token():
    gate = RateGate()
    # a mirror of one token, one more every 100 ms: slow enough that a busy machine's
    # scheduling between two lines never refills it (1 ms per token flaked under load)
    gate.limit(10, 2)
    first = gate.try_acquire(gate.ticket())
    assert first is not None  # the token is taken
    waiter = asyncio.ensure_future(gate.acquire(gate.ticket()))
    await asyncio.sleep(0)  # in line: the mirror is empty
    assert not waiter.done()
    time.sleep(0.12)  # a loaded loop: the pump's timer runs late, tokens are back
    gate._pump()  # let through: its permit is set, its task has not run yet
    time.sleep(0.12)  # and before it runs, another token
    assert gate.try_acquire(gate.ticket()) is None  # the later ticket must not overtake it
    permit = await waiter
    later = gate.try_acquire(gate.ticket())
    assert later is not None  # once it has resumed, the fast path is open again
    for p in (first, permit, later):
        p.close(None)


def test_the_window_grows_only_while_it_is_full():
    ledger = SendLedger()
    win = SendWindows(ledger, 3.0)
    sends = rows(START + 4, ledger)
    win.sent(sends[0])  # one on the wire: the gate holds the rest back
    win.answered(CONV, sends[0].client_message_id)
    assert win.limit(CONV) == START  # quick, but the window was nearly empty
    for r in sends[1:START + 1]:
        win.sent(r)
    win.answered(CONV, sends[1].client_message_id)
    assert win.limit(CONV) == START + 1  # quick and full: grows


def test_a_refused_send_holds_back_every_later_send_until_it_is_sent_again():
    ledger = SendLedger()
    win = SendWindows(ledger, 3.0)
    r0, r1, r2, r3 = rows(4, ledger)
    for r in (r0, r1, r2):
        win.sent(r)
    win.refused(r1)
    win.refused(r2)  # refused behind r1 (it named r1)
    assert win.limit(CONV) == START // 4
    assert win.admits(r0) and win.admits(r1)  # r0 is on the wire; r1 is the first to go again
    assert not win.admits(r2) and not win.admits(r3)  # neither before r1 has gone again
    win.sent(r1)
    assert win.admits(r2) and not win.admits(r3)
    win.sent(r2)
    assert win.admits(r3)


async def test_a_turn_waits_for_the_earlier_refused_send_to_go_again():
    ledger = SendLedger()
    win = SendWindows(ledger, 3.0)
    r0, r1 = rows(2, ledger)
    for r in (r0, r1):
        win.sent(r)
        win.refused(r)

    class Open:  # the connection stays up
        is_open = True
        closed = asyncio.get_running_loop().create_future()

    later = asyncio.ensure_future(win.turn(Open(), r1))  # type: ignore[arg-type]
    await asyncio.sleep(0.01)
    assert not later.done()  # r0 has not been sent again
    win.sent(r0)
    await asyncio.wait_for(later, 1.0)


async def test_frames_leave_in_ordinal_order_on_a_loop_slower_than_the_mirror_refills(gw, tmp_path, monkeypatch):
    # a loaded loop: every clock read is 0.3 ms after the one before, so at 1,000/s the
    # mirror has a token again every few tries (a send that found none is lined up
    # in a task that has not run yet, and the next one must not pass it)
    now = [time.monotonic()]

    def slow_monotonic() -> float:
        now[0] += 0.0003
        return now[0]

    monkeypatch.setattr(rategate, "time", types.SimpleNamespace(monotonic=slow_monotonic))
    rt = runtime(gw, tmp_path, A)
    n = 200
    cmids = [await rt.submit_message(DIRECT, B, f"m{i}".encode()) for i in range(n)]  # stored only
    limit = RateGate.limit  # whatever AUTH_OK advertises, a mirror of one token, one more each ms
    monkeypatch.setattr(RateGate, "limit", lambda gate, rate, burst: limit(gate, 1000, 2))
    await rt.connect()  # the sync starts the window's first sends in one go
    acks = await asyncio.wait_for(asyncio.gather(*(rt.wait_ack(c) for c in cmids)), 60)
    assert [a.conversation_seq for a in acks] == list(range(1, n + 1))
    firsts = list(dict.fromkeys(f.client_message_id for f in gw.frames))
    assert firsts == cmids  # first transmissions in submission order
    assert len(gw.frames) == n  # none refused for naming a send the writer had not seen
    await rt.close()
