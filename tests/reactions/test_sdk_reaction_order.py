"""The Python SDK keeps the newest summary whatever order it learns them in
(qim/sdk/reactions.py; decision 0121, amended: versions), without a network: live
REACTION_EVENTS arriving out of order (as they do through different gateways), a REACT
reply older than an event already told, mailbox pull entries and a history page with an
emptied summary. Only a higher version replaces what `known` holds; an event that is
not newer is not told."""

from __future__ import annotations

from types import SimpleNamespace

from qim._core import ids
from qim.proto.v1 import history_pb2, mailbox_pb2, reaction_pb2
from qim.protocol import Opcode
from qim.sdk.reactions import Reactions, ReactionsChanged

ME, OTHER_USER = 7, 8
CONV = ids.conversation_id_group(7, 78)
MSG = bytes(15) + b"\x09"


class Host:
    """The ClientRuntime parts qim.sdk.reactions uses: `request` answers from `replies`."""

    def __init__(self) -> None:
        self.told: list = []
        self.retry_budget_s = 1.0
        self.replies: dict[int, bytes] = {}
        self.core = SimpleNamespace(emit=self.told.append, on_ephemeral=None, on_pulled=None)
        self.store = SimpleNamespace(user_id=ME, run=self._run, peer_of=lambda conv: 0)

    @staticmethod
    async def _run(fn, *args):
        return fn(*args)

    async def request(self, opcode: int, body: bytes) -> tuple[int, bytes]:
        return opcode + 1, self.replies[opcode]


def summary(version: int, **counts: int) -> reaction_pb2.MessageReactionSummary:
    return reaction_pb2.MessageReactionSummary(version=version, counts=[
        reaction_pb2.ReactionCount(emoji=e, count=n) for e, n in counts.items()])


def event(version: int, emoji: str, removed: bool, **counts: int) -> bytes:
    return reaction_pb2.ReactionEvents(conversation_id=CONV, message_id=MSG, user_id=OTHER_USER, emoji=emoji,
                                       removed=removed, version=version,
                                       counts=summary(version, **counts).counts).SerializeToString()


def shown(r: Reactions) -> tuple[dict[str, int], int]:
    known = r.known(MSG)
    assert known is not None
    return {e: n for e, n, _ in known.counts}, known.version


async def test_known_ends_at_the_newest_whatever_the_order():
    host = Host()
    r = Reactions(host)
    r.attach()
    # the changes ran: v1 +a, v2 +b, v3 (this device's REACT, below), v4 -a, v5 -b; the events arrive 2, 5, 1, 4
    for version, emoji, removed, counts in [(2, "a", False, {"a": 1, "b": 1}), (5, "b", True, {}),
                                            (1, "a", False, {"a": 1}), (4, "a", True, {"b": 1})]:
        host.core.on_ephemeral(Opcode.REACTION_EVENTS, event(version, emoji, removed, **counts))
    assert shown(r) == ({}, 5)
    assert [(e.version, e.summary.counts) for e in host.told if isinstance(e, ReactionsChanged)] == [
        (2, (("a", 1, False), ("b", 1, False))), (5, ())]  # the stale ones were not told

    host.replies[Opcode.REACT] = reaction_pb2.ReactOk(summary=summary(3, a=1, c=1), changed=True).SerializeToString()
    reply = await r.add(CONV, MSG, "c")
    assert (reply.version, shown(r)) == (3, ({}, 5))  # the reply as read; `known` keeps the newer

    host.core.on_pulled([mailbox_pb2.MailboxEntry(message_id=MSG, reactions=summary(5, z=1))])
    assert shown(r) == ({}, 5)  # equal: nothing new
    host.core.on_pulled([mailbox_pb2.MailboxEntry(message_id=MSG, reactions=summary(6, z=1))])
    assert shown(r) == ({"z": 1}, 6)

    page = history_pb2.HistoryBatch(items=[history_pb2.HistoryItem(message_id=MSG, reactions=summary(8))])
    host.replies[Opcode.PULL_HISTORY] = page.SerializeToString()
    assert await r.summaries(CONV) == {}  # the page has none left ...
    assert shown(r) == ({}, 8)  # ... and `known` learnt they are gone
    host.core.on_ephemeral(Opcode.REACTION_EVENTS, event(7, "z", False, z=2))  # late
    assert shown(r) == ({}, 8) and len([e for e in host.told if isinstance(e, ReactionsChanged)]) == 2
