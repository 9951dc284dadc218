"""T-HEAVY session-list bench (docs/design.md §6, §12; seed 000: "5000 对端各发一条").

Starts private engines and the whole stack under a temp dir, builds one user with 5000
conversations through the real write path (5000 peers each log in and send one message
to the user; nothing is seeded into Redis: a layout change must not leave this green),
then measures the first PULL_SESSION_LIST page (50 entries) at the client, through the
gateway:
- cold: qim-session restarted with QIM_SESSION_SNAPSHOT_TTL_MS=0, so every request
  rebuilds the snapshot (ZRANGE of the whole set) and computes every entry of the page
  (heads from canonical history, unread by the definition);
- warm: qim-session restarted with the default 5-minute snapshot.
The last line is `session-list: conversations=N first_page_p50_ms=… first_page_p99_ms=…`
for the cold case. Goal: P99 ≤ 500 ms. Usage: python benches/bench_sessions.py [--peers N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from qim._core import ids  # noqa: E402
from qim.dev.stack import stack_up  # noqa: E402
from qim.net.framed import open_framed, parse_addr  # noqa: E402
from qim.net.tls import client_port_context  # noqa: E402
from qim.proto.v1 import connection_pb2, message_pb2, session_pb2  # noqa: E402
from qim.protocol import Opcode  # noqa: E402
from qim.wire.devtoken import issue_dev_token  # noqa: E402
from tests.fixtures import start_test_engines  # noqa: E402

USER = 7_000_000_001
SENDERS = 32  # concurrent peer connections while building


class Client:
    """One authenticated connection; strictly one request at a time."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.rid = 0

    @classmethod
    async def login(cls, addr: str, key: str, user: int, ca_file: Optional[str] = None) -> "Client":
        host, port = parse_addr(addr)  # over TLS with the stack's CA, as every client
        c = cls(await open_framed(host, port, tls=client_port_context(ca_file) if ca_file else None))
        op, body = await c.request(Opcode.AUTH, connection_pb2.Auth(
            token=issue_dev_token(key, 0, user, 1)).SerializeToString())
        assert op == Opcode.AUTH_OK, body
        return c

    async def request(self, opcode: int, body: bytes) -> tuple[int, bytes]:
        self.rid += 1
        self.stream.send(opcode, self.rid, body)
        while True:
            op, rid, reply = await asyncio.wait_for(self.stream.read_frame(), 30)
            if rid == self.rid:
                return op, reply


async def build(stack, peers: int) -> None:
    todo = iter(range(1, peers + 1))

    async def worker() -> None:
        for i in todo:
            peer = USER + i
            c = await Client.login(stack.gateway_addr, stack.token_key, peer, stack.ca_file)
            msg = message_pb2.SendMessage(client_message_id=os.urandom(16),
                                          conversation_id=ids.conversation_id_direct(0, USER, peer),
                                          recipient_user_id=USER, message_type=1, body=b"hello %d" % i)
            op, body = await c.request(Opcode.SEND_MESSAGE, msg.SerializeToString())
            assert op == Opcode.SEND_ACK, body
            c.stream.abort()

    await asyncio.gather(*(worker() for _ in range(SENDERS)))


async def count_listed(client: Client) -> int:
    total, cursor = 0, b""
    while True:
        op, body = await client.request(Opcode.PULL_SESSION_LIST,
                                        session_pb2.PullSessionList(limit=200, cursor=cursor).SerializeToString())
        if op != Opcode.SESSION_LIST_BATCH:
            return -1
        batch = session_pb2.SessionListBatch.FromString(body)
        total += len(batch.sessions)
        if not batch.has_more:
            return total
        cursor = batch.next_cursor


async def first_pages(stack, samples: int) -> tuple[list[float], session_pb2.SessionListBatch]:
    client = await Client.login(stack.gateway_addr, stack.token_key, USER, stack.ca_file)
    out, batch = [], None
    for _ in range(samples):
        t0 = time.perf_counter()
        op, body = await client.request(Opcode.PULL_SESSION_LIST, session_pb2.PullSessionList().SerializeToString())
        out.append((time.perf_counter() - t0) * 1000)
        assert op == Opcode.SESSION_LIST_BATCH, body
        batch = session_pb2.SessionListBatch.FromString(body)
    client.stream.abort()
    return out, batch


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def restart_session(stack, extra: dict) -> None:
    stack.stop_service("session")
    stack.start_service("session", extra)
    stack.wait_ready(["session"])


async def main(peers: int, samples: int) -> None:
    with tempfile.TemporaryDirectory(prefix="qim-bench-sessions-") as tmp:
        engines = start_test_engines(Path(tmp) / "engines")
        stack = None
        try:
            stack = stack_up(Path(tmp) / "stack", engines.env(), die_with_parent=True)
            t0 = time.monotonic()
            await build(stack, peers)
            print(f"built: {peers} conversations through the write path in {time.monotonic() - t0:.1f} s", flush=True)
            probe = await Client.login(stack.gateway_addr, stack.token_key, USER, stack.ca_file)
            deadline = time.monotonic() + 120
            while (listed := await count_listed(probe)) != peers:
                assert time.monotonic() < deadline, f"list holds {listed} of {peers} conversations"
                await asyncio.sleep(0.5)
            probe.stream.abort()

            restart_session(stack, {"QIM_SESSION_SNAPSHOT_TTL_MS": "0"})
            cold, batch = await first_pages(stack, samples)
            assert len(batch.sessions) == 50 and all(s.unread == 1 and s.unread_exact for s in batch.sessions)
            restart_session(stack, {})
            warm_all, _ = await first_pages(stack, samples + 1)
            print(f"session-list-restart: conversations={peers} first_request_ms={warm_all[0]:.1f}")
            warm = warm_all[1:]
            print(f"session-list-warm: conversations={peers} first_page_p50_ms={pct(warm, 0.5):.1f} "
                  f"first_page_p99_ms={pct(warm, 0.99):.1f} samples={len(warm)}")
            print(f"session-list: conversations={peers} first_page_p50_ms={pct(cold, 0.5):.1f} "
                  f"first_page_p99_ms={pct(cold, 0.99):.1f}", flush=True)
        finally:
            if stack is not None:
                stack.down()
            engines.down()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peers", type=int, default=5000)
    parser.add_argument("--samples", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(main(args.peers, args.samples))
