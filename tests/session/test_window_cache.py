"""The badge settler's window cache on a real Redis (qim/stores/redis/windows.py,
docs/decisions/0158): tails read through it equal tails read without it after every
operation of a random sequence (sends with and without mentions, CONTROL messages,
recalls and edits that rewrite a record already held, a recall reserved in split mode
and recorded later, reads moving the base, closed and gapped intervals); a recall or an
edit of a held record changes the count at the next read; the held records stay within
the bound, least recently used conversations first; a state change whose reserved
message is not CONTROL is refused (the cache sees a rewrite only through it)."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from types import SimpleNamespace

import pytest

from qim.proto.v1 import message_pb2
from qim.services.session.summary import count_unread, mentions
from qim.stores.commits import StateChange
from qim.stores.messages import TailQuery
from qim.stores.redis import held as held_reads
from qim.stores.redis.archive import RedisArchiveState
from qim.stores.redis.backend import RedisBackend
from qim.stores.redis.windows import MIN_WINDOW, WindowCache
from tests.stores.conftest import Conv, direct

RECALLED = message_pb2.MESSAGE_STATE_RECALLED
USERS = (5, 9, 11)


class _Metrics:
    """counter(name, doc, labels) -> counts[(name, label value)]."""

    def __init__(self) -> None:
        self.counts: Counter = Counter()

    def counter(self, name, doc, labels=()):
        def labels_(**kw):
            key = (name, *kw.values())
            return SimpleNamespace(inc=lambda n=1: self.counts.update({key: n}))
        return SimpleNamespace(labels=labels_)


@pytest.fixture
async def window_stores(private_redis):
    stores = RedisBackend(private_redis.addr)
    yield stores
    await stores.close()


def _apart(convs: list[Conv]) -> list[Conv]:
    """Conversations whose message ids never meet (a record's key is bucket + message_id)."""
    for i, c in enumerate(convs):
        c.clock_ms += i * 10_000_000
    return convs


async def send(c: Conv, sender: int, *, to: tuple[int, ...] = (), everyone: bool = False, message_type: int = 1,
               split: bool = False):
    """A message of `sender`, mentioning `to` / all; split: reserved, not yet recorded."""
    cmid = random.randbytes(16)
    res = c.reservation(sender, cmid, b"body", message_type=message_type, split=split)
    rec = message_pb2.MessageRecord.FromString(res.record_prefix)
    rec.mention_user_ids.extend(to)
    rec.mention_all = everyone
    res = dataclasses.replace(res, record_prefix=rec.SerializeToString())
    reserved = await c.stores.commits.reserve(res)
    return res, reserved


async def rewrite(c: Conv, message_id: bytes, state: int = RECALLED, *, to: tuple[int, ...] = (),
                  split: bool = False):
    """A recall (state RECALLED) or an edit (state 0, new mentions `to`) of a stored record,
    reserving its CONTROL message as the writer does."""
    stored = await c.stores.messages.get(c.tenant, c.conversation_id, message_id)
    new = message_pb2.MessageRecord()
    new.CopyFrom(stored.record)
    new.state = state
    if state:
        new.body = b""
    else:
        del new.mention_user_ids[:]
        new.mention_user_ids.extend(to)
    res = c.reservation(5, random.randbytes(16), b"notice", message_type=4, split=split)
    reserved = await c.stores.commits.reserve_state_change(res, StateChange(message_id, stored.version,
                                                                            new.SerializeToString(), state))
    return res, reserved


def seen(tail, user: int, base: int):
    """What the badge reads of a tail: the head, the window's fields and count, mentions."""
    head = None if tail.head is None else (tail.head.message_id, tail.head.conversation_seq, tail.head.state)
    if tail.window is None:
        return head, None
    rows = sorted((r.conversation_seq, r.sender_id, r.message_type, r.state, r.mention_all,
                   tuple(r.mention_user_ids)) for r in tail.window)
    return head, rows, count_unread(tail.window, user, base, None), mentions(tail.window, user, base)


async def both(stores, cache: WindowCache, queries: list[tuple[int, TailQuery]], window: int):
    """(with the cache, without it) for `queries` of (user, query)."""
    qs = [q for _, q in queries]
    held = await stores.messages.tails(7, qs, window, cache=cache)
    plain = await stores.messages.tails(7, qs, window)
    return ([seen(t, u, q.base) for (u, q), t in zip(queries, held)],
            [seen(t, u, q.base) for (u, q), t in zip(queries, plain)])


@pytest.mark.parametrize("min_window", [1, MIN_WINDOW])
async def test_held_windows_equal_fresh_reads_over_random_operations(window_stores, monkeypatch, min_window):
    monkeypatch.setattr(held_reads, "MIN_WINDOW", min_window)  # 1: every window starts an entry
    rng = random.Random(158)
    metrics = _Metrics()
    cache = WindowCache(metrics)
    convs = _apart([direct(window_stores, a=5, b=9), direct(window_stores, a=5, b=11)])
    sent: dict[bytes, list[bytes]] = {c.conversation_id: [] for c in convs}
    bases = {(c.conversation_id, u): 0 for c in convs for u in USERS}
    top = {c.conversation_id: 0 for c in convs}  # the newest conversation_seq reserved
    pending: list[object] = []  # split reservations not yet recorded
    archive, trimmed = RedisArchiveState(window_stores.topology), 0
    for step in range(200):
        c = rng.choice(convs)
        conv, op, reserved = c.conversation_id, rng.random(), None
        if op < 0.45 or not sent[conv]:
            _, reserved = await send(c, rng.choice(USERS), to=tuple(rng.sample(USERS, rng.randint(0, 2))),
                                     everyone=rng.random() < 0.05)
            sent[conv].append(reserved.message_id)
        elif op < 0.52:
            _, reserved = await send(c, rng.choice(USERS), message_type=4)  # a CONTROL message (membership, ...)
        elif op < 0.64:
            _, reserved = await rewrite(c, rng.choice(sent[conv][-12:]))
        elif op < 0.72:
            _, reserved = await rewrite(c, rng.choice(sent[conv][-12:]), 0, to=tuple(rng.sample(USERS, 1)))
        elif op < 0.77:  # a recall reserved in split mode: the rewrite is there, its seq not yet indexed
            res, reserved = await rewrite(c, rng.choice(sent[conv][-12:]), split=True)
            pending.append(res)
        elif op < 0.85 and pending:
            res = pending.pop(0)
            await window_stores.commits.record(res.ref, res.message_id)
        elif op < 0.89:  # the archiver trims the oldest rows (the hot floor rises)
            _, rows = await archive.hot_rows(7, conv, 100)
            rows = [row for row in rows if row.conversation_seq <= top[conv] - rng.randint(2, 12)][:rng.randint(1, 6)]
            if rows:
                trimmed += (await archive.trim(7, conv, rows)).trimmed
                gone = {row.message_id for row in rows}
                sent[conv] = [m for m in sent[conv] if m not in gone]
        else:  # a read: the base moves up, at most to the newest seq
            user = rng.choice(USERS)
            bases[(conv, user)] = max(bases[(conv, user)], rng.randint(0, top[conv]))
        if reserved is not None:
            top[conv] = max(top[conv], reserved.conversation_seq)
        queries = []
        for c2 in convs:
            cid, mid = c2.conversation_id, max(1, top[c2.conversation_id] // 2)
            for user in USERS:
                queries.append((user, TailQuery(cid, ((0, None),), bases[(cid, user)])))
            queries.append((9, TailQuery(cid, ((0, mid),), 0)))  # a leaver
            queries.append((11, TailQuery(cid, ((0, 3), (mid, None)), 2)))  # re-joined
        held, plain = await both(window_stores, cache, queries, rng.choice((8, 8, 30)))
        assert held == plain, f"step {step}"
    counts = metrics.counts
    # the comparison was not vacuous: records and whole windows served held, trims made
    assert counts[("qim_session_window_records", "hit")] > 1000 and counts[("qim_session_window_reads", "held")] > 20
    assert trimmed > 10
    assert counts[("qim_session_window_drops", "control")] > 0 and counts[("qim_session_window_drops", "gap")] > 0


def _counts(metrics: _Metrics) -> tuple[int, int]:
    c = metrics.counts
    return c[("qim_session_window_records", "hit")], c[("qim_session_window_records", "miss")]


async def _unread(stores, cache, conv: bytes, user: int = 5, base: int = 0) -> tuple[int, bool]:
    tail = (await stores.messages.tails(7, [TailQuery(conv, ((0, None),), base)], 200, cache=cache))[0]
    return count_unread(tail.window, user, base, None), mentions(tail.window, user, base)


async def test_a_recipient_who_never_reads_reads_only_the_new_records(window_stores):
    metrics = _Metrics()
    cache, c = WindowCache(metrics), direct(window_stores)
    for _ in range(20):
        await send(c, 9)
    assert await _unread(window_stores, cache, c.conversation_id) == (20, False)
    assert _counts(metrics) == (0, 20)
    for _ in range(3):
        await send(c, 9)
    assert await _unread(window_stores, cache, c.conversation_id) == (23, False)
    assert _counts(metrics) == (20, 23)  # the three new ones read, the twenty held
    assert cache.records == 23
    # the second read took its window from the held index: no index read of the window
    assert metrics.counts[("qim_session_window_reads", "index")] == 1
    assert metrics.counts[("qim_session_window_reads", "held")] == 1


async def test_a_recall_an_edit_or_a_delete_of_a_held_record_changes_the_count(window_stores):
    metrics = _Metrics()
    cache, c = WindowCache(metrics), direct(window_stores)
    mids = [(await send(c, 9))[1].message_id for _ in range(20)]
    assert await _unread(window_stores, cache, c.conversation_id) == (20, False)
    await rewrite(c, mids[1])  # recalled after it was held
    assert await _unread(window_stores, cache, c.conversation_id) == (19, False)
    await rewrite(c, mids[2], 0, to=(5,))  # an edit rewriting the mentions of a held record
    assert await _unread(window_stores, cache, c.conversation_id) == (19, True)
    await rewrite(c, mids[3], message_pb2.MESSAGE_STATE_DELETED)  # an operator delete
    assert await _unread(window_stores, cache, c.conversation_id) == (18, True)
    assert metrics.counts[("qim_session_window_drops", "control")] == 3


async def test_a_recall_reserved_in_split_mode_is_seen_before_its_seq_is_indexed(window_stores):
    metrics = _Metrics()
    cache, c = WindowCache(metrics), direct(window_stores)
    mids = [(await send(c, 9))[1].message_id for _ in range(20)]
    assert await _unread(window_stores, cache, c.conversation_id) == (20, False)
    res, _ = await rewrite(c, mids[0], split=True)  # the record rewritten, its notice's seq not indexed
    assert await _unread(window_stores, cache, c.conversation_id) == (19, False)
    await send(c, 9)  # a seq above the missing one
    assert await _unread(window_stores, cache, c.conversation_id) == (20, False)
    await window_stores.commits.record(res.ref, res.message_id)
    assert await _unread(window_stores, cache, c.conversation_id) == (20, False)
    # one drop: the read after the split reserve (its seq not indexed); it read C' past that
    # seq and every record again, so the later reads had nothing to drop
    assert metrics.counts[("qim_session_window_drops", "gap")] == 1


async def test_the_bound_evicts_the_least_recently_used_conversations_first(window_stores, monkeypatch):
    cache = WindowCache(max_records=45, max_conversations=2)
    convs = _apart([direct(window_stores, a=5, b=b) for b in (9, 11, 13)])
    for c in convs:
        for _ in range(20):
            await send(c, 9)
    for c in convs:
        await _unread(window_stores, cache, c.conversation_id)
        assert cache.records <= 45 and len(cache) <= 2
    assert cache.get(7, convs[0].conversation_id) is None and cache.get(7, convs[2].conversation_id) is not None
    assert await _unread(window_stores, cache, convs[0].conversation_id) == (20, False)
    # one conversation keeps about one window: records a window below `checked` are pruned
    monkeypatch.setattr(held_reads, "MIN_WINDOW", 1)
    small, most = WindowCache(), 0
    for _ in range(30):  # a reader 4 behind: a window of 4 exact records, 5 at most
        _, sent = await send(convs[1], 9)
        query = TailQuery(convs[1].conversation_id, ((0, None),), sent.conversation_seq - 4)
        tail = (await window_stores.messages.tails(7, [query], 5, cache=small))[0]
        assert len(tail.window) == 4 and count_unread(tail.window, 5, query.base, None) == 4
        most = max(most, small.records)
    assert most == 2 * 6 and small.records <= 2 * 6  # pruned whenever above two windows


async def test_a_state_change_must_reserve_a_control_message(window_stores):
    c = direct(window_stores)
    _, sent = await send(c, 9)
    stored = await window_stores.messages.get(7, c.conversation_id, sent.message_id)
    with pytest.raises(ValueError):
        await window_stores.commits.reserve_state_change(
            c.reservation(5, b"r" * 16, b"notice", message_type=1),
            StateChange(sent.message_id, stored.version, stored.record.SerializeToString(), RECALLED))


async def test_the_settle_summarize_with_the_cache_equals_it_without_through_reads_and_mutes(window_stores,
                                                                                             monkeypatch):
    from qim.services.session.badge import contribution
    from qim.services.session.summary import Summarizer
    from qim.stores.convstate import MUTE_FOREVER
    from qim.stores.convstate import StateChange as Choice
    from qim.stores.redis.windows import WindowedMessages

    async def no_peers(tenant, user, direct_):
        return [0] * len(direct_)

    monkeypatch.setattr(held_reads, "MIN_WINDOW", 1)  # every window held
    metrics = _Metrics()
    s = window_stores
    held = Summarizer(WindowedMessages(s.messages, WindowCache(metrics)), s.groups, s.sessions, s.reads, s.convstates,
                      no_peers)
    plain = Summarizer(s.messages, s.groups, s.sessions, s.reads, s.convstates, no_peers)
    c = direct(s)
    conv = c.conversation_id

    async def badge() -> int:
        a = (await held.summarize(7, 5, [conv], with_peers=False))[conv]
        b = (await plain.summarize(7, 5, [conv], with_peers=False))[conv]
        assert a == b
        return contribution(a, 0)

    for i in range(3):
        await send(c, 9, to=(5,) if i == 1 else ())
    assert await badge() == 3
    await s.convstates.change(7, 5, conv, Choice(muted_until=MUTE_FOREVER))
    assert await badge() == 1  # muted: the unread mention counts once
    await s.reads.mark_read(7, 5, conv, 2)  # the mention read
    assert await badge() == 0
    await s.convstates.change(7, 5, conv, Choice(muted_until=0))
    assert await badge() == 1
    await send(c, 9)
    assert await badge() == 2
    assert metrics.counts[("qim_session_window_reads", "held")] >= 4  # the cache was read
