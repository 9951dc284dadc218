"""ClientRuntime: the one SDK state machine every host drives (DESIGN.md §9, seed 001 §2.9).

States: idle → (connect) → syncing → ready ⇄ reconnecting → closed. The host calls
`await connect()` explicitly; it authenticates, syncs the mailbox (PULL_MAILBOX until
has_more is false, each batch committed with its cursor in one SQLite transaction) and
only then resends the pending sends the sync did not find (our own mailbox entries
carry the client_message_id). The same sequence runs after every automatic reconnect.

Sends: `submit_message` stores the local_pending row (reserving the cmid) and returns
the cmid; `send_message` also awaits the outcome as a `SendAck`. A SEND_ACK, or our own
mailbox entry, resolves it; a permanent ERROR raises ServerError (a QimError carrying
the ErrorCode); UNAVAILABLE / RATE_LIMITED / MAILBOX_DIRTY are retried with the same
cmid. The ACK deadline is 3 s, then a PING probe; no PONG → connection dead → reconnect.

PUSH_EVENTS are stored (idempotent on message_id), never move the cursor and trigger a
single-flight pull. Events go to `events` (an asyncio.Queue) and/or `on_event`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable, Optional

from qim.consts import MAILBOX_PAGE_MAX_BYTES, MAILBOX_PAGE_MAX_ENTRIES, MESSAGE_TYPE_TEXT, SEND_ACK_PROBE_S
from qim.errors import ErrorCode, QimError
from qim.proto.v1 import mailbox_pb2, message_pb2
from qim.protocol import Opcode
from qim.sdk import events as ev
from qim.sdk.rebuild import rebuild
from qim.sdk.connection import PROBE_S, Connection
from qim.sdk.events import ConnectionLost, Kicked, NotConnected, SendAck, SendTimeout, ServerError
from qim.sdk.store import ApplyResult, LocalStore, PendingSend, Resolved, StoreError

logger = logging.getLogger(__name__)
RETRYABLE = {ErrorCode.UNAVAILABLE, ErrorCode.RATE_LIMITED, ErrorCode.MAILBOX_DIRTY}


class ClientRuntime:
    """Client state machine over one endpoint ('host:port'), one token, one LocalStore."""

    def __init__(self, endpoint: str, token: str, store: LocalStore, *, auto_reconnect: bool = True,
                 send_timeout: float = 60.0, on_event: Optional[Callable[[ev.Event], None]] = None,
                 event_queue: bool = True, reconnect_backoff: tuple[float, float] = (0.05, 2.0),
                 ack_deadline_s: float = SEND_ACK_PROBE_S, probe_s: float = PROBE_S) -> None:
        self.endpoint, self._token, self.store = endpoint, token, store
        self.auto_reconnect, self.send_timeout = auto_reconnect, send_timeout
        self.on_event = on_event
        self.events: Optional[asyncio.Queue] = asyncio.Queue() if event_queue else None
        self._backoff = reconnect_backoff
        self.ack_deadline_s, self.probe_s = ack_deadline_s, probe_s
        self._conn: Optional[Connection] = None
        self._ready = False          # connected, synced and reconciled
        self._closing = True         # True until connect(); close() sets it again
        self._waiters: dict[bytes, asyncio.Future] = {}  # cmid -> Future[SendAck]
        self._inflight: set[bytes] = set()  # cmids transmitted on the current connection
        self._pull_task: Optional[asyncio.Task] = None
        self._pull_dirty = False
        self._tasks: set[asyncio.Task] = set()
        self._reconnect_task: Optional[asyncio.Task] = None
        self._cut_after_next_send = False
        self.stats = {"reconnects": 0, "resends": 0, "reconciled": 0, "pushes": 0}

    # --- lifecycle -----------------------------------------------------------------
    @property
    def connected(self) -> bool:
        return self._ready and self._conn is not None and self._conn.is_open

    async def connect(self) -> None:
        """Connect, AUTH, sync the mailbox, resend unresolved pending sends. Raises
        ServerError(UNAUTHENTICATED), ConnectionLost, StoreError (store/device mismatch)."""
        if self.connected:
            return
        if self._reconnect_task is not None and not self._reconnect_task.done():
            await asyncio.shield(self._reconnect_task)  # never run two logins of one device
            if self.connected:
                return
        self._closing = False
        try:
            await self._establish()
        except BaseException:
            self._closing = True  # a failed explicit connect does not start reconnecting
            if self._conn is not None:
                self._conn.abort("connect failed")
            raise

    async def close(self) -> None:
        """Stop reconnecting and close the connection; the store stays open (host owns it).
        Waiting sends keep their pending rows and time out or resolve after a later connect()."""
        self._closing = True
        self._ready = False
        for task in [self._reconnect_task, self._pull_task, *self._tasks]:
            if task is not None and not task.done():
                task.cancel()
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    def abort_connection(self) -> None:
        """Test hook: cut the connection abruptly (as a network failure would)."""
        if self._conn is not None:
            self._conn.abort("aborted by host")

    def cut_after_next_send(self) -> None:
        """Test hook: abort right after the next SEND_MESSAGE frame was written, before its ACK."""
        self._cut_after_next_send = True

    async def _establish(self, reconnect: bool = False) -> None:
        conn = await Connection.open(self.endpoint, self._token)
        if reconnect:
            self.stats["reconnects"] += 1
        auth = conn.auth
        if auth.user_id != self.store.user_id or auth.device_id != self.store.device_id:
            conn.abort("identity mismatch")
            self._closing = True
            raise StoreError("AUTH_OK identity differs from the LocalStore's (user, device)")
        old, self._conn = self._conn, None
        if old is not None:
            old.abort("replaced by a new connection")
        conn.on_push = self._on_push
        conn.on_kicked = self._on_kicked
        self._conn, self._ready, self._inflight = conn, False, set()
        conn.closed.add_done_callback(lambda f, c=conn: self._on_closed(c, f.result()))
        self._emit(ev.Connected(auth.user_id, auth.device_id, auth.mailbox_lane))
        self._spawn(conn.heartbeat(max(1.0, min(auth.heartbeat_s or 60, 120) / 2), self.probe_s))
        try:
            await self._sync_and_reconcile(conn)
        except BaseException:
            conn.abort("sync failed")
            raise

    async def _sync_and_reconcile(self, conn: Connection) -> None:
        await self.pull_mailbox()
        rows = await self.store.run(self.store.pending_sends)
        if conn is not self._conn or not conn.is_open:
            raise ConnectionLost("connection dropped during sync")
        self._ready = True
        for row in rows:
            if row.client_message_id in self._inflight:
                continue
            self.stats["resends"] += 1
            self._spawn(self._transmit(conn, row))

    def _on_closed(self, conn: Connection, reason: str) -> None:
        if conn is not self._conn:
            return
        self._ready = False
        self._emit(ev.Disconnected(reason))
        if self.auto_reconnect and not self._closing and (self._reconnect_task is None
                                                          or self._reconnect_task.done()):
            self._reconnect_task = asyncio.get_running_loop().create_task(self._reconnect_loop())

    async def _reconnect_loop(self) -> None:
        delay = self._backoff[0]
        while not self._closing:
            await asyncio.sleep(delay)
            try:
                await self._establish(reconnect=True)
                return
            except ServerError as exc:
                if exc.code == ErrorCode.UNAUTHENTICATED:
                    logger.warning("reconnect refused: %s", exc.code.name)
                    self._fail_waiters(exc)
                    return
                logger.debug("reconnect sync failed: %s", exc.code.name)
            except StoreError as exc:  # identity mismatch: reconnecting cannot fix it
                self._fail_waiters(exc)
                return
            except (QimError, asyncio.TimeoutError, OSError) as exc:
                logger.debug("reconnect failed: %s", exc.__class__.__name__)
            delay = min(delay * 2, self._backoff[1])

    def _on_kicked(self, reason: int) -> None:
        self._closing = True  # a kicked device does not fight back by reconnecting
        self._emit(ev.KickedEvent(reason))
        self._fail_waiters(Kicked(reason))

    def _fail_waiters(self, exc: BaseException) -> None:
        for fut in self._waiters.values():
            if not fut.done():
                fut.set_exception(exc)

    async def request(self, opcode: int, body: bytes, timeout: Optional[float] = None) -> tuple[int, bytes]:
        """One request on the live connection -> (reply opcode, body). NotConnected,
        ServerError (ERROR reply), ConnectionLost."""
        if not self.connected:
            raise NotConnected("call connect() first")
        return await self._conn.request(opcode, body, timeout or self.send_timeout)

    # --- sending -------------------------------------------------------------------
    async def submit_message(self, conversation_id: bytes, recipient_user_id: int, body: bytes,
                             message_type: int = MESSAGE_TYPE_TEXT, custom_type: bytes = b"") -> bytes:
        """Store the local_pending row (durable) and start sending; returns the cmid.
        Sent now when ready, otherwise after the next (re)connect's reconciliation."""
        row = await self.store.run(self.store.add_pending, conversation_id, recipient_user_id,
                                   message_type, custom_type, body)
        cmid = row.client_message_id
        self._waiters.setdefault(cmid, asyncio.get_running_loop().create_future())
        if self._ready and self._conn is not None and cmid not in self._inflight:
            self._spawn(self._transmit(self._conn, row))
        return cmid

    async def wait_ack(self, cmid: bytes, timeout: Optional[float] = None) -> SendAck:
        """Await the outcome of a submitted send. SendTimeout (row stays pending),
        ServerError (permanent ERROR), Kicked."""
        fut = self._waiters.setdefault(cmid, asyncio.get_running_loop().create_future())
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout or self.send_timeout)
        except asyncio.TimeoutError:
            raise SendTimeout(cmid) from None
        finally:
            if fut.done():
                self._waiters.pop(cmid, None)

    async def send_message(self, conversation_id: bytes, recipient_user_id: int, body: bytes,
                           message_type: int = MESSAGE_TYPE_TEXT, custom_type: bytes = b"") -> SendAck:
        """submit_message + wait_ack. Needs a prior connect() (NotConnected otherwise,
        raised before anything is stored)."""
        if self._closing:
            raise NotConnected("call connect() first")
        cmid = await self.submit_message(conversation_id, recipient_user_id, body, message_type, custom_type)
        return await self.wait_ack(cmid)

    async def _transmit(self, conn: Connection, row: PendingSend) -> None:
        cmid = row.client_message_id
        self._inflight.add(cmid)
        body = message_pb2.SendMessage(
            client_message_id=cmid, conversation_id=row.conversation_id, recipient_user_id=row.recipient_user_id,
            message_type=row.message_type, custom_type=row.custom_type, body=row.body).SerializeToString()
        delay = 0.1
        try:
            while True:
                try:
                    if self._cut_after_next_send:
                        self._cut_after_next_send = False
                        await conn.send_then_cut(Opcode.SEND_MESSAGE, body)
                    op, reply = await conn.request_probed(Opcode.SEND_MESSAGE, body, self.ack_deadline_s,
                                                          self.probe_s, repeat=True)
                except ServerError as exc:
                    if exc.code in RETRYABLE:
                        await asyncio.sleep(delay)
                        delay = min(delay * 2, 2.0)
                        continue
                    await self.store.run(self.store.mark_failed, cmid)
                    self._settle(cmid, exc=exc)
                    return
                if op != Opcode.SEND_ACK:
                    raise ConnectionLost(f"unexpected reply 0x{op:04x} to SEND_MESSAGE")
                a = message_pb2.SendAck.FromString(reply)
                resolved = Resolved(cmid, a.message_id, a.conversation_id, a.conversation_seq, a.created_at_ms)
                await self.store.run(self.store.mark_acked, resolved)
                self._settle(cmid, ack=SendAck(cmid, a.message_id, a.conversation_id, a.conversation_seq,
                                               a.created_at_ms))
                return
        except ConnectionLost:
            pass  # the reconnect's reconciliation resends or resolves it
        finally:
            if conn is self._conn:
                self._inflight.discard(cmid)

    def _settle(self, cmid: bytes, ack: Optional[SendAck] = None, exc: Optional[BaseException] = None) -> bool:
        """Resolve the waiter of `cmid`; False when there is none or it was already resolved."""
        fut = self._waiters.get(cmid)
        if fut is None or fut.done():
            return False
        fut.set_exception(exc) if exc is not None else fut.set_result(ack)
        return True

    # --- mailbox -------------------------------------------------------------------
    async def pull_mailbox(self) -> None:
        """Pull until has_more is false (single flight: a call during a running pull marks
        it dirty and waits for it). ConnectionLost / NotConnected / ServerError."""
        self._pull_dirty = True
        if self._pull_task is None or self._pull_task.done():
            self._pull_task = asyncio.get_running_loop().create_task(self._pull_loop())
        await asyncio.shield(self._pull_task)

    async def _pull_loop(self) -> None:
        while self._pull_dirty:
            self._pull_dirty = False
            while await self._pull_page():
                pass

    async def _pull_page(self) -> bool:
        conn = self._conn
        if conn is None or not conn.is_open:
            raise NotConnected("no connection")
        cursor = await self.store.run(self.store.cursor)
        req = mailbox_pb2.PullMailbox(cursor=cursor[2] if cursor else 0, max_entries=MAILBOX_PAGE_MAX_ENTRIES,
                                      max_bytes=MAILBOX_PAGE_MAX_BYTES)
        try:
            op, body = await conn.request_probed(Opcode.PULL_MAILBOX, req.SerializeToString(),
                                                 self.ack_deadline_s, self.probe_s)
        except ServerError as exc:
            if exc.code != ErrorCode.CURSOR_EXPIRED:
                raise
            # REBUILD: session list → per-conversation history → cursor from 0 (DESIGN.md §9)
            for result in await rebuild(self, lambda op, b: conn.request(op, b, self.send_timeout)):
                self._after_apply(result)
            self.stats["rebuilds"] = self.stats.get("rebuilds", 0) + 1
            self._emit(ev.CursorReset())
            return True
        if op != Opcode.MAILBOX_BATCH:
            raise ConnectionLost(f"unexpected reply 0x{op:04x} to PULL_MAILBOX")
        batch = mailbox_pb2.MailboxBatch.FromString(body)
        result = await self.store.run(self.store.apply_mailbox_batch, list(batch.entries), batch.next_cursor,
                                      batch.lane, batch.shard_epoch)
        self._after_apply(result)
        return batch.has_more

    def _on_push(self, push: mailbox_pb2.PushEvents) -> None:
        self.stats["pushes"] += 1
        self._spawn(self._handle_push(list(push.entries)))

    async def _handle_push(self, entries: list) -> None:
        result = await self.store.run(self.store.apply_push, entries)
        self._after_apply(result)
        if self._ready:
            await self.pull_mailbox()

    def _after_apply(self, result: ApplyResult) -> None:
        """Only after the SQLite commit: events and pending resolution (seed 000 §362)."""
        if result.inserted:
            convs = tuple(dict.fromkeys(m.conversation_id for m in result.inserted))
            self._emit(ev.ConversationsUpdated(convs))
            self._emit(ev.MessagesAdded(tuple(result.inserted)))
        if result.resolved:
            acks = tuple(SendAck(r.client_message_id, r.message_id, r.conversation_id, r.conversation_seq,
                                 r.created_at_ms, reconciled=True) for r in result.resolved)
            for ack in acks:  # counts only sends that no SEND_ACK had settled
                self.stats["reconciled"] += self._settle(ack.client_message_id, ack=ack)
            self._emit(ev.PendingResolved(acks))

    async def ping(self) -> int:
        """PING/PONG round trip; returns server time in ms. NotConnected, ConnectionLost."""
        if self._conn is None or not self._conn.is_open:
            raise NotConnected("no connection")
        return await self._conn.ping()

    # --- plumbing ------------------------------------------------------------------
    def _emit(self, event: ev.Event) -> None:
        if self.events is not None:
            self.events.put_nowait(event)
        if self.on_event is not None:
            self.on_event(event)

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            if not isinstance(exc, (ConnectionLost, NotConnected)):
                logger.warning("background task failed: %r", exc)
