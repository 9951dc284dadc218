"""`qim-loadgen rate`: open-loop load at an explicit target rate (DESIGN.md §12).

Sends are scheduled at the target rate regardless of replies (open loop: a slow server
shows up as latency and as arrival below target, never as a quietly lower rate). Each
sender connection pipelines its sends; each message goes to a connected receiver whose
PUSH_EVENTS give the end-to-end latency (body = send time ns ‖ sequence ‖ padding).
Every 5 s segment prints sent, arrival ratio (sent / target), ACK and end-to-end
P50/P95/P99/max in ms; the last line is
`loadgen: target_rate=R duration_s=D sent=S acked=A errors=E arrival=X push_coverage=Y ack_p99_ms=… e2e_p99_ms=…`.
Exit 0 when arrival ≥ 0.99 and every send was acknowledged, 1 otherwise. Short runs
are smoke, never capacity claims. Loopback targets only (the gateway address given).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import struct
import sys
import time
from typing import Optional, Sequence

from qim._core import ids
from qim.net.framed import open_framed, parse_addr
from qim.errors import ErrorCode
from qim.proto.v1 import common_pb2, connection_pb2, mailbox_pb2, message_pb2
from qim.protocol import Opcode
from qim.services.gateway.auth import issue_dev_token

SEGMENT_S = 5.0
TICK_S = 0.005


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(values: list[float]) -> str:
    return "/".join(f"{pct(values, q):.1f}" for q in (0.5, 0.95, 0.99)) + f"/{max(values, default=float('nan')):.1f}"


class Stats:
    def __init__(self) -> None:
        self.sent = self.acked = self.errors = self.pushed = 0
        self.ack_ms: list[float] = []
        self.e2e_ms: list[float] = []

    def line(self, label: str, target: float, elapsed: float) -> str:
        arrival = self.sent / max(1.0, target * elapsed)
        return (f"{label}: sent={self.sent} arrival={arrival:.3f} acked={self.acked} errors={self.errors} "
                f"ack_ms(p50/p95/p99/max)={summary(self.ack_ms)} e2e_ms={summary(self.e2e_ms)}")


async def login(addr: str, secret: bytes, user: int):
    stream = await open_framed(*parse_addr(addr))
    stream.send(Opcode.AUTH, 1, connection_pb2.Auth(token=issue_dev_token(secret, 0, user, 1)).SerializeToString())
    item = await asyncio.wait_for(stream.read_frame(), 10)
    if item is None or item[0] != Opcode.AUTH_OK:
        raise RuntimeError(f"AUTH failed for user {user}")
    return stream


async def run(cfg: argparse.Namespace) -> int:
    secret = cfg.token_secret.encode()
    base = secrets.randbits(60) + 1
    senders = [base + i for i in range(cfg.pairs)]
    receivers = [base + cfg.pairs + i for i in range(cfg.pairs)]
    streams = await asyncio.gather(*(login(cfg.gateway, secret, u) for u in senders + receivers))
    out_streams, in_streams = streams[:cfg.pairs], streams[cfg.pairs:]
    convs = [ids.conversation_id_direct(0, s, r) for s, r in zip(senders, receivers)]
    pending: dict[tuple[int, int], int] = {}
    seg, total = Stats(), Stats()
    error_codes: dict[str, int] = {}

    async def read_acks(i: int) -> None:
        while True:
            item = await out_streams[i].read_frame()
            if item is None:
                return
            op, rid, body = item
            started = pending.pop((i, rid), None)
            if started is None:
                continue
            if op != Opcode.SEND_ACK:
                code = ErrorCode(common_pb2.Error.FromString(body).code).name
                error_codes[code] = error_codes.get(code, 0) + 1
            for st in (seg, total):
                if op == Opcode.SEND_ACK:
                    st.acked += 1
                    st.ack_ms.append((time.perf_counter_ns() - started) / 1e6)
                else:
                    st.errors += 1

    async def read_pushes(i: int) -> None:
        while True:
            item = await in_streams[i].read_frame()
            if item is None:
                return
            if item[0] != Opcode.PUSH_EVENTS:
                continue
            now = time.perf_counter_ns()
            for e in mailbox_pb2.PushEvents.FromString(item[2]).entries:
                if len(e.body) >= 16 and e.sender_id != receivers[i]:
                    sent_ns, _ = struct.unpack_from(">QQ", e.body)
                    for st in (seg, total):
                        st.pushed += 1
                        st.e2e_ms.append((now - sent_ns) / 1e6)

    readers = [asyncio.get_running_loop().create_task(read_acks(i)) for i in range(cfg.pairs)]
    readers += [asyncio.get_running_loop().create_task(read_pushes(i)) for i in range(cfg.pairs)]
    padding = b"x" * max(0, cfg.size - 16)
    start = time.perf_counter()
    seg_start, n, rid = start, 0, 1
    total_due = round(cfg.rate * cfg.duration)
    while n < total_due:
        now = time.perf_counter()
        due = min(total_due, int((now - start) * cfg.rate) + 1) - n
        for _ in range(due):
            i, rid = n % cfg.pairs, rid + 1
            body = struct.pack(">QQ", time.perf_counter_ns(), n) + padding
            msg = message_pb2.SendMessage(client_message_id=os.urandom(16), conversation_id=convs[i],
                                          recipient_user_id=receivers[i], message_type=1, body=body)
            pending[(i, rid)] = time.perf_counter_ns()
            out_streams[i].send(Opcode.SEND_MESSAGE, rid, msg.SerializeToString())
            seg.sent += 1
            total.sent += 1
            n += 1
        if now - seg_start >= SEGMENT_S:
            print(seg.line(f"segment t={now - start:5.1f}s", cfg.rate, now - seg_start), flush=True)
            seg, seg_start = Stats(), now
        await asyncio.sleep(TICK_S)
    send_end = time.perf_counter()
    deadline = send_end + cfg.drain
    while pending and time.perf_counter() < deadline:
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)  # late pushes
    now = time.perf_counter()
    if seg.sent:  # the last (possibly partial) segment, with its replies drained
        print(seg.line(f"segment t={now - start:5.1f}s", cfg.rate, max(1e-3, min(now, start + cfg.duration) - seg_start)),
              flush=True)
    # a generator that fell behind needed longer than the duration to send them all
    arrival = total.sent / (cfg.rate * max(cfg.duration, send_end - start))
    print(f"loadgen: target_rate={cfg.rate} duration_s={cfg.duration} sent={total.sent} acked={total.acked} "
          f"errors={total.errors} arrival={arrival:.3f} push_coverage={total.pushed / max(1, total.sent):.3f} "
          f"ack_p99_ms={pct(total.ack_ms, 0.99):.1f} e2e_p99_ms={pct(total.e2e_ms, 0.99):.1f}", flush=True)
    if error_codes:
        print(f"errors by code: {error_codes}", file=sys.stderr)
    for s in streams:
        s.abort()
    for r in readers:
        r.cancel()
    return 0 if arrival >= 0.99 and total.acked == total.sent else 1


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="qim-loadgen rate", description=__doc__.split("\n\n")[0])
    p.add_argument("--gateway", default=os.environ.get("QIM_GATEWAY_ADDR"))
    p.add_argument("--token-secret", default=os.environ.get("QIM_DEV_TOKEN_SECRET"))
    p.add_argument("--rate", type=float, required=True, help="target sends per second")
    p.add_argument("--duration", type=float, default=180.0, help="seconds of load (180 for acceptance)")
    p.add_argument("--pairs", type=int, default=20, help="sender/receiver connection pairs")
    p.add_argument("--size", type=int, default=64, help="body bytes (>= 16)")
    p.add_argument("--drain", type=float, default=30.0, help="seconds to wait for outstanding ACKs")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    cfg = parser().parse_args(argv)
    if not cfg.gateway or not cfg.token_secret:
        print("qim-loadgen rate: --gateway/QIM_GATEWAY_ADDR and --token-secret/QIM_DEV_TOKEN_SECRET are required",
              file=sys.stderr)
        return 2
    if cfg.rate <= 0 or cfg.duration <= 0 or cfg.pairs <= 0 or cfg.size < 16:
        print("qim-loadgen rate: --rate, --duration and --pairs must be positive, --size >= 16", file=sys.stderr)
        return 2
    return asyncio.run(run(cfg))
