"""The traffic of the gates that kill a Redis instance under load (issue 35 §3:
tests/e2e/test_redis_instance_restart.py on three Redis instances, tests/cql3/test_node_faults.py
on the whole tier): direct conversations placed one per commit-bucket instance, a group
whose commit bucket is on the instance to be killed, `Sender`s retrying under one
client_message_id and `Puller`s on their own cursors (tests/e2e/instancetraffic.py), and
the checks after: every ACKed message to every recipient once and in order on the running
cursors and on a pull from 0, no cursor back, `qimctl audit dispatch` at zero.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Callable

from qim._core import ids
from qim.proto.v1 import message_pb2
from qim.protocol import Opcode
from qim.stores.redis.keys import CommitKeys
from tests.e2e.chaos import delivered_once, run_audit
from tests.e2e.instancetraffic import Puller, Sender
from tests.e2e.rawclient import RawClient, call
from tests.e2e.sessionclient import entry_when
from tests.e2e.test_groups import create

TENANT = 0  # the development tokens' tenant
AUDIT_ZEROS = "committed_without_dispatch=0 dispatch_without_commit=0 coordinate_mismatch=0 wrong_partition=0"


def pairs_of(layout) -> list[tuple[int, int]]:
    """(sender, receiver) per instance k: the direct conversation's commit bucket on core
    instance k and the receiver's MailboxShard on mailbox instance k."""
    out = {}
    while len(out) < len(layout.core):
        a, b = random.getrandbits(40) + 1, random.getrandbits(40) + 1
        k = layout.core_index(CommitKeys(TENANT, ids.conversation_id_direct(TENANT, a, b)).bucket)
        if k not in out and layout.mailbox[layout.mailbox_index(layout.user_shard(TENANT, b))] == layout.core[k]:
            out[k] = (a, b)
    return [out[k] for k in sorted(out)]


def group_of(layout, killed: str) -> tuple[int, list[int]]:
    """A group id whose commit bucket is on the killed instance, and three members (the
    sender first) whose MailboxShards are on the three mailbox instances."""
    while True:
        gid = random.getrandbits(40) + 1
        if layout.core[layout.core_index(CommitKeys(TENANT, ids.conversation_id_group(TENANT, gid)).bucket)] == killed:
            break
    found: dict[int, int] = {}
    while len(found) < 3:
        u = random.getrandbits(40) + 1
        found.setdefault(layout.mailbox_index(layout.user_shard(TENANT, u)), u)
    return gid, [found[i] for i in sorted(found)]


def direct_to(peer: int):
    async def build(client: RawClient, body: bytes, cmid: bytes):
        return await client.send_text(peer, body, cmid=cmid)
    return build


def to_group(gid: int):
    async def build(client: RawClient, body: bytes, cmid: bytes):
        return await call(client, Opcode.SEND_MESSAGE, message_pb2.SendMessage(
            client_message_id=cmid, conversation_id=ids.conversation_id_group(TENANT, gid), message_type=1, body=body))
    return build


async def until(cond, what: str, timeout: float) -> None:
    """Poll `cond()` every 0.3 s; AssertionError naming `what` after `timeout` s."""
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, f"{what}: not within {timeout} s"
        await asyncio.sleep(0.3)


def check_served(puller: Puller, sender: Sender) -> None:
    """The entries of `sender`'s conversation served to `puller`: its ACKed messages,
    each once, in conversation order, with the ACK's coordinates."""
    prefix = sender.name.encode() + b" "
    got = [e for e in puller.texts() if e.body.startswith(prefix)]
    assert [e.body for e in got] == sender.order, (
        f"user {puller.user} from {sender.name}: served {len(got)}, ACKed {len(sender.order)}; "
        f"first difference at {next((i for i, (x, y) in enumerate(zip([e.body for e in got], sender.order)) if x != y), min(len(got), len(sender.order)))}")
    assert [(e.message_id, e.conversation_seq) for e in got] == [sender.acks[b] for b in sender.order]
    seqs = [e.conversation_seq for e in got]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


class Crowd:
    """The senders and pullers of one gate run on `layout` with `killed` (an instance
    address) to be killed: `senders` (d0.., then "g"), `pullers` user -> Puller,
    `final` (puller, sender) per recipient, `tasks` once `start`ed."""

    def __init__(self, st, layout, killed: str) -> None:
        self.st = st
        self.pairs = pairs_of(layout)
        self.gid, self.members = group_of(layout, killed)
        self.senders = [Sender(st, a, f"d{k}", direct_to(b), conv=ids.conversation_id_direct(TENANT, a, b))
                        for k, (a, b) in enumerate(self.pairs)]
        self.gsender = Sender(st, self.members[0], "g", to_group(self.gid),
                              conv=ids.conversation_id_group(TENANT, self.gid))
        self.senders.append(self.gsender)
        self.pullers = {b: Puller(st, b) for _, b in self.pairs}
        self.pullers.update({m: Puller(st, m) for m in self.members[1:]})
        self.final = [(self.pullers[b], s) for (_, b), s in zip(self.pairs, self.senders)]
        self.final += [(self.pullers[m], self.gsender) for m in self.members[1:]]
        self.stop = asyncio.Event()
        self.tasks: list = []

    async def start(self, send_deadline_s: float) -> None:
        """Create the group, then run every sender and puller as a task."""
        creator = await RawClient.login(self.st, self.members[0])
        try:
            op, reply = await create(creator, self.gid, self.members[1:])
            assert op == Opcode.GROUP_OK, reply
        finally:
            await creator.close()
        loop = asyncio.get_running_loop()
        self.tasks = [loop.create_task(s.run(self.stop, send_deadline_s)) for s in self.senders]
        self.tasks += [loop.create_task(p.run(self.stop)) for p in self.pullers.values()]

    def acked(self, n: int) -> bool:
        """Every sender has `n` ACKed messages; a failed task raises its own error."""
        for t in self.tasks:
            if t.done():
                t.result()
        return all(len(s.order) >= n for s in self.senders)

    async def more(self, n: int, what: str, timeout: float) -> None:
        """Wait until every sender ACKed `n` more messages than now."""
        mark = {s.name: len(s.order) for s in self.senders}
        await until(lambda: all(len(s.order) >= mark[s.name] + n for s in self.senders) and self.acked(0),
                    what, timeout)

    async def finish(self) -> None:
        """Stop the traffic (the message under way is finished first); AssertionError
        listing any sender or puller that failed."""
        self.stop.set()
        done = await asyncio.gather(*self.tasks, return_exceptions=True)
        failures = [d for d in done if isinstance(d, BaseException)]
        assert not failures, failures

    async def check_delivered(self, heal_s: float) -> None:
        """Every ACKed message to every recipient once and in order on the running cursors
        (no cursor back) and on a pull from 0; `qimctl audit dispatch` at zero."""
        await served_all(self.st, self.final, heal_s, cursors_forward)
        await audit_at_zero(self.st)


def cursors_forward(puller: Puller, sender: Sender) -> None:
    """`puller`'s cursor never went back (a check for served_all)."""
    assert puller.cursors == sorted(puller.cursors), f"user {puller.user}'s cursor went back"


async def served_all(st, final, heal_s: float, also: Callable[[Puller, Sender], None]) -> None:
    """For each (puller, sender) of `final`: pull until the puller was served every
    message the sender ACKed (or `heal_s` s passed), close it, check_served and
    `also(puller, sender)`; then every ACKed message delivered once on a pull from 0."""
    for p, s in final:
        end = time.monotonic() + heal_s
        while len([e for e in p.texts() if e.body.startswith(s.name.encode() + b" ")]) < len(s.order) \
                and time.monotonic() < end:
            await p.pull_once()
            await asyncio.sleep(0.5)
        await p.close()
        check_served(p, s)
        also(p, s)
    for p, s in final:
        await delivered_once(st, p.user, list(s.order), timeout=heal_s)


async def audit_at_zero(st) -> None:
    """`qimctl audit dispatch` exits 0 with every count at zero."""
    audit = await asyncio.to_thread(run_audit, st)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert AUDIT_ZEROS in audit.stdout, audit.stdout


async def healthy_again(st, pids: dict, heal_s: float) -> None:
    """Every service answers /healthz 200 within `heal_s` s, with the same processes as
    `pids` (nobody restarted one)."""
    end = time.monotonic() + heal_s
    while (sick := {n: h for n in st.names if (h := st.healthz(n))[0] != 200}):
        assert time.monotonic() < end, f"not healthy again within {heal_s} s: {sick}"
        await asyncio.sleep(1.0)
    assert dict(st.pids) == pids and all(st.alive(n) for n in st.names)


async def lists_exact(st, final, heal_s: float) -> None:
    """A new device of each recipient of `final` is listed the sender's conversation with
    its last ACKed message and an exact unread count (the session nodes)."""
    for p, s in final:
        c = await RawClient.login(st, p.user, device=9)
        try:
            last = s.acks[s.order[-1]]
            await entry_when(c, s.conv, lambda e, s=s, last=last: e.unread_exact and e.unread == len(s.order)
                             and e.last_message.conversation_seq == last[1], timeout=heal_s)
        finally:
            await c.close()
