"""One connected OpenTelemetry trace per message, from the sender's gateway to the
recipient's pull (issue 42, docs/decisions/0140), on real engines with two gateways.

The stack exports to a local OTLP/HTTP receiver (tests/otel/receiver.py). The sender is on
gateway 1, the recipients on gateway 2; each recipient pulls on the push, as the SDK does.
For a direct message, a group message and a recall, the trace of the recipient's pull
(found by the pulled entry's mailbox_seq) must have one root, the sender gateway's
SPAN_GATEWAY of that request, and every other span a child of a span of the same trace:
writer under gateway, fanout under writer, mailbox under fanout, the push under a
mailbox span and each recipient's pull under the push on gateway 2. The trace id is
the message's QIM trace id (`qimctl trace` prints it).
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import subprocess
import sys

from qim._core import ids
from qim.obs import otel
from qim.proto.v1 import message_pb2
from qim.protocol import EventType, Opcode
from tests.e2e.rawclient import RawClient, call
from tests.e2e.test_groups import create, gsend
from tests.e2e.test_push_repair import wait_push
from tests.otel.receiver import OtlpReceiver, Span

DEADLINE_S = 90.0  # push, pull and the exports (every 200 ms) on a loaded machine


async def pulled_on_push(client: RawClient, cursor: int, match) -> tuple[object, int]:
    """Pull on every push (never without one) until an entry `match`es; (entry, cursor)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    while await wait_push(client, deadline - loop.time()):
        entries, cursor = await client.pull_all(cursor)
        for e in entries:
            if match(e):
                return e, cursor
    raise AssertionError(f"user {client.user}: no pushed entry matched within {DEADLINE_S} s")


def _trace_of(spans: list[Span], trace_id: str) -> list[Span]:
    return [s for s in spans if s.trace_id == trace_id]


async def connected_trace(rx: OtlpReceiver, seq: int, op: str, pullers: int) -> tuple[str, list[Span]]:
    """The trace whose SPAN_PULL names mailbox_seq `seq` and whose root is the gateway's
    span of `op`, once it holds every stage and `pullers` pulls; (trace id, spans)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    names = {otel.SPAN_GATEWAY, otel.SPAN_WRITER, otel.SPAN_FANOUT, otel.SPAN_MAILBOX, otel.SPAN_PUSH, otel.SPAN_PULL}
    seen: list[Span] = []
    while loop.time() < deadline:
        spans = rx.spans()
        for tid in {s.trace_id for s in spans if s.name == otel.SPAN_PULL and s.attributes.get("qim.mailbox_seq") == seq}:
            seen = _trace_of(spans, tid)
            roots = [s for s in seen if s.name == otel.SPAN_GATEWAY and s.attributes.get("qim.op") == op]
            if roots and {s.name for s in seen} >= names and \
                    sum(s.name == otel.SPAN_PULL for s in seen) >= pullers:
                return tid, seen
        await asyncio.sleep(0.3)
    raise AssertionError(f"no complete trace of {op} (mailbox_seq {seq}) within {DEADLINE_S} s: "
                         f"{sorted((s.name, s.service) for s in seen)}")


def check_links(spans: list[Span], op: str, pullers: int) -> None:
    """The parent links of one message's trace (module doc)."""
    by_id = {s.span_id: s for s in spans}
    roots = [s for s in spans if not s.parent_id]
    assert [(r.name, r.service, r.instance, r.attributes.get("qim.op")) for r in roots] == \
        [(otel.SPAN_GATEWAY, "gateway", "gateway", op)], roots
    orphans = [s for s in spans if s.parent_id and s.parent_id not in by_id]
    assert not orphans, f"spans whose parent is not in the trace: {orphans}"
    parents = {(s.name, s.service): {(by_id[s.parent_id].name, by_id[s.parent_id].service)}
               for s in spans if s.parent_id}
    for s in spans:
        if s.parent_id:
            parents[(s.name, s.service)].add((by_id[s.parent_id].name, by_id[s.parent_id].service))
    assert parents == {
        (otel.SPAN_WRITER, "writer"): {(otel.SPAN_GATEWAY, "gateway")},
        (otel.SPAN_FANOUT, "fanout"): {(otel.SPAN_WRITER, "writer")},
        (otel.SPAN_MAILBOX, "mailbox"): {(otel.SPAN_FANOUT, "fanout")},
        (otel.SPAN_PUSH, "gateway"): {(otel.SPAN_MAILBOX, "mailbox")},
        (otel.SPAN_PULL, "gateway"): {(otel.SPAN_PUSH, "gateway")},
    }, parents
    assert sum(s.name == otel.SPAN_GATEWAY for s in spans) == 1 and sum(s.name == otel.SPAN_WRITER for s in spans) == 1
    pulls = [s for s in spans if s.name == otel.SPAN_PULL]
    assert len(pulls) == pullers and {p.instance for p in pulls} == {"gateway2"}, pulls  # the recipients' gateway
    assert all(by_id[p.parent_id].instance == "gateway2" for p in pulls)


async def qimctl_trace_id(st, message_id: bytes) -> str:
    """The trace id `qimctl trace MESSAGE_ID` prints for the message."""
    env = {**os.environ, **st.engines.env()}
    r = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "qim.cli.qimctl", "trace", message_id.hex()],
                                env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    found = re.search(r"trace=([0-9a-f]{32})", r.stdout)
    assert found, r.stdout
    return found.group(1)


async def test_direct_group_and_recall_are_each_one_connected_trace(traced_stack, otlp_receiver):
    st, rx = traced_stack, otlp_receiver
    gw1, gw2 = st.gateway_addrs
    base = random.getrandbits(40) + 1
    a, b, c = base, base + 1, base + 2
    ca = await RawClient.login(st, a, addr=gw1)
    cb, cc = await RawClient.login(st, b, addr=gw2), await RawClient.login(st, c, addr=gw2)
    try:
        _, cur_b = await cb.pull_all()
        _, cur_c = await cc.pull_all()
        cb.pushes.clear()
        cc.pushes.clear()

        op, ack = await ca.send_text(b, b"traced direct")
        assert op == Opcode.SEND_ACK
        entry, cur_b = await pulled_on_push(cb, cur_b, lambda e: e.message_id == ack.message_id)
        tid, spans = await connected_trace(rx, entry.mailbox_seq, "SEND_MESSAGE", pullers=1)
        check_links(spans, "SEND_MESSAGE", pullers=1)
        assert await qimctl_trace_id(st, ack.message_id) == tid  # one id: QIM's trace id is the trace's

        gid = random.getrandbits(62) + 1
        op, _ = await create(ca, gid, [b, c])
        assert op == Opcode.GROUP_OK
        op, gack = await gsend(ca, gid, b"traced group")
        assert op == Opcode.SEND_ACK
        eb, cur_b = await pulled_on_push(cb, cur_b, lambda e: e.message_id == gack.message_id)
        ec, cur_c = await pulled_on_push(cc, cur_c, lambda e: e.message_id == gack.message_id)
        tid_g, spans = await connected_trace(rx, eb.mailbox_seq, "SEND_MESSAGE", pullers=2)
        check_links(spans, "SEND_MESSAGE", pullers=2)  # both recipients' pulls, whatever their shards
        assert tid_g == (await connected_trace(rx, ec.mailbox_seq, "SEND_MESSAGE", pullers=2))[0] != tid

        op, ok = await call(ca, Opcode.RECALL_MESSAGE, message_pb2.RecallMessage(
            conversation_id=ids.conversation_id_direct(0, a, b), message_id=ack.message_id,
            client_message_id=os.urandom(16), peer_user_id=b))
        assert op == Opcode.RECALL_OK
        notice, cur_b = await pulled_on_push(cb, cur_b, lambda e: e.event_type == EventType.RECALL)
        tid_r, spans = await connected_trace(rx, notice.mailbox_seq, "RECALL_MESSAGE", pullers=1)
        check_links(spans, "RECALL_MESSAGE", pullers=1)
        assert tid_r not in (tid, tid_g)
        assert rx.bad == 0
    finally:
        for cl in (ca, cb, cc):
            await cl.close()
