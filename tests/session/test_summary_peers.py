"""The badge's summarize (Summarizer.summarize with_peers=False, qim/services/session/
summary.py): every field the list shows except the direct peer and its read position,
which it neither reads nor checks (docs/perf.md "Round six: the session's CPU per
message"); the list's own path reads both as before."""

from __future__ import annotations

from types import SimpleNamespace

from qim._core import ids
from qim.consts import MESSAGE_TYPE_TEXT
from qim.proto.v1 import message_pb2
from qim.services.session.summary import Summarizer
from qim.stores.convstate import ConvState
from qim.stores.messages import Tail

T, ME, PEER = 1, 5, 9
CONV = ids.conversation_id_direct(T, ME, PEER)


def _rec(seq: int, mention: bool = False) -> message_pb2.MessageRecord:
    return message_pb2.MessageRecord(message_id=seq.to_bytes(16, "big"), conversation_id=CONV, conversation_seq=seq,
                                     sender_id=PEER, message_type=MESSAGE_TYPE_TEXT, body=b"b%d" % seq,
                                     state=message_pb2.MESSAGE_STATE_NORMAL,
                                     mention_user_ids=[ME] if mention else [])


def _summarizer(calls: list[str]) -> Summarizer:
    async def positions(tenant, user, convs):
        return [2 for _ in convs]

    async def peers(tenant, user, convs):
        calls.append("peers")
        return [PEER for _ in convs]

    async def member_views(tenant, user, convs):
        return []

    async def tails(tenant, queries, window):
        return [Tail(_rec(5), [_rec(3, mention=True), _rec(4), _rec(5)]) for _ in queries]

    async def states(tenant, user, convs):
        return [ConvState(pinned=True, muted_until=123) for _ in convs]

    async def peer_reads(tenant, user, pairs):
        calls.append(f"peer_reads {len(pairs)}")
        return [4 for _ in pairs]

    return Summarizer(SimpleNamespace(tails=tails), SimpleNamespace(member_views=member_views),
                      SimpleNamespace(peers=peers), SimpleNamespace(positions=positions),
                      SimpleNamespace(states=states), peer_reads)


async def test_the_badge_summary_is_the_list_entry_without_the_peer():
    calls: list[str] = []
    summarizer = _summarizer(calls)
    listed = (await summarizer.summarize(T, ME, [CONV]))[CONV]
    assert calls == ["peers", "peer_reads 1"]
    assert (listed.peer_user_id, listed.peer_read_seq) == (PEER, 4)
    calls.clear()
    badge = (await summarizer.summarize(T, ME, [CONV], with_peers=False))[CONV]
    assert calls == ["peer_reads 0"]  # no peer asked (ConvStateCalls.peer_reads answers [] at once)
    assert (badge.peer_user_id, badge.peer_read_seq) == (0, 0)
    listed.peer_user_id, listed.peer_read_seq = 0, 0
    assert badge == listed  # unread, mentioned, muted_until, head, ... as the list shows them
    assert (badge.unread, badge.mentioned, badge.muted_until, badge.pinned) == (3, True, 123, True)
