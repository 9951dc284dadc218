"""LocalStore: ordinals, atomic batch + cursor, pending resolution, idempotency (docs/design.md §9)."""

from __future__ import annotations

import sqlite3

import pytest

from qim._core import ids
from qim.proto.v1 import mailbox_pb2, message_pb2
from qim.sdk import store as store_mod
from qim.sdk.store import ACKED, COMMITTED, PENDING, LocalStore, Resolved, StoreError

TENANT, ME, PEER = 7, 1001, 2002
RECALLED, DELETED = message_pb2.MESSAGE_STATE_RECALLED, message_pb2.MESSAGE_STATE_DELETED
CONV = ids.conversation_id_direct(TENANT, ME, PEER)


def entry(seq: int, n: int, sender: int = PEER, cmid: bytes = b"", body: bytes | None = None,
          event_type: int = 1) -> mailbox_pb2.MailboxEntry:
    return mailbox_pb2.MailboxEntry(
        mailbox_seq=seq, event_type=event_type, message_id=n.to_bytes(16, "big"), conversation_id=CONV,
        conversation_seq=n, sender_id=sender, created_at_ms=1_700_000_000_000 + n, message_type=1,
        client_message_id=cmid, body=body if body is not None else f"body {n}".encode())


@pytest.fixture
def path(tmp_path):
    return LocalStore.path_for(str(tmp_path), "LocalHost:7000", TENANT, ME)


def test_path_is_stable_and_scoped(tmp_path, path):
    assert path == LocalStore.path_for(str(tmp_path), "localhost:7000", TENANT, ME)
    assert ids.endpoint_scope("localhost:7000") in path
    assert path != LocalStore.path_for(str(tmp_path), "localhost:7001", TENANT, ME)
    assert path != LocalStore.path_for(str(tmp_path), "localhost:7000", TENANT + 1, ME)
    assert path != LocalStore.path_for(str(tmp_path), "localhost:7000", TENANT, ME + 1)


def test_ordinals_survive_reopen_and_never_repeat(path):
    s = LocalStore.open(path, TENANT, ME)
    device = s.device_id
    first = [s.reserve_ordinal() for _ in range(store_mod.ORDINAL_BLOCK + 5)]  # crosses a block
    s.close()
    s = LocalStore.open(path, TENANT, ME)
    assert s.device_id == device  # device identity is durable
    second = [s.reserve_ordinal() for _ in range(10)]
    s.close()
    all_ = first + second
    assert len(set(all_)) == len(all_)
    assert min(second) > max(first)  # the unused rest of the crashed block is skipped
    assert first == list(range(len(first)))


def test_two_handles_on_one_file_never_share_an_ordinal(path):
    a = LocalStore.open(path, TENANT, ME)
    b = LocalStore.open(path, TENANT, ME)
    got = [a.reserve_ordinal() for _ in range(3)] + [b.reserve_ordinal() for _ in range(3)]
    got += [a.reserve_ordinal() for _ in range(store_mod.ORDINAL_BLOCK)]
    assert len(set(got)) == len(got)
    a.close()
    b.close()


def test_cmid_derivation_and_pending_row_persist(path):
    s = LocalStore.open(path, TENANT, ME)
    nonce = s.store_nonce
    row = s.add_pending(CONV, PEER, 1, b"", b"hello")
    assert len(nonce) == 16 and any(nonce)
    assert row.client_message_id == ids.client_message_id(nonce, s.device_id, row.ordinal)
    s.close()
    s = LocalStore.open(path, TENANT, ME)
    assert s.store_nonce != nonce  # drawn at every open (decision 0081): a restored copy never reissues a cmid
    (again,) = s.pending_sends()
    assert again == row and again.state == PENDING  # a stored row keeps its cmid: a cmid never changes meaning
    assert s.add_pending(CONV, PEER, 1, b"", b"x").client_message_id != row.client_message_id
    s.close()


def test_a_new_store_with_a_reused_device_id_never_repeats_a_cmid(tmp_path):
    old = LocalStore.open(str(tmp_path / "old.sqlite3"), TENANT, ME, device_id=77)
    new = LocalStore.open(str(tmp_path / "new.sqlite3"), TENANT, ME, device_id=77)  # reinstall, empty store
    a = [old.add_pending(CONV, PEER, 1, b"", b"same text") for _ in range(3)]
    b = [new.add_pending(CONV, PEER, 1, b"", b"same text") for _ in range(3)]
    assert [r.ordinal for r in a] == [r.ordinal for r in b] == [0, 1, 2]
    assert not {r.client_message_id for r in a} & {r.client_message_id for r in b}


def test_identity_mismatch_refused(path):
    LocalStore.open(path, TENANT, ME, device_id=55).close()
    with pytest.raises(StoreError):
        LocalStore.open(path, TENANT, ME + 1)
    with pytest.raises(StoreError):
        LocalStore.open(path, TENANT, ME, device_id=56)
    assert LocalStore.open(path, TENANT, ME).device_id == 55


def test_batch_and_cursor_commit_together(path):
    s = LocalStore.open(path, TENANT, ME)
    r = s.apply_mailbox_batch([entry(10, 1), entry(11, 2)], 11, 3, 1)
    assert [m.conversation_seq for m in r.inserted] == [1, 2]
    s.close()
    s = LocalStore.open(path, TENANT, ME)
    assert s.cursor() == (3, 1, 11)
    assert [(m.conversation_seq, m.body) for m in s.messages(CONV)] == [(1, b"body 1"), (2, b"body 2")]


def test_failure_mid_apply_changes_nothing(path):
    s = LocalStore.open(path, TENANT, ME)
    s.apply_mailbox_batch([entry(10, 1)], 10, 3, 1)
    mine = s.add_pending(CONV, PEER, 1, b"", b"mine")
    bad = entry(13, 4)
    bad.message_id = b"\x01" * 15  # violates the 16-byte CHECK after two good rows went in
    batch = [entry(11, 2), entry(12, 3, sender=ME, cmid=mine.client_message_id), bad]
    with pytest.raises(StoreError):
        s.apply_mailbox_batch(batch, 13, 3, 1)
    assert s.cursor() == (3, 1, 10)
    assert [m.conversation_seq for m in s.messages()] == [1]
    assert s.pending_state(mine.client_message_id) == PENDING


def test_failure_writing_cursor_rolls_back_messages(path, monkeypatch):
    s = LocalStore.open(path, TENANT, ME)

    def boom(*_a):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(s, "_write_cursor", boom)
    with pytest.raises(StoreError):
        s.apply_mailbox_batch([entry(10, 1), entry(11, 2)], 11, 3, 1)
    monkeypatch.undo()
    s.close()
    s = LocalStore.open(path, TENANT, ME)
    assert s.cursor() is None and s.messages() == []
    # the replayed batch goes in whole afterwards
    assert len(s.apply_mailbox_batch([entry(10, 1), entry(11, 2)], 11, 3, 1).inserted) == 2


def test_reapply_is_idempotent(path):
    s = LocalStore.open(path, TENANT, ME)
    assert not hasattr(s, "apply_push")  # a push never reaches the store (it may carry references only)
    r = s.apply_mailbox_batch([entry(10, 1), entry(11, 2)], 11, 3, 1)
    assert [m.conversation_seq for m in r.inserted] == [1, 2]
    r = s.apply_mailbox_batch([entry(10, 1), entry(11, 2)], 11, 3, 1)
    assert r.inserted == r.updated == [] and len(s.messages()) == 2 and s.cursor() == (3, 1, 11)


def test_inserted_messages_are_told_per_conversation_in_seq_order(path):
    s = LocalStore.open(path, TENANT, ME)
    other = ids.conversation_id_direct(TENANT, ME, PEER + 1)
    late = entry(10, 5)
    x = entry(11, 1)
    x.conversation_id = other
    r = s.apply_mailbox_batch([late, x, entry(12, 3), entry(13, 4)], 13, 3, 1)
    assert [(m.conversation_id, m.conversation_seq) for m in r.inserted] == [
        (CONV, 3), (CONV, 4), (CONV, 5), (other, 1)]


def test_cursor_never_moves_backwards(path):
    s = LocalStore.open(path, TENANT, ME)
    s.apply_mailbox_batch([entry(20, 1)], 20, 3, 1)
    with pytest.raises(StoreError):
        s.apply_mailbox_batch([entry(15, 2)], 15, 3, 1)
    assert s.cursor() == (3, 1, 20) and not s.has_message((2).to_bytes(16, "big"))
    s.reset_cursor()
    assert s.cursor() is None and s.has_message((1).to_bytes(16, "big"))


def test_pending_resolved_only_by_own_entry(path):
    s = LocalStore.open(path, TENANT, ME)
    a = s.add_pending(CONV, PEER, 1, b"", b"a")
    b = s.add_pending(CONV, PEER, 1, b"", b"b")
    c = s.add_pending(CONV, PEER, 1, b"", b"c")
    # the peer's entry carrying a's cmid must not resolve it: only our own entries do
    r = s.apply_mailbox_batch([entry(10, 1, sender=PEER, cmid=a.client_message_id, body=b"a"),
                               entry(11, 2, sender=ME, cmid=b.client_message_id, body=b"b")], 11, 3, 1)
    assert [x.client_message_id for x in r.resolved] == [b.client_message_id]
    assert r.resolved[0].message_id == (2).to_bytes(16, "big") and r.resolved[0].conversation_seq == 2
    s.mark_acked(Resolved(c.client_message_id, (9).to_bytes(16, "big"), CONV, 9, 1))
    assert [p.client_message_id for p in s.pending_sends()] == [a.client_message_id]
    assert s.pending_state(b.client_message_id) == COMMITTED
    assert s.pending_state(c.client_message_id) == ACKED
    # a later ACK for an already committed row leaves it committed; re-apply resolves nothing
    s.mark_acked(Resolved(b.client_message_id, (2).to_bytes(16, "big"), CONV, 2, 1))
    assert s.pending_state(b.client_message_id) == COMMITTED
    r = s.apply_mailbox_batch([entry(11, 2, sender=ME, cmid=b.client_message_id, body=b"b")], 11, 3, 1)
    assert r.resolved == [] and r.inserted == []


def test_own_entry_with_our_cmid_and_other_content_is_not_our_send(path):
    # another device of the user sent with a cmid this store will use (a cloned store, a
    # reused device id): the writer answers our send CONFLICT; its entry must neither
    # resolve our pending row nor turn a failed one committed
    s = LocalStore.open(path, TENANT, ME)
    waiting = s.add_pending(CONV, PEER, 1, b"", b"my text")
    failed = s.add_pending(CONV, PEER, 1, b"", b"also mine")
    assert s.mark_failed(failed.client_message_id)
    r = s.apply_mailbox_batch([entry(10, 1, sender=ME, cmid=waiting.client_message_id, body=b"their text"),
                               entry(11, 2, sender=ME, cmid=failed.client_message_id, body=b"also theirs")],
                              11, 3, 1)
    assert r.resolved == [] and [m.body for m in r.inserted] == [b"their text", b"also theirs"]
    assert s.pending_state(waiting.client_message_id) == PENDING
    assert s.pending_state(failed.client_message_id) == "failed"
    other = ids.conversation_id_direct(TENANT, ME, PEER + 1)  # same body, another conversation
    elsewhere = entry(12, 3, sender=ME, cmid=waiting.client_message_id, body=b"my text")
    elsewhere.conversation_id = other
    assert s.apply_mailbox_batch([elsewhere], 12, 3, 1).resolved == []
    assert s.pending_state(waiting.client_message_id) == PENDING


def test_own_entry_already_recalled_resolves_by_what_it_still_names(path):
    # a recalled copy has no body: conversation, type and custom type decide
    s = LocalStore.open(path, TENANT, ME)
    mine = s.add_pending(CONV, PEER, 1, b"", b"gone soon")
    gone = entry(10, 1, sender=ME, cmid=mine.client_message_id, body=b"")
    gone.state = RECALLED
    r = s.apply_mailbox_batch([gone], 10, 3, 1)
    assert [x.client_message_id for x in r.resolved] == [mine.client_message_id]
    assert s.pending_state(mine.client_message_id) == COMMITTED


def test_non_message_events_move_cursor_only(path):
    s = LocalStore.open(path, TENANT, ME)
    r = s.apply_mailbox_batch([entry(10, 1, event_type=3)], 10, 3, 1)  # MEMBERSHIP
    assert r.inserted == [] and s.cursor() == (3, 1, 10) and s.messages() == []


def test_recall_notice_clears_the_local_body_and_a_garbled_one_changes_nothing(path):
    s = LocalStore.open(path, TENANT, ME)
    s.apply_mailbox_batch([entry(10, 1), entry(11, 2)], 11, 3, 1)
    notice = message_pb2.ControlEvent(state_change=message_pb2.MessageStateChange(
        message_id=(1).to_bytes(16, "big"), state=message_pb2.MESSAGE_STATE_RECALLED)).SerializeToString()
    r = s.apply_mailbox_batch([entry(12, 3, event_type=2, body=notice), entry(13, 4, event_type=4, body=b"\xff")],
                              13, 3, 1)
    assert r.inserted == [] and s.cursor() == (3, 1, 13)
    assert [(m.body, m.state) for m in s.messages()] == [(b"", RECALLED), (b"body 2", 0)]
    assert [(m.message_id, m.state, m.body) for m in r.updated] == [((1).to_bytes(16, "big"), RECALLED, b"")]


def test_memory_store_when_asked():
    s = LocalStore.open(":memory:", TENANT, ME)
    s.add_pending(CONV, PEER, 1, b"", b"m")
    assert len(s.pending_sends()) == 1


async def test_run_uses_store_thread(path):
    import threading

    s = LocalStore.open(path, TENANT, ME)
    name = await s.run(lambda: threading.current_thread().name)
    assert name.startswith("qim-localstore") and name != threading.current_thread().name
    row = await s.run(s.add_pending, CONV, PEER, 1, b"", b"async")
    assert (await s.run(s.pending_sends))[0] == row
    s.close()
