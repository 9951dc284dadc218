"""A pipelined burst in one conversation flows at the rate the server takes, with no
refused frame (qim/sdk/sender.py send window, qim/sdk/rategate.py paced by the limit
AUTH_OK advertises, the gateway's refund of "not now" answers; docs/decisions/0056).

Counted by the gateway's own metrics, not by the SDK: every SEND_MESSAGE frame it
received and every ERROR it answered during the burst. What the app is told: every
ACK in submission order, and the recipient shown every message once, in order.
"""

from __future__ import annotations

import asyncio

from qim.sdk import direct_conversation
from qim.sdk import events as ev
from qim.sdk.window import MAX as MAX_WINDOW
from tests.e2e.tlsmetrics import samples, value
from tests.sdk.realstack import eventually, runtime, shutdown, users

SENDS = 900  # more than twice the per-connection burst of the default limits (QIM_RATE_CONN_BURST)


def counters(stack) -> dict[str, float]:
    return {"frames": value(stack, "gateway", "qim_gateway_requests_total", opcode="0x0201"),
            "errors": value(stack, "gateway", "qim_gateway_request_errors_total"),
            "logins": value(stack, "gateway", "qim_gateway_requests_total", opcode="0x0101"),
            **{f"errors {dict(k)['code']}": v for k, v in samples(stack, "gateway", "qim_gateway_request_errors_total").items()}}


async def test_a_pipelined_burst_is_paced_not_refused(stack, tmp_path):
    a, b = users(2)
    conv = direct_conversation(0, a, b)
    ra, rb = runtime(stack, tmp_path, a, send_timeout=120), runtime(stack, tmp_path, b)
    await ra.connect()
    await rb.connect()
    await ra.send_message(conv, b, b"warm-up")  # a writer's first commit after start can pass the ACK deadline
    bodies = [b"burst %05d" % i for i in range(SENDS)]
    before = await asyncio.to_thread(counters, stack)
    repeats0 = ra.stats.get("repeats", 0)  # the warm-up may have been repeated
    cmids = [await ra.submit_message(conv, b, body) for body in bodies]  # no waiting in between
    acks = [await ra.wait_ack(c, timeout=120) for c in cmids]
    after = await asyncio.to_thread(counters, stack)
    try:
        seqs = [x.conversation_seq for x in acks]
        assert seqs == sorted(seqs) and len(set(seqs)) == SENDS  # submission order
        # the app was told of no lost connection during the burst (a resend would follow one)
        assert not ra.told.of(ev.Disconnected), ra.told.of(ev.Disconnected)
        # the gateway's counters are of every connection of the shared stack: a second
        # sender would show here, so say who else was logged in when it does
        # nothing retransmitted but what the ACK-deadline rule repeats: a send unanswered for
        # SEND_ACK_PROBE_S with the connection alive goes again (a machine that stalls for
        # seconds does that to the sends then in the window); a refusal would count in errors
        repeats = ra.stats.get("repeats", 0) - repeats0
        assert after["frames"] - before["frames"] == SENDS + repeats, (after, before, repeats)
        assert repeats <= MAX_WINDOW, repeats  # at most one window's worth, never a storm
        assert after["errors"] - before["errors"] == 0  # not one refusal (RATE_LIMITED, UNAVAILABLE)
        assert ra.rate_gate.refusals == 0
        await eventually(lambda: len(rb.told.messages(conv)) > SENDS, timeout=60, what="the burst at the recipient")
        assert [m.body for m in rb.told.messages(conv)] == [b"warm-up", *bodies]
    finally:
        await shutdown(ra, rb)
