"""After-send notifications end to end (issue 38; docs/decisions/0123): a private stack
with two ModerationService nodes (qim-moderation, one Kafka consumer group over a
4-partition Outbox) notifying a real local receiver (tests/moderation/receiver.py).

- The receiver down (503) while 20 direct messages are sent: nothing is accepted, the
  group lags (qim_moderation_notify_lag_records > 0 on a node, retries counted); back up,
  it gets every one of them exactly once (no node died: no duplicate), signed.
- One node SIGKILLed, 20 more sent: the survivor takes its partitions and the receiver
  gets every message (duplicates allowed only here, recognisable by message_id).
- `qimctl moderation replay --from T` replays from T (refused while a node runs)."""

from __future__ import annotations

import asyncio
import time
import urllib.request

import pytest

from qim.cli import qimctl
from qim.protocol import Opcode
from tests.e2e.rawclient import RawClient
from tests.e2e.test_groups import users
from tests.fixtures import running_stack
from tests.moderation.receiver import SECRET, Receiver

DEADLINE_S = 120.0


@pytest.fixture(scope="module")
def receiver():
    """The receiver the ModerationService POSTs to."""
    server = Receiver().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def notify_stack(tmp_path_factory, receiver):
    """A stack with two qim-moderation nodes notifying `receiver`."""
    env = {
        "QIM_MODERATION_NOTIFY_URL": receiver.url,
        "QIM_MODERATION_NOTIFY_SECRET": SECRET,
        "QIM_MODERATION_NOTIFY_BATCH": "7",
    }
    with running_stack(
        tmp_path_factory.mktemp("notify"), engines_kw={"outbox_partitions": 4}, extra_env=env, nodes={"moderation": 2}
    ) as st:
        yield st


def metric(st, name: str, metric_name: str) -> float:
    """An unlabelled metric of node `name` (0 when absent)."""
    text = urllib.request.urlopen(f"http://{st.metrics[name]}/metrics", timeout=3).read().decode()
    for line in text.splitlines():
        if line.startswith(metric_name + " "):
            return float(line.split()[1])
    return 0.0


async def until(cond, what: str) -> None:
    """Poll `cond()` (a sync callable) until true within DEADLINE_S; fail naming `what`."""
    end = time.monotonic() + DEADLINE_S
    while not await asyncio.to_thread(cond):
        if time.monotonic() > end:
            pytest.fail(f"not within {DEADLINE_S}s: {what}")
        await asyncio.sleep(0.5)


async def send_many(a: RawClient, peer: int, n: int) -> set[str]:
    """n direct sends; their message_ids (hex)."""
    out = set()
    for i in range(n):
        op, ack = await a.send_text(peer, b"notify me %d" % i)
        assert op == Opcode.SEND_ACK, ack
        out.add(ack.message_id.hex())
    return out


async def test_a_receiver_down_then_back_gets_every_message_once_and_a_killed_node_loses_none(notify_stack, receiver):
    st = notify_stack
    ua, ub = users(2)
    a = await RawClient.login(st, ua)
    try:
        receiver.down = True
        first = await send_many(a, ub, 20)
        await until(
            lambda: sum(metric(st, n, "qim_moderation_notify_lag_records") for n in ("moderation", "moderation2")) > 0,
            "the notify lag shows on a node while the receiver is down",
        )
        assert sum(receiver.count(first).values()) == 0
        receiver.down = False
        await until(lambda: all(receiver.count(first).values()), "every message notified once the receiver is back")
        assert set(receiver.count(first).values()) == {1}, receiver.count(first)  # no node died: no duplicate
        assert receiver.bad_signatures == 0
        await until(
            lambda: sum(metric(st, n, "qim_moderation_notify_lag_records") for n in ("moderation", "moderation2")) == 0,
            "the lag back to 0",
        )

        await asyncio.to_thread(st.kill_service, "moderation2")
        second = await send_many(a, ub, 20)
        await until(lambda: all(receiver.count(second).values()), "every message notified after a node's SIGKILL")
        assert set(receiver.count(first).values()) == {1}
    finally:
        await a.close()


async def test_replay_from_a_time_delivers_again_and_is_refused_while_a_node_runs(notify_stack, receiver, capsys):
    """qimctl moderation replay --from T (after the first test's node kill): refused, exit
    2, while a node is in the group; with the nodes stopped it moves the group to T, and
    the restarted node delivers the records from T again (and none from before T)."""
    st = notify_stack
    ua, ub = users(2)
    a = await RawClient.login(st, ua)
    try:
        before = await send_many(a, ub, 3)
        await until(lambda: all(receiver.count(before).values()), "the earlier messages notified")
        await asyncio.sleep(1.5)  # T strictly after their timestamps (ms, one clock)
        t_ms = int(time.time() * 1000)
        after = await send_many(a, ub, 5)
        await until(lambda: all(receiver.count(after).values()), "the later messages notified")
    finally:
        await a.close()
    argv = ["moderation", "replay", "--from", str(t_ms), "--kafka-bootstrap", st.engines.env()["QIM_KAFKA_BOOTSTRAP"]]
    assert await asyncio.to_thread(qimctl.main, argv) == 2  # the node is still a member
    assert "stop every qim-moderation node first" in capsys.readouterr().err
    await asyncio.to_thread(st.stop_service, "moderation")
    # a member the broker still counts (a node SIGKILLed earlier, or one whose leave has not
    # reached the coordinator yet) leaves within the group's session timeout (10 s): the
    # refusal holds until then, as an operator re-running the command would see
    deadline = time.monotonic() + 40
    while (rc := await asyncio.to_thread(qimctl.main, argv)) != 0:
        err = capsys.readouterr().err
        assert rc == 2 and "stop every qim-moderation node first" in err, err
        assert time.monotonic() < deadline, f"replay still refused 40 s after the nodes stopped: {err}"
        await asyncio.sleep(2)
    await asyncio.to_thread(st.start_service, "moderation")
    await until(lambda: set(receiver.count(after).values()) == {2}, "the records from T delivered again")
    assert set(receiver.count(before).values()) == {1}  # nothing from before T
