"""Reactions end to end on real engines through the Python SDK (issue 37; decision 0121):
two users on two devices each, one device of each on either gateway of the stack. A
reaction added and removed is seen live by every other device (across gateways), is
idempotent per (user, message, emoji), is read again with history after a reconnect,
and never changes unread, the session list's order, the mailbox cursor or the Outbox."""

from __future__ import annotations

import pytest

from qim.errors import ErrorCode
from qim.sdk.events import ServerError
from tests.e2e.outboxread import outbox_end
from tests.e2e.sdkclient import close_all
from tests.reactions.kit import listed, local_view, on_gateway, reactions_told
from tests.sdk.realstack import eventually, users


def counts(event) -> dict[str, int]:
    """emoji -> count of a ReactionsChanged's summary."""
    return {e: c for e, c, _ in event.summary.counts}


async def test_reactions_live_idempotent_after_reconnect_and_never_unread(two_gateways, tmp_path):
    st = two_gateways
    a, b, c = users(3)
    a1, a2 = await on_gateway(st, tmp_path, a, 1), await on_gateway(st, tmp_path, a, 2)
    b1, b2 = await on_gateway(st, tmp_path, b, 1), await on_gateway(st, tmp_path, b, 2)
    group = await a1.create_group([b, c])
    conv = group.conversation_id
    first = await a1.send_text(conv, "react to me")
    other = (await b1.open_direct(a)).conversation_id
    await b1.send_text(other, "a later conversation")  # ranks above the group in b's list
    await eventually(lambda: len(b2.told.messages(conv)) == 1 and len(a2.told.messages(other)) == 1
                     and len(b2.told.messages(other)) == 1, what="both messages on every device")

    async def both_listed() -> bool:  # b's own message of the direct chat listed on both of b's devices
        return [len(await local_view(d)) for d in (b1, b2)] == [2, 2] and len((await listed(b1))[0]) == 2
    await eventually(both_listed, what="both conversations in b's lists")
    mid = first.message_id
    before_list = await listed(b1)
    before_local = [await local_view(d) for d in (b1, b2)]
    before_cursor = {d: await d.store.run(d.store.cursor) for d in (a1, a2, b1)}
    outbox = outbox_end(st.env["QIM_KAFKA_BOOTSTRAP"])

    mine = await a1.reactions.add(conv, mid, "👍")
    assert mine.counts == (("👍", 1, True),)
    for d in (a2, b1, b2):  # every other device, on either gateway
        await eventually(lambda d=d: reactions_told(d, mid), what="the 👍 live")
    assert not reactions_told(a1, mid)  # the acting device has its reply
    assert reactions_told(a2, mid)[-1].summary.mine() == {"👍"}  # a's own, seen from its other device
    assert reactions_told(b1, mid)[-1].summary.mine() == set()
    assert (reactions_told(b2, mid)[-1].user_id, reactions_told(b2, mid)[-1].emoji) == (a, "👍")

    await b2.reactions.add(conv, mid, "👍")
    theirs = await b2.reactions.add(conv, mid, "❤️")
    assert dict((e, (n, m)) for e, n, m in theirs.counts) == {"👍": (2, True), "❤️": (1, True)}
    await eventually(lambda: counts(reactions_told(a1, mid)[-1]) == {"👍": 2, "❤️": 1}
                     if reactions_told(a1, mid) else False, what="b's reactions on a1")
    await eventually(lambda: reactions_told(b1, mid) and counts(reactions_told(b1, mid)[-1]) == {"👍": 2, "❤️": 1}
                     and reactions_told(b1, mid)[-1].summary.mine() == {"👍", "❤️"}, what="b's own on b1")

    told_a2 = len(reactions_told(a2, mid))
    again = await b1.reactions.add(conv, mid, "👍")  # idempotent: the same (user, message, emoji)
    assert again.count("👍") == 2 and again.mine() == {"👍", "❤️"}
    removed = await a1.reactions.remove(conv, mid, "👍")
    assert removed.count("👍") == 1 and removed.mine() == set()
    assert (await a1.reactions.remove(conv, mid, "👍")).count("👍") == 1  # removing what is absent
    await eventually(lambda: counts(reactions_told(a2, mid)[-1]) == {"👍": 1, "❤️": 1}, what="a's removal on a2")
    # the repeat add and the repeat removal told nobody: a2 heard exactly the one removal since
    assert [e.removed for e in reactions_told(a2, mid)[told_a2:]] == [True]

    await close_all(b2)  # b's second device goes away; a reacts meanwhile
    await a2.reactions.add(conv, mid, "🎉")
    b2 = await on_gateway(st, tmp_path, b, 2)  # the same store: a reconnect
    seen = (await b2.reactions.summaries(conv))[mid]
    assert {e: (n, m) for e, n, m in seen.counts} == {"👍": (1, True), "❤️": (1, True), "🎉": (1, False)}
    seen_a = (await a1.reactions.summaries(conv))[mid]
    assert {e: (n, m) for e, n, m in seen_a.counts} == {"👍": (1, False), "❤️": (1, False), "🎉": (1, True)}

    # never a message: unread, order, last message, cursors and the Outbox are untouched
    assert await listed(b1) == before_list
    assert [await local_view(d) for d in (b1, b2)] == before_local  # b2: the reconnected store
    assert {d: await d.store.run(d.store.cursor) for d in (a1, a2, b1)} == before_cursor
    assert outbox_end(st.env["QIM_KAFKA_BOOTSTRAP"]) == outbox
    await close_all(a1, a2, b1, b2)


async def test_reactions_refused_with_reasons(two_gateways, tmp_path):
    st = two_gateways
    a, b, stranger = users(3)
    a1 = await on_gateway(st, tmp_path, a, 1)
    s1 = await on_gateway(st, tmp_path, stranger, 1)
    conv = (await a1.open_direct(b)).conversation_id
    ack = await a1.send_text(conv, "hello")
    with pytest.raises(ValueError, match="emoji"):
        await a1.reactions.add(conv, ack.message_id, "two words")  # refused before sending
    with pytest.raises(ServerError) as nf:
        await a1.reactions.add(conv, bytes(15) + b"\x01", "👍")
    assert nf.value.code == ErrorCode.NOT_FOUND
    other = (await s1.open_direct(b)).conversation_id  # the stranger names a's message in its own conversation
    with pytest.raises(ServerError) as elsewhere:
        await s1.reactions.add(other, ack.message_id, "👍")
    assert elsewhere.value.code == ErrorCode.NOT_FOUND
    for i in range(20):
        await a1.reactions.add(conv, ack.message_id, chr(0x1F600 + i))
    with pytest.raises(ServerError) as full:
        await a1.reactions.add(conv, ack.message_id, "🦄")  # the 21st distinct emoji
    assert full.value.code == ErrorCode.PAYLOAD_TOO_LARGE
    assert (await a1.reactions.add(conv, ack.message_id, chr(0x1F600))).count(chr(0x1F600)) == 1  # present: fine
    await close_all(a1, s1)


async def test_a_history_page_carries_an_emptied_summary_with_its_version(two_gateways, tmp_path):
    # decision 0121, amended: a summary keeps its version when the last reaction goes, and
    # history carries it empty, so a device holding an older summary learns they are gone
    st = two_gateways
    a, b = users(2)
    a1 = await on_gateway(st, tmp_path, a, 1)
    conv = (await a1.open_direct(b)).conversation_id
    taken = await a1.send_text(conv, "taken back")
    assert (await a1.reactions.add(conv, taken.message_id, "👍")).version == 1
    assert (await a1.reactions.remove(conv, taken.message_id, "👍")).version == 2
    b2 = await on_gateway(st, tmp_path, b, 2)
    await b2.open_direct(a)
    assert taken.message_id not in await b2.reactions.summaries(conv)  # none left to show ...
    gone = b2.reactions.known(taken.message_id)  # ... and the page said so, with its version
    assert gone is not None and (gone.counts, gone.version) == ((), 2)
    await close_all(a1, b2)
