"""A mailbox owner SIGKILLed, or SIGSTOPped past its lease, *while overtakes happen*, on a
private stack of two mailbox nodes (docs/decisions/0142-direct-records-overtake-group-
records.md §1, §4; 0148: the shard holding direct records takes its turn first; 0165:
overtakes on by default).

The seam: a 1,000-member group bursts (120 sends, its members on the victim's shards) so
its records queue in the victim's shard FIFOs, while two direct chats of its members go
on beside it in one of those shards. A direct record behind the backlog overtakes: the
group records queued ahead of it get the entries of the direct record's lanes appended
and are begun (DispatchProgress BEGUN), not finished, and W moves in those lanes only. The
fault is dealt the moment the victim's `qim_mailbox_overtakes_total` has moved and group
records are begun and unfinished in its shards, read in Redis with the victim frozen
(SIGSTOP), so at least MIN_LEFT of them are what the next owner finds. It replays
from min(W)+1: the overtaken direct records are then DUPLICATEs, the begun group records
RESUME with their first mailbox_seq and are finished. Checked afterwards: every
chatter's, a quiet member's (an SDK device; a lane no direct record moved) and eight
silent members' mailboxes (raw pulls from 0, lanes no chatter is in: W never moved there
at the overtake, so a replay from anywhere but min(W)+1 loses their entries) hold each
acknowledged message once, each conversation in conversation_seq order, the group's in
its sender's order; every SDK device equals a fresh device's full sync, told each message
once; unread counts (SDK and server list) and badges (SDK, list, stored UserBadgeState)
exact; no record left begun, no shard stopped.

Neighbours: tests/mailbox/test_overtake.py holds the restart rule at unit level (one
process, a gated store); tests/e2e/test_direct_beside_group.py the orders without a fault;
tests/e2e/test_inline_push_takeover.py takeovers under direct traffic alone (no backlog,
so no overtake need be in flight at its fault).
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import threading
import time

import pytest
import redis

from qim._core import ids
from qim.consts import MESSAGE_TYPE_CONTROL
from qim.dev.redis_instances import layout_of
from qim.proto.v1 import message_pb2
from qim.protocol import Opcode
from tests.badge.audit import badge_store, listed_badge, stored
from tests.e2e.rawclient import RawClient
from tests.e2e.sdkclient import client, close_all, unread_pair
from tests.e2e.test_direct_beside_group import pipelined
from tests.e2e.test_groups import create, gconv
from tests.e2e.test_inline_push_attack import store_view, told_once
from tests.e2e.test_inline_push_takeover import Chat, _count, _no_unsent
from tests.e2e.test_shard_takeover import metric, node_id, owners, until_split, user_on
from tests.fixtures import TEST_SHARD_COUNT, running_stack
from tests.sdk.realstack import eventually

LEASE_MS, RENEW_MS = 4000, 500
GROUP_SENDS = 120  # below UNREAD_EXACT_WINDOW (200): every member's unread stays exact
GROUP_SIZE = 1000  # GROUP_MAX_MEMBERS: about 125 members in each of the 8 shards' records
OVERTAKE_WAIT_S = 45.0  # from the burst's start until the victim overtakes (a busy machine)
MIN_LEFT = 8  # group records begun by overtakes and unfinished, at the fault
LANDED_S = 0.1  # a frozen node's Redis calls in flight land within this
SETTLE_S = 90.0
SILENT = 8  # members who never connect whose mailboxes are pulled: each in a lane no chatter is in


@pytest.fixture(scope="module")
def two_owners(tmp_path_factory):
    env = {"QIM_SHARD_LEASE_MS": str(LEASE_MS), "QIM_SHARD_RENEW_MS": str(RENEW_MS), "QIM_MAILBOX_OVERTAKE": "1"}
    with running_stack(tmp_path_factory.mktemp("overtake-takeover"), mailboxes=2, extra_env=env) as st:
        yield st


def _overtakes(st, name: str) -> float:
    return metric(st, name, "qim_mailbox_overtakes_total")


# begun, unfinished DispatchProgress among the shard's newest ones (its DP index: score
# the highest offset seen): only an overtake's records ahead are left so, the in-order
# fused call finishes every record it begins (qim/stores/redis/lua/mailbox_fused.lua)
BEGUN_LUA = """
local n = 0
for _, k in ipairs(redis.call('ZRANGE', KEYS[1], -1024, -1)) do
  if redis.call('HGET', k, 'st') == 'BEGUN' then n = n + 1 end
end
return n
"""


def _begun(st, shards: list[int]) -> dict[int, int]:
    """shard -> its DispatchProgress entries left BEGUN (an overtake's records ahead),
    read from each shard's Redis instance (the development layout: no shard moved)."""
    layout = layout_of(st.engines.redis_addrs, st.engines.shard_count)
    out = {}
    for shard in shards:
        host, port = layout.mailbox[layout.mailbox_index(shard)].rsplit(":", 1)
        r = redis.Redis(host, int(port))
        try:
            out[shard] = int(r.eval(BEGUN_LUA, 1, f"qim:dpidx:{{s{shard}}}"))
        finally:
            r.close()
    return out


def _fault_mid_overtake(st, name: str, shards: list[int], sig: int, before: float,
                        stop: threading.Event) -> tuple[float, dict[int, int]]:
    """Watch `name` (owner of `shards`) and deal `sig` to its pid at the worst moment
    found: its overtake counter moved past `before` and group records are begun in its
    shards. To know what the next owner will find, the node is frozen first (SIGSTOP,
    its calls in flight landed) and Redis read again: with at least MIN_LEFT begun
    records `sig` follows (SIGKILL; a SIGSTOP stays), else SIGCONT and watch on (a stop
    far shorter than the lease). Returns (the counter then, the begun records per shard
    the next owner finds); (before, {}) when `stop` was set or OVERTAKE_WAIT_S passed."""
    pid = st.pids[name]
    deadline = time.monotonic() + OVERTAKE_WAIT_S
    now, most, tries = before, 0, 0
    while not stop.is_set() and time.monotonic() < deadline:
        try:
            now = _overtakes(st, name)
        except OSError:  # a busy node's /metrics late: the next round
            continue
        if now > before and sum(_begun(st, shards).values()) >= MIN_LEFT:
            os.kill(pid, signal.SIGSTOP)
            time.sleep(LANDED_S)
            left = _begun(st, shards)
            if sum(left.values()) >= MIN_LEFT:
                if sig != signal.SIGSTOP:
                    os.kill(pid, sig)
                return now, left
            os.kill(pid, signal.SIGCONT)
            most, tries = max(most, sum(left.values())), tries + 1
        time.sleep(0.01)
    print(f"no fault: {now - before:.0f} overtake(s), {tries} freeze(s), at most {most} group records begun")
    return before, {}


def _user_in(shard: int) -> int:
    """A fresh user whose mailbox shard is `shard`."""
    while True:
        user = random.getrandbits(40) + 1
        if ids.user_placement(0, user, TEST_SHARD_COUNT)[2] == shard:
            return user


def _others(shard: int, lanes: set[int], n: int) -> list[int]:
    """`n` fresh users of `shard`, each in a lane of its own outside `lanes`."""
    out: dict[int, int] = {}
    while len(out) < n:
        user = _user_in(shard)
        lane = ids.lane_id(0, user)
        if lane not in lanes:
            out.setdefault(lane, user)
    return list(out.values())


def _unread(view: list[tuple], user: int) -> int:
    """The unread of `user` in a conversation held as `view` (seq, sender, body, state):
    the others' messages after the user's own last one (an own send reads the
    conversation: tests/badge/test_badge.py)."""
    last_own = max((seq for seq, sender, _, _ in view if sender == user), default=0)
    return sum(1 for seq, sender, _, _ in view if sender != user and seq > last_own)


async def _mailbox_once(st, user: int, convs: dict[bytes, list[bytes]], ordered: bytes) -> None:
    """A raw pull of `user`'s mailbox from 0: every message once (by message_id), each
    conversation of `convs` in conversation_seq order with exactly its bodies, those of
    `ordered` (one sender's) in the order given."""
    c = await RawClient.login(st, user, device=random.getrandbits(31) + 1)
    try:
        entries, _ = await c.pull_all(0, timeout=30)
    finally:
        await c.close()
    mids = [e.message_id for e in entries if e.message_type != MESSAGE_TYPE_CONTROL]
    assert len(mids) == len(set(mids)), f"user {user}: a message in the mailbox twice"
    for conv, bodies in convs.items():
        mine = [e for e in entries if e.conversation_id == conv and e.message_type != MESSAGE_TYPE_CONTROL]
        seqs = [e.conversation_seq for e in mine]
        assert seqs == sorted(set(seqs)), f"user {user}: a conversation out of order in the mailbox"
        got = [e.body for e in mine]
        assert (got if conv == ordered else sorted(got)) == (bodies if conv == ordered else sorted(bodies)), \
            f"user {user}: {len(got)} of {len(bodies)} messages, or not in order"


async def _through_a_fault(st, tmp_path, victim_name: str, label: str, sig: int, heal) -> None:
    table = await until_split(st, "mailbox", ("mailbox", "mailbox2"))
    victim = node_id(st, victim_name)
    victim_shards = sorted(s for s, n in table.items() if n == victim)
    owner = user_on(victim, table)
    # the chatters in one of the victim's shards: its direct records overtake there, in
    # their lanes only; `quiet` (an SDK device) and `silent` there too, in other lanes
    hot = ids.user_placement(0, owner, TEST_SHARD_COUNT)[2]
    a, b, c, d = (_user_in(hot) for _ in range(4))
    chatting = {ids.lane_id(0, u) for u in (a, b, c, d)}
    quiet, *silent = _others(hot, chatting, 1 + SILENT)
    # members who never connect, all on the victim's shards: its records carry twice the
    # members (about 250) and its FIFOs, not the survivor's, hold the backlog
    made_up = [*silent, *(user_on(victim, table) for _ in range(GROUP_SIZE - 6 - SILENT))]
    gid = random.getrandbits(40) + 1
    sender = await RawClient.login(st, owner)
    op, _ = await create(sender, gid, [owner, a, b, c, d, quiet, *made_up])
    assert op == Opcode.GROUP_OK
    group = gconv(gid)
    devices = {u: [await client(st, tmp_path, u, i, name=label) for i in ((1, 2) if u in (a, b) else (1,))]
               for u in (a, b, c, d, quiet)}
    for ds in devices.values():
        for dev in ds:
            await dev.connect()
    chats = []
    for me, peer in ((a, c), (b, d)):
        conv = (await devices[me][0].open_direct(peer)).conversation_id
        for dev in (*devices[me][1:], *devices[peer]):
            await dev.open_direct(peer if dev.user_id == me else me)
        chats.append(Chat(devices, me, peer, conv))
    tasks = [asyncio.get_running_loop().create_task(ch.run()) for ch in chats]
    burst = [message_pb2.SendMessage(client_message_id=os.urandom(16), conversation_id=group, message_type=1,
                                     body=b"g%03d" % i) for i in range(GROUP_SENDS)]
    stop = threading.Event()
    sending = asyncio.get_running_loop().create_future()
    try:
        await asyncio.sleep(1)
        before = _overtakes(st, victim_name)
        watcher = asyncio.get_running_loop().run_in_executor(None, _fault_mid_overtake, st, victim_name,
                                                             victim_shards, sig, before, stop)
        started = time.monotonic()
        sending = asyncio.get_running_loop().create_task(pipelined(sender, burst))
        seen, left = await watcher
        assert left, (f"{victim_name} never had {MIN_LEFT} group records begun by overtakes within "
                      f"{OVERTAKE_WAIT_S} s of the burst: the seam was not reached")
        print(f"{label}: fault {time.monotonic() - started:.1f} s into the burst after {seen - before:.0f} "
              f"overtake(s), group records left begun per shard {left}")
        await heal()
        await asyncio.sleep(1)
        for ch in chats:
            ch.stop()
        await asyncio.gather(*tasks)
        acks = await sending
        assert acks == sorted(acks)
        healed = time.monotonic()
        await _converged(st, tmp_path, label, devices, chats, group, [m.body for m in burst])
        for user in silent:  # members outside the overtaking lanes: their entries came in order
            await _mailbox_once(st, user, {group: [m.body for m in burst]}, group)
        # every begun record was finished by a later owner (none left for ever), no shard stopped
        assert sum((await asyncio.to_thread(_begun, st, victim_shards)).values()) == 0
        assert sum(metric(st, n, "qim_mailbox_dirty_total") for n in ("mailbox", "mailbox2")) == 0
        print(f"{label}: {[ch.sent for ch in chats]} direct messages; converged {time.monotonic() - healed:.1f} s "
              f"after healing; {sum(_overtakes(st, n) for n in ('mailbox', 'mailbox2')):.0f} overtakes so far")
    finally:
        stop.set()
        sending.cancel()
        for ch in chats:
            ch.stop()
        await asyncio.gather(sending, *tasks, return_exceptions=True)
        await sender.close()
        await close_all(*(dev for ds in devices.values() for dev in ds))


async def _converged(st, tmp_path, label, devices, chats, group, group_bodies) -> None:
    convs_of: dict[int, dict[bytes, list[bytes]]] = {u: {} for u in devices}
    for ch in chats:
        bodies = [f"m{i}".encode() for i in range(ch.sent)]
        convs_of[ch.me][ch.conv] = convs_of[ch.peer][ch.conv] = bodies
    for u in devices:
        convs_of[u][group] = group_bodies
    for ds in devices.values():
        for dev in ds:
            await eventually(lambda dev=dev: _no_unsent(dev), timeout=SETTLE_S, what=f"{label}: sends acknowledged")
    badges = badge_store(st.engines)
    for user, convs in convs_of.items():
        await _mailbox_once(st, user, convs, group)
        fresh = await client(st, tmp_path, user, 9, name=label)
        await fresh.connect()
        try:
            want, total = {}, 0
            for conv, bodies in convs.items():
                await eventually(_count(fresh, conv, len(bodies)), timeout=SETTLE_S, what=f"{label}: fresh sync")
                want[conv] = await store_view(fresh, conv)
                assert sorted(r[2] for r in want[conv]) == sorted(bodies)
                if conv == group:  # one sender's pipelined sends: its order
                    assert [r[2] for r in want[conv]] == bodies
                total += _unread(want[conv], user)
            for dev in (*devices[user], fresh):
                for conv, bodies in convs.items():
                    await eventually(_count(dev, conv, len(bodies)), timeout=SETTLE_S,
                                     what=f"{label}: device {dev.device_id} of {user} ({dev.stats})")
                    assert await store_view(dev, conv) == want[conv]
                    assert told_once(dev, conv)
                    n = _unread(want[conv], user)

                    async def exact(dev=dev, conv=conv, n=n) -> bool:
                        return await unread_pair(dev, conv) == ((n, True), (n, True))

                    await eventually(exact, timeout=SETTLE_S, what=f"{label}: unread {n} of {user} on {dev.device_id}")

            async def badge_exact(user=user, fresh=fresh, total=total) -> bool:
                return ((await stored(badges, user))[0] == total and await listed_badge(fresh) == total
                        and all(dev.badge[0] == total for dev in (*devices[user], fresh)))

            await eventually(badge_exact, timeout=SETTLE_S, what=f"{label}: badge {total} of {user}")
        finally:
            await fresh.close()


async def test_an_owner_killed_mid_overtake_resumes_its_begun_group_records_on_the_next_owner(two_owners, tmp_path):
    st = two_owners

    async def heal() -> None:
        st.kill_service("mailbox")  # reaped (it is dead already)
        deadline = time.monotonic() + 30
        while set((await owners(st, "mailbox")).values()) != {node_id(st, "mailbox2")}:
            assert time.monotonic() < deadline, "the killed owner's shards were not taken over"
            await asyncio.sleep(0.2)
        st.start_service("mailbox")  # back under its id: the shards move again (another epoch)
        await asyncio.to_thread(st.wait_ready, ["mailbox"])

    await _through_a_fault(st, tmp_path, "mailbox", "kill", signal.SIGKILL, heal)


async def test_an_owner_paused_mid_overtake_past_its_lease_doubles_nothing(two_owners, tmp_path):
    st = two_owners
    pid = st.pids["mailbox2"]

    async def heal() -> None:
        try:
            deadline = time.monotonic() + 30
            while set((await owners(st, "mailbox")).values()) != {node_id(st, "mailbox")}:
                assert time.monotonic() < deadline, "the paused owner's shards were not taken over"
                await asyncio.sleep(0.2)
            await asyncio.sleep(1)
        finally:
            os.kill(pid, signal.SIGCONT)

    await _through_a_fault(st, tmp_path, "mailbox2", "pause", signal.SIGSTOP, heal)

