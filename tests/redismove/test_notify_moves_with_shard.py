"""The NotificationService across a MailboxShard move (docs/decisions/0144, 0104; `make
test-redis-move`): stack3's qim-notify node alerts an offline phone of a user of shard 0.

- m1 is alerted before the move (its "made" record on the source instance);
- the shard is moved with a 15 s settle; m2 and, 4 s later, m2b are sent while the shard
  is marked moving: the notify node's batch meets StoreUnavailable for the user and is
  made again until the move switched (qim_notify_store_waits_total rose), then each is
  alerted, once;
- the node is stopped, the group `qim-notify` set back to the offsets it had before m1 (an
  operator's reset: the records are replayed), the node started again, m3 sent: m1 and m2
  are found made on the target instance, so the phone has each message's alert exactly once.
Shard 0: the move-under-traffic test never takes it (test_push_moves_with_shard moves it too)."""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
import urllib.request

from confluent_kafka import Consumer, TopicPartition

from qim.consts import DISPATCH_TOPIC
from qim.dev.redis_instances import layout_of
from qim.infra.redis.client import connect
from qim.services.notify.consumer import GROUP_ID
from tests.e2e.sdkclient import client, close_all
from tests.notify.servicefakes import DEADLINE_S, OFFLINE_S, offline_phone
from tests.sdk.realstack import eventually

TENANT, SHARD = 0, 0
SETTLE_S = 15  # long enough for the notify node to meet the marked shard on a busy machine


def store_waits(st) -> float:
    """The notify node's qim_notify_store_waits_total (0 when unreachable)."""
    try:
        text = urllib.request.urlopen(f"http://{st.metrics['notify']}/metrics", timeout=3).read().decode()
    except OSError:
        return 0.0
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith("qim_notify_store_waits_total "))


def group_offsets(bootstrap: str, offsets: dict[int, int] | None = None) -> dict[int, int]:
    """The group's committed offsets of every dispatch partition; with `offsets`, commit
    those first (the group must have no member: its node stopped)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP_ID, "enable.auto.commit": False})
    try:
        if offsets is not None:
            c.commit(offsets=[TopicPartition(DISPATCH_TOPIC, p, o) for p, o in offsets.items()], asynchronous=False)
        parts = list(c.list_topics(DISPATCH_TOPIC, timeout=30).topics[DISPATCH_TOPIC].partitions)
        got = c.committed([TopicPartition(DISPATCH_TOPIC, p) for p in parts], timeout=30)
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()


async def test_alert_claims_move_with_the_shard_and_a_batch_waits_through_the_move(stack3, stack3_apns, tmp_path):
    st, es, apns = stack3, stack3.engines, stack3_apns
    st.wait_ready()
    layout = layout_of(es.redis_addrs, es.shard_count)
    a = next(u for u in iter(lambda: random.getrandbits(40) + 1, 0) if layout.user_shard(TENANT, u) != SHARD)
    me = next(u for u in iter(lambda: random.getrandbits(40) + 1, 0) if layout.user_shard(TENANT, u) == SHARD)
    home = connect(es.redis_addrs[0])
    try:
        source = (await home.hget("qim:placement", f"shard:{SHARD}") or b"").decode() or \
            layout.mailbox[layout.mailbox_index(SHARD)]
        target = next(x for x in layout.mailbox if x != source)
        phone = await offline_phone(st, tmp_path, me, 1)
        sender = await client(st, tmp_path, a)
        await sender.connect()
        await asyncio.sleep(OFFLINE_S)
        direct = (await sender.open_direct(me)).conversation_id
        before = await asyncio.to_thread(group_offsets, es.kafka_bootstrap)
        m1 = (await sender.send_text(direct, "before the move")).message_id.hex()
        await eventually(lambda: apns.per_message(phone.token) == {m1: 1}, DEADLINE_S, "m1's alert")

        waits = await asyncio.to_thread(store_waits, st)
        env = {**os.environ, **es.env()}
        move = asyncio.get_running_loop().run_in_executor(None, lambda: subprocess.run(
            [sys.executable, "-m", "qim.cli.qimctl", "redis", "move-shard", "--shard", str(SHARD), "--to", target,
             "--settle", str(SETTLE_S)], env=env, capture_output=True, text=True, timeout=300))

        async def marked() -> bool:
            return await home.hget("qim:placement", f"moving:{SHARD}") is not None
        await eventually(marked, DEADLINE_S, "the shard marked moving")
        # a node reads the placement map again in the background of its first shard call
        # after a change (decision 0104): m2 may still be alerted with the old map (the
        # source is authoritative until the switch); m2b, 4 s later, meets the mark
        m2 = (await sender.send_text(direct, "during the move")).message_id.hex()
        await asyncio.sleep(4)
        m2b = (await sender.send_text(direct, "during the move, later")).message_id.hex()
        moved = await move
        assert moved.returncode == 0, moved.stdout + moved.stderr
        await eventually(lambda: apns.per_message(phone.token) == {m1: 1, m2: 1, m2b: 1}, DEADLINE_S,
                         "m2's and m2b's alerts")
        assert await asyncio.to_thread(store_waits, st) > waits, "the batch never met the marked shard"

        await asyncio.to_thread(st.stop_service, "notify")
        now = await asyncio.to_thread(group_offsets, es.kafka_bootstrap)
        # the partitions notified since `before` go back there (never committed then: 0, the log's start)
        back = {p: max(o, 0) for p, o in before.items() if now.get(p) != o}
        assert back, "the group committed nothing since m1"
        await asyncio.to_thread(group_offsets, es.kafka_bootstrap, back)
        await asyncio.to_thread(st.start_service, "notify")
        await asyncio.to_thread(st.wait_ready, ["notify"])
        m3 = (await sender.send_text(direct, "after the replay")).message_id.hex()
        await eventually(lambda: m3 in apns.per_message(phone.token), DEADLINE_S * 2, "m3's alert after the replay")
        assert apns.per_message(phone.token) == {m1: 1, m2: 1, m2b: 1, m3: 1}, "an alert made again after the move"
        await close_all(sender)
    finally:
        await home.aclose()
