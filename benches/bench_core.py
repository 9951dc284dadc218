"""Benches of the watermark, mailbox_seq, event group and id codecs (docs/design.md §3, §5).

watermark: decode / advance_all / start_offset (the min over lanes) / encode, each on
the per-lane 1216-byte form (64 different lanes) and the uniform 19-byte form.
eventgroup: pack_group / unpack_group of one event and of eight events with every
optional field set. mailbox_seq: compose / split. ids: every derivation the send path
uses (BLAKE3 through the `blake3` binding dominates these).
Expected results come from the pure twin; every bench checks its result.
"""

from __future__ import annotations

import pytest

from qim._core._pure import eventgroup as pure_eg
from qim._core._pure import ids as pure_ids
from qim._core._pure import watermark as pure_wm
from qim._core.types import MailboxEvent

# --- watermark -------------------------------------------------------------------
LANES = [(1 | (i % 2) << 1, 1_000_000 + 17 * i, 1_000 + i) for i in range(64)]
UNIFORM = [(1, 5_000_000, 1_000)] * 64
BLOBS = {"lanes": pure_wm.encode(LANES), "uniform": pure_wm.encode(UNIFORM)}
RECORDS = {"lanes": LANES, "uniform": UNIFORM}
FORMS = pytest.mark.parametrize("form", ["lanes", "uniform"])


@FORMS
@pytest.mark.benchmark(group="watermark")
def test_watermark_decode(benchmark, core, form) -> None:
    assert benchmark(core("watermark").decode, BLOBS[form]) == RECORDS[form]


@FORMS
@pytest.mark.benchmark(group="watermark")
def test_watermark_advance(benchmark, core, form) -> None:
    got = benchmark(core("watermark").advance_all, BLOBS[form], 1_000_500)
    assert got == pure_wm.advance_all(BLOBS[form], 1_000_500)


@FORMS
@pytest.mark.benchmark(group="watermark")
def test_watermark_min(benchmark, core, form) -> None:
    got = benchmark(core("watermark").start_offset, BLOBS[form])
    assert got == min(w for _, w, _ in RECORDS[form]) + 1


@FORMS
@pytest.mark.benchmark(group="watermark")
def test_watermark_encode(benchmark, core, form) -> None:
    assert benchmark(core("watermark").encode, RECORDS[form]) == BLOBS[form]


# --- mailbox_seq -----------------------------------------------------------------
@pytest.mark.benchmark(group="mailbox_seq")
def test_seq_compose(benchmark, core) -> None:
    assert benchmark(core("mailbox_seq").compose, 3, 123_456_789) == (3 << 48) | 123_456_789


@pytest.mark.benchmark(group="mailbox_seq")
def test_seq_split(benchmark, core) -> None:
    assert benchmark(core("mailbox_seq").split, (3 << 48) | 123_456_789) == (3, 123_456_789)


# --- eventgroup ------------------------------------------------------------------
def _event(event_type: int) -> MailboxEvent:
    return MailboxEvent(
        event_type=event_type, event_id=bytes([event_type]) * 16, message_id=b"\x01" * 16,
        conversation_id=b"\x02" * 16, conversation_seq=1234, sender_id=42,
        created_at_ms=1_717_000_000_000, message_type=1, custom_type=b"app.card",
        client_message_id=b"\xcc" * 16, body=b"hello, world " * 8)


GROUPS = {"one": [_event(1)], "eight": [_event(t) for t in range(1, 9)]}
SIZES = pytest.mark.parametrize("size", ["one", "eight"])


@SIZES
@pytest.mark.benchmark(group="eventgroup")
def test_eventgroup_pack(benchmark, core, size) -> None:
    assert benchmark(core("eventgroup").pack_group, GROUPS[size]) == pure_eg.pack_group(GROUPS[size])


@SIZES
@pytest.mark.benchmark(group="eventgroup")
def test_eventgroup_unpack(benchmark, core, size) -> None:
    raw = pure_eg.pack_group(GROUPS[size])
    assert benchmark(core("eventgroup").unpack_group, raw) == GROUPS[size]


# --- ids -------------------------------------------------------------------------
MID = pure_ids.compose_message_id(1_717_000_000_000, 7, 1, 3)
CID = pure_ids.conversation_id_direct(0, 11, 12)
ID_CALLS = {
    "lane_id": (0, 123_456),
    "virtual_bucket": (0, 123_456),
    "user_placement": (0, 123_456, 64),
    "conversation_id_direct": (0, 123_456, 654_321),
    "commit_bucket": (0, CID),
    "dispatch_id": (MID, 17),
    "event_id": (MID, 123_456, 1),
    "client_message_id": (b"\x09" * 16, 9, 1234),
    "compose_message_id": (1_717_000_000_000, 7, 1, 3),
    "split_message_id": (MID,),
}


@pytest.mark.parametrize("fn", sorted(ID_CALLS))
@pytest.mark.benchmark(group="ids")
def test_ids(benchmark, core, fn) -> None:
    args = ID_CALLS[fn]
    assert benchmark(getattr(core("ids"), fn), *args) == getattr(pure_ids, fn)(*args)
