"""The SDK lane's checker (qim/cli/loadgen_sdkcheck.py) on crafted views: it must find a
wrong body, a reordered pair and a wrong unread, and pass a faithful view."""

from __future__ import annotations

from types import SimpleNamespace

from qim.cli.bodies import digest
from qim.cli.loadgen_sdk import default_clients
from qim.cli.loadgen_sdkcheck import Listed, SdkView, check_sdk
from qim.cli.verify import AppView, Intent

A, B = 101, 202
CONV = b"\x01" * 16


def _intents() -> list[Intent]:
    """A sends 3 (seq 1, 2, 4), B sends 1 (seq 3): B's unread is A's seq 4 only."""
    out = []
    for order, (sender, seq) in enumerate([(A, 1), (A, 2), (B, 3), (A, 4)]):
        body = f"m{seq}".encode()
        out.append(Intent(CONV, sender, order, digest(body), len(body), 1, b"", frozenset({B if sender == A else A}),
                          message_id=bytes([seq]) * 16, conversation_seq=seq))
    return out


def _message(i: Intent, body: bytes = b""):
    body = body or f"m{i.conversation_seq}".encode()
    return SimpleNamespace(message_id=i.message_id, conversation_id=CONV, conversation_seq=i.conversation_seq,
                           sender_id=i.sender, body=body, message_type=1, custom_type=b"", state=0)


def _view(user: int, intents: list[Intent], order=None, bodies=None, unread=None) -> SdkView:
    app = AppView(user, f"user {user}")
    rows = [intents[k] for k in (order or range(len(intents)))]
    msgs = [_message(i, (bodies or {}).get(i.conversation_seq, b"")) for i in rows]
    app.on_event(_added(msgs))
    listed = [Listed(m.message_id, m.conversation_seq, m.sender_id, digest(m.body), len(m.body), 1)
              for m in sorted(msgs, key=lambda m: m.conversation_seq)]
    want_unread = {A: 0, B: 1}[user]
    return SdkView(user, CONV, app, listed, want_unread if unread is None else unread, True)


def _added(msgs):
    class MessagesAdded:  # recognised by class name, like the SDK's event
        messages = tuple(msgs)
    return MessagesAdded()


def test_a_faithful_view_passes() -> None:
    intents = _intents()
    v = check_sdk(intents, [_view(A, intents), _view(B, intents)])
    assert v.checked and v.failures == 0, v.notes
    assert v.delivered == 4 and v.acked == 4


def test_a_wrong_body_is_corrupt_in_events_and_listing() -> None:
    intents = _intents()
    v = check_sdk(intents, [_view(A, intents), _view(B, intents, bodies={2: b"m9"})])
    assert v.corrupt == 1 and v.listing_errors == 1 and v.failures == 2, v.notes


def test_a_reordered_pair_is_out_of_order() -> None:
    intents = _intents()
    v = check_sdk(intents, [_view(A, intents), _view(B, intents, order=[1, 0, 2, 3])])
    assert v.out_of_order == 1 and v.failures == 1, v.notes


def test_a_wrong_unread_is_found() -> None:
    intents = _intents()
    v = check_sdk(intents, [_view(A, intents), _view(B, intents, unread=2)])
    assert v.unread_errors == 1 and v.failures == 1, v.notes
    assert "unread 2" in " ".join(v.notes)


def test_a_missing_message_is_lost() -> None:
    intents = _intents()
    b = _view(B, intents, order=[0, 2, 3])  # A's seq 2 never told nor listed
    v = check_sdk(intents, [_view(A, intents), b])
    assert v.lost == 1 and v.listing_errors == 1, v.notes


def test_the_default_lane_is_five_percent_in_whole_pairs() -> None:
    assert default_clients(40) == 2 and default_clients(200) == 10 and default_clients(8) == 2
