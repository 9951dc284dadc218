"""What every replayed conversation does, direct or group (qim/cli/replay.py,
qim/cli/replay_group.py): send the turns, let the apps catch up, check what each app was
told (qim/cli/verify.py), check unread, then MARK_READ on a second device.

A dialogue's items are its corpus lines (UTF-8 TEXT) with binary turns inserted
(CUSTOM bodies of qim/cli/bodies.py at the threshold sizes and the large-body mix).
Unread (docs/design.md §6) is checked on every member's session list against the
load generator's own record of what was sent: messages of others above the user's last
own send. A user given a second device (`second_device`) then marks the conversation
read on that device and the first device's list must show unread 0. A dialogue with
`recall` has its first speaker recall its first message after the last turn: the
other members' apps must end up showing it recalled (MessagesUpdated, or told recalled
when it arrives after the recall) and it no longer counts as unread.
"""

from __future__ import annotations

import asyncio
import sys
import time
from dataclasses import dataclass
from typing import Optional

from qim.cli.bodies import BLOB_CUSTOM_TYPE, BLOB_MESSAGE_TYPE, Blob, body_bytes, digest
from qim.cli.replay_common import EXPECTED_REFUSAL, Device, Tally, close_devices, mark_read, unread_settles
from qim.cli.verify import Intent, expected_unread, judge
from qim.consts import MAX_MESSAGE_BODY, MESSAGE_TYPE_TEXT
from qim.errors import ErrorCode, QimError
from qim.sdk import SendAck, ServerError
from qim.sdk.requests import recall


@dataclass(frozen=True)
class Item:
    """One turn to send: a corpus line or a binary body."""

    body: bytes
    message_type: int
    custom_type: bytes


def items_of(turns: list[str], blobs: list[Blob], seed: bytes) -> list[Item]:
    """Corpus lines with the binary turns inserted at their positions (bodies from `seed`)."""
    out: list[Item] = []
    pending = sorted(blobs, key=lambda b: b.position)
    for pos in range(len(turns) + 1):
        while pending and pending[0].position <= pos:
            blob = pending.pop(0)
            out.append(Item(body_bytes(seed + len(out).to_bytes(4, "big"), blob.size), BLOB_MESSAGE_TYPE,
                            BLOB_CUSTOM_TYPE))
        if pos < len(turns):
            out.append(Item(turns[pos].encode("utf-8"), MESSAGE_TYPE_TEXT, b""))
    return out


def refused_locally(exc: BaseException) -> bool:
    """PAYLOAD_TOO_LARGE raised by the SDK itself: an ERROR frame of the server carries the
    request opcode, a local refusal does not."""
    return getattr(exc, "code", None) == ErrorCode.PAYLOAD_TOO_LARGE and not getattr(exc, "request_opcode", 0)


def reason_of(exc: BaseException) -> str:
    """'ExceptionClass CODE' for the not-sent and harness reasons."""
    code = getattr(exc, "code", None)
    return f"{exc.__class__.__name__}" + (f" {code.name}" if isinstance(code, ErrorCode) else "")


class DialogueBase:
    """One conversation of the replay. Subclasses set `mode`, `conv`, `members`, `peer_of`
    and implement `setup()`, `sender_of(i)` and `send_item()`."""

    mode = "?"

    def __init__(self, index: int, items: list[Item], cfg, base_dir: str, second_device: Optional[int],
                 recall: bool) -> None:
        self.index, self.items, self.cfg, self.base_dir = index, items, cfg, base_dir
        self.second_user, self.recall = second_device, recall
        self.devices: dict[int, Device] = {}
        self.extra: list[Device] = []
        self.intents: list[Intent] = []
        self.unknown: list[tuple[bytes, int, bytes]] = []  # sends without an outcome
        self.harness: list[str] = []  # what this dialogue could not exercise as planned
        self.read_marks: dict[int, int] = {}  # user -> seq of its own CONTROL sends (a recall marks read too)
        self.conv = b""
        self.members: tuple[int, ...] = ()

    def open_devices(self) -> None:
        """The first device (LocalStore, runtime, app view) of every member."""
        for user in self.members:
            self.devices[user] = Device(self.cfg, self.base_dir, user, "d1")

    def peer_of(self, user: int) -> int:
        """The peer named in MARK_READ / RECALL of a direct conversation (0: a group)."""
        return 0

    def note(self, text: str) -> None:
        """One diagnostic line on stderr naming this dialogue."""
        print(f"dialogue {self.index} ({self.mode}): {text}", file=sys.stderr)

    async def run(self) -> Tally:
        """Setup, send every item, (recall,) check every app, close; returns the Tally."""
        t = Tally(conversations=1, by_mode={self.mode: 1})
        sent, stage = 0, "setup"
        try:
            self.open_devices()
            await self.setup()
            stage = "send"
            for sent, item in enumerate(self.items):
                await self.submit(t, self.sender_of(sent), item)
            sent = len(self.items)
            if self.recall:
                await self.recall_first_message(t)
        except Exception as exc:  # one broken dialogue must not hide the others' results
            self.note(f"stopped sending: {exc.__class__.__name__}: {exc}")
            t.skip(f"{stage} failed: {reason_of(exc)}", len(self.items) - sent)
        try:
            await self.check_views_and_unread(t)
        except Exception as exc:
            self.note(f"check failed: {exc.__class__.__name__}: {exc}")
        finally:
            await close_devices([*self.devices.values(), *self.extra], t)
        v = judge(self.intents, [d.view for d in (*self.devices.values(), *self.extra)], self.unknown)
        for line in v.notes[:5]:
            self.note(line)
        for problem in self.harness:
            self.note(problem)
            t.harness[problem] = t.harness.get(problem, 0) + 1
        t.messages += sum(1 for i in self.intents if i.message_id is not None)
        t.add_verdict(v)
        return t

    async def submit(self, t: Tally, sender: int, item: Item) -> None:
        """Send one item and record the intent; refusals and unknown outcomes are counted
        as not sent (an over-limit body must be refused locally, anything else is a fault)."""
        order = sum(1 for i in self.intents if i.sender == sender)
        intent = Intent(self.conv, sender, order, digest(item.body), len(item.body), item.message_type,
                        item.custom_type, frozenset(u for u in self.members if u != sender))
        over = len(item.body) > MAX_MESSAGE_BODY
        try:
            ack: SendAck = await self.send_item(sender, item, over)
        except QimError as exc:
            if over:
                t.skip(EXPECTED_REFUSAL if refused_locally(exc) else f"over-limit body: {reason_of(exc)}")
                return
            if not isinstance(exc, ServerError):  # no answer: it may still commit and be told
                self.unknown.append((self.conv, sender, intent.digest))
            raise
        if over:
            t.skip("over-limit body ACCEPTED (expected PAYLOAD_TOO_LARGE)")
            self.unknown.append((self.conv, sender, intent.digest))
            return
        intent.message_id, intent.conversation_seq = ack.message_id, ack.conversation_seq
        self.intents.append(intent)

    async def recall_first_message(self, t: Tally) -> None:
        """The first speaker recalls its first message (through the SDK's recall); every
        other member's app must end up showing it recalled, without its body."""
        first = self.members[0]
        target = next((i for i in self.intents if i.sender == first), None)
        if target is None or target.message_id is None:  # intents are appended once acked
            return
        rt = self.devices[first].rt
        try:
            await rt.connect()  # offline mode: the sender is connected only while it acts
            ok = await recall(rt, self.conv, target.message_id, self.peer_of(first))
        except QimError as exc:
            self.harness.append(f"recall failed: {reason_of(exc)}")
            return
        finally:
            if self.mode == "offline":
                await rt.close()
        target.recalled = True
        t.recalled += 1
        # the recall is a CONTROL message of the first speaker: sending marks read up to it (docs/design.md §6)
        self.read_marks[first] = max(self.read_marks.get(first, 0), ok.control_conversation_seq)

    async def check_views_and_unread(self, t: Tally) -> None:
        """Every device catches up (bounded by --sync-timeout), then unread per member,
        then MARK_READ on the second device and unread 0 on the first. A check that
        cannot be made counts as unread_wrong (never as passed)."""
        deadline = time.monotonic() + self.cfg.sync_timeout
        acked = [i for i in self.intents if i.message_id is not None]

        async def catch_up(user: int, dev: Device) -> None:
            try:
                mine = [i for i in acked if user in i.recipients]
                ids = [i.message_id for i in mine if i.message_id is not None]  # acked: all of them
                if not await dev.wait_told(ids, deadline, [i.message_id for i in mine
                                                           if i.recalled and i.message_id is not None]):
                    self.note(f"user {user}: not every message told within --sync-timeout")
            except Exception as exc:  # judge() counts what was not told as lost
                self.note(f"user {user}: catching up failed: {exc.__class__.__name__}: {exc}")

        await asyncio.gather(*(catch_up(u, d) for u, d in self.devices.items()))
        if not self.cfg.unread:
            return

        def want(u: int, read: int = 0) -> int:
            return expected_unread(self.intents, u, self.conv, max(read, self.read_marks.get(u, 0)))

        await asyncio.gather(*(self._expect_unread(t, d, want(u), deadline, f"user {u}: unread expected {want(u)}")
                               for u, d in self.devices.items()))
        if self.second_user is None or not acked:
            return
        user = self.second_user
        try:
            second = Device(self.cfg, self.base_dir, user, "d2")
            self.extra.append(second)
            mine = [i for i in acked if user in i.recipients]
            await second.wait_told([i.message_id for i in mine if i.message_id is not None], deadline,
                                   [i.message_id for i in mine if i.recalled and i.message_id is not None])
            top = max(i.conversation_seq for i in acked)
            position = await mark_read(second.rt, self.conv, top, self.peer_of(user))
        except Exception as exc:
            t.unread_wrong += 1
            self.note(f"user {user}: MARK_READ on a second device failed: {exc.__class__.__name__}: {exc}")
            return
        if want(user, position) != 0:
            t.unread_wrong += 1
            self.note(f"user {user}: MARK_READ {top} on a second device left the position at {position}")
        await self._expect_unread(t, self.devices[user], 0, deadline,
                                  f"user {user}: after MARK_READ on a second device, unread expected 0")

    async def _expect_unread(self, t: Tally, dev: Device, want: int, deadline: float, what: str) -> None:
        try:
            ok, seen = await unread_settles(dev.rt, self.conv, want, deadline)
        except Exception as exc:
            ok, seen = False, f"{exc.__class__.__name__}: {exc}"
        if not ok:
            t.unread_wrong += 1
            self.note(f"{what}, session list says {seen}")

    # --- subclass hooks -----------------------------------------------------------
    async def setup(self) -> None:
        """Subclass hook: connect the devices this dialogue starts with."""
        raise NotImplementedError

    def sender_of(self, i: int) -> int:
        """Subclass hook: who sends line `i`."""
        raise NotImplementedError

    async def send_item(self, sender: int, item: Item, over_limit: bool) -> SendAck:
        """Subclass hook: send one corpus line from `sender`; the SendAck."""
        raise NotImplementedError
