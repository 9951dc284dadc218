"""Offline push soak (issue 39; docs/decisions/0135, 0145): a private stack with two
qim-notify nodes and the local APNs endpoint; offline phones, mixed traffic from a few
senders to random users, reads on a connected second device of every tenth user, bursts
of provider faults (500, 429 with Retry-After 1, slow answers). Its size comes from
NOTIFY_SOAK_DEVICES / NOTIFY_SOAK_MINUTES (tests/scale/notify_soak.py): `make test-scale`
runs 200 devices for 3 minutes, `make soak-notify` the issue's 1,000 for 20 minutes.

At the end, once every node's lag is 0 and the endpoint has been quiet:
- every phone's last push (its highest badge_version) carries the server's badge
  (UserBadgeState), and a phone that got none has badge 0: 100 %;
- no (device, message) was accepted twice;
- the counters reconcile: the alerts' outcomes of both nodes add up to the messages sent
  (each user has one registered device: sent + suppressed + failed = due), with none
  `failed`."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.badge.audit import badge_store
from tests.e2e.sdkclient import close_all
from tests.fixtures import running_stack
from tests.notify.servicefakes import OFFLINE_S, ThreadedApns
from tests.scale.notify_soak import (
    NODES,
    SENDERS,
    Traffic,
    by_label,
    connected,
    cpu_by_process,
    endings,
    figures,
    lag,
    phones_of,
    scrape,
    size_from_env,
)
from tests.sdk.realstack import eventually, users

IDLE_S = 15.0  # the notify nodes' CPU with no traffic, measured before it


@pytest.fixture(scope="module")
def soak(tmp_path_factory):
    apns = ThreadedApns().start(tmp_path_factory.mktemp("apns"))
    env = {**apns.env, "QIM_NOTIFY_CLAIM_MS": "5000"}
    try:
        with running_stack(tmp_path_factory.mktemp("soak"), extra_env=env, nodes={"notify": 2}) as st:
            yield st, apns
    finally:
        apns.stop()


async def test_a_soak_ends_with_every_badge_right_and_the_counters_reconciled(soak, tmp_path):
    st, apns = soak
    size = size_from_env()
    people = users(size.devices + SENDERS)
    them, senders_ids = people[:size.devices], people[size.devices:]
    phones, setup_s = await phones_of(st, tmp_path, them)
    readers = them[::10]
    laptops = dict(zip(readers, await connected(st, tmp_path, readers, 2)))
    senders = await connected(st, tmp_path, senders_ids, 1)
    await asyncio.sleep(OFFLINE_S)
    idle0 = cpu_by_process(st)
    await asyncio.sleep(IDLE_S)
    cpu0 = cpu_by_process(st)
    idle = {k: (v - idle0.get(k, 0.0)) / IDLE_S for k, v in cpu0.items()}
    traffic = Traffic(st, apns, size, them, senders, laptops)
    began = time.monotonic()
    await traffic.run()

    async def quiet() -> bool:
        before = len(apns.fake.received)
        if await asyncio.to_thread(lag, st) > 0:
            return False
        await asyncio.sleep(10.0)
        return len(apns.fake.received) == before and await asyncio.to_thread(lag, st) == 0
    await eventually(quiet, 900.0, "every node caught up and the endpoint quiet")
    took = time.monotonic() - began - 10.0  # the last quiet check's 10 s left out
    cpu1 = cpu_by_process(st)
    cpu = {k: v - cpu0.get(k, 0.0) for k, v in cpu1.items()}

    store = badge_store(st.engines)
    badges = await store.badges_of(0, them)
    last, per_message = endings(apns, phones)
    wrong, doubled = [], {}
    for u, phone in phones.items():
        badge, version = badges.get(u, (0, 0))
        got = last.get(phone.token)
        if got is None and badge != 0:
            wrong.append((u, None, None, badge, version))
        elif got is not None and (got["aps"]["badge"], got["qim"]["badge_version"]) != (badge, version):
            wrong.append((u, got["aps"]["badge"], got["qim"]["badge_version"], badge, version))
        doubled.update({(u, m): n for m, n in per_message[phone.token].items() if n > 1})
    samples = {n: scrape(st, n) for n in NODES}
    outcomes: dict[str, float] = {}
    for n in NODES:
        for k, v in by_label(samples[n], "qim_notify_alerts_total", "outcome").items():
            outcomes[k] = outcomes.get(k, 0.0) + v
    nodes = {n: {"pushes": by_label(samples[n], "qim_notify_alerts_total", "outcome").get("sent", 0.0)
                 + by_label(samples[n], "qim_notify_silent_total", "outcome").get("sent", 0.0),
                 "retries": sum(by_label(samples[n], "qim_notify_retries_total", "provider").values())}
             for n in NODES}
    for line in figures(size, traffic, setup_s, took, cpu, idle, nodes):
        print(line)
    print(f"soak-notify: at the server's badge {len(phones) - len(wrong)}/{len(phones)}, doubled={len(doubled)}, "
          f"alerts by outcome {outcomes} (sum {sum(outcomes.values()):.0f}, messages {traffic.sent})")
    assert not doubled, f"alerts accepted twice: {list(doubled.items())[:10]}"
    assert not wrong, f"{len(wrong)} of {len(phones)} phones end with another badge than the server's: {wrong[:10]}"
    assert sum(outcomes.values()) == traffic.sent, outcomes
    assert outcomes.get("failed", 0) == 0, outcomes
    await close_all(*laptops.values(), *senders)
