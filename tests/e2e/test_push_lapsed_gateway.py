"""A gateway whose node lease lapsed while its process and its devices' connections lived
on (SIGSTOP past the lease: a stall) wakes its devices when it is listed again
(docs/decisions/0153; qim/cluster/links.py GatewayLinks on_back).

Observed before the fix: device B, connected to gateway2 all along and synced, was never
told of a message sent to it while gateway2's lease had lapsed. The mailbox counts the
presence entries of listed gateways only, so it withheld the push; gateway2 renewed the
same incarnation on waking, its link to the mailbox had never dropped (no hello, no
wake), and B sat on an unseen message until its next push or reconnect.
Expected: B gets a PUSH_EVENTS within PUSH_DEADLINE_S of SIGCONT and pulls the message
(or, when gateway2's own resync closes B's connection first, decision 0154, B reconnects
and pulls it: tests/e2e/test_lapsed_gateway_resync.py covers that path with the SDK).
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time

import redis

from qim.protocol import Opcode
from qim.stores.redis.keys import registry_nodes_key
from tests.e2e.rawclient import RawClient
from tests.e2e.test_push_repair import receive_by_push, wait_push
from tests.fixtures import running_stack

PUSH_DEADLINE_S = 10.0
LAPSE_WAIT_S = 30.0  # the default 10 s lease ends within that on a loaded host
OWNERS_REFRESH_S = 1.5  # the mailbox's OwnerTable reads the registry every second


def lease_end_ms(st, node_id: str) -> tuple[float, int]:
    """(gateway2's lease end, the registry's clock), both in registry ms."""
    host, port = st.env["QIM_REDIS_ADDR"].rsplit(":", 1)
    r = redis.Redis(host=host, port=int(port))
    try:
        secs, micros = r.time()
        return r.zscore(registry_nodes_key("gateway"), node_id) or 0.0, secs * 1000 + micros // 1000
    finally:
        r.close()


async def test_devices_of_a_gateway_back_from_a_lapsed_lease_are_woken(tmp_path):
    with running_stack(tmp_path, nodes={"gateway": 2}) as st:
        g1, g2 = st.gateway_addrs
        node_id = f"gateway@{g2}"
        a, b = random.getrandbits(40) + 1, random.getrandbits(40) + 1
        ca = await RawClient.login(st, a, 1, addr=g1)
        cb = await RawClient.login(st, b, 1, addr=g2)
        # the mailbox wakes a device whose presence entry it read: B is known at gateway2
        # (else the entry, published after the pause, would wake B by itself)
        assert await wait_push(cb, 20.0), "B's login was never woken"
        _, cursor = await cb.pull_all()
        os.kill(st.pids["gateway2"], signal.SIGSTOP)
        try:
            deadline = time.monotonic() + LAPSE_WAIT_S
            while True:
                end, now = lease_end_ms(st, node_id)
                assert end, f"{node_id} not in the registry"
                if now > end:
                    break
                assert time.monotonic() < deadline, "gateway2's lease never ended"
                await asyncio.sleep(0.2)
            await asyncio.sleep(OWNERS_REFRESH_S)  # the mailbox saw gateway2 unlisted
            op, ack = await ca.send_text(b, b"while gateway2 was away")
            assert op == Opcode.SEND_ACK, ack
            # materialized (and its push withheld) before the wake: B's other device, on
            # gateway 1, pulls it from the mailbox
            b2 = await RawClient.login(st, b, 2, addr=g1)
            for _ in range(100):
                if any(e.body == b"while gateway2 was away" for e in (await b2.pull_all(cursor))[0]):
                    break
                await asyncio.sleep(0.2)
            else:
                raise AssertionError("the message never reached B's mailbox")
            await b2.close()
        finally:
            os.kill(st.pids["gateway2"], signal.SIGCONT)
        cb.pushes.clear()  # nothing B held before the pause stands in for the wake
        try:
            got = await receive_by_push(cb, cursor, PUSH_DEADLINE_S)
        except (AssertionError, ConnectionError, OSError):  # wait_push: "connection closed"
            # gateway2, once it renewed the lapsed lease, may close B's connection before
            # the mailbox's wake reaches it (decision 0154: its devices reconnect to resync);
            # B is told either way: it reconnects and pulls, as the SDK does
            cb = await RawClient.login(st, b, 1, addr=g2)
            got = [e.body for e in (await cb.pull_all(cursor))[0]]
        assert got == [b"while gateway2 was away"], (got, st.log_tail("mailbox", 15))
        await ca.close()
        await cb.close()
