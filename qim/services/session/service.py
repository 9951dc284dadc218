"""PULL_SESSION_LIST and MARK_READ of SessionProjection (docs/design.md §6, seed 000 会话列表).

Requests arrive as SESSION_CALL from the gateway, which routes a user to the owner of
its session shard in the ShardRegistry (docs/design.md §13); both projection paths of that
shard reach the same owner, so one node holds every mark of its users. Replies:
SESSION_LIST_BATCH / MARK_READ_OK, or RequestError: INVALID_ARGUMENT (bad body or
cursor), FORBIDDEN / NOT_FOUND (MARK_READ on a conversation the actor is not in),
UNAVAILABLE (Redis down; not the owner of the user's shard; the shard's durable
projection catching up or failed closed), INTERNAL (a missing or corrupt record: the
whole page fails).

Cursor: 24 bytes = score u64 ‖ conversation_id of the last entry returned (keyset over
the (score, conversation_id) order; scores only grow, so no entry repeats across pages).

Display names (docs/protocol.md "Names"): the first page of a user's PULL_SESSION_LIST
keeps the actor's `display_name` (its token's `name` claim, attached by the gateway) as
the user's name, in the same round trip as the page's reads; a token without a name
leaves the kept one. PULL_PROFILES answers names by user id (PROFILES_BATCH).
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from typing import Awaitable, Callable, Optional

from qim._core import ids
from qim.consts import (
    CONVERSATION_KIND_DIRECT,
    CONVERSATION_KIND_GROUP,
    ID_LEN,
    PROFILES_PAGE_MAX,
    SESSION_PAGE_DEFAULT_LIMIT,
    SESSION_PAGE_MAX_LIMIT,
)
from qim.errors import EngineError, ErrorCode, IdError, RequestError
from qim.proto.v1 import convstate_pb2, internal_pb2, session_pb2
from qim.protocol import Opcode
from qim.services.session.cache import SessionListCache, Snapshot
from qim.services.session.convstate import ConvStateCalls
from qim.services.session.metrics import SessionMetrics
from qim.services.session.push import PushCalls, PushHandlers
from qim.services.session.summary import PageError, Summarizer
from qim.stores.badges import BadgeStore
from qim.stores.convstate import ConversationStateStore
from qim.stores.errors import StorageError
from qim.stores.groups import GroupStore
from qim.stores.intervals import OPEN
from qim.stores.messages import MessageStore
from qim.stores.push import PushRegistrationStore
from qim.stores.reads import ReadPositionStore
from qim.stores.sessions import SessionStore
from qim.topology import SESSION
from qim.wire.calls import Dispatch
from qim.wire.validate import parse_request

logger = logging.getLogger(__name__)

CURSOR = struct.Struct(">Q16s")
REFRESH_ATTEMPTS = 3

DeviceSend = Callable[[int, int, int, int, bytes], None]  # (tenant, user, exclude_device, opcode, body)
# (tenant, user, pages) -> why this node must not serve the user now (not the owner of its
# shard; with pages=True also: its projection is catching up or failed closed), or None
Unserved = Callable[[int, int, bool], Optional[str]]


class SessionService(PushHandlers):
    """`await handle(body)` -> (reply_opcode, reply_body) for one SessionCall body."""

    def __init__(self, messages: MessageStore, groups: GroupStore, sessions: SessionStore, reads: ReadPositionStore,
                 cache: SessionListCache, send_devices: DeviceSend, unserved: Unserved,
                 metrics: Optional[SessionMetrics] = None,
                 restore: Optional[Callable[[int, int, frozenset], Awaitable[int]]] = None,
                 states: Optional[ConversationStateStore] = None,
                 push: Optional[PushRegistrationStore] = None) -> None:
        self._m = metrics if metrics is not None else SessionMetrics()
        self._messages = messages
        self._groups = groups
        self._sessions = sessions
        self._reads = reads
        self.cache = cache
        # UserConversationState and read receipts (convstate.py, docs/decisions/0122)
        self._cs = None if states is None else ConvStateCalls(
            states, sessions, groups, send_devices, self._summarize, cache.mark,
            lambda key: self.cache.forget(lambda k: k == key), unserved)
        self._summarizer = Summarizer(messages, groups, sessions, reads, states,
                                      None if self._cs is None else self._cs.peer_reads)
        self._send_devices = send_devices
        self._unserved = unserved
        # completes a conversation set not yet checked against CQL user_conversation_state
        # (docs/decisions/0023, 0065: firstreg.py restore_list); None without the archive tier
        self._restore = restore
        self._tasks: set[asyncio.Task] = set()
        # device push registrations (push.py, docs/decisions/0128)
        self._push = None if push is None else PushCalls(push, unserved)
        self._dispatch = Dispatch(SESSION, self)
        self.badges: Optional[BadgeStore] = None  # UserBadgeState (decision 0129), set by the node: mutes mark it

    async def handle(self, body: bytes) -> tuple[int, bytes]:
        """One SessionCall body -> (reply opcode, reply body); RequestError (see the module docstring)."""
        call = parse_request(internal_pb2.SessionCall, body, "SESSION_CALL")
        actor = call.actor
        if len(actor.tenant_id) != ID_LEN or actor.user_id == 0:
            raise RequestError(ErrorCode.UNAUTHENTICATED, "no authenticated actor")
        try:
            return await self._dispatch(call.opcode, call.upstream, actor)  # its declared calls (qim/wire/calls.py)
        except EngineError as exc:  # StoreUnavailable, or the broker
            self._m.page_failures.labels(reason="unavailable").inc()
            raise RequestError(ErrorCode.UNAVAILABLE, f"session store unavailable: {exc.__class__.__name__}") from None

    # --- PULL_SESSION_LIST -------------------------------------------------------------
    async def pull_list(self, actor, req: session_pb2.PullSessionList) -> session_pb2.SessionListBatch:
        """PULL_SESSION_LIST: one page of the user's list from the cached snapshot, entries summarized on the read path."""
        tenant, user = int.from_bytes(actor.tenant_id, "big"), actor.user_id
        reason = self._unserved(tenant, user, True)
        if reason:
            raise RequestError(ErrorCode.UNAVAILABLE, f"session projection not ready: {reason}")
        if req.cursor and len(req.cursor) != CURSOR.size:
            raise RequestError(ErrorCode.INVALID_ARGUMENT, "bad session list cursor")
        after = None
        if req.cursor:
            score, conv = CURSOR.unpack(req.cursor)
            after = (score, conv.hex().encode())
        limit = min(req.limit or SESSION_PAGE_DEFAULT_LIMIT, SESSION_PAGE_MAX_LIMIT)
        t0 = time.perf_counter()
        try:
            if not req.cursor and actor.display_name:  # concurrent with the page's reads: no extra latency
                (snap, how), _ = await asyncio.gather(
                    self.snapshot(tenant, user), self._sessions.set_display_name(tenant, user, actor.display_name))
            else:
                snap, how = await self.snapshot(tenant, user)
            members, nxt = snap.page(after, limit)
            convs = [_conv(m) for m in members]
            fresh = await self._summarizer.summarize(tenant, user,
                                    [c for m, c in zip(members, convs) if m not in snap.summaries])
        except PageError as exc:
            self._m.page_failures.labels(reason="corrupt").inc()
            logger.error("session page failed: %s", exc)
            raise RequestError(ErrorCode.INTERNAL, f"session list unavailable: {exc}") from None
        batch = session_pb2.SessionListBatch(has_more=nxt is not None)
        for member, conv in zip(members, convs):
            summary = snap.summaries.get(member)
            if summary is None:
                summary = snap.summaries[member] = fresh[conv]
            batch.sessions.append(summary)
        if nxt is not None:
            batch.next_cursor = CURSOR.pack(nxt[0], _conv(nxt[1]))
        if not req.cursor and self.badges is not None:  # the first page carries the badge (decision 0129)
            batch.badge, batch.badge_version = (await self.badges.badges_of(tenant, [user]))[user]
        self._m.list_seconds.labels(snapshot=how).observe(time.perf_counter() - t0)
        return batch

    async def profiles(self, actor, req: session_pb2.PullProfiles) -> session_pb2.ProfilesBatch:
        """PULL_PROFILES: each asked user's display name, in request order ("" none)."""
        if not 0 < len(req.user_ids) <= PROFILES_PAGE_MAX:
            raise RequestError(ErrorCode.INVALID_ARGUMENT, f"PULL_PROFILES asks for 1 to {PROFILES_PAGE_MAX} user ids")
        users = list(req.user_ids)
        names = await self._sessions.display_names(int.from_bytes(actor.tenant_id, "big"), users)
        return session_pb2.ProfilesBatch(profiles=[session_pb2.Profile(user_id=u, display_name=n)
                                                   for u, n in zip(users, names)])

    async def snapshot(self, tenant: int, user: int) -> tuple[Snapshot, str]:
        """A snapshot covering every mark taken before the call: rebuilt when absent or
        expired, refreshed when dirty. Returns it and "cold" | "refresh" | "warm"."""
        key = (tenant, user)
        how = "warm"
        snap: Optional[Snapshot] = None
        for _ in range(REFRESH_ATTEMPTS):
            snap = self.cache.current(key)
            if snap is None:
                how = "cold"
                start = self.cache.begin_rebuild(key)
                try:
                    # (score, member) ascending, what the cache keeps
                    asc = await self._read_set(tenant, user)
                    if self._cs is not None:  # pinned first, hidden left out (convstate.py)
                        asc = await self._cs.shape(tenant, user, asc)
                except BaseException:
                    self.cache.abort_rebuild(key, start)
                    raise
                snap = self.cache.install_rebuild(key, start, asc)
            dirty, upto = self.cache.dirty(key, snap)
            if not dirty:
                return snap, how
            how = "refresh" if how == "warm" else how
            scores = await self._scores(tenant, user, dirty)
            new = self.cache.install_refresh(key, snap, upto, dict(zip(dirty, scores)))
            if new is not None:
                return new, how
        # Contention with other requests of this user: serve an uninstalled refresh.
        assert snap is not None  # REFRESH_ATTEMPTS >= 1
        dirty, upto = self.cache.dirty(key, snap)
        scores = await self._scores(tenant, user, dirty) if dirty else []
        return snap.updated(0, upto, dict(zip(dirty, scores))), how

    async def _scores(self, tenant: int, user: int, members: list[bytes]) -> list[Optional[int]]:
        """Re-read list scores of `members` (None: not listed), shaped by the user's choices."""
        scores = await self._sessions.scores(tenant, user, members)
        return scores if self._cs is None else await self._cs.shape_scores(tenant, user, members, scores)

    async def _summarize(self, tenant: int, user: int, convs: list[bytes]) -> dict:
        return await self._summarizer.summarize(tenant, user, convs)

    async def summarize(self, tenant: int, user: int, convs: list[bytes]) -> dict:
        """{conversation_id: SessionEntry} as the list shows them but without the direct
        peer and its read position (Summarizer.summarize with_peers=False; PageError,
        StoreUnavailable); UserBadgeState settles from these (badge.py), which reads
        neither."""
        return await self._summarizer.summarize(tenant, user, convs, with_peers=False)

    # --- conversation state and read receipts (convstate.py) ----------------------------
    def _calls(self) -> ConvStateCalls:
        if self._cs is None:
            raise RequestError(ErrorCode.UNAVAILABLE, "conversation state is not configured on this node")
        return self._cs

    async def set_state(self, actor, req: convstate_pb2.SetConversationState) -> convstate_pb2.ConversationState:
        """SET_CONVERSATION_STATE (ConvStateCalls.set_state); a mute marks the badge."""
        reply = await self._calls().set_state(actor, req)
        if req.HasField("muted_until") and self.badges is not None:  # decision 0129
            await self.badges.mark(int.from_bytes(actor.tenant_id, "big"), actor.user_id, [reply.conversation_id])
        return reply

    async def set_receipts(self, actor, req: convstate_pb2.SetReceipts) -> convstate_pb2.ReceiptsOk:
        """SET_RECEIPTS (ConvStateCalls.set_receipts)."""
        return await self._calls().set_receipts(actor, req)

    async def pull_readers(self, actor, req: convstate_pb2.PullReaders) -> convstate_pb2.ReadersBatch:
        """PULL_READERS (ConvStateCalls.pull_readers)."""
        return await self._calls().pull_readers(actor, req)

    async def _read_set(self, tenant: int, user: int) -> list[tuple[int, bytes]]:
        """The user's conversation set (score, member) ascending; with the archive tier, a
        set not yet checked against user_conversation_state is completed from it first
        (docs/decisions/0065)."""
        if self._restore is None:
            return await self._sessions.conversations(tenant, user)
        asc, checked = await self._sessions.checked_conversations(tenant, user)
        if checked:
            return asc
        try:
            restored = await self._restore(tenant, user, frozenset(m for _, m in asc))
        except (StorageError, EngineError) as exc:
            if not asc:  # nothing to serve: the page fails as the store failed
                raise
            # the set Redis holds is served, the mark stays unset: the next cold read
            # tries again (a CQL outage must not fail pages of intact lists)
            self._m.list_restore_failures.inc()
            logger.warning("conversation list not checked against user_conversation_state (%s); "
                           "served from Redis", exc.__class__.__name__)
            return asc
        return await self._sessions.conversations(tenant, user) if restored else asc

    # --- MARK_READ ---------------------------------------------------------------------
    async def mark_read(self, actor, req: session_pb2.MarkRead) -> session_pb2.MarkReadOk:
        """MARK_READ: the read position moved forward to at most the newest visible message; READ_SYNC and SESSION_DELTA follow."""
        tenant, user = int.from_bytes(actor.tenant_id, "big"), actor.user_id
        reason = self._unserved(tenant, user, False)
        if reason:
            raise RequestError(ErrorCode.UNAVAILABLE, reason)
        conv = req.conversation_id
        try:
            kind = ids.conversation_kind(conv)
        except IdError:
            raise RequestError(ErrorCode.INVALID_ARGUMENT, "conversation_id must be 16 non-zero bytes") from None
        if kind == CONVERSATION_KIND_DIRECT:
            if req.peer_user_id and ids.conversation_id_direct(tenant, user, req.peer_user_id) != conv:
                raise RequestError(ErrorCode.FORBIDDEN, "not a participant of this conversation")
            listed, newest = await asyncio.gather(self._sessions.listed(tenant, user, conv),
                                                  self._messages.latest_seq(tenant, conv, OPEN))
            if not req.peer_user_id and not listed:
                raise RequestError(ErrorCode.NOT_FOUND, "conversation not in the user's list")
        elif kind == CONVERSATION_KIND_GROUP:
            intervals = await self._groups.intervals_of(tenant, conv, user)  # StoreCorrupt: INTERNAL
            if intervals is None:
                raise RequestError(ErrorCode.FORBIDDEN, "not a member of this group")
            # the newest message the user can see: the top of its newest non-empty interval
            newest = await self._messages.latest_seq(tenant, conv, intervals)
        else:
            raise RequestError(ErrorCode.INVALID_ARGUMENT, "rooms have no read position")
        if newest is None:
            raise RequestError(ErrorCode.NOT_FOUND, "no visible message in this conversation")
        seq, moved = await self._reads.mark_read(tenant, user, conv, min(req.read_conversation_seq, newest))
        self.cache.mark((tenant, user), conv.hex().encode())
        self._m.mark_reads.labels(moved=str(bool(moved)).lower()).inc()
        if moved:
            task = asyncio.get_running_loop().create_task(self._sync_devices(tenant, user, actor.device_id, conv, seq))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            if kind == CONVERSATION_KIND_DIRECT and self._cs is not None:  # the peer's read tick
                self._cs.read_moved(tenant, user, conv, seq, req.peer_user_id)
        return session_pb2.MarkReadOk(conversation_id=conv, read_conversation_seq=seq)

    async def _sync_devices(self, tenant: int, user: int, device: int, conv: bytes, seq: int) -> None:
        """READ_SYNC (absolute position) to the user's other devices, then SESSION_DELTA
        (absolute entry) to all of them. Best effort: a failure is logged, the next list
        pull is exact anyway."""
        body = session_pb2.ReadSync(conversation_id=conv, read_conversation_seq=seq).SerializeToString()
        self._send_devices(tenant, user, device, Opcode.READ_SYNC, body)
        try:
            entry = (await self._summarizer.summarize(tenant, user, [conv]))[conv]
        except Exception as exc:  # noqa: BLE001 — best effort: the next list pull is exact anyway
            logger.warning("SESSION_DELTA after MARK_READ skipped: %s", exc.__class__.__name__)
            return
        delta = session_pb2.SessionDelta(sessions=[entry]).SerializeToString()
        self._send_devices(tenant, user, 0, Opcode.SESSION_DELTA, delta)


def _conv(member: bytes) -> bytes:
    """conversation_id from a convs member (lowercase hex); PageError when it is not one."""
    try:
        conv = bytes.fromhex(member.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        conv = b""
    if len(conv) != ID_LEN or conv.hex().encode() != member:
        raise PageError("corrupt member in the conversation set")
    return conv
