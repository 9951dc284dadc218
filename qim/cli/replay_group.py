"""Group dialogues of the replay (issue 6: "make demo also replays some dialogues as
small groups").

The two speakers of a dialogue and a silent listener form a fresh group (CREATE_GROUP by
the first speaker). Turns alternate between the speakers, each sent after the previous
ACK; the listener stays offline until the end and gets everything by the login pull.
A message counts as delivered when both other members hold a byte-identical body with
the right sender and conversation_seq; CONTROL messages (the group's CREATED event) are
not dialogue turns and are left out of the count.
"""

from __future__ import annotations

import sys
import time

from qim._core import ids
from qim.cli.replay_common import Tally, close_runtimes
from qim.consts import MESSAGE_TYPE_CONTROL
from qim.sdk import ClientRuntime, LocalStore
from qim.sdk.requests import create_group
from qim.services.gateway.auth import issue_dev_token

GROUP_EVERY = 5  # every 5th dialogue is replayed as a group


class GroupDialogue:
    """One dialogue in a 3-member group; `run()` returns its Tally."""

    def __init__(self, index: int, turns: list[str], users: tuple[int, int, int], group_id: int, cfg,
                 base_dir: str, tenant: int) -> None:
        self.index, self.turns, self.users, self.group_id, self.cfg = index, turns, users, group_id, cfg
        self.conv = ids.conversation_id_group(tenant, group_id)
        self.rts: dict[int, ClientRuntime] = {}
        for user in users:
            store = LocalStore.open(LocalStore.path_for(base_dir, cfg.gateway, tenant, user), tenant, user)
            token = issue_dev_token(cfg.token_secret.encode(), tenant, user, store.device_id)
            self.rts[user] = ClientRuntime(cfg.gateway, token, store, event_queue=False, send_timeout=cfg.send_timeout)
        self.sent: list[tuple[int, int, bytes, object]] = []  # (turn, sender, body, ack)

    async def run(self) -> Tally:
        t = Tally(conversations=1, messages=len(self.turns), by_mode={"group": 1})
        try:
            a, b, listener = self.users
            await self.rts[a].connect()
            await self.rts[b].connect()
            await create_group(self.rts[a], self.group_id, [b, listener])
            for i, text in enumerate(self.turns):
                sender = a if i % 2 == 0 else b
                ack = await self.rts[sender].send_message(self.conv, 0, text.encode("utf-8"))
                self.sent.append((i, sender, text.encode("utf-8"), ack))
            await self._sync()
            self._verify(t)
        except Exception as exc:  # one broken dialogue must not hide the others' results
            print(f"dialogue {self.index} (group) failed: {exc.__class__.__name__}: {exc}", file=sys.stderr)
            t.lost = t.messages - t.delivered
        finally:
            await close_runtimes(self.rts.values(), t)
        return t

    async def _sync(self) -> None:
        deadline = time.monotonic() + self.cfg.sync_timeout
        for user in self.users:
            rt = self.rts[user]
            await rt.connect()
            want = [ack.message_id for _, sender, _, ack in self.sent if sender != user]
            while True:
                await rt.pull_mailbox()
                missing = [m for m in want if not await rt.store.run(rt.store.has_message, m)]
                if not missing or time.monotonic() > deadline:
                    break

    def _verify(self, t) -> None:
        seqs = [ack.conversation_seq for *_, ack in self.sent]
        t.out_of_order += sum(1 for x, y in zip(seqs, seqs[1:]) if y <= x)
        rows_by_user = {u: {r.message_id: r for r in self.rts[u].store.messages(self.conv)
                            if r.sender_id != u and r.message_type != MESSAGE_TYPE_CONTROL} for u in self.users}
        for _, sender, body, ack in self.sent:
            ok = True
            for user in self.users:
                if user == sender:
                    continue
                r = rows_by_user[user].get(ack.message_id)
                ok &= (r is not None and r.body == body and r.sender_id == sender
                       and r.conversation_seq == ack.conversation_seq)
            t.delivered += ok
        wanted = {ack.message_id for *_, ack in self.sent}
        t.duplicated += sum(1 for rows in rows_by_user.values() for mid in rows if mid not in wanted)
        t.lost += t.messages - t.delivered
