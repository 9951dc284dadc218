"""The session snapshot cache with dirty marks (docs/design.md §6, §11 TTL 5 min; seed 000
2026-09-26: "qsession 脏刷新丢标记").

Pure in-memory logic, no I/O: the caller reads Redis between the begin_* and install_*
steps, so tests can drive every interleaving with plain data.

Shapes. A Snapshot holds one user's conversation set: `asc` = [(score, conv)] ascending
(score = created_at_ms of the newest message, pages are read from the end; conv is any
bytes key ordered like the conversation_id, the service uses the convs member, i.e. the
lowercase hex), `scores`, per-conversation `covers` and lazily filled `summaries`. Marks: after every Redis write that can change a conversation of a user (registration
on either projection path, MARK_READ), the writer calls `mark(user, conv)`, which takes
the next global mark number. An entry *covers* mark m when its data were read from Redis
after m was taken (covered >= m), so it includes m's write. A conversation is dirty
while it has a mark above its coverage (`covers`, else the snapshot's `covered`).

The seed lost marks three ways; the rule closing each:
1. A mark that arrived while a full rebuild was between "read Redis" and "install" was
   dropped because there was no live snapshot. -> Marks are kept for every user with a
   snapshot OR a rebuild in flight; a rebuild covers only marks taken before its read
   started (`start`), later ones stay dirty after it installs.
2. The low-latency path invalidated the whole snapshot, deleting marks that arrived after
   an in-flight refresh took its dirty set, and the refresh then installed its old base
   again. -> Nothing invalidates: every path only marks. Taking the dirty set deletes no
   mark. A refresh installs only onto the exact snapshot it started from.
3. Two concurrent rebuilds: the later install overwrote the earlier one and its marks.
   -> A rebuild yields to an installed snapshot that covers at least as much, and a mark
   is deleted only when the installed snapshot covers it AND no rebuild still in flight
   started before it (that rebuild may install later without it).
Marks of a user with neither snapshot nor rebuild are not kept: the next rebuild reads
Redis after the write anyway.
"""

from __future__ import annotations

import bisect
import itertools
import time
from typing import Any, Callable, Iterable, Optional

INF = float("inf")
SMALL_UPDATE = 32  # below this many changed entries, re-sort by bisect instead of sorting


class Snapshot:
    """One user's frozen conversation set. `asc` = [(score, conv)] ascending, `scores`
    = conv -> score, `covers` = coverage of conversations re-read by refreshes (others
    have `covered`), `summaries` = conv -> page entry filled lazily (the only mutation
    after install; a summary read after install is at least as fresh as its entry)."""

    __slots__ = ("rev", "built_at", "covered", "asc", "scores", "covers", "summaries")

    def __init__(self, rev: int, built_at: float, covered: int, asc: list, scores: dict,
                 covers: Optional[dict] = None, summaries: Optional[dict] = None) -> None:
        self.rev, self.built_at, self.covered, self.asc, self.scores = rev, built_at, covered, asc, scores
        self.covers = covers if covers is not None else {}
        self.summaries = summaries if summaries is not None else {}

    def coverage(self, conv) -> int:
        """The mark number through which `conv`'s data is known to be fresh."""
        return self.covers.get(conv, self.covered)

    def page(self, after: Optional[tuple[int, bytes]], limit: int) -> tuple[list, Optional[tuple[int, bytes]]]:
        """Newest first: up to `limit` conversations strictly below the keyset cursor
        `after` = (score, conv) (None = from the top); returns them and the cursor of
        the next page (None when this page reaches the end)."""
        hi = len(self.asc) if after is None else bisect.bisect_left(self.asc, after)
        lo = max(0, hi - limit)
        rows = self.asc[lo:hi]
        rows.reverse()
        return [c for _, c in rows], (rows[-1] if lo > 0 and rows else None)

    def updated(self, rev: int, upto: int, scores: dict) -> "Snapshot":
        """A copy with the conversations in `scores` (conv -> score | None = absent)
        re-read at mark number `upto`: their summaries dropped, re-sorted."""
        new_scores = dict(self.scores)
        covers = dict(self.covers)
        summaries = dict(self.summaries)
        old_keys = [(self.scores[c], c) for c in scores if c in self.scores]
        new_keys = []
        for conv, score in scores.items():
            covers[conv] = upto
            summaries.pop(conv, None)
            if score is None:
                new_scores.pop(conv, None)
            else:
                new_scores[conv] = int(score)
                new_keys.append((int(score), conv))
        if len(scores) <= SMALL_UPDATE:
            asc = list(self.asc)
            for key in old_keys:
                i = bisect.bisect_left(asc, key)
                if i < len(asc) and asc[i] == key:
                    del asc[i]
            for key in new_keys:
                bisect.insort(asc, key)
        else:
            asc = sorted([k for k in self.asc if k[1] not in scores] + new_keys)
        return Snapshot(rev, self.built_at, self.covered, asc, new_scores, covers, summaries)


class _User:
    __slots__ = ("snap", "marks", "rebuilds")

    def __init__(self) -> None:
        self.snap: Optional[Snapshot] = None
        self.marks: dict[bytes, int] = {}
        self.rebuilds: list[int] = []  # starts of rebuilds in flight (a multiset)


class SessionListCache:
    """Per-user snapshots keyed by any hashable user key (the service uses (tenant, user)).

    Protocol of a reader: `current` -> None? `begin_rebuild`, read the conversation set,
    `install_rebuild` (or `abort_rebuild` on failure). Then `dirty` -> (convs, upto); if
    any, read their scores and `install_refresh(base, upto, scores)`; None means the base
    was replaced meanwhile: start over. Counters (`rebuilt`, `yielded`, `refreshed`,
    `abandoned`) feed the service metrics."""

    def __init__(self, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self._clock = clock
        self._seq = 0
        self._revs = itertools.count(1)
        self._users: dict = {}
        self.rebuilt = self.yielded = self.refreshed = self.abandoned = 0

    # --- marks -------------------------------------------------------------------------
    def mark(self, user, conv: bytes) -> None:
        """Call after the Redis write that changed `conv` for `user` completed."""
        st = self._users.get(user)
        if st is None:
            return
        self._seq += 1
        st.marks[conv] = self._seq

    def mark_many(self, pairs: Iterable[tuple]) -> None:
        """`mark(user, conv)` for each pair."""
        for user, conv in pairs:
            self.mark(user, conv)

    @property
    def mark_count(self) -> int:
        """Dirty marks held over every user (a gauge: bounded by the users with snapshots or rebuilds)."""
        return sum(len(st.marks) for st in self._users.values())

    # --- reading -----------------------------------------------------------------------
    def current(self, user) -> Optional[Snapshot]:
        """The installed snapshot, or None when absent or older than the TTL."""
        st = self._users.get(user)
        if st is None or st.snap is None:
            return None
        if self._clock() - st.snap.built_at >= self.ttl_s:
            st.snap = None
            self._prune(user, st)
            return None
        return st.snap

    def dirty(self, user, snap: Snapshot) -> tuple[list[bytes], int]:
        """Conversations with a mark above `snap`'s coverage, and the mark number a read
        that starts now covers. Deletes nothing (a failed refresh needs no repair)."""
        st = self._users.get(user)
        upto = self._seq
        if st is None:
            return [], upto
        return [c for c, m in st.marks.items() if m > snap.coverage(c)], upto

    # --- rebuild -----------------------------------------------------------------------
    def begin_rebuild(self, user) -> int:
        """Register a rebuild about to read Redis; returns its start (the marks it covers)."""
        st = self._users.get(user)
        if st is None:
            st = self._users[user] = _User()
        st.rebuilds.append(self._seq)
        return self._seq

    def abort_rebuild(self, user, start: int) -> None:
        """A rebuild that started at mark `start` failed: forget it (its marks may now be pruned)."""
        st = self._users[user]
        st.rebuilds.remove(start)
        self._prune(user, st)

    def install_rebuild(self, user, start: int, asc: list) -> Snapshot:
        """Install the conversation set read after `start` — `asc` = [(score, conv)]
        ascending by (score, conv), as ZRANGE returns it — unless a live snapshot already
        covers at least as much (loss mode 3); returns the snapshot now installed."""
        st = self._users[user]
        st.rebuilds.remove(start)
        live = st.snap
        if live is not None and self._clock() - live.built_at >= self.ttl_s:
            live = st.snap = None
        if live is not None and live.covered >= start:
            self.yielded += 1
            self._prune(user, st)
            return live
        st.snap = Snapshot(next(self._revs), self._clock(), start, asc, {c: s for s, c in asc})
        self.rebuilt += 1
        self._prune(user, st)
        return st.snap

    # --- refresh -----------------------------------------------------------------------
    def install_refresh(self, user, base: Snapshot, upto: int, scores: dict) -> Optional[Snapshot]:
        """Install `base` updated with `scores` (conv -> score | None) read after mark
        `upto`, only if `base` is still the installed snapshot (loss mode 2). Returns the
        new snapshot or None (the caller starts over)."""
        st = self._users.get(user)
        if st is None or st.snap is not base or self.current(user) is not base:
            self.abandoned += 1
            return None
        st.snap = base.updated(next(self._revs), upto, scores)
        self.refreshed += 1
        self._prune(user, st)
        return st.snap

    # --- housekeeping ------------------------------------------------------------------
    def forget(self, where: Callable[[Any], bool]) -> int:
        """Drop the snapshots of every user key `where` selects (a session shard this
        node takes (again): another owner may have changed those lists without marking
        this cache); how many."""
        dropped = 0
        for user, st in list(self._users.items()):
            if st.snap is not None and where(user):
                st.snap = None
                dropped += 1
                self._prune(user, st)
        return dropped

    def sweep(self) -> None:
        """Drop expired snapshots and the marks nobody needs any more."""
        for user in list(self._users):
            self.current(user)

    def _prune(self, user, st: _User) -> None:
        floor = min(st.rebuilds) if st.rebuilds else INF
        snap = st.snap
        for conv, m in list(st.marks.items()):
            covered = INF if snap is None else snap.coverage(conv)
            if m <= covered and m <= floor:
                del st.marks[conv]
        if snap is None and not st.rebuilds:
            self._users.pop(user, None)
