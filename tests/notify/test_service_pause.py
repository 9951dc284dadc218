"""A NotificationService node paused (SIGSTOP) under traffic (issue 39; docs/decisions/
0135, 0144), on a private stack with two qim-notify nodes (claims of 3 s, the group's
session timeout 10 s) and a local APNs endpoint (tests/notify/conftest.py).

One pause, two cases held by the paused node:
- phone X's alert was answered 429 (Retry-After 8 s): it waits in the node's retry
  timer, claimed but not sent. The other node takes the partition over, finds the claim
  expired and makes the alert. When the paused node continues, its retry finds its claim
  gone (notify_claim_renew.lua) and sends nothing: one alert, and never an older badge
  after a newer one.
- phone Y's alert is in flight: APNs holds the request 7 s and answers while the node
  is stopped (the pause lasts the group's session timeout, 10 s, and more). The node taking over cannot know the request was made; the claim expired,
  so it makes the alert again: the one case decision 0135 names (a node stalled past its
  claim with the request in flight) - exactly two accepted requests for that (device,
  message), with the same apns-collapse-id (the conversation) and the same message id,
  so the phone shows one. Every other alert of X and Y, and of the other users, once.
Per device the badge versions, in the order APNs received the accepted requests, never go
back; the last equals the stored UserBadgeState."""

from __future__ import annotations

import asyncio
import os
import signal
import urllib.request

from tests.badge.audit import badge_store, stored
from tests.e2e.sdkclient import client, close_all
from tests.notify.servicefakes import DEADLINE_S, OFFLINE_S, offline_phone
from tests.sdk.realstack import eventually, users

NODES = ("notify", "notify2")


def metric(st, name: str, family: str, **labels: str) -> float:
    """The sum of node `name`'s samples of `family` with these labels (0 when unreachable)."""
    try:
        text = urllib.request.urlopen(f"http://{st.metrics[name]}/metrics", timeout=3).read().decode()
    except OSError:
        return 0.0
    want = [f'{k}="{v}"' for k, v in labels.items()]
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith(family + "{") and all(w in line for w in want))


def accepted_in_order(apns, token: str) -> list[dict]:
    """The payloads APNs accepted for `token`, in the order it received the requests."""
    ok = {id(r) for r in list(apns.fake.accepted)}
    return [r.payload for r in list(apns.fake.received) if id(r) in ok and r.token == token]


async def test_a_paused_node_continued_after_a_takeover_sends_nothing_twice_but_its_request_in_flight(
        push_stack, apns_endpoint, tmp_path):
    st, apns = push_stack, apns_endpoint
    a, me, *others = users(5)
    x, y = await offline_phone(st, tmp_path, me, 1), await offline_phone(st, tmp_path, me, 2)
    phones = [await offline_phone(st, tmp_path, u, 1) for u in others]
    sender = await client(st, tmp_path, a)
    await sender.connect()
    await asyncio.sleep(OFFLINE_S)
    mine = (await sender.open_direct(me)).conversation_id
    convs = [(await sender.open_direct(u)).conversation_id for u in others]
    sent: dict[str, list[str]] = {p.token: [] for p in [x, y, *phones]}

    async def round_(text: str, to_me: bool) -> None:
        for p, conv in zip(phones, convs):
            sent[p.token].append((await sender.send_text(conv, text)).message_id.hex())
        if to_me:
            m = (await sender.send_text(mine, text)).message_id.hex()
            sent[x.token].append(m)
            sent[y.token].append(m)

    await round_("before", True)
    await eventually(lambda: all(len(apns.per_message(t)) == len(m) for t, m in sent.items()), DEADLINE_S,
                     "the first round's alerts")
    retried = {n: await asyncio.to_thread(metric, st, n, "qim_push_sends_total", provider="apns",
                                          outcome="retry_after") for n in NODES}
    apns.fake.retry_after, apns.fake.modes[x.token], apns.fake.slow[y.token] = "8", "429", 7.0
    held = (await sender.send_text(mine, "held")).message_id.hex()
    sent[x.token].append(held)
    sent[y.token].append(held)
    await eventually(lambda: {r.token for r in list(apns.fake.received) if r.payload["qim"]["message"] == held}
                     >= {x.token, y.token}, DEADLINE_S, "X answered 429 and Y's request held")

    async def victim() -> str:
        now = {n: await asyncio.to_thread(metric, st, n, "qim_push_sends_total", provider="apns",
                                          outcome="retry_after") for n in NODES}
        return next((n for n in NODES if now[n] > retried[n]), "")
    await eventually(victim, DEADLINE_S, "the node that was answered 429 counted it")
    paused = await victim()
    pid = st.pids[paused]
    os.kill(pid, signal.SIGSTOP)
    try:
        del apns.fake.modes[x.token]  # the takeover's requests are answered at once
        apns.fake.slow.pop(y.token)
        await round_("during", True)
        await eventually(lambda: held in apns.per_message(x.token) and all(
            set(apns.per_message(t)) >= set(m) for t, m in sent.items()), DEADLINE_S,
            "the other node made every alert, the held ones too")
    finally:
        os.kill(pid, signal.SIGCONT)
    dup = await asyncio.to_thread(metric, st, paused, "qim_notify_alerts_total", outcome="suppressed_duplicate")

    async def paused_node_done() -> bool:  # its retry of X's alert ended, one way or the other
        now = await asyncio.to_thread(metric, st, paused, "qim_notify_alerts_total", outcome="suppressed_duplicate")
        return now > dup or apns.per_message(x.token)[held] > 1
    await eventually(paused_node_done, DEADLINE_S, "the paused node's retry of X's alert ended")
    await round_("after", True)
    await eventually(lambda: all(set(apns.per_message(t)) >= set(m) for t, m in sent.items()), DEADLINE_S,
                     "the last round's alerts")

    assert apns.per_message(x.token) == {m: 1 for m in sent[x.token]}, "X: its retried alert made twice"
    # Y: the request in flight at the pause was answered (accepted), and made again after
    # the claim expired: the one case of two, collapsed on the phone by the conversation
    asked = [r for r in list(apns.fake.received) if r.token == y.token and r.payload["qim"]["message"] == held]
    assert len(asked) == 2, "Y's held alert: one request per node, no more"
    assert apns.per_message(y.token) == {m: 2 if m == held else 1 for m in sent[y.token]}
    assert {r.headers["apns-collapse-id"] for r in asked} == {mine.hex()}  # the phone shows one
    for p in phones:
        assert apns.per_message(p.token) == {m: 1 for m in sent[p.token]}, "another user: a lost or doubled alert"
    store = badge_store(st.engines)
    for token, user in [(x.token, me), (y.token, me), *[(p.token, u) for p, u in zip(phones, others)]]:
        versions = [p["qim"]["badge_version"] for p in accepted_in_order(apns, token)]
        assert versions == sorted(versions), f"a badge went back: {versions}"
        badge, version = await stored(store, user)
        assert (accepted_in_order(apns, token)[-1]["aps"]["badge"], versions[-1]) == (badge, version)
    await close_all(sender)
