"""`qim-loadgen room`: one chatroom of N online members, M posts/s (docs/perf.md "Rooms";
docs/decisions/0045-rooms-phase-one-in-process-ring.md).

N frame-level member connections (users of their own, spread round-robin over the
gateways given) join one new room; `--posters` of them post at `--rate` posts/s in all,
open loop (a slow server shows as latency, never as a lower rate). Bodies are send time
ns ‖ post ordinal ‖ padding. Every member checks what it is told, apart from the SDK's
code: every post once, in room_seq order (room_seq of one epoch is contiguous, so a gap
is seen at once), and each post at the same (room_epoch, room_seq) for every member
(`out_of_order` counts a post told at another position than to the first member told:
the room's one order is room_seq, not the posters' send order). A member told `rejoin` (a slow member, or its RoomWriter link lost)
joins again with its last (room_epoch, room_seq) and merges the replay by seq, as the
SDK does; a replay marked `truncated` is counted (and its missing posts are lost).
The last line is `loadgen_room: members=N gateways=G posts=P acked=A deliveries=D
expected=E lost=L duplicated=U out_of_order=O rejoins=R truncated=T
delivery_ms(p50/p95/p99/max)=… ack_ms=… deliveries_per_s=… loadgen_cpu_s=…`; exit 0
when every post was acknowledged and L = U = O = 0. Delivery latency is post send ->
frame read by the member, so it includes this process's own queueing: on a loaded
host the figures are upper bounds. Loopback targets only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import secrets
import struct
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

from qim.cli.argchecks import in_range, non_negative, positive, writable_path
from qim.cli.bodies import body_bytes
from qim.cli.loadgen_args import load_gateway_args, loadgen_parser
from qim.cli.loadgen_login import login
from qim.cli.loadgen_stats import Latencies
from qim.errors import ConfigError
from qim.net.framed import StreamClosed
from qim.proto.v1 import room_pb2
from qim.protocol import Opcode
from qim.wire.errors import decode_error

LOGIN_CONCURRENCY = 64
POST = room_pb2.RoomEvent.POST
HEAD = struct.Struct(">QQ")  # send time ns, post ordinal


class Member:
    """One member connection: its joins, its checks, and (for a poster) its ACKs."""

    def __init__(self, run: "RoomRun", user: int, stream) -> None:
        self.run, self.user, self.stream = run, user, stream
        self.epoch = self.seq = 0
        self.seen = bytearray(run.total_posts)  # deliveries per post ordinal
        self.rejoining = False
        self.buffered: list[room_pb2.RoomEvents] = []
        self._rid = 1
        self._waiting: dict[int, asyncio.Future] = {}
        self.reader = asyncio.ensure_future(self._read())

    def request(self, opcode: int, body: bytes) -> asyncio.Future:
        """Send one request; a future of (reply opcode, body)."""
        self._rid += 1
        fut = asyncio.get_running_loop().create_future()
        self._waiting[self._rid] = fut
        self.stream.send(opcode, self._rid, body)
        return fut

    async def join(self) -> None:
        """JOIN_ROOM (from the last position when there is one); RuntimeError when refused."""
        req = room_pb2.JoinRoom(room_id=self.run.room)
        if self.epoch:
            req.since.room_epoch, req.since.room_seq = self.epoch, self.seq
        self.rejoining = True
        op, body = await self.request(Opcode.JOIN_ROOM, req.SerializeToString())
        if op != Opcode.ROOM_JOINED:
            raise RuntimeError(f"JOIN_ROOM refused: {decode_error(body)}")
        joined = room_pb2.RoomJoined.FromString(body)
        if joined.truncated and self.epoch:
            self.run.truncated += 1
        if joined.room_epoch != self.epoch:
            self.epoch, self.seq = joined.room_epoch, (joined.events[0].room_seq - 1 if joined.events else 0)
        self._apply(joined.events, replay=True)
        self.seq = max(self.seq, joined.room_seq)
        self.rejoining = False
        buffered, self.buffered = self.buffered, []
        for frame in buffered:
            self._frame(frame)

    async def _read(self) -> None:
        try:
            await self._read_frames()
        except (ConnectionError, StreamClosed):
            pass  # closed at the end of the run (or by the server: its posts show as lost)

    async def _read_frames(self) -> None:
        while True:
            item = await self.stream.read_frame()
            if item is None:
                return
            opcode, rid, body = item
            if rid:
                fut = self._waiting.pop(rid, None)
                if fut is not None and not fut.done():
                    fut.set_result((opcode, body))
            elif opcode == Opcode.ROOM_EVENTS:
                self._frame(room_pb2.RoomEvents.FromString(body))

    def _frame(self, frame: room_pb2.RoomEvents) -> None:
        if self.rejoining:
            self.buffered.append(frame)
        elif frame.rejoin or frame.room_epoch != self.epoch:
            self._rejoin()
        else:
            self._apply(frame.events, replay=False)

    def _apply(self, events, replay: bool) -> None:
        now = time.time_ns()
        for e in events:
            if e.room_seq <= self.seq:
                continue  # a live frame the join's replay covered already
            if e.room_seq != self.seq + 1 and not replay:
                self._rejoin()  # a gap: the ring replays it
                return
            self.seq = e.room_seq
            if e.kind != POST or len(e.body) < HEAD.size:
                continue
            sent_ns, ordinal = HEAD.unpack_from(e.body)
            if ordinal >= len(self.seen):
                continue  # not this run's
            if self.seen[ordinal]:
                self.run.duplicated += 1
            at = self.run.position.setdefault(ordinal, (self.epoch, e.room_seq))
            if at != (self.epoch, e.room_seq):
                self.run.out_of_order += 1  # members disagree on the room's order
            self.seen[ordinal] = min(255, self.seen[ordinal] + 1)
            self.run.deliveries += 1
            if self.run.deliveries >= self.run.expected():
                self.run.all_told.set()
            if not replay:
                self.run.delivery_ms.add((now - sent_ns) / 1e6)

    def _rejoin(self) -> None:
        if self.rejoining:
            return
        self.run.rejoins += 1
        self.rejoining = True
        task = asyncio.ensure_future(self.join())
        self.run.tasks.add(task)
        task.add_done_callback(self.run.tasks.discard)


class RoomRun:
    """The figures of one run (module doc)."""

    def __init__(self, cfg: argparse.Namespace) -> None:
        self.cfg = cfg
        self.room = secrets.randbits(62) + 1
        self.total_posts = max(1, int(cfg.rate * cfg.duration))
        self.deliveries = self.duplicated = self.out_of_order = self.rejoins = self.truncated = 0
        self.acked = self.errors = 0
        self.delivery_ms, self.ack_ms = Latencies(), Latencies()
        self.tasks: set[asyncio.Task] = set()
        self.members: list[Member] = []
        self.position: dict[int, tuple[int, int]] = {}  # post ordinal -> (room_epoch, room_seq) first told
        self.all_told = asyncio.Event()  # set when deliveries reach expected()

    async def connect(self) -> None:
        """Log every member in (LOGIN_CONCURRENCY at a time) and join the room."""
        gateways = self.cfg.gateways
        base = secrets.randbits(60) + 1
        gate = asyncio.Semaphore(LOGIN_CONCURRENCY)

        async def one(i: int) -> Member:
            async with gate:
                stream = await login(gateways[i % len(gateways)], self.cfg.token_key, base + i, self.cfg.tls)
                m = Member(self, base + i, stream)
                await m.join()
                return m

        self.members = list(await asyncio.gather(*(one(i) for i in range(self.cfg.members))))

    async def post(self) -> float:
        """Post total_posts at the target rate (open loop); the seconds it took."""
        posters = self.members[:self.cfg.posters]
        start = time.monotonic()
        acks = []
        for n in range(self.total_posts):
            delay = start + n / self.cfg.rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            sent_ns = time.time_ns()
            body = HEAD.pack(sent_ns, n) + body_bytes(n.to_bytes(8, "big"), max(0, self.cfg.size - HEAD.size))
            req = room_pb2.RoomSend(room_id=self.room, client_message_id=os.urandom(16), message_type=1, body=body)
            acks.append(asyncio.ensure_future(self._ack(posters[n % len(posters)], req.SerializeToString(), sent_ns)))
        await asyncio.gather(*acks)
        return time.monotonic() - start

    async def _ack(self, poster: Member, body: bytes, sent_ns: int) -> None:
        try:
            op, reply = await asyncio.wait_for(poster.request(Opcode.ROOM_SEND, body), self.cfg.drain)
        except asyncio.TimeoutError:
            self.errors += 1
            return
        if op == Opcode.ROOM_ACK:
            self.acked += 1
            self.ack_ms.add((time.time_ns() - sent_ns) / 1e6)
        else:
            self.errors += 1
            print(f"loadgen_room: ROOM_SEND refused: {decode_error(reply)}", file=sys.stderr)

    def expected(self) -> int:
        """Deliveries a clean run makes: every post to every member."""
        return self.total_posts * len(self.members)

    async def drain(self) -> None:
        """Wait until every member was told every post, or --drain seconds."""
        try:
            await asyncio.wait_for(self.all_told.wait(), self.cfg.drain)
        except asyncio.TimeoutError:
            pass  # the report counts what is missing

    def report(self, send_s: float, cpu_s: float) -> dict:
        """The run's figures (the last line's fields)."""
        lost = sum(m.seen.count(0) for m in self.members)
        return {"members": len(self.members), "gateways": len(self.cfg.gateways),
                "posts": self.total_posts, "acked": self.acked, "errors": self.errors,
                "deliveries": self.deliveries, "expected": self.expected(), "lost": lost,
                "duplicated": self.duplicated, "out_of_order": self.out_of_order, "rejoins": self.rejoins,
                "truncated": self.truncated, "send_s": round(send_s, 2),
                "deliveries_per_s": round(self.deliveries / max(send_s, 1e-9)),
                "delivery_ms": self.delivery_ms.to_dict(), "ack_ms": self.ack_ms.to_dict(),
                "delivery_summary": self.delivery_ms.summary(), "ack_summary": self.ack_ms.summary(),
                "loadgen_cpu_s": round(cpu_s, 1)}

    def close(self) -> None:
        """Close every member connection."""
        for m in self.members:
            m.reader.cancel()
            m.stream.abort()
        for t in list(self.tasks):
            t.cancel()


async def run(cfg: argparse.Namespace) -> int:
    """The whole run (module doc); the exit code."""
    r = RoomRun(cfg)
    try:
        await r.connect()
        print(f"loadgen_room: joined members={len(r.members)} room={r.room}", flush=True)  # benches sample CPU here
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        send_s = await r.post()
        await r.drain()
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    finally:
        r.close()
    rep = r.report(send_s, (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime))
    counts = " ".join(f"{k}={rep[k]}" for k in ("members", "gateways", "posts", "acked", "deliveries", "expected",
                                                 "lost", "duplicated", "out_of_order", "rejoins", "truncated"))
    print(f"loadgen_room: {counts} delivery_ms(p50/p95/p99/max)={rep['delivery_summary']}"
          f" ack_ms={rep['ack_summary']} deliveries_per_s={rep['deliveries_per_s']}"
          f" loadgen_cpu_s={rep['loadgen_cpu_s']}")
    if cfg.json:
        await asyncio.to_thread(Path(cfg.json).write_text, json.dumps(rep, indent=1), "utf-8")
    clean = rep["acked"] == rep["posts"] and not (rep["lost"] or rep["duplicated"] or rep["out_of_order"])
    return 0 if clean else 1


def parser() -> argparse.ArgumentParser:
    """The command line of `qim-loadgen room`."""
    p = loadgen_parser("room", __doc__, "members")
    p.add_argument("--members", type=int, default=2000, help="online member connections")
    p.add_argument("--rate", type=float, default=10.0, help="posts per second into the room, in all")
    p.add_argument("--duration", type=float, default=30.0, help="seconds of posting")
    p.add_argument("--posters", type=int, default=1, help="members that post (round-robin)")
    p.add_argument("--size", type=int, default=64, help="post body bytes (>= 16)")
    p.add_argument("--drain", type=float, default=30.0, help="seconds to wait for ACKs and deliveries")
    p.add_argument("--json", default=None, help="write the report as JSON to this path")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the room load: 0 clean, 1 when a post was lost, doubled, out of order or not
    acknowledged (or a login or join failed: one line), 2 on bad arguments (one line
    naming the option)."""
    cfg = parser().parse_args(argv)
    try:
        check(cfg)  # ArgError is a ValueError
        load_gateway_args(cfg)  # qim/cli/loadgen_args.py
    except (ValueError, ConfigError) as exc:
        print(f"qim-loadgen room: {exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(run(cfg))
    except RuntimeError as exc:  # LoginFailed, JOIN_ROOM refused: nothing measured, one line
        print(f"qim-loadgen room: {exc}", file=sys.stderr)
        return 1


def check(cfg: argparse.Namespace) -> None:
    """Every numeric option and --json, before anything connects; ArgError naming the first bad one."""
    in_range("--members", cfg.members, 1)
    in_range("--posters", cfg.posters, 1, cfg.members)
    positive("--rate", cfg.rate)
    positive("--duration", cfg.duration)
    in_range("--size", cfg.size, HEAD.size)
    non_negative("--drain", cfg.drain)
    writable_path("--json", cfg.json)
