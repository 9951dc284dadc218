"""Fuzz target 4 over WebSocket: the live sequences (tests/fuzz/live_gen.py) sent to a
real stack as WebSocket messages on the client port (wss://…/qim/ws, ALPN http/1.1),
with message-level faults (tests/fuzz/live_ws_gen.py: a frame split across messages,
two frames in one message, text, an oversize message). The client is the `websockets`
library's own, not QIM's. Properties per connection, within DEADLINE_S:
- it ends: every request the gateway could decode is answered, or the gateway closes
  the connection with a close frame whose code is one of CLOSE_CODES (a fault always
  ends in such a close; a silent, open connection or a dropped one is a finding);
- every gateway message is exactly one frame chunk; every reply carries the id of a
  request that was sent, an ERROR names that request's opcode and is never INTERNAL;
and afterwards every service's /healthz is 200 and a normal client still sends and
receives. QIM_FUZZ_LIVE_WS_SEQUENCES (default 300 in CI) and QIM_FUZZ_SEED set the
budget; `make fuzz` runs a fifth of its live count here with a random seed.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import random
import time
from pathlib import Path

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from qim._core import frame as frame_codec
from qim.errors import ErrorCode
from qim.net.tls import ALPN_HTTP, client_port_context
from qim.proto.v1 import common_pb2
from qim.protocol import SERVER_INITIATED_OPCODES, Opcode
from qim.wire.devtoken import issue_dev_token
from tests.e2e.rawclient import RawClient
from tests.fuzz.draw import Draw, Finding
from tests.fuzz.live_gen import sequence
from tests.fuzz.live_ws_gen import WsSequence, messages

DEADLINE_S = 20.0
CONCURRENCY = 8
# 1000 clean end (AUTH refused then closed, kicked by a newer login), 1002 protocol error
# (a message that is not one frame, a frame fault), 1003 text, 1008 no AUTH in time,
# 1009 a message over one chunk
CLOSE_CODES = {1000, 1002, 1003, 1008, 1009}
PUSHES = SERVER_INITIATED_OPCODES


async def _exchange(stack, seq: WsSequence, opcodes: dict, stats: collections.Counter) -> None:
    sent = collections.Counter(rid for _, rid, _ in seq.requests)
    ws = await connect(stack.client_env()["QIM_GATEWAY_WSS_ADDR"], ssl=client_port_context(stack.ca_file, ALPN_HTTP),
                       compression=None, max_size=None, ping_interval=None, open_timeout=DEADLINE_S)
    answered: collections.Counter = collections.Counter()
    dec = frame_codec.FrameDecoder()
    deadline = time.monotonic() + DEADLINE_S
    try:
        for m in seq.messages:
            await ws.send(m)
        while True:
            if not seq.fault and answered == sent:
                # nothing more to say (an unfinished frame waits for chunks until then)
                await ws.close()
                stats["unfinished" if seq.unfinished else "answered_all"] += 1
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise Finding(f"connection neither answered nor closed in {DEADLINE_S} s: sent {dict(sent)}, "
                              f"answered {dict(answered)}, fault={seq.fault}")
            try:
                message = await asyncio.wait_for(ws.recv(), left)
            except asyncio.TimeoutError:
                continue
            except ConnectionClosed:
                if ws.close_code not in CLOSE_CODES:
                    raise Finding(f"closed with code {ws.close_code} ({ws.close_reason!r}), not a clear close") from None
                stats[f"close:{ws.close_code}"] += 1
                return
            if not isinstance(message, bytes) or len(message) != 20 + int.from_bytes(message[12:16], "big"):
                raise Finding("a gateway message that is not exactly one binary frame chunk")
            for op, rid, body in dec.feed(message):
                if rid == 0 and op in PUSHES:
                    continue
                if rid not in sent:
                    raise Finding(f"a reply (0x{op:04x}) with request id {rid} that was never sent")
                answered[rid] += 1
                if op == Opcode.ERROR:
                    err = common_pb2.Error.FromString(body)
                    stats[f"error:{ErrorCode(err.code).name}"] += 1
                    if err.code == ErrorCode.INTERNAL:
                        raise Finding(f"ERROR(INTERNAL) for request opcodes {opcodes[rid]}: {err.message}")
                    if err.request_opcode not in opcodes[rid]:
                        raise Finding(f"ERROR names opcode 0x{err.request_opcode:04x}, the request was {opcodes[rid]}")
                else:
                    stats["replies"] += 1
    finally:
        stats["requests"] += sum(sent.values())
        stats["faults"] += seq.fault
        await ws.close()


async def _fuzz(stack, count: int, seed: int) -> collections.Counter:
    rnd = random.Random(f"qim-fuzz/live-ws/{seed}")
    tokens: dict[tuple[int, int], str] = {}

    def token_for(user: int, device: int) -> str:
        if (user, device) not in tokens:
            tokens[(user, device)] = issue_dev_token(stack.token_key, 0, user, device)
        return tokens[(user, device)]

    stats: collections.Counter = collections.Counter()
    sem = asyncio.Semaphore(CONCURRENCY)

    async def one(i: int, data: bytes) -> None:
        async with sem:
            d = Draw(data)
            base = sequence(d, token_for)
            seq = messages(d, base)
            opcodes: dict[int, set[int]] = collections.defaultdict(set)
            for op, rid, _ in seq.requests:
                opcodes[rid].add(op)
            try:
                await _exchange(stack, seq, opcodes, stats)
            except Finding as exc:
                raise Finding(f"sequence {i} (seed {seed}, input {data.hex()}): {exc}") from exc

    inputs = [rnd.randbytes(rnd.choice((64, 256, 1024, 4096))) for _ in range(count)]
    await asyncio.gather(*(one(i, data) for i, data in enumerate(inputs)))
    stats["sequences"] = count
    return stats


async def test_fuzzed_websocket_messages_end_in_replies_or_a_clear_close_and_the_stack_stays_healthy(stack):
    count = int(os.environ.get("QIM_FUZZ_LIVE_WS_SEQUENCES", "300"))
    seed = int(os.environ.get("QIM_FUZZ_SEED", "1"))
    started = time.monotonic()
    stats = await _fuzz(stack, count, seed)
    stats["seconds"] = round(time.monotonic() - started)
    for name in stack.names:
        code, text = stack.healthz(name)
        assert code == 200, f"{name} unhealthy after the fuzz: {text}"
    client = await RawClient.login(stack, 9_399_011)
    op, _ = await client.send_text(9_399_012, b"after the websocket fuzz")
    assert op == Opcode.SEND_ACK
    await client.close()
    print(f"fuzz-live-ws: {dict(stats)}")
    assert stats["requests"] > count and stats["faults"] > count // 10  # real requests, real faults
    report = os.environ.get("QIM_FUZZ_REPORT")
    if report:
        _write_report(report + ".ws", {"target": "live-ws", "inputs": count, "findings": 0, "seed": seed, **stats})


def _write_report(path: str, data: dict) -> None:
    Path(path).write_text(json.dumps(data))
