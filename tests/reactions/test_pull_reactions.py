"""A device that was away reads the reaction summaries with its mailbox pull (issue 37;
decision 0121 §4; MailboxEntry.reactions): no history request, `mine` as that user sees
it, nothing on the wire for a message that never had reactions, and for one whose
reactions were all removed an empty summary with its version (decision 0121, amended:
versions), so a device holding an older summary learns they are gone. On the two-gateway stack
(tests/reactions/conftest.py), through qim.sdk."""

from __future__ import annotations

from qim.protocol import Opcode
from qim.sdk.connection import Connection
from tests.e2e.sdkclient import close_all
from tests.reactions.kit import local_view, on_gateway
from tests.sdk.realstack import eventually, users


async def test_a_device_away_while_two_users_react_gets_the_summaries_by_its_pull(two_gateways, tmp_path,
                                                                                  monkeypatch):
    st = two_gateways
    a, b, c = users(3)
    a1, b2 = await on_gateway(st, tmp_path, a, 1), await on_gateway(st, tmp_path, b, 2)
    group = await a1.create_group([b, c])
    conv = group.conversation_id
    c1, b1 = await on_gateway(st, tmp_path, c, 1), await on_gateway(st, tmp_path, b, 1)

    async def know_group() -> bool:  # both devices know the group, then go away
        return [conv in await local_view(d) for d in (c1, b1)] == [True, True]
    await eventually(know_group, what="c1 and b1 know the group")
    await close_all(c1, b1)

    reacted = await a1.send_text(conv, "react to me")
    quiet = await a1.send_text(conv, "nobody reacts to me")
    emptied = await a1.send_text(conv, "react, then take it back")
    await a1.reactions.add(conv, emptied.message_id, "😂")
    await a1.reactions.remove(conv, emptied.message_id, "😂")
    await a1.reactions.add(conv, reacted.message_id, "👍")
    await b2.reactions.add(conv, reacted.message_id, "👍")
    await b2.reactions.add(conv, reacted.message_id, "❤️")

    sent: list[int] = []  # every request opcode any client sends from here on
    send_request = Connection.send_request

    def recording(self, opcode, body, *args, **kw):
        sent.append(opcode)
        return send_request(self, opcode, body, *args, **kw)
    monkeypatch.setattr(Connection, "send_request", recording)

    c1 = await on_gateway(st, tmp_path, c, 1)  # the same data directory: a reconnect that pulls
    await eventually(lambda: len(c1.told.messages(conv)) == 3, what="the messages pulled by c1")
    await eventually(lambda: c1.reactions.known(reacted.message_id) is not None, what="the summary from the pull")
    summary = c1.reactions.known(reacted.message_id)
    assert {e: (n, m) for e, n, m in summary.counts} == {"👍": (2, False), "❤️": (1, False)}
    assert summary.version == 3  # three changes on that message
    assert c1.reactions.known(quiet.message_id) is None  # no reactions: nothing carried
    gone = c1.reactions.known(emptied.message_id)  # all removed: carried empty, with its version
    assert gone is not None and (gone.counts, gone.version) == ((), 2)
    assert Opcode.PULL_MAILBOX in sent and Opcode.PULL_HISTORY not in sent  # the pull alone

    # `mine` is the puller's own: b's other device, away too, pulls them with its flags
    b1 = await on_gateway(st, tmp_path, b, 1)
    await eventually(lambda: len(b1.told.messages(conv)) == 3, what="the messages pulled by b1")
    await eventually(lambda: b1.reactions.known(reacted.message_id) is not None, what="b1's pulled summary")
    assert {e: (n, m) for e, n, m in b1.reactions.known(reacted.message_id).counts} == {
        "👍": (2, True), "❤️": (1, True)}
    assert Opcode.PULL_HISTORY not in sent
    await close_all(a1, b2, c1, b1)
