"""Fanout and mailbox durability gates (docs/design.md §5.3–5.4, §12 reliability).

SIGKILL fanout mid-batch, SIGKILL mailbox between append and finish, restart the Kafka
broker and the Redis server (AOF) while traffic flows. After each: every acknowledged
message reaches every recipient once and in order, watermarks advance again, and the
independent audit finds no orphan.
"""

from __future__ import annotations

import asyncio
import random
import re
import urllib.request

import pytest

from tests.e2e.chaos import Conversation, delivered_once, run_audit
from tests.fixtures import running_stack


@pytest.fixture(scope="module")
def chaos_stack(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("chaos")) as st:
        yield st


def mailbox_records(stack, status: str) -> float:
    text = urllib.request.urlopen(f"http://{stack.metrics['mailbox']}/metrics", timeout=2).read().decode()
    found = re.search(rf'^qim_mailbox_records_total{{status="{status}"}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


def pair() -> tuple[int, int]:
    a = random.getrandbits(40) + 1
    return a, a + 1


async def check(stack, conv: Conversation, bodies: list[bytes]) -> None:
    assert conv.order == bodies
    entries = await delivered_once(stack, conv.peer, bodies)
    assert [e.message_id for e in entries] == [conv.acks[b].message_id for b in bodies]
    own = await delivered_once(stack, conv.sender, bodies)
    assert [e.client_message_id for e in own] == [conv.acks[b].client_message_id for b in bodies]


async def test_fanout_killed_after_dispatch_before_commit(chaos_stack):
    st = chaos_stack
    conv = Conversation(st, *pair())
    await conv.send(b"f0")
    st.stop_service("fanout")
    st.start_service("fanout", {"QIM_FAULT_INJECTION": "1", "QIM_FANOUT_FAULT_POINT": "after_dispatch"})
    await conv.send(b"f1")  # the writer ACKs; fanout dies after producing its dispatches
    for _ in range(100):
        if not st.alive("fanout"):
            break
        await asyncio.sleep(0.1)
    assert not st.alive("fanout"), "fault injection did not kill fanout"
    duplicates_before = mailbox_records(st, "DUPLICATE")
    st.start_service("fanout")
    st.wait_ready(["fanout"])
    await conv.send(b"f2")
    await check(st, conv, [b"f0", b"f1", b"f2"])
    # the replayed batch really re-produced its dispatches, and the mailbox absorbed them
    assert mailbox_records(st, "DUPLICATE") > duplicates_before


async def test_mailbox_killed_between_append_and_finish(chaos_stack):
    st = chaos_stack
    conv = Conversation(st, *pair())
    await conv.send(b"m0")
    await delivered_once(st, conv.peer, [b"m0"])
    st.stop_service("mailbox")
    st.start_service("mailbox", {"QIM_FAULT_INJECTION": "1", "QIM_MAILBOX_FAULT_POINT": "after_append"})
    st.wait_ready(["mailbox"])
    await conv.send(b"m1")
    for _ in range(100):
        if not st.alive("mailbox"):
            break
        await asyncio.sleep(0.1)
    assert not st.alive("mailbox"), "fault injection did not kill the mailbox"
    st.start_service("mailbox")
    st.wait_ready(["mailbox"])
    assert mailbox_records(st, "RESUME") >= 1  # the half-done record was finished on replay
    await conv.send(b"m2")
    await check(st, conv, [b"m0", b"m1", b"m2"])


@pytest.mark.parametrize("engine", ["kafka", "redis"])
async def test_engine_restart_while_traffic_flows(chaos_stack, engine):
    st = chaos_stack
    convs = [Conversation(st, *pair()) for _ in range(3)]
    bodies = [f"{engine}-{i}".encode() for i in range(30)]

    async def traffic(conv: Conversation) -> None:
        for body in bodies:
            await conv.send(body, deadline_s=90)

    senders = [asyncio.get_running_loop().create_task(traffic(c)) for c in convs]
    await asyncio.sleep(0.3)
    target = st.engines.kafka if engine == "kafka" else st.engines.redis
    assert not all(s.done() for s in senders), "traffic finished before the restart"
    await asyncio.get_running_loop().run_in_executor(None, lambda: target.restart(hard=True))
    await asyncio.wait_for(asyncio.gather(*senders), 180)
    for conv in convs:
        await check(st, conv, bodies)
    st.wait_ready()  # every service healthy again: watermarks advance, nothing dirty


def test_audit_finds_no_orphan_after_the_gates(chaos_stack):
    proc = run_audit(chaos_stack)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "committed_without_dispatch=0 dispatch_without_commit=0 coordinate_mismatch=0 wrong_partition=0" in proc.stdout
