"""PULL_MAILBOX (docs/design.md §5.5): entries after the device cursor, never past the lane's
materialized watermark, split only at mailbox_seq boundaries, referenced bodies filled
from MessageStore in one read per page (MessageStore.resolve).
"""

from __future__ import annotations

import asyncio
from typing import Callable, Optional

from qim._core import eventgroup, ids, watermark
from qim._core import mailbox_seq as mseq
from qim.consts import ID_LEN, MAILBOX_PAGE_MAX_BYTES, MAILBOX_PAGE_MAX_ENTRIES, U63_MAX
from qim.errors import EngineError, ErrorCode, RequestError, SeqError
from qim.proto.v1 import internal_pb2, mailbox_pb2, reaction_pb2
from qim.protocol import EventType, Opcode
from qim.services.mailbox.inline import entry_pb  # one wire form for pulls and inline pushes (0156)
from qim.services.mailbox.materializer import MailboxMaterializer
from qim.stores import quotes
from qim.stores.mailboxes import MailboxStore, Retained
from qim.stores.messages import MessageRef, MessageStore
from qim.stores.reactions import ReactionStore
from qim.topology import MAILBOX
from qim.wire.calls import Dispatch
from qim.wire.history import copy_extras

# A zero-cursor pull that finds only expired entries removes this many pages of them
# before it answers (empty, has_more) so that one request stays bounded.
ZERO_CURSOR_TRIM_ROUNDS = 8


class MailboxPuller:
    """Serves MAILBOX_PULL for the shards this node owns.

    Raises RequestError: UNAUTHENTICATED (no valid actor), INVALID_ARGUMENT (bad body or
    cursor), CURSOR_EXPIRED (a cursor below the trim boundary, of another shard_epoch or
    ahead of the watermark: the device must REBUILD; docs/decisions/0076), UNAVAILABLE
    (shard not owned here, its lease ended, or not ready: the gateway asks the
    ShardRegistry again), MAILBOX_DIRTY (the node stopped materializing).
    `holds(shard)`: whether this node's lease of the shard is live (None: no registry).
    `reactions`: where the summaries of pulled messages are read (None: pulls carry none).
    """

    def __init__(self, messages: MessageStore, store: MailboxStore, materializer: MailboxMaterializer,
                 shard_count: int, holds: Optional[Callable[[int], bool]] = None,
                 reactions: Optional[ReactionStore] = None) -> None:
        self._messages = messages
        self._reactions = reactions
        self._store = store
        self._mat = materializer
        self._shard_count = shard_count
        self._holds = holds
        self._dispatch = Dispatch(MAILBOX, self)

    async def pull(self, req: internal_pb2.MailboxPull) -> mailbox_pb2.MailboxBatch:
        """One MAILBOX_BATCH for the actor's device cursor (see the class docstring for
        errors), through the mailbox's declared call (qim/wire/calls.py)."""
        return await self._dispatch.answer(Opcode.PULL_MAILBOX, req.upstream, req)

    async def pull_mailbox(self, req: internal_pb2.MailboxPull, q: mailbox_pb2.PullMailbox) -> mailbox_pb2.MailboxBatch:
        """PULL_MAILBOX `q` of the envelope `req` (its declared handler)."""
        if len(req.actor.tenant_id) != ID_LEN or not 0 < req.actor.user_id <= U63_MAX:
            # as in the writer and the session service: never an IdError (INTERNAL) below
            raise RequestError(ErrorCode.UNAUTHENTICATED, "no authenticated actor")
        tenant = int.from_bytes(req.actor.tenant_id, "big")
        user = req.actor.user_id
        lane, _, shard = ids.user_placement(tenant, user, self._shard_count)
        state = self._mat.shards.get(shard)
        if state is None or (self._holds is not None and not self._holds(shard)):
            raise RequestError(ErrorCode.UNAVAILABLE, f"mailbox shard {shard} is not served by this node (not its "
                               "owner)")
        if state.dirty:
            raise RequestError(ErrorCode.MAILBOX_DIRTY, "mailbox shard stopped; retry later")
        if q.cursor == 0:
            after = -1
        else:
            try:
                epoch, after = mseq.split(q.cursor)
            except SeqError:
                raise RequestError(ErrorCode.INVALID_ARGUMENT, "cursor is not a mailbox_seq") from None
            if epoch != state.epoch:
                # a cursor of another life of this log (a restore moved the shard to a new
                # shard_epoch, docs/decisions/0075): its offsets name other entries here
                raise RequestError(ErrorCode.CURSOR_EXPIRED, "cursor is of another shard_epoch: REBUILD")
        visible = watermark.visible_offset(state.blob, lane)
        if after > visible and q.cursor != 0:
            # the device holds entries this mailbox does not (it was rewound): it must
            # REBUILD, never retry, nor wait for W to pass it (it would skip entries
            # handed out again at those offsets; docs/decisions/0076)
            raise RequestError(ErrorCode.CURSOR_EXPIRED, "cursor is ahead of the mailbox watermark: REBUILD")
        max_entries = min(q.max_entries or MAILBOX_PAGE_MAX_ENTRIES, MAILBOX_PAGE_MAX_ENTRIES)
        max_bytes = min(q.max_bytes or MAILBOX_PAGE_MAX_BYTES, MAILBOX_PAGE_MAX_BYTES)
        try:
            kept = await self._store.trim_and_days(tenant, user)
            if q.cursor != 0 and (after < kept.trim or not kept.known):
                # Entries after this cursor were removed by retention (or everything was):
                # the device must REBUILD (docs/design.md §5.5, §9). A zero cursor never expires.
                raise RequestError(ErrorCode.CURSOR_EXPIRED, "cursor is below the mailbox trim boundary")
            groups, expired = await self._read(tenant, user, kept, after, visible, max_entries + 1, state.epoch)
            if q.cursor != 0 and any(expired):
                await self._trim(tenant, user, kept, groups, expired)
                raise RequestError(ErrorCode.CURSOR_EXPIRED, "an entry after the cursor is past the mailbox retention")
            rounds = 1
            while all(expired) and len(groups) > max_entries:  # zero cursor, nothing retained yet
                await self._trim(tenant, user, kept, groups, expired)
                if rounds == ZERO_CURSOR_TRIM_ROUNDS:  # bounded work per request: pull again
                    return mailbox_pb2.MailboxBatch(next_cursor=0, has_more=True, lane=lane, shard_epoch=state.epoch)
                groups, expired = await self._read(tenant, user, kept, after, visible, max_entries + 1, state.epoch)
                rounds += 1
        except EngineError:
            raise RequestError(ErrorCode.UNAVAILABLE, "mailbox store unavailable") from None
        batch = mailbox_pb2.MailboxBatch(next_cursor=q.cursor, lane=lane, shard_epoch=state.epoch)
        # The byte budget counts referenced bodies too (filled after the cut), so their
        # stored sizes are read first: a page never exceeds the frame limit.
        ref_sizes = await self._record_sizes(tenant, [ev for (_, evs, _, _), old in zip(groups, expired) if not old
                                                      for ev in evs if ev.body is None])
        used = served = examined = 0
        refs = []
        for (seq, events, member_len, _), old in zip(groups, expired):
            if served == max_entries:
                batch.has_more = True
                break
            if not old:
                size = member_len + sum(ref_sizes.get(ev.message_id, 0) for ev in events if ev.body is None)
                if served > 0 and used + size > max_bytes:
                    batch.has_more = True
                    break
                for ev in events:
                    entry = batch.entries.add()
                    entry.CopyFrom(entry_pb(seq, ev))
                    if ev.body is None:
                        refs.append((entry, ev))
                used += size
                served += 1
            examined += 1
        else:
            batch.has_more = len(groups) > max_entries
        if served:  # past skipped (and removed) entries too: the trim boundary stays behind it
            batch.next_cursor = groups[examined - 1][0]
        if any(expired[:examined]):  # zero cursor: what it stepped over is removed for good
            try:
                await self._trim(tenant, user, kept, groups[:examined], expired[:examined])
            except EngineError:
                raise RequestError(ErrorCode.UNAVAILABLE, "mailbox store unavailable") from None
        if batch.entries:
            # the two reads of the page run concurrently: the summaries add no latency
            # beyond the slower of them (one round trip per core instance each)
            await asyncio.gather(self._fill_bodies(tenant, refs, [e for e in batch.entries if e.body]),
                                 self._annotate(tenant, user, batch))
        return batch

    async def _read(self, tenant: int, user: int, kept: Retained, after: int, upto: int,
                    limit: int, epoch: int) -> tuple[list, list[bool]]:
        """Rows after `after` as (seq, events, member length, (member, offset)) and, per
        row, whether it is past the retention. One event group is one dispatch record:
        its events share created_at. Only the oldest retained day can hold such entries
        (it straddles the cutoff), so the check costs nothing otherwise. `seq` carries
        the shard's current `epoch`: an entry stored before a restore moved the shard to
        a new shard_epoch keeps its offset (the restore preserves offsets) and is served
        in the new life (docs/decisions/0075)."""
        rows = await self._store.read_range(tenant, user, kept.days, after, upto, limit)
        groups = [(mseq.compose(epoch, mseq.split(mseq.from_bytes(m[:8]))[1]), eventgroup.unpack_group(m[8:]),
                   len(m), (m, off)) for m, off in rows]
        straddles = kept.straddles()
        return groups, [straddles and g[1][0].created_at_ms < kept.cutoff_ms for g in groups]

    async def _trim(self, tenant: int, user: int, kept: Retained, groups: list, expired: list[bool]) -> None:
        """Remove the expired rows (all from the straddling day) and raise the boundary."""
        members = [g[3] for g, old in zip(groups, expired) if old]
        if members:
            await self._store.trim_entries(tenant, user, kept.days[0], members)

    async def _record_sizes(self, tenant: int, events: list) -> dict[bytes, int]:
        """message_id -> stored record size of referenced events (one store read)."""
        if not events:
            return {}
        sizes = await self._messages.record_sizes(tenant, [MessageRef(ev.conversation_id, ev.message_id)
                                                           for ev in events])
        return {ev.message_id: n for ev, n in zip(events, sizes)}

    async def _annotate(self, tenant: int, user: int, batch: mailbox_pb2.MailboxBatch) -> None:
        """Set `reactions` on each MESSAGE entry whose message has any, or had (empty, with
        its version), as `user` sees them (decision 0121 §4 and its versions amendment); an
        entry of a message that never had any carries nothing more. The summary
        store's errors leave as UNAVAILABLE, like the mailbox's."""
        if self._reactions is None:
            return
        msgs = [e for e in batch.entries if e.event_type == EventType.MESSAGE]
        if not msgs:
            return
        try:
            summaries = await self._reactions.summaries_of(
                tenant, [MessageRef(e.conversation_id, e.message_id) for e in msgs], user)
        except EngineError:
            raise RequestError(ErrorCode.UNAVAILABLE, "reaction store unavailable") from None
        for entry, summary in zip(msgs, summaries):
            # `mine` as the puller sees it, like a history page's; an empty summary with a
            # version too, so a device holding an older one learns they are gone (0121)
            if summary.counts or summary.version:
                entry.reactions.version = summary.version
                entry.reactions.counts.extend(reaction_pb2.ReactionCount(emoji=c.emoji, count=c.count, mine=c.mine)
                                              for c in summary.counts)

    async def _fill_bodies(self, tenant: int, refs: list, inline: list) -> None:
        """One store read per page: referenced records (their state is inside), and the
        state of inline entries, so a recalled/deleted body is never served. INTERNAL when
        a referenced record is missing or corrupt (StoreCorrupt)."""
        records, states = await self._messages.resolve(
            tenant, [MessageRef(ev.conversation_id, ev.message_id) for _, ev in refs],
            [MessageRef(entry.conversation_id, entry.message_id) for entry in inline])
        for (entry, _), rec in zip(refs, records):
            if rec is None:
                raise RequestError(ErrorCode.INTERNAL, "referenced message missing from MessageStore")
            entry.body, entry.state = rec.body, rec.state
            copy_extras(rec, entry)  # replies and mentions are never inlined (decision 0120)
        # a quote of a message recalled or removed since is read without its text (decision 0134)
        await quotes.refresh(self._messages, tenant, [(entry.conversation_id, entry) for entry, _ in refs])
        for entry, state in zip(inline, states):
            if state:  # recalled or deleted
                entry.body = b""
                entry.state = state
