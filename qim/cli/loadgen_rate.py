"""`qim-loadgen rate`: open-loop load at an explicit target rate (docs/design.md §12).

Sends are scheduled at the target rate regardless of replies (open loop: a slow server
shows up as latency and as arrival below target, never as a quietly lower rate). Each
sender connection pipelines its sends to its own receiver (one direct conversation per
pair). Bodies are send time ns ‖ ordinal ‖ pseudo-random padding (qim/cli/bodies.py);
the generator keeps each body's SHA-256. Receivers (qim/cli/rate_receiver.py) take a
PUSH_EVENTS as a wake-up and as the first sighting for latency, and PULL their mailbox
with their own cursor after pushes (at most every --pull-gap, 0.25 s) and at least once
a second: hash, order and loss are verified on what they pull (pushes may be dropped by
design).
The timed window starts once every receiver's login settled (its login wake-up came,
so the mailbox pushes to it, and its first page was answered; at most 5 s, printed as
`settle: …`; qim/cli/rate_receiver.py `settle`): the first segment holds the stack's
first messages, not its logins' aftermath. Every 5 s segment prints sent, arrival ratio
(sent / target), ACK and end-to-end P50/P95/P99/max in ms (np.percentile); the last line is
`loadgen: target_rate=R duration_s=D sent=S acked=A errors=E arrival=X push_coverage=Y
ack_p99_ms=… e2e_p99_ms=… lost=L duplicated=U corrupt=C out_of_order=O`.
push_coverage = messages first seen in a push / sent. Exit 0 when arrival ≥ --min-arrival (0.99),
every send was acknowledged and L = U = C = O = 0, 1 otherwise (out_of_order: ACKs
below the previous submission's conversation_seq plus messages pulled after a higher
one; stderr splits them). Short runs are smoke, never capacity claims. Loopback
targets only (the gateway address given).

SDK lane (qim/cli/loadgen_sdk.py): `--sdk-clients N` real SDK clients (default 5 % of
the frame-level connections, whole pairs; 0 = off, the capacity control) send to each
other at their share of the target (every sending connection carries the same rate:
the lane gets N / (pairs + N) of it, the frame-level senders the rest); their view is
checked at the end (`sdk_lane: …` line) and its failures make the exit code 1. The last
line then also has `sdk_sent=… sdk_failures=…`. Latency statistics: numpy
(qim/cli/loadgen_stats.py). `--json PATH` writes the whole report (segments, totals,
histograms, the SDK lane's verdict, `settle` and `first_seconds`: the first segment per
second of send time and its slowest samples, `Ledger.first_seconds`) for qim/dev/perf.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import struct
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

from qim._core import ids
from qim.cli.argchecks import ArgError, in_range, non_negative, positive, writable_path
from qim.cli.bodies import body_bytes, digest
from qim.cli.gateways import gateway_for
from qim.cli.loadgen_args import load_gateway_args, loadgen_parser
from qim.cli.loadgen_group import GroupSender
from qim.cli.loadgen_login import LoginFailed, login
from qim.cli.loadgen_mix import MixLoad, parse_mix
from qim.cli.loadgen_sdk import SdkLane, default_clients
from qim.cli.loadgen_sdkcheck import SdkVerdict
from qim.cli.loadgen_stats import HIST_EDGES_MS, Latencies
from qim.cli.rate_receiver import PULL_GAP_S, Ledger, Receiver, Sent, settle
from qim.consts import GROUP_MAX_MEMBERS
from qim.errors import ConfigError
from qim.proto.v1 import message_pb2
from qim.protocol import Opcode
from qim.wire.errors import decode_error

SEGMENT_S = 5.0
TICK_S = 0.005


class Stats:
    """Counters and latency samples (ms) of one segment or of the whole run."""

    def __init__(self) -> None:
        self.sent = self.acked = self.errors = 0
        self.ack_ms = Latencies()
        self.e2e_ms = Latencies()

    def line(self, label: str, target: float, elapsed: float) -> str:
        """One report line of this segment: arrival ratio and ACK / end-to-end percentiles."""
        arrival = self.sent / max(1.0, target * elapsed)
        return (f"{label}: sent={self.sent} arrival={arrival:.3f} acked={self.acked} errors={self.errors} "
                f"ack_ms(p50/p95/p99/max)={self.ack_ms.summary()} e2e_ms={self.e2e_ms.summary()}")

    def to_dict(self, **extra) -> dict:
        """The JSON form of these figures (`extra` first: t_s, duration_s, ...)."""
        return {**extra, "sent": self.sent, "acked": self.acked, "errors": self.errors,
                "ack": self.ack_ms.to_dict(), "e2e": self.e2e_ms.to_dict()}


def padding(seed: bytes, n: int, size: int) -> bytes:
    """Pseudo-random padding of message `n` (a corrupted or swapped body changes its hash)."""
    return body_bytes(seed + n.to_bytes(8, "big"), size) if size > 0 else b""


async def run(cfg: argparse.Namespace) -> int:
    """The whole run described by `cfg` (see `parser()`); returns the exit code."""
    key = cfg.token_key
    base = secrets.randbits(60) + 1
    senders = [base + i for i in range(cfg.pairs)]
    receivers = [base + cfg.pairs + i for i in range(cfg.pairs)]
    streams = await asyncio.gather(*(login(gateway_for(u, cfg.gateways), key, u, cfg.tls)
                                     for u in senders + receivers))
    out_streams = streams[:cfg.pairs]
    convs = [ids.conversation_id_direct(0, s, r) for s, r in zip(senders, receivers)]
    seg, total = Stats(), Stats()
    ledger = Ledger(senders, receivers, convs)

    def latency(ms: float) -> None:
        seg.e2e_ms.add(ms)
        total.e2e_ms.add(ms)

    ledger.on_latency = latency
    pending: dict[tuple[int, int], int] = {}  # (pair, request_id) -> message ordinal n
    error_codes: dict[str, int] = {}
    pad_seed = base.to_bytes(8, "big")
    mix = MixLoad(cfg.mix, base)

    async def read_acks(i: int) -> None:
        while True:
            item = await out_streams[i].read_frame()
            if item is None:
                return
            op, rid, body = item
            n = pending.pop((i, rid), None)
            if n is None:
                mix.answer(i, rid, op, body)  # a REACT or TYPING of --mix (qim/cli/loadgen_mix.py)
                continue
            mix.acked(i, n, message_pb2.SendAck.FromString(body).message_id if op == Opcode.SEND_ACK else b"",
                      op == Opcode.SEND_ACK)
            now_ns = time.perf_counter_ns()
            ack_ms = (now_ns - ledger.sent[n].sent_ns) / 1e6
            if op == Opcode.SEND_ACK:
                a = message_pb2.SendAck.FromString(body)
                ledger.acked(n, a.message_id, a.conversation_seq, now_ns)
            else:
                code = decode_error(body).code.name if op == Opcode.ERROR else hex(op)
                error_codes[code] = error_codes.get(code, 0) + 1
            for st in (seg, total):
                if op == Opcode.SEND_ACK:
                    st.acked += 1
                    st.ack_ms.add(ack_ms)
                else:
                    st.errors += 1

    lane = None
    if cfg.sdk_clients:
        lane = SdkLane(cfg.gateways, key, cfg.sdk_clients, cfg.rate * cfg.sdk_clients / (cfg.pairs + cfg.sdk_clients),
                       cfg.size, base + 2 * cfg.pairs, cfg.ca_file, cfg.plaintext)
        await lane.start()
    rate = cfg.rate * cfg.pairs / (cfg.pairs + cfg.sdk_clients)  # the frame-level lane's share
    group = None
    if cfg.group_members:  # one more sender, to a big group, at a direct sender's rate (loadgen_group.py)
        owner = base + 2 * cfg.pairs + cfg.sdk_clients
        group_rate = rate / cfg.pairs if cfg.group_rate is None else cfg.group_rate
        group = GroupSender(await login(gateway_for(owner, cfg.gateways), key, owner, cfg.tls), owner, cfg.group_members,
                            group_rate, cfg.size)
        await group.start()
    segments: list[dict] = []
    rx = [Receiver(i, s, ledger, cfg.pull_gap) for i, s in enumerate(streams[cfg.pairs:])]
    loop = asyncio.get_running_loop()
    tasks = [loop.create_task(read_acks(i)) for i in range(cfg.pairs)]
    tasks += [loop.create_task(r.read_loop()) for r in rx] + [loop.create_task(r.pull_loop()) for r in rx]
    # the timed window starts once every receiver's login settled (rate_receiver.settle):
    # its first sends are then the stack's first messages, not its logins' aftermath
    settle_s, unsettled = await settle(rx)
    print(f"settle: {settle_s:.2f} s, {unsettled} of {len(rx)} receivers not settled", flush=True)
    start, start_ns = time.perf_counter(), time.perf_counter_ns()
    seg_start, n, rid, ops = start, 0, 1, 0  # n: message ordinal; ops: scheduled operations (--mix)
    total_due = round(rate * cfg.duration)
    while ops < total_due:
        now = time.perf_counter()
        if lane is not None:
            await lane.send_due(now - start)
        if group is not None:
            group.send_due(min(now - start, cfg.duration))
        due = min(total_due, int((now - start) * rate) + 1) - ops
        for _ in range(due):
            i, rid, ops, kind = ops % cfg.pairs, rid + 1, ops + 1, mix.draw()
            if mix.ephemeral(kind, i, rid, out_streams[i], convs[i], receivers[i]):
                continue
            sent_ns = time.perf_counter_ns()
            body = struct.pack(">QQ", sent_ns, n) + padding(pad_seed, n, cfg.size - 16)
            msg = message_pb2.SendMessage(client_message_id=os.urandom(16), conversation_id=convs[i],
                                          recipient_user_id=receivers[i], message_type=1, body=body)
            mix.extras(kind, i, n, msg)
            ledger.sent.append(Sent(i, sent_ns, digest(body)))
            pending[(i, rid)] = n
            out_streams[i].send(Opcode.SEND_MESSAGE, rid, msg.SerializeToString())
            seg.sent += 1
            total.sent += 1
            n += 1
        if now - seg_start >= SEGMENT_S:
            print(seg.line(f"segment t={now - start:5.1f}s", rate, now - seg_start), flush=True)
            segments.append(seg.to_dict(t_s=round(now - start, 3), duration_s=round(now - seg_start, 3)))
            seg, seg_start = Stats(), now
        await asyncio.sleep(TICK_S)
    send_end = time.perf_counter()
    deadline = send_end + cfg.drain
    sdk = SdkVerdict()
    if lane is not None:
        await lane.send_due(cfg.duration)  # what fell due in the last tick
        lane_task = loop.create_task(lane.finish(cfg.drain))
    while (pending or mix.pending) and time.perf_counter() < deadline:  # noqa: ASYNC110 — ACKs empty it from many tasks
        await asyncio.sleep(0.05)
    if group is not None:
        await group.drain(deadline)
    while not ledger.all_pulled() and time.perf_counter() < deadline:  # receivers catch up by pulling
        for r in rx:
            r.wake.set()
        await asyncio.sleep(0.1)
    now = time.perf_counter()
    if seg.sent:  # the last (possibly partial) segment, with its replies drained
        seg_s = max(1e-3, min(now, start + cfg.duration) - seg_start)
        print(seg.line(f"segment t={now - start:5.1f}s", rate, seg_s), flush=True)
        segments.append(seg.to_dict(t_s=round(now - start, 3), duration_s=round(seg_s, 3)))
    for r in rx:
        r.stop()
    v = ledger.verdict()
    if lane is not None:
        sdk = await lane_task
        print(sdk.line(), flush=True)
        for note in [*sdk.notes[:20], *sdk.clients_seen]:
            print(f"sdk_lane: {note}", file=sys.stderr)
        await lane.close()
    if group is not None:
        print(group.line(total.ack_ms), flush=True)
        group.stream.abort()
    # a generator that fell behind needed longer than the duration to send them all
    arrival = (total.sent + mix.ops()) / (rate * max(cfg.duration, send_end - start))
    sdk_tail = f" sdk_sent={len(lane.intents)} sdk_failures={sdk.failures}" if lane is not None else ""
    if any(cfg.mix.values()):
        print(mix.line(), flush=True)
    print(f"loadgen: target_rate={cfg.rate} duration_s={cfg.duration} sent={total.sent} acked={total.acked} "
          f"errors={total.errors} arrival={arrival:.3f} push_coverage={ledger.pushed_first / max(1, total.sent):.3f} "
          f"ack_p99_ms={total.ack_ms.p99():.1f} e2e_p99_ms={total.e2e_ms.p99():.1f} lost={v['lost']} "
          f"duplicated={v['duplicated']} corrupt={v['corrupt']} out_of_order={v['out_of_order']}{sdk_tail}",
          flush=True)
    if v["out_of_order"]:
        print(f"out_of_order: {ledger.ack_inversions} ACKs below the previous submission's seq, "
              f"{ledger.pull_inversions} pulled after a higher seq", file=sys.stderr)
    if error_codes or mix.error_codes:
        print(f"errors by code: {error_codes} {mix.error_codes}", file=sys.stderr)
    pull_errors = {k: n for r in rx for k, n in r.pull_errors.items()}
    if pull_errors:
        print(f"receiver pull errors by code: {pull_errors}", file=sys.stderr)
    for s in streams:
        s.abort()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    clean = v["lost"] == v["duplicated"] == v["corrupt"] == v["out_of_order"] == 0
    ok = arrival >= cfg.min_arrival and total.acked == total.sent and clean and sdk.failures == 0
    ok = ok and (group is None or group.acked == group.sent) and mix.clean()
    if cfg.json:
        report = {"target_rate": cfg.rate, "frame_rate": rate, "duration_s": cfg.duration, "pairs": cfg.pairs,
                  "size": cfg.size, "ok": ok, "arrival": arrival, "send_s": send_end - start,
                  "push_coverage": ledger.pushed_first / max(1, total.sent), "verdict": v,
                  "error_codes": error_codes, "pull_errors": pull_errors,
                  # the receivers' pulls and the pushes they applied instead (decisions/0156)
                  "receiver_pulls": sum(r.pulls for r in rx), "pushes_applied": sum(r.pushes_applied for r in rx),
                  "total": total.to_dict(), "segments": segments, "hist_edges_ms": HIST_EDGES_MS.tolist(),
                  "settle": {"seconds": round(settle_s, 3), "unsettled": unsettled},
                  "first_seconds": ledger.first_seconds(start_ns, SEGMENT_S),
                  "hist": {"ack": total.ack_ms.histogram(), "e2e": total.e2e_ms.histogram()},
                  "sdk": None if lane is None else {**{k: getattr(sdk, k) for k in (
                      "clients", "acked", "delivered", "lost", "duplicated", "out_of_order", "corrupt",
                      "listing_errors", "unread_errors", "send_failures", "checked")},
                      "sent": len(lane.intents), "failures": sdk.failures, "notes": sdk.notes[:50],
                      "clients_seen": sdk.clients_seen},
                  "group": None if group is None else group.report(total.ack_ms), "mix": mix.report()}
        await asyncio.to_thread(Path(cfg.json).write_text, json.dumps(report, indent=1), "utf-8")
    return 0 if ok else 1


def parser() -> argparse.ArgumentParser:
    """The command line of `qim-loadgen rate`."""
    p = loadgen_parser("rate", __doc__, "clients")
    p.add_argument("--rate", type=float, required=True, help="target sends per second")
    p.add_argument("--duration", type=float, default=180.0, help="seconds of load (180 for acceptance)")
    p.add_argument("--pairs", type=int, default=20, help="sender/receiver connection pairs")
    p.add_argument("--size", type=int, default=64, help="body bytes (>= 16)")
    p.add_argument("--pull-gap", type=float, default=PULL_GAP_S,
                   help="seconds a receiver waits at least between pulls (0: pull on every push)")
    p.add_argument("--drain", type=float, default=30.0,
                   help="seconds to wait for outstanding ACKs and for receivers to pull everything")
    p.add_argument("--sdk-clients", type=int, default=None,
                   help="real SDK clients, paired (default: 5 %% of the connections, at least 2; 0: off)")
    p.add_argument("--group-members", type=int, default=0,
                   help="also send from one more connection to a group of this many members (0: off)")
    p.add_argument("--group-rate", type=float, default=None,
                   help="sends per second to the group (default: a direct sender's rate)")
    p.add_argument("--min-arrival", type=float, default=0.99,
                   help="arrival below this fails the run (a functional check on a busy machine may lower it)")
    p.add_argument("--json", default=None, help="write the whole report as JSON to this path")
    p.add_argument("--mix", default=None, help="fractions of the operations: replies=F,mentions=F,reactions=F,"
                   "typing=F (the rest plain sends; qim/cli/loadgen_mix.py)")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the open-loop load: 0 when arrival reached --min-arrival (99 %) of the target, every send was
    acknowledged and the client view is clean; 1 otherwise (also when a login failed:
    one line naming the gateway), 2 on bad arguments (one line naming the option)."""
    cfg = parser().parse_args(argv)
    if cfg.sdk_clients is None:
        cfg.sdk_clients = default_clients(2 * max(1, cfg.pairs))
    try:
        check(cfg)  # ArgError is a ValueError
        load_gateway_args(cfg)  # qim/cli/loadgen_args.py
    except (ValueError, ConfigError) as exc:
        print(f"qim-loadgen rate: {exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(run(cfg))
    except LoginFailed as exc:  # nothing was measured: one line, not a traceback
        print(f"qim-loadgen rate: {exc}", file=sys.stderr)
        return 1


def check(cfg: argparse.Namespace) -> None:
    """Every numeric option and --json, before anything connects; ArgError naming the first bad one."""
    positive("--rate", cfg.rate)
    positive("--duration", cfg.duration)
    in_range("--pairs", cfg.pairs, 1)
    in_range("--size", cfg.size, 16)
    non_negative("--pull-gap", cfg.pull_gap)
    non_negative("--drain", cfg.drain)
    if not 0.0 <= cfg.min_arrival <= 1.0:  # NaN fails this too
        raise ArgError(f"--min-arrival must be 0..1, got {cfg.min_arrival}")
    if cfg.group_members:
        in_range("--group-members", cfg.group_members, 2, GROUP_MAX_MEMBERS)  # GroupSender's bound
    if cfg.group_rate is not None:
        positive("--group-rate", cfg.group_rate)
        if not cfg.group_members:
            raise ArgError("--group-rate needs --group-members")
    if cfg.sdk_clients < 0 or cfg.sdk_clients % 2:
        raise ArgError(f"--sdk-clients must be 0 or an even number (paired), got {cfg.sdk_clients}")
    writable_path("--json", cfg.json)
    cfg.mix = parse_mix(cfg.mix)  # ArgError naming --mix
