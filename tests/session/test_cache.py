"""SessionListCache: ordering, paging, TTL, and the three ways the seed lost dirty marks
(seed 000, 2026-09-26). Each race is driven step by step: the service reads Redis
between begin_* and install_*, here the "read" is plain data chosen by the test."""

from __future__ import annotations

from qim.services.session.cache import SessionListCache

U = (0, 7)  # (tenant, user)
A, B, C, D = (bytes([1]) + bytes([i]) * 15 for i in (1, 2, 3, 4))


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def asc(rows) -> list:
    """ZRANGE order of [(conv, score)]: ascending (score, conv)."""
    return sorted((score, conv) for conv, score in rows)


def built(cache: SessionListCache, rows) -> object:
    start = cache.begin_rebuild(U)
    return cache.install_rebuild(U, start, asc(rows))


def test_page_is_newest_first_with_a_keyset_cursor():
    cache = SessionListCache(300)
    snap = built(cache, [(A, 10), (B, 30), (C, 20), (D, 20)])
    first, nxt = snap.page(None, 2)
    assert first == [B, D]  # ties on score: higher conversation_id first, like ZREVRANGE
    second, nxt2 = snap.page(nxt, 2)
    assert second == [C, A] and nxt2 is None
    assert snap.page(None, 10) == ([B, D, C, A], None)


def test_snapshot_expires_after_the_ttl():
    clock = Clock()
    cache = SessionListCache(300, clock)
    snap = built(cache, [(A, 1)])
    clock.t += 299
    assert cache.current(U) is snap
    clock.t += 1
    assert cache.current(U) is None


def test_a_mark_makes_only_that_conversation_dirty_and_a_refresh_clears_it():
    cache = SessionListCache(300)
    snap = built(cache, [(A, 10), (B, 20)])
    cache.mark(U, A)
    dirty, upto = cache.dirty(U, snap)
    assert dirty == [A]
    new = cache.install_refresh(U, snap, upto, {A: 30})
    assert new.page(None, 5)[0] == [A, B]
    assert cache.dirty(U, new)[0] == [] and cache.mark_count == 0


def test_marks_of_users_without_snapshot_or_rebuild_are_not_kept():
    cache = SessionListCache(300)
    cache.mark(U, A)  # the next rebuild reads Redis after this write anyway
    assert cache.mark_count == 0


def test_loss_mode_1_mark_during_a_full_rebuild_is_kept():
    """Seed ①: a mark arriving between "read Redis" and "install" of a full rebuild was
    dropped because no snapshot was live yet."""
    cache = SessionListCache(300)
    start = cache.begin_rebuild(U)
    rows = [(A, 10)]  # read from Redis before the write below
    cache.mark(U, A)  # A got a newer message (and maybe B is new): written, then marked
    cache.mark(U, B)
    snap = cache.install_rebuild(U, start, asc(rows))
    dirty, upto = cache.dirty(U, snap)
    assert sorted(dirty) == [A, B]
    new = cache.install_refresh(U, snap, upto, {A: 40, B: 35})
    assert new.page(None, 5)[0] == [A, B]


def test_loss_mode_2_mark_after_refresh_took_the_dirty_set_survives_its_install():
    """Seed ②: the low-latency path invalidated the whole snapshot; marks arriving after
    an in-flight refresh took its dirty set were deleted and the refresh installed its
    old base again. Now every path only marks, and the install keeps newer marks."""
    cache = SessionListCache(300)
    snap = built(cache, [(A, 10), (B, 20)])
    cache.mark(U, A)
    dirty, upto = cache.dirty(U, snap)
    assert dirty == [A]
    cache.mark(U, B)  # low-latency projection lands while the refresh reads Redis
    cache.mark(U, A)  # and A changes again after its score was read
    new = cache.install_refresh(U, snap, upto, {A: 30})
    assert new is not None
    assert sorted(cache.dirty(U, new)[0]) == [A, B]


def test_loss_mode_2_refresh_never_reinstalls_a_replaced_base():
    cache = SessionListCache(300)
    base = built(cache, [(A, 10), (B, 20)])
    cache.mark(U, A)
    dirty1, upto1 = cache.dirty(U, base)  # refresh 1 starts on base
    cache.mark(U, B)
    dirty2, upto2 = cache.dirty(U, base)  # refresh 2 starts on the same base
    newer = cache.install_refresh(U, base, upto2, {A: 30, B: 50})
    assert cache.install_refresh(U, base, upto1, {A: 30}) is None  # its base was replaced
    assert cache.current(U) is newer and newer.page(None, 5)[0] == [B, A]
    assert cache.abandoned == 1


def test_taking_the_dirty_set_deletes_nothing_so_a_failed_refresh_needs_no_repair():
    cache = SessionListCache(300)
    snap = built(cache, [(A, 10)])
    cache.mark(U, A)
    cache.dirty(U, snap)  # the refresh then fails on Redis and installs nothing
    assert cache.dirty(U, snap)[0] == [A]


def test_loss_mode_3_older_rebuild_yields_to_a_newer_install():
    """Seed ③: two concurrent full rebuilds; the later installer overwrote the earlier
    one and its dirty set."""
    cache = SessionListCache(300)
    old_start = cache.begin_rebuild(U)
    old_rows = [(A, 10)]
    cache.mark(U, B)  # B registered between the two reads
    new_start = cache.begin_rebuild(U)
    new_rows = [(A, 10), (B, 20)]
    cache.mark(U, C)  # after both reads
    newer = cache.install_rebuild(U, new_start, asc(new_rows))
    kept = cache.install_rebuild(U, old_start, asc(old_rows))
    assert kept is newer and cache.yielded == 1
    assert cache.current(U).page(None, 5)[0] == [B, A]
    assert cache.dirty(U, newer)[0] == [C]


def test_loss_mode_3_newer_rebuild_replaces_an_older_install_and_keeps_later_marks():
    cache = SessionListCache(300)
    old_start = cache.begin_rebuild(U)
    cache.mark(U, A)
    new_start = cache.begin_rebuild(U)
    cache.mark(U, B)
    cache.install_rebuild(U, old_start, asc([(C, 5)]))
    snap = cache.install_rebuild(U, new_start, asc([(A, 10), (C, 5)]))
    assert cache.current(U) is snap
    assert cache.dirty(U, snap)[0] == [B]


def test_mark_covered_by_a_refresh_survives_a_slower_rebuild_that_started_before_it():
    """A refresh on an older snapshot covers mark m and installs; a rebuild that began
    before m installs afterwards: m must still be dirty (it may not be in its read)."""
    cache = SessionListCache(300)
    first = built(cache, [(A, 10)])
    cache.mark(U, B)  # B registered: the slow rebuild below covers more than `first`
    slow_start = cache.begin_rebuild(U)  # reads Redis slowly
    slow_rows = [(A, 10), (B, 20)]
    cache.mark(U, A)
    dirty, upto = cache.dirty(U, first)
    assert sorted(dirty) == [A, B]
    refreshed = cache.install_refresh(U, first, upto, {A: 99, B: 20})
    assert refreshed is not None and cache.dirty(U, refreshed)[0] == []
    assert cache.mark_count == 1  # A's mark kept: the slow rebuild does not cover it
    after = cache.install_rebuild(U, slow_start, asc(slow_rows))
    assert after is not refreshed and cache.current(U) is after
    assert cache.dirty(U, after)[0] == [A]


def test_sweep_drops_expired_snapshots_and_their_marks():
    clock = Clock()
    cache = SessionListCache(300, clock)
    built(cache, [(A, 1)])
    cache.mark(U, A)
    clock.t += 301
    cache.sweep()
    assert cache.mark_count == 0 and cache.current(U) is None
