"""The check of the loadgen's SDK lane (seed 000 "SDK 回归泳道").

The lane's clients are real `qim.sdk.Client`s; what they show is compared here with
what the lane sent, by code that shares none of the SDK's state machine, cursor or
dedup: only the SDK's public results are read (the MessagesAdded events in the order
told, the `messages()` listing of the LocalStore, `conversation().unread`).

`SdkView` is one client's view at the end of the run; `check_sdk()` judges every view
against the lane's `Intent`s (qim/cli/verify.py):
  told          verify.judge over the events: every message of the peer told once, with
                the body digest, size, sender, conversation and conversation_seq sent,
                per conversation in conversation_seq order; ACKs in submission order
  listed        the store's listing holds every acknowledged message of the
                conversation (both directions) once, in conversation_seq order, with the
                body sent
  unread        the listed unread equals the single definition over what was sent
                (verify.expected_unread; 200 and not exact past the window)
A failure of any kind counts in the lane's `failures` and in the loadgen's verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from qim.cli.bodies import digest
from qim.cli.verify import AppView, Intent, expected_unread, judge
from qim.consts import MESSAGE_TYPE_CONTROL

UNREAD_WINDOW = 200  # the server's exact-unread window (docs/design.md §6): above it 200, not exact


@dataclass(frozen=True)
class Listed:
    """One row of the store's listing as the checker keeps it (no body, its digest)."""

    message_id: bytes
    conversation_seq: int
    sender: int
    digest: bytes
    size: int
    message_type: int


@dataclass
class SdkView:
    """What one lane client shows at the end: events told (`told`), its listing of the
    lane conversation (`listed`, in the order `messages()` returned) and that
    conversation's unread count."""

    user: int
    conversation_id: bytes
    told: AppView
    listed: list = field(default_factory=list)      # [Listed]
    unread: int = 0
    unread_exact: bool = True
    read_seq: int = 0


@dataclass
class SdkVerdict:
    """Counts of the lane check; `failures` = everything that is not delivered."""

    clients: int = 0
    acked: int = 0
    delivered: int = 0
    lost: int = 0
    duplicated: int = 0
    out_of_order: int = 0
    corrupt: int = 0
    listing_errors: int = 0
    unread_errors: int = 0
    send_failures: int = 0
    checked: bool = False
    notes: list = field(default_factory=list)
    clients_seen: list = field(default_factory=list)  # a failed lane: one line per client (SdkLane.describe)

    @property
    def failures(self) -> int:
        """Every finding of the check (0: the SDK lane passed)."""
        return (self.lost + self.duplicated + self.out_of_order + self.corrupt + self.listing_errors
                + self.unread_errors + self.send_failures)

    def line(self) -> str:
        """`sdk_lane: clients=… acked=… delivered=… … failures=…` (one line)."""
        return (f"sdk_lane: clients={self.clients} acked={self.acked} delivered={self.delivered} "
                f"lost={self.lost} duplicated={self.duplicated} out_of_order={self.out_of_order} "
                f"corrupt={self.corrupt} listing_errors={self.listing_errors} "
                f"unread_errors={self.unread_errors} send_failures={self.send_failures} failures={self.failures}")


def listed_row(m) -> Listed:
    """A `qim.sdk.StoredMessage` as the checker keeps it."""
    return Listed(bytes(m.message_id), m.conversation_seq, m.sender_id, digest(m.body), len(m.body), m.message_type)


def check_listing(intents: list[Intent], view: SdkView) -> list[str]:
    """Findings of one listing: missing, extra, repeated, out of order or different rows."""
    want = {i.message_id: i for i in intents
            if i.message_id is not None and i.conversation_id == view.conversation_id}
    notes, seen, last = [], set(), 0
    for row in view.listed:
        if row.message_type == MESSAGE_TYPE_CONTROL:
            continue
        if row.message_id in seen:
            notes.append(f"user {view.user}: listed seq {row.conversation_seq} twice")
            continue
        seen.add(row.message_id)
        if row.conversation_seq <= last:
            notes.append(f"user {view.user}: listed seq {row.conversation_seq} after seq {last}")
        last = max(last, row.conversation_seq)
        i = want.get(row.message_id)
        if i is None:
            notes.append(f"user {view.user}: listed seq {row.conversation_seq} that nobody sent")
        elif (row.digest, row.size, row.sender, row.conversation_seq) != (i.digest, i.size, i.sender,
                                                                          i.conversation_seq):
            notes.append(f"user {view.user}: listed seq {row.conversation_seq} differs from what was sent")
    missing = [i.conversation_seq for mid, i in want.items() if mid not in seen]
    if missing:
        notes.append(f"user {view.user}: {len(missing)} sent messages not listed (first seq {min(missing)})")
    return notes


def check_unread(intents: list[Intent], view: SdkView) -> list[str]:
    """Findings of one unread count against verify.expected_unread."""
    want = expected_unread(intents, view.user, view.conversation_id, view.read_seq)
    if want > UNREAD_WINDOW:
        ok = view.unread == UNREAD_WINDOW and not view.unread_exact
    else:
        ok = view.unread == want and view.unread_exact
    return [] if ok else [f"user {view.user}: unread {view.unread} (exact={view.unread_exact}), expected {want}"]


def check_sdk(intents: list[Intent], views: list[SdkView], send_failures: int = 0) -> SdkVerdict:
    """The lane verdict over every client's view (see module docstring)."""
    told = judge(intents, [v.told for v in views])
    v = SdkVerdict(clients=len(views), acked=sum(i.message_id is not None for i in intents),
                   delivered=told.delivered, lost=told.lost, duplicated=told.duplicated,
                   out_of_order=told.out_of_order, corrupt=told.corrupt, send_failures=send_failures,
                   checked=True, notes=list(told.notes))
    for view in views:
        listing = check_listing(intents, view)
        unread = check_unread(intents, view)
        v.listing_errors += len(listing)
        v.unread_errors += len(unread)
        v.notes += listing + unread
    return v
