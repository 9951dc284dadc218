"""Tracing (docs/operations.md "Tracing"): the trace id the ConversationWriter draws at
commit is in the Outbox record (`qimctl trace` shows it with the dispatch records and
their materialization), and the same id is in a log line of every service that handled
the message: writer (committed), fanout (dispatched), mailbox (materialized), gateway
(pushed) and session (projected). Every line a service logs carries its context
(`service=… node=…`). Real processes: the session's `ops_stack` (QIM_LOG_TRACE=1)."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time

from qim._core.ids import compose_message_id
from qim.protocol import Opcode
from tests.e2e.rawclient import RawClient, wait_for_entries

LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (DEBUG|INFO|WARNING|ERROR|CRITICAL) ")
STAGES = {"writer": "committed", "fanout": "dispatch records produced", "mailbox": "materialized",
          "gateway": "push of mailbox_seq", "session": "projection"}


def _logs(st, kind: str) -> str:
    return "".join(p.read_text(errors="replace") for p in sorted((st.dir / "logs").glob(f"{kind}*.log")))


async def _trace(st, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **st.engines.env()}
    return await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "qim.cli.qimctl", "trace", *args],
                                   env=env, capture_output=True, text=True, timeout=120)


async def test_one_trace_id_from_commit_to_every_service_log(ops_stack):
    st = ops_stack
    sender = await RawClient.login(st, 9_100_001, device=1)
    peer = await RawClient.login(st, 9_100_002, device=1)  # online: the gateway pushes to it
    try:
        op, ack = await sender.send_text(9_100_002, b"trace me")
        assert op == Opcode.SEND_ACK
        entries = await wait_for_entries(peer, 1)
        seq = max(e.mailbox_seq for e in entries)
    finally:
        await sender.close()
        await peer.close()
    mid = ack.message_id.hex()
    r = await _trace(st, mid, "--cursor", f"9100002={seq}", "--cursor", "9100003=1")
    assert r.returncode == 0, r.stdout + r.stderr
    trace = re.search(r"trace=([0-9a-f]{32})", r.stdout).group(1)
    assert re.search(rf"committed: outbox offset \d+ conversation [0-9a-f]+ seq {ack.conversation_seq} ", r.stdout)
    assert "dispatched: shard" in r.stdout and "materialized: shard" in r.stdout, r.stdout
    assert f"cursor: user 9100002 cursor {seq}: entry {seq} is below it" in r.stdout, r.stdout
    assert "cursor: user 9100003 is not among the recipients" in r.stdout, r.stdout  # said, not left out

    for kind, stage in STAGES.items():
        text = ""
        for _ in range(50):  # the session's durable path and the push are asynchronous
            text = _logs(st, kind)
            if re.search(rf"trace={trace}\]: .*{stage}", text):
                break
            await asyncio.sleep(0.2)
        assert re.search(rf"trace={trace}\]: .*{stage}", text), f"{kind}: no '{stage}' line with trace={trace}"
        lines = [ln for ln in text.splitlines() if LINE.match(ln)]
        assert lines and all(f"[service={kind} node={kind}" in ln for ln in lines), \
            next(ln for ln in lines if f"[service={kind}" not in ln)
    assert f"trace={trace}]: committed message_id={mid} " in _logs(st, "writer")  # from a trace to qimctl trace
    unknown = await _trace(st, compose_message_id(int(time.time() * 1000), 0, 0, 4242).hex())
    assert unknown.returncode == 1 and "not committed" in unknown.stdout
    bad = await _trace(st, "00" * 16)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "not a message id a writer makes" in bad.stderr
