"""Shared pieces of the replay: the tally, devices with their app views, the session-list
requests the unread check makes, and the runtime teardown."""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from qim.cli.gateways import failover_order, gateway_for
from qim.cli.verify import AppView, Verdict
from qim.proto.v1 import session_pb2
from qim.protocol import Opcode
from qim.sdk import ClientRuntime, LocalStore
from qim.sdk.faults import LinkFaults
from qim.wire.devtoken import issue_dev_token

TENANT = 0
COUNTS = ("conversations", "messages", "delivered", "lost", "duplicated", "out_of_order", "corrupt", "unread_wrong",
          "recalled")
EXPECTED_REFUSAL = "PAYLOAD_TOO_LARGE refused locally"  # the one reason a message may go unsent in a good run


@dataclass
class Tally:
    """Counters of one run (or one dialogue); `add` merges. `not_sent` counts messages
    never sent by reason (setup errors, refusals): they are not in `messages`."""

    conversations: int = 0
    messages: int = 0
    delivered: int = 0
    lost: int = 0
    duplicated: int = 0
    out_of_order: int = 0
    corrupt: int = 0
    unread_wrong: int = 0
    recalled: int = 0  # messages recalled by their sender (judged as shown recalled)
    not_sent: dict = field(default_factory=dict)
    harness: dict = field(default_factory=dict)  # what the run could not exercise (e.g. a cut that did not cut)
    by_mode: dict = field(default_factory=dict)
    sdk: dict = field(default_factory=dict)  # summed ClientRuntime.stats (reconnects, resends, ...)
    history: Any = None  # --history-check: qim.cli.replay_history.HistoryResult (docs/decisions/0023)

    def add(self, other: "Tally") -> None:
        """Add another dialogue's counts and notes into this one."""
        for name in COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for mine, theirs in ((self.not_sent, other.not_sent), (self.harness, other.harness),
                             (self.by_mode, other.by_mode), (self.sdk, other.sdk)):
            for key, n in theirs.items():
                mine[key] = mine.get(key, 0) + n

    def add_verdict(self, v: Verdict) -> None:
        """Add the counts of one conversation's client-view verdict."""
        for name in ("delivered", "lost", "duplicated", "out_of_order", "corrupt"):
            setattr(self, name, getattr(self, name) + getattr(v, name))

    def skip(self, reason: str, n: int = 1) -> None:
        """Count `n` messages that were never sent, and why."""
        self.not_sent[reason] = self.not_sent.get(reason, 0) + n

    @property
    def ok(self) -> bool:
        """Everything told whole, once, in order, unread right, nothing unsent but the
        intended over-limit refusals, and every mode exercised as planned."""
        return (self.delivered == self.messages and self.lost == self.duplicated == self.out_of_order == 0
                and self.corrupt == self.unread_wrong == 0 and set(self.not_sent) <= {EXPECTED_REFUSAL}
                and not self.harness and (self.history is None or self.history.mismatched == 0))

    def not_sent_line(self) -> str:
        """The first result line: the intended over-limit refusals (the SDK's size check
        at work, not a failure) apart from messages left unsent for any other reason,
        `replay: over_limit_refused=2 (as intended: ...) unsent=0`."""
        others = {k: n for k, n in sorted(self.not_sent.items()) if k != EXPECTED_REFUSAL}
        reasons = ", ".join(f"{k}: {n}" for k, n in others.items())
        return (f"replay: over_limit_refused={self.not_sent.get(EXPECTED_REFUSAL, 0)} (as intended: bodies above "
                f"the size limit, refused by the SDK before sending) unsent={sum(others.values())}"
                + (f" ({reasons})" if reasons else ""))

    def line(self) -> str:
        """The `replay: ...` verdict line (the last line `make demo` prints)."""
        return (f"replay: conversations={self.conversations} messages={self.messages} "
                f"delivered={self.delivered} lost={self.lost} duplicated={self.duplicated} "
                f"out_of_order={self.out_of_order} corrupt={self.corrupt} unread_wrong={self.unread_wrong}")


class Device:
    """One device of a user: its own LocalStore (under `base_dir/label`), ClientRuntime and AppView."""

    def __init__(self, cfg, base_dir: str, user: int, label: str) -> None:
        self.user, self.label = user, label
        self.view = AppView(user, f"user {user} {label}")
        # a user's devices may sit on different gateways (qim/cli/gateways.py)
        gateways = getattr(cfg, "gateways", None) or (cfg.gateway,)
        gateway = gateway_for(user, gateways, label)
        path = LocalStore.path_for(os.path.join(base_dir, label), gateway, TENANT, user)
        self.store = LocalStore.open(path, TENANT, user)
        device = self.store.device_id

        def fresh_token() -> str:  # a replay may outlive one token (KICKED{TOKEN_EXPIRED})
            return issue_dev_token(cfg.token_key, TENANT, user, device)

        self.faults = LinkFaults()  # a chaos harness: the cut-connection dialogues use it
        self.rt = ClientRuntime(failover_order(gateway, tuple(gateways)), fresh_token(), self.store, event_queue=False,
                                send_timeout=cfg.send_timeout, on_event=self.view.on_event, token_provider=fresh_token,
                                ssl_context=cfg.tls, plaintext=cfg.tls is None,  # cfg.tls: qim/cli/tlsopts.py
                                faults=self.faults)

    async def wait_told(self, message_ids: list[bytes], deadline: float, recalled: Sequence[bytes] = ()) -> bool:
        """Connect and pull until the app was told every id and shown each of `recalled`
        as recalled (the mailbox watermark may still be catching up), or until `deadline`
        (time.monotonic); True when complete."""
        await self.rt.connect()
        while True:
            if self.view.has_all(message_ids, recalled):
                return True
            if time.monotonic() > deadline:
                return False
            await self.rt.pull_mailbox()
            if not self.view.has_all(message_ids, recalled):
                await asyncio.sleep(0.1)


async def session_entry(rt: ClientRuntime, conversation_id: bytes):
    """The user's SessionEntry of `conversation_id` (all pages of PULL_SESSION_LIST through
    the runtime's request()), or None when the list does not hold it."""
    cursor = b""
    while True:
        _, body = await rt.request(Opcode.PULL_SESSION_LIST,
                                   session_pb2.PullSessionList(cursor=cursor, limit=200).SerializeToString())
        batch = session_pb2.SessionListBatch.FromString(body)
        for entry in batch.sessions:
            if entry.conversation_id == conversation_id:
                return entry
        if not batch.has_more or not batch.next_cursor:
            return None
        cursor = batch.next_cursor


async def mark_read(rt: ClientRuntime, conversation_id: bytes, seq: int, peer: int = 0) -> int:
    """MARK_READ through the runtime's request(); returns the absolute position after it."""
    _, body = await rt.request(Opcode.MARK_READ, session_pb2.MarkRead(
        conversation_id=conversation_id, read_conversation_seq=seq, peer_user_id=peer).SerializeToString())
    return session_pb2.MarkReadOk.FromString(body).read_conversation_seq


async def unread_settles(rt: ClientRuntime, conversation_id: bytes, want: int, deadline: float) -> tuple[bool, str]:
    """Poll the session list until the entry's unread equals `want` (the projection is
    asynchronous) or `deadline` passes; (matched, what was last seen)."""
    seen = "no entry"
    while True:
        entry = await session_entry(rt, conversation_id)
        if entry is not None:
            seen = f"unread={entry.unread} read_seq={entry.read_conversation_seq}"
            if entry.unread == want:
                return True, seen
        if time.monotonic() > deadline:
            return False, seen
        await asyncio.sleep(0.05)


async def close_devices(devices, t: Tally) -> None:
    """Add each runtime's stats to `t`, then close the runtime and its store."""
    for d in devices:
        for key, n in d.rt.stats.items():
            t.sdk[key] = t.sdk.get(key, 0) + n
        try:
            await d.rt.close()
        finally:
            d.store.close()
