"""A pipelined SDK burst in one conversation, measured end to end (docs/perf.md "SDK
send burst"; docs/decisions/0056).

    .venv/bin/python benches/sdk_burst.py [--sends 2000] [--runs 1] [--base DIR]

Starts private engines and services (qim.dev.stack, default limits), then per run: the
reference — `--raw` SEND_MESSAGE frames pipelined by a raw client (no SDK, within the
connection's burst, so nothing is refused): the rate the server sequences one
conversation at right now — and then one ClientRuntime of a fresh user submits
`--sends` messages to one direct conversation without waiting (`submit_message`) and
waits for every ACK. Prints one JSON line per run: both rates (msg/s, first frame or
submit to last ACK), and from the gateway's own counters (not the SDK's) the
SEND_MESSAGE frames it received during the burst and the refusals it answered by code. Not a test: the figures depend on the machine; a test asserts the counts
(tests/e2e/test_sdk_burst.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from qim.sdk import ClientRuntime, LocalStore, direct_conversation  # noqa: E402
from qim.wire.devtoken import issue_dev_token  # noqa: E402
from tests.e2e.rawclient import RawClient, sdk_transport  # noqa: E402
from tests.e2e.test_send_order import direct, pipeline  # noqa: E402
from tests.fixtures import start_private_stack  # noqa: E402


def gateway_counters(stack) -> dict[str, float]:
    """{"sends": SEND_MESSAGE frames received, "<CODE>": ERROR frames of that code}."""
    text = urllib.request.urlopen(f"http://{stack.metrics['gateway']}/metrics", timeout=5).read().decode()
    out = {"sends": 0.0}
    for opcode, value in re.findall(r'^qim_gateway_requests_total\{opcode="(0x[0-9a-f]+)"\} (\S+)$', text, re.M):
        if opcode == "0x0201":
            out["sends"] += float(value)
    for code, value in re.findall(r'^qim_gateway_request_errors_total\{code="(\w+)"\} (\S+)$', text, re.M):
        out[code] = out.get(code, 0.0) + float(value)
    return out


async def reference(stack, sends: int) -> float:
    """msg/s of `sends` frames pipelined by a raw client to one conversation."""
    a, b = random.sample(range(1, 1 << 40), 2)
    client = await RawClient.login(stack, a)
    start = time.monotonic()
    replies = await pipeline(client, [direct(a, b, b"raw %05d" % i) for i in range(sends)], timeout=120)
    elapsed = time.monotonic() - start
    await client.close()
    assert all(op == 0x0202 for op, _ in replies), "the reference burst was refused: lower --raw"
    return round(sends / elapsed, 1)


async def burst(stack, data_dir: str, sends: int, raw: int) -> dict:
    """One burst of `sends` pipelined messages after a raw reference of `raw`; its figures."""
    server_rate = await reference(stack, raw) if raw else None
    a, b = random.sample(range(1, 1 << 40), 2)
    store = LocalStore.open(str(Path(data_dir) / f"{a}.sqlite3"), 0, a)
    rt = ClientRuntime(stack.gateway_addr, issue_dev_token(stack.token_key, 0, a, store.device_id), store,
                       event_queue=False, send_timeout=300, **sdk_transport(stack))
    conv = direct_conversation(0, a, b)
    await rt.connect()
    before = gateway_counters(stack)
    start = time.monotonic()
    cmids = [await rt.submit_message(conv, b, b"burst %05d" % i) for i in range(sends)]
    acks = [await rt.wait_ack(c, timeout=300) for c in cmids]
    elapsed = time.monotonic() - start
    after = gateway_counters(stack)
    await rt.close()
    store.close()
    seqs = [x.conversation_seq for x in acks]
    delta = {k: int(after.get(k, 0) - before.get(k, 0)) for k in after if after.get(k, 0) != before.get(k, 0)}
    return {"sends": sends, "msg_per_s": round(sends / elapsed, 1), "raw_reference_msg_per_s": server_rate,
            "seconds": round(elapsed, 2),
            "send_frames": delta.pop("sends", 0), "refusals": delta, "in_order": seqs == sorted(seqs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sends", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--raw", type=int, default=300, help="frames of the raw reference (0: none)")
    parser.add_argument("--base", default="", help="directory for engines and stack (default: a temporary one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(args.base or tmp)
        stack = start_private_stack(base)
        try:
            for _ in range(args.runs):
                print(json.dumps(asyncio.run(burst(stack, str(base), args.sends, args.raw))), flush=True)
        finally:
            stack.down()
            stack.engines.down()


if __name__ == "__main__":
    main()
