"""SessionProjection restarts from its own checkpoint (issue 7 proof) and fails closed on
a checkpoint bound to another topic, on a private stack (it kills qim-session)."""

from __future__ import annotations

import asyncio
import time
import urllib.request

from qim._core import ids
from qim.errors import ErrorCode
from qim.protocol import Opcode
from qim.stores.redis.keys import session_shard_checkpoint_key
from tests.e2e.chaos import private_stack
from tests.e2e.rawclient import RawClient
from tests.e2e.sessionclient import entry_when, mark_read, new_user, pull_page, sessions
from tests.e2e.test_sessions import redis_of, send_n


def metric(stack, service: str, name: str) -> float:
    with urllib.request.urlopen(f"http://{stack.metrics[service]}/metrics", timeout=2) as r:
        text = r.read().decode()
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + " ")
               or line.startswith(name + "{"))


async def test_list_is_exact_after_restart_from_checkpoint_and_fails_closed_on_rebinding(tmp_path):
    st = private_stack(tmp_path)
    try:
        me, p1, p2 = new_user(), new_user(), new_user()
        c1, c2 = ids.conversation_id_direct(0, me, p1), ids.conversation_id_direct(0, me, p2)
        a, b = await RawClient.login(st, p1), await RawClient.login(st, p2)
        await send_n(a, me, 2)
        client = await RawClient.login(st, me)
        await entry_when(client, c1, lambda e: e.unread == 2)

        st.kill_service("session")  # SIGKILL: no graceful checkpoint write
        dropped = metric(st, "mailbox", "qim_mailbox_projection_dropped_total")
        await send_n(b, me, 3)  # a conversation that appears only while the projection is down
        late = await send_n(a, me, 1, b"late")
        for _ in range(100):  # materialized: the mailbox tried the low-latency path and dropped it
            if metric(st, "mailbox", "qim_mailbox_projection_dropped_total") >= dropped + 2:
                break
            await asyncio.sleep(0.1)
        assert metric(st, "mailbox", "qim_mailbox_projection_dropped_total") >= dropped + 2

        st.start_service("session")
        await asyncio.get_running_loop().run_in_executor(None, st.wait_ready, ["session"])
        listed = await sessions(client)  # ready means caught up: exact at once, no polling
        assert [(e.conversation_id, e.unread) for e in listed] == [(c1, 3), (c2, 3)]
        assert listed[0].last_message.message_id == late[0].message_id

        # the checkpoint bound to another topic id: not ready, list refused, reads work
        st.stop_service("session")
        r = redis_of(st)
        for shard in range(int(st.env["QIM_MAILBOX_SHARD_COUNT"])):  # every session shard's checkpoint
            key = session_shard_checkpoint_key(shard)
            bind = (await r.hget(key, "bind")).decode().split("|")
            await r.hset(key, "bind", "|".join([bind[0], "AAAAAAAAAAAAAAAAAAAAAA", bind[2]]))
        st.start_service("session")
        deadline = time.monotonic() + 30
        while True:
            status, body = st.healthz("session")
            if status == 503 and "checkpoint bound to" in body:
                break
            assert time.monotonic() < deadline, (status, body)
            await asyncio.sleep(0.2)
        # the restarted node takes its shards' leases one by one (UNAVAILABLE "not served by
        # this node" until it holds the user's: docs/decisions/0040-scale-leases-and-fencing.md);
        # once held, the list is refused because the projection failed closed
        while True:
            op, err = await pull_page(client)
            assert op == Opcode.ERROR and err.code == ErrorCode.UNAVAILABLE, (op, err)
            if "failed closed" in err.message:
                break
            # or, just restarted, its RPC port not reached yet by the gateway ("unreachable"): transient too
            # or its lease not taken yet after the restart ("no live owner (takeover in progress)")
            transient = "not served by this node" in err.message or err.message.endswith(" unreachable") or \
                "no live owner" in err.message
            assert transient and time.monotonic() < deadline, err.message
            await asyncio.sleep(0.2)
        op, ok = await mark_read(client, c2, 2, peer=p2)
        assert op == Opcode.MARK_READ_OK and ok.read_conversation_seq == 2
        await r.aclose()
        for c in (a, b, client):
            await c.close()
    finally:
        st.down()
        st.engines.down()
