"""The group sender of `qim-loadgen rate --group-members M` ("a send to a
1,000-member group is acknowledged within 2x the time of a direct send at the same
rate; fanout work never delays other senders' ACKs").

One extra raw connection (the group's owner) creates a group of M members (itself and
M - 1 made-up users who never connect: their mailbox entries are written all the same;
the frame-level receivers stay out, their ledger judges only their direct
conversation) and sends to it at the same per-connection rate as
each direct sender. Its ACK latencies are kept apart from the direct sends' so the two
are compared in the same run. Delivery of the group messages is not judged here (the
e2e group tests do that): this lane measures the ACK path under fanout load only.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import time

from qim.cli.loadgen_stats import Latencies
from qim.consts import GROUP_MAX_MEMBERS
from qim.net.framed import FramedStream
from qim.proto.v1 import group_pb2, message_pb2
from qim.protocol import Opcode
from qim.wire.errors import decode_error

CREATE_TIMEOUT_S = 30.0


class GroupSender:
    """Sends `rate` msg/s to a new group of `members` members from `stream` (user `owner`)."""

    def __init__(self, stream: FramedStream, owner: int, members: int, rate: float, size: int) -> None:
        if not 2 <= members <= GROUP_MAX_MEMBERS:
            raise ValueError(f"--group-members must be 2..{GROUP_MAX_MEMBERS}, got {members}")
        self.stream, self.owner, self.rate, self.size = stream, owner, rate, size
        base = secrets.randbits(58) + (1 << 59)  # made-up members, far from the loadgen's own ids
        self.members = [base + i for i in range(members - 1)]
        self.conversation_id = b""
        self.sent = self.acked = self.errors = 0
        self.ack_ms = Latencies()
        self.error_codes: dict[str, int] = {}
        self._pending: dict[int, int] = {}  # request id -> send time ns
        self._rid = 1
        self._reader: asyncio.Task | None = None

    async def _reply_to(self, rid: int) -> "tuple[int, int, bytes] | None":
        """The next frame answering request `rid` (None at the end of the stream); frames
        the server sends on its own meanwhile (a wake-up PUSH_EVENTS at login) are skipped."""
        while True:
            item = await self.stream.read_frame()
            if item is None or item[1] == rid:
                return item

    async def start(self) -> None:
        """CREATE_GROUP, then read ACKs in the background. RuntimeError when refused."""
        req = group_pb2.CreateGroup(group_id=secrets.randbits(62) + 1, members=self.members,
                                    client_message_id=os.urandom(16))
        self.stream.send(Opcode.CREATE_GROUP, self._rid, req.SerializeToString())
        item = await asyncio.wait_for(self._reply_to(self._rid), CREATE_TIMEOUT_S)
        if item is None or item[0] != Opcode.GROUP_OK:
            code = (decode_error(item[2]).code.name
                    if item is not None and item[0] == Opcode.ERROR else "no reply")
            raise RuntimeError(f"CREATE_GROUP of {len(self.members) + 1} members refused: {code}")
        self.conversation_id = group_pb2.GroupOk.FromString(item[2]).conversation_id
        self._reader = asyncio.get_running_loop().create_task(self._read_acks())

    def send_due(self, elapsed: float) -> None:
        """Pipeline the sends due `elapsed` s after the start."""
        for _ in range(max(0, int(elapsed * self.rate) + 1 - self.sent)):
            self._rid += 1
            body = self.sent.to_bytes(8, "big") + os.urandom(max(0, self.size - 8))
            msg = message_pb2.SendMessage(client_message_id=os.urandom(16), conversation_id=self.conversation_id,
                                          message_type=1, body=body)
            self._pending[self._rid] = time.perf_counter_ns()
            self.stream.send(Opcode.SEND_MESSAGE, self._rid, msg.SerializeToString())
            self.sent += 1

    async def _read_acks(self) -> None:
        while True:
            item = await self.stream.read_frame()
            if item is None:
                return
            op, rid, body = item
            t0 = self._pending.pop(rid, None)
            if t0 is None:
                continue
            if op == Opcode.SEND_ACK:
                self.acked += 1
                self.ack_ms.add((time.perf_counter_ns() - t0) / 1e6)
            else:
                self.errors += 1
                code = decode_error(body).code.name if op == Opcode.ERROR else hex(op)
                self.error_codes[code] = self.error_codes.get(code, 0) + 1

    async def drain(self, deadline: float) -> None:
        """Wait (until perf_counter `deadline`) for the outstanding ACKs, then stop reading."""
        while self._pending and time.perf_counter() < deadline:  # noqa: ASYNC110 — the reader empties it
            await asyncio.sleep(0.05)
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)

    def report(self, direct: Latencies) -> dict:
        """The JSON form, with the direct sends' ACK figures of the same run beside it."""
        g, d = self.ack_ms.to_dict(), direct.to_dict()
        ratio = (g["p99_ms"] / d["p99_ms"]) if g["p99_ms"] and d["p99_ms"] else None
        return {"members": len(self.members) + 1, "rate": self.rate, "sent": self.sent, "acked": self.acked,
                "errors": self.errors, "error_codes": self.error_codes, "ack": g, "direct_ack": d,
                "ack_p99_ratio": None if ratio is None else round(ratio, 2)}

    def line(self, direct: Latencies) -> str:
        """`group: members=… sent=… acked=… errors=… ack_p99_ms=… direct_ack_p99_ms=… ratio=…`."""
        r = self.report(direct)
        return (f"group: members={r['members']} sent={self.sent} acked={self.acked} errors={self.errors} "
                f"ack_p99_ms={self.ack_ms.p99():.1f} direct_ack_p99_ms={direct.p99():.1f} ratio={r['ack_p99_ratio']}")
