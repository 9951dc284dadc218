"""A paused writer under a steady sender, two writers (issue 33 item 8;
docs/operations.md "Recovery at a glance": the gateway tries the next writer, clients see
UNAVAILABLE only when none answers; docs/decisions/0079-writer-failover.md).

Six frame-level senders, four of whose conversations route first to `writer2`, send one
message after another; `writer2` is SIGSTOPped for PAUSE_S and SIGCONTed. No client gets
an ERROR (before the fix: the sends waited for the paused writer, which woke past its
clock ceiling and refused them all with UNAVAILABLE); the senders of writer2's
conversations get ACKs from the other writer while writer2 is stopped; every ACKed
message reaches its peer once and in order (a send seen by both writers commits once);
the audit is at zero; the gateway said so once at WARNING and counted the failovers.
"""

from __future__ import annotations

import asyncio
import collections
import os
import random
import re
import signal
import time
import urllib.request

from qim._core import ids
from qim.protocol import Opcode
from qim.services.gateway.router import rendezvous_order
from tests.e2e.chaos import delivered_once, run_audit
from tests.e2e.rawclient import RawClient
from tests.fixtures import running_stack

PAUSE_S = 8.0
SENDERS_ON_PAUSED, SENDERS_ELSEWHERE = 4, 2
GAP_S = 0.15  # between one sender's sends: ~35 msg/s over six senders


def pair_routed_to(addrs: list[str], index: int) -> tuple[int, int]:
    """(sender, peer) whose direct conversation's first writer is addrs[index]."""
    while True:
        a, b = random.getrandbits(40) + 1, random.getrandbits(40) + 1
        if rendezvous_order(ids.conversation_id_direct(0, a, b), tuple(addrs))[0] == index:
            return a, b


class Sender:
    """Sends numbered bodies one after another; records every answer and when it came."""

    def __init__(self, client: RawClient, peer: int, paused_conv: bool) -> None:
        self.client, self.peer, self.paused_conv = client, peer, paused_conv
        self.acked: list[bytes] = []
        self.errors: list[str] = []
        self.ack_times: list[tuple[float, int]] = []  # (monotonic time of the ACK, writer_id of its message_id)

    async def run(self, stop: asyncio.Event) -> None:
        n = 0
        while not stop.is_set():
            body = b"f%d-%d" % (self.client.user, n)
            op, reply = await self.client.send_text(self.peer, body)
            if op == Opcode.SEND_ACK:
                self.acked.append(body)
                self.ack_times.append((time.monotonic(), ids.split_message_id(reply.message_id)[3]))
            else:
                self.errors.append(f"{op:#06x} {reply}")
            n += 1
            await asyncio.sleep(GAP_S)


def gateway_metric(st, name: str) -> float:
    text = urllib.request.urlopen(f"http://{st.metrics['gateway']}/metrics", timeout=5).read().decode()
    return sum(float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M))


async def test_a_paused_writer_fails_over_to_the_other_and_commits_once(tmp_path):
    with running_stack(tmp_path, writers=2) as st:
        addrs = st.env["QIM_WRITER_ADDRS"].split(",")
        paused_addr = st.instance_env["writer2"]["QIM_WRITER_LISTEN"]
        paused = addrs.index(paused_addr)
        pairs = ([pair_routed_to(addrs, paused) for _ in range(SENDERS_ON_PAUSED)] +
                 [pair_routed_to(addrs, 1 - paused) for _ in range(SENDERS_ELSEWHERE)])
        senders = [Sender(await RawClient.login(st, a, device=7), b, n < SENDERS_ON_PAUSED)
                   for n, (a, b) in enumerate(pairs)]
        stop = asyncio.Event()
        tasks = [asyncio.create_task(s.run(stop)) for s in senders]
        try:
            await asyncio.sleep(3.0)  # steady traffic on both writers first
            # writer2's writer_id: what its conversations' ACKs carried before the pause
            paused_writer_id = collections.Counter(w for s in senders if s.paused_conv
                                                   for _, w in s.ack_times).most_common(1)[0][0]
            os.kill(st.pids["writer2"], signal.SIGSTOP)
            stopped_at = time.monotonic()
            try:
                await asyncio.sleep(PAUSE_S)
            finally:
                os.kill(st.pids["writer2"], signal.SIGCONT)
            woke_at = time.monotonic()
            await asyncio.sleep(5.0)  # the traffic after the wake-up, where the refusals were
        finally:
            stop.set()
            await asyncio.gather(*tasks)
        for s in senders:
            await s.client.close()

        errors = [e for s in senders for e in s.errors]
        assert not errors, f"{len(errors)} client(s) told an error, first: {errors[:3]}"
        # writer2's conversations went on while it was stopped: ACKed by the other writer (a
        # reply writer2 sent just before the signal may still arrive on a loaded host)
        during = [w for s in senders if s.paused_conv for t, w in s.ack_times if stopped_at < t < woke_at]
        assert any(w != paused_writer_id for w in during), (
            f"writer2's conversations got no ACK from the other writer while it was stopped: {during}")
        gaps = [b - a for s in senders if s.paused_conv for (a, _), (b, _) in zip(s.ack_times, s.ack_times[1:])]
        print(f"failover: acks={sum(len(s.acked) for s in senders)} acks_while_stopped={len(during)} "
              f"longest_wait_s={max(gaps):.2f} failovers={gateway_metric(st, 'qim_gateway_failovers_total'):.0f}")
        for s in senders:  # every ACKed message once, in order (a send both writers saw commits once)
            await delivered_once(st, s.peer, s.acked, timeout=60)
        audit = run_audit(st)
        assert audit.returncode == 0, audit.stdout + audit.stderr
        assert gateway_metric(st, "qim_gateway_failovers_total") > 0
        log = (st.dir / "logs" / "gateway.log").read_text(errors="replace")
        assert len(re.findall(rf"writer {re.escape(paused_addr)} failed \(", log)) == 1, st.log_tail("gateway", 40)
        assert f"writer {paused_addr} answers again" in log, st.log_tail("gateway", 40)
