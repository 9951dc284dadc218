"""The client-view check of the load generator: what each app was told against what the
senders intended ("a client's view is checked by code that does not share the
code under test").

`Intent` is kept by the load generator when it sends (conversation, sender, submission
order, SHA-256 of the body, the ACK). `AppView` records what one device's app is told
through the public surface only: the MessagesAdded / MessagesUpdated / MessagesRemoved
events its ClientRuntime emits (via `on_event`), in the order they come. Nothing here
reads the SDK's LocalStore or reuses its ordering or dedup code.

`judge()` compares them:
  delivered     every device that must be told the message was told it with the same
                body digest and length, sender, conversation, conversation_seq and type
  corrupt       some device was told the message, or a later update of it, with
                anything of that different (an empty or cut body, another state), or a
                recalled message is not shown recalled in the end (a recalled message
                may be told whole first, then updated to RECALLED without a body)
  lost          not corrupt, and some device that must be told it never was, or was
                told to remove it
  duplicated    a message told twice to one device, or told although never sent (a
                CONTROL message or a send whose outcome is unknown excepted)
  out_of_order  per device and conversation, a message told after one with a higher or
                equal conversation_seq; per sender and conversation, an ACK whose
                conversation_seq is not above the previous submission's
Own messages are checked when the app is told them but are not required.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Optional

from qim.cli.bodies import digest
from qim.consts import MESSAGE_TYPE_CONTROL

MESSAGE_STATE_NORMAL = 0   # message.proto MessageState
MESSAGE_STATE_RECALLED = 1


@dataclass
class Intent:
    """One message the load generator submitted. `recipients`: users whose devices must be
    told it. `message_id`/`conversation_seq` come from the ACK (None until acknowledged)."""

    conversation_id: bytes
    sender: int
    order: int               # submission order of this sender in this conversation
    digest: bytes
    size: int
    message_type: int
    custom_type: bytes
    recipients: frozenset
    message_id: Optional[bytes] = None
    conversation_seq: int = 0
    recalled: bool = False   # the sender recalled it: the app ends showing it recalled, without body


@dataclass(frozen=True)
class Told:
    """One message as an app was told it (bodies are kept only as digest and length)."""

    message_id: bytes
    conversation_id: bytes
    conversation_seq: int
    sender: int
    digest: bytes
    size: int
    message_type: int
    custom_type: bytes
    state: int


def _told(m) -> Told:
    return Told(bytes(m.message_id), bytes(m.conversation_id), m.conversation_seq, m.sender_id, digest(m.body),
                len(m.body), m.message_type, bytes(m.custom_type), getattr(m, "state", MESSAGE_STATE_NORMAL))


class AppView:
    """What one device's app was told, in order. Pass `on_event` to the ClientRuntime.

    MessagesAdded rows go to `told`; MessagesUpdated rows (a state or body change of a
    message already told) to `updated`; MessagesRemoved ids to `removed`. Events are
    recognised by class name, so the view works with any SDK version's event set."""

    def __init__(self, user: int, label: str) -> None:
        self.user, self.label = user, label
        self.told: list[Told] = []
        self.updated: list[Told] = []
        self.removed: set[bytes] = set()
        self.seen: set[bytes] = set()

    def on_event(self, event) -> None:
        """ClientRuntime on_event hook."""
        kind = type(event).__name__
        if kind == "MessagesAdded":
            for m in event.messages:
                self.told.append(_told(m))
                self.seen.add(bytes(m.message_id))
        elif kind == "MessagesUpdated":
            self.updated.extend(_told(m) for m in event.messages)
        elif kind == "MessagesRemoved":
            self.removed.update(bytes(x) for x in event.message_ids)

    def has_all(self, message_ids: Iterable[bytes], recalled: Iterable[bytes] = ()) -> bool:
        """Told every id, and shown each of `recalled` as recalled."""
        return all(mid in self.seen for mid in message_ids) and all(
            self.final_state(mid) == MESSAGE_STATE_RECALLED for mid in recalled)

    def final_state(self, message_id: bytes) -> Optional[int]:
        """The state the app shows now: its last update, else how it was told (None: never told)."""
        for t in reversed(self.updated):
            if t.message_id == message_id:
                return t.state
        return next((t.state for t in self.told if t.message_id == message_id), None)


@dataclass
class Verdict:
    """The counts of `judge()` (see module docstring); delivered + lost + corrupt = acknowledged messages."""

    delivered: int = 0
    lost: int = 0
    duplicated: int = 0
    out_of_order: int = 0
    corrupt: int = 0
    notes: list = field(default_factory=list)  # human-readable findings (no bodies)


def mismatch(i: Intent, t: Told) -> Optional[str]:
    """What differs between the intent and a telling (None: nothing). A recalled intent
    may be told whole and normal or recalled without a body."""
    body: tuple[tuple[str, object, object], ...] = (
        ("size", i.size, t.size), ("digest", i.digest, t.digest), ("state", MESSAGE_STATE_NORMAL, t.state))
    if i.recalled and t.state == MESSAGE_STATE_RECALLED:
        body = (("size", 0, t.size),)
    for name, want, got in (*body, ("sender", i.sender, t.sender),
                            ("conversation", i.conversation_id, t.conversation_id),
                            ("conversation_seq", i.conversation_seq, t.conversation_seq),
                            ("message_type", i.message_type, t.message_type),
                            ("custom_type", i.custom_type, t.custom_type)):
        if want != got:
            shown = (f"{want.hex()[:12]} vs {got.hex()[:12]}" if isinstance(want, bytes) and isinstance(got, bytes)
                     else f"{want!r} vs {got!r}" if isinstance(want, bytes) else f"{want} vs {got}")
            return f"{name} {shown}"
    return None


def ack_order(intents: list[Intent]) -> int:
    """ACKs per (sender, conversation) whose conversation_seq is not above the previous submission's."""
    by_key = defaultdict(list)
    for i in intents:
        if i.message_id is not None:
            by_key[(i.sender, i.conversation_id)].append((i.order, i.conversation_seq))
    return sum(1 for seqs in by_key.values() for (_, a), (_, b) in zip(sorted(seqs), sorted(seqs)[1:]) if b <= a)


def _acked_id(i: Intent) -> bytes:
    """The message_id of an acknowledged intent (judge() looks only at those)."""
    if i.message_id is None:
        raise ValueError("intent was not acknowledged")
    return i.message_id


def judge(intents: list[Intent], views: list[AppView], unknown_ok: Iterable[tuple[bytes, int, bytes]] = ()) -> Verdict:
    """The verdict of one conversation set (see module docstring). `unknown_ok`:
    (conversation, sender, digest) of sends whose outcome is unknown (no ACK): told or
    not, they count nowhere."""
    v = Verdict()
    acked = [i for i in intents if i.message_id is not None]
    by_id = {_acked_id(i): i for i in acked}
    maybe = set(unknown_ok)
    state: dict[bytes, str] = {_acked_id(i): "delivered" for i in acked}
    for view in views:
        first: dict[bytes, Told] = {}
        last_seq: dict[bytes, int] = {}
        for t in view.told:
            if t.message_id in first:
                v.duplicated += 1
                v.notes.append(f"{view.label}: seq {t.conversation_seq} told twice")
                continue
            first[t.message_id] = t
            if t.conversation_seq <= last_seq.get(t.conversation_id, 0):
                v.out_of_order += 1
                v.notes.append(f"{view.label}: seq {t.conversation_seq} told after seq {last_seq[t.conversation_id]}")
            last_seq[t.conversation_id] = max(last_seq.get(t.conversation_id, 0), t.conversation_seq)
            i = by_id.get(t.message_id)
            if i is None:
                if t.message_type != MESSAGE_TYPE_CONTROL and (t.conversation_id, t.sender, t.digest) not in maybe:
                    v.duplicated += 1
                    v.notes.append(f"{view.label}: told seq {t.conversation_seq} that nobody sent")
                continue
            bad = mismatch(i, t)
            if bad is not None:
                state[_acked_id(i)] = "corrupt"
                v.notes.append(f"{view.label}: seq {i.conversation_seq} ({i.size} B) told with {bad}")
        for t in view.updated:  # a later change must still show what was sent
            i = by_id.get(t.message_id)
            bad = mismatch(i, t) if i is not None else None
            if i is not None and bad is not None:
                state[_acked_id(i)] = "corrupt"
                v.notes.append(f"{view.label}: seq {i.conversation_seq} ({i.size} B) updated to {bad}")
        for i in acked:
            mid = _acked_id(i)
            if view.user not in i.recipients or state[mid] != "delivered":
                continue
            if mid not in first or mid in view.removed:
                state[mid] = "lost"
                what = "removed" if mid in first else "never told"
                v.notes.append(f"{view.label}: seq {i.conversation_seq} ({i.size} B) {what}")
            elif i.recalled and view.final_state(mid) != MESSAGE_STATE_RECALLED:
                state[mid] = "corrupt"
                v.notes.append(f"{view.label}: seq {i.conversation_seq} still shown as sent after its recall")
    v.out_of_order += ack_order(intents)
    for s in state.values():
        setattr(v, s, getattr(v, s) + 1)
    return v


def expected_unread(intents: list[Intent], user: int, conversation_id: bytes, read_seq: int = 0) -> int:
    """The single unread definition (docs/design.md §6) over what was sent: messages of others
    above max(read_seq, the user's own last send), CONTROL, recalled and unknown outcomes
    left out."""
    mine = [i.conversation_seq for i in intents
            if i.conversation_id == conversation_id and i.sender == user and i.message_id is not None]
    base = max([read_seq, *mine])
    return sum(1 for i in intents if i.conversation_id == conversation_id and i.message_id is not None
               and i.sender != user and i.message_type != MESSAGE_TYPE_CONTROL and not i.recalled
               and i.conversation_seq > base)
