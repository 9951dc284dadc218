"""ClientRuntime: the one SDK state machine every host drives (docs/design.md §9, seed 001 §2.9).

States: idle → (connect) → syncing → ready ⇄ reconnecting → closed. The host calls
`await connect()` explicitly; it authenticates, REBUILDs first when the store asks for
it, syncs the mailbox (PULL_MAILBOX until has_more is false, each batch committed with
its cursor in one SQLite transaction) and only then resends, in ordinal order, the
pending sends the sync did not find (our own mailbox entries carry the
client_message_id). The same sequence runs after every automatic reconnect. Transient
server errors during all of it are retried with bounded backoff (qim/sdk/retry.py).

Sends (qim/sdk/sender.py): `submit_message` validates (qim/sdk/validate.py: what the
server would refuse raises SendRefused before anything is stored), stores the
local_pending row (reserving the cmid) and returns the cmid; `send_message` also
awaits the outcome as a `SendAck`. A SEND_ACK, or our own mailbox entry, resolves it; a
permanent ERROR raises ServerError and tells the app SendFailed; UNAVAILABLE /
RATE_LIMITED / MAILBOX_DIRTY are retried with the same cmid. The ACK deadline is 3 s,
then a PING probe; no PONG and no byte → connection dead → reconnect.

Pulls (qim/sdk/puller.py): PUSH_EVENTS only wake a single-flight pull (their entries
may carry references, not bodies); only MAILBOX_BATCH and history pages reach the
store and the app. Events go to `events` (an asyncio.Queue) and/or `on_event`.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Any, Awaitable, Callable, Optional

from qim.consts import MAX_MESSAGE_BODY, MESSAGE_TYPE_TEXT, SEND_ACK_PROBE_S
from qim.errors import ErrorCode, QimError
from qim.proto.v1 import connection_pb2, mailbox_pb2, room_pb2, session_pb2
from qim.protocol import RATE_LIMITED_OPCODES
from qim.sdk import events as ev
from qim.sdk.connection import PROBE_S, Connection, client_tls
from qim.sdk.credentials import TokenProvider, TokenSource
from qim.sdk.events import ConnectionLost, Kicked, NotConnected, SendAck, SendTimeout, ServerError
from qim.sdk.puller import Puller
from qim.sdk.rategate import RateGate
from qim.sdk.reconnect import reconnect_loop
from qim.sdk.retry import RETRY_BUDGET_S, RETRYABLE, Backoff
from qim.sdk.sender import Sender
from qim.sdk.store import ApplyResult, LocalStore, StoreError
from qim.sdk.tell import tell
from qim.sdk.validate import check_send

logger = logging.getLogger(__name__)


class ClientRuntime:
    """Client state machine over one endpoint ('host:port'), one token, one LocalStore.

    `retry_budget_s`: how long transient server errors are retried in connect(), pulls
    and REBUILD before they surface (seconds). `token_provider`: called (sync or async)
    for a fresh token when the held one expires soon or was refused (qim/sdk/credentials.py).
    Transport: TLS 1.3 verifying the gateway against `ca_file` (else $QIM_CA_FILE, else
    the system trust store) or an `ssl_context` of the app's; `plaintext=True` only for a
    development gateway (qim/sdk/connection.py client_tls; TlsError ends connect() and
    the reconnect loop: trying again cannot fix a certificate)."""

    def __init__(self, endpoint: str, token: str, store: LocalStore, *, auto_reconnect: bool = True,
                 send_timeout: float = 60.0, on_event: Optional[Callable[[ev.Event], None]] = None,
                 event_queue: bool = True, reconnect_backoff: tuple[float, float] = (0.05, 2.0),
                 ack_deadline_s: float = SEND_ACK_PROBE_S, probe_s: float = PROBE_S,
                 retry_budget_s: float = RETRY_BUDGET_S, token_provider: Optional[TokenProvider] = None,
                 ca_file: Optional[str] = None, ssl_context: Optional[ssl.SSLContext] = None,
                 plaintext: bool = False) -> None:
        self.endpoint, self.store = endpoint, store
        self._tls = client_tls(endpoint, ca_file, ssl_context, plaintext)  # built once: reads the CA file now
        self.tokens = TokenSource(token, (store.tenant, store.user_id, store.device_id), token_provider)
        self.rate_gate = RateGate()  # every request the send-rate buckets charge passes it (rategate.py)
        self.auto_reconnect, self.send_timeout = auto_reconnect, send_timeout
        self.on_event = on_event
        self.events: Optional[asyncio.Queue] = asyncio.Queue() if event_queue else None
        self._backoff = reconnect_backoff
        self.ack_deadline_s, self.probe_s, self.retry_budget_s = ack_deadline_s, probe_s, retry_budget_s
        self.max_body_bytes = MAX_MESSAGE_BODY  # AuthOk.max_body_bytes once authenticated
        self._conn: Optional[Connection] = None
        self._ready = False          # connected, synced and reconciled
        self._closing = True         # True until connect(); close() sets it again
        self._waiters: dict[bytes, asyncio.Future] = {}  # cmid -> Future[SendAck]
        self._sender = Sender(self)
        self._puller = Puller(self)
        self._tasks: set[asyncio.Task] = set()
        self._reconnect_task: Optional[asyncio.Task] = None
        self._cut_after_next_send = False
        self._connecting = False  # an explicit connect() retries itself: no reconnect loop meanwhile
        self.stats = {"reconnects": 0, "resends": 0, "reconciled": 0, "pushes": 0}
        self.state = "offline"  # see ev.ConnectionState
        # awaited after every (re)connect's sync, on its connection (Client: the session list);
        # a failure is told as SyncFailed, never fails the connect
        self.after_sync: list[Callable[[Connection], Awaitable[None]]] = []
        self.on_session_delta: Optional[Callable[[session_pb2.SessionDelta], None]] = None
        self.on_read_sync: Optional[Callable[[session_pb2.ReadSync], None]] = None
        self.on_room_events: Optional[Callable[[room_pb2.RoomEvents], None]] = None  # qim/sdk/rooms.py

    # --- lifecycle -----------------------------------------------------------------
    def _set_state(self, state: str, reason: str = "") -> None:
        if state != self.state:
            self.state = state
            self._emit(ev.ConnectionState(state, reason))

    @property
    def connected(self) -> bool:
        """True while a connection is up and the mailbox sync after it finished."""
        return self._ready and self._conn is not None and self._conn.is_open

    @property
    def mailbox_page_bytes(self) -> int:
        """The max_bytes the next PULL_MAILBOX asks for (adapts to the link's throughput)."""
        return self._puller.page_bytes

    async def connect(self) -> None:
        """Connect, AUTH, (REBUILD,) sync the mailbox, resend unresolved pending sends.
        Transient ERRORs are retried for `retry_budget_s`. Raises ServerError
        (UNAUTHENTICATED, or a transient one after the budget), ConnectionLost, StoreError
        (store/device mismatch)."""
        if self.connected:
            return
        if self._reconnect_task is not None and not self._reconnect_task.done():
            await asyncio.shield(self._reconnect_task)  # never run two logins of one device
            if self.connected:
                return
        self._closing, self._connecting = False, True
        self._set_state("connecting")
        backoff = Backoff(self._backoff[0], self._backoff[1], self.retry_budget_s)
        refreshed = False
        try:
            while True:
                try:
                    await self._establish()
                    return
                except ServerError as exc:
                    if exc.code == ErrorCode.UNAUTHENTICATED and self.tokens.provider and not refreshed:
                        refreshed = self.tokens.refresh_next = True  # once: a fresh token from the provider
                        continue
                    if exc.code in RETRYABLE and not self._closing:
                        try:
                            await backoff.wait(exc)
                            continue
                        except ServerError:
                            pass
                    self._connect_failed()
                    raise
                except BaseException:
                    self._connect_failed()
                    raise
        finally:
            self._connecting = False

    def _connect_failed(self) -> None:
        self._closing = True  # a failed explicit connect does not start reconnecting
        self._set_state("offline", "connect failed")
        if self._conn is not None:
            self._conn.abort("connect failed")

    async def close(self) -> None:
        """Stop reconnecting and close the connection; the store stays open (host owns it).
        Waiting sends keep their pending rows and time out or resolve after a later connect()."""
        self._closing = True
        self._ready = False
        self._set_state("offline", "closed by the app")
        self._puller.cancel()
        for task in [self._reconnect_task, *self._tasks]:
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

    def update_token(self, token: str) -> None:
        """Authenticate with `token` from the next (re)connect on (a live connection
        keeps its session until the gateway closes it at the old token's expiry).
        ValueError when it names another tenant, user or device than the store."""
        self.tokens.update(token)

    async def _establish(self, reconnect: bool = False) -> None:
        conn = await Connection.open(self.endpoint, await self.tokens.current(), tls=self._tls)
        if reconnect:
            self.stats["reconnects"] += 1
        auth = conn.auth
        if auth.user_id != self.store.user_id or auth.device_id != self.store.device_id:
            conn.abort("identity mismatch")
            self._closing = True
            raise StoreError("AUTH_OK identity differs from the LocalStore's (user, device)")
        if auth.max_body_bytes:
            self.max_body_bytes = auth.max_body_bytes
        old, self._conn = self._conn, None
        if old is not None:
            old.abort("replaced by a new connection")
        conn.on_push = self._on_push
        conn.on_kicked = self._on_kicked
        conn.on_rate_limited = self.rate_gate.refused
        if self.on_session_delta is not None:
            conn.on_session_delta = self.on_session_delta
        if self.on_read_sync is not None:
            conn.on_read_sync = self.on_read_sync
        if self.on_room_events is not None:
            conn.on_room_events = self.on_room_events
        self._conn, self._ready = conn, False
        self._sender.new_connection()
        conn.closed.add_done_callback(lambda f: self._on_closed(conn, f.result()))
        self._emit(ev.Connected(auth.user_id, auth.device_id, auth.mailbox_lane))
        self._set_state("syncing")
        self._spawn(conn.heartbeat(max(1.0, min(auth.heartbeat_s or 60, 120) / 2), self.probe_s))
        try:
            await self._sync_and_reconcile(conn)
        except BaseException:
            conn.abort("sync failed")
            raise

    async def _sync_and_reconcile(self, conn: Connection) -> None:
        if await self.store.run(self.store.rebuild_needed):
            await self._puller.rebuild(conn)
        await self._puller.pull()
        rows = await self.store.run(self.store.pending_sends)
        if conn is not self._conn or not conn.is_open:
            raise ConnectionLost("connection dropped during sync")
        for row in rows:  # from this process and from earlier ones (the durable rows)
            self._sender.track(row)
        self._ready = True
        for row in self._sender.unresolved():  # ordinal order: frames leave in submission order
            self.stats["resends"] += 1
            self._sender.start(conn, row)
        for hook in self.after_sync:
            try:
                await hook(conn)
            except (ConnectionLost, NotConnected):
                raise
            except QimError as exc:  # the connection is usable: tell the app, keep it
                self._emit(ev.SyncFailed(exc.code, str(exc)))
        if conn is self._conn and conn.is_open:
            self._set_state("ready")

    def _on_closed(self, conn: Connection, reason: str) -> None:
        if conn is not self._conn:
            return
        self._ready = False
        self._emit(ev.Disconnected(reason))
        idle = self._reconnect_task is None or self._reconnect_task.done()
        if self.auto_reconnect and not self._closing and not self._connecting and idle:
            self._set_state("reconnecting", reason)
            self._reconnect_task = asyncio.get_running_loop().create_task(reconnect_loop(self))
        elif self._closing and self.state not in ("kicked", "offline"):
            self._set_state("offline", reason)

    def _on_kicked(self, reason: int) -> None:
        if reason == connection_pb2.Kicked.TOKEN_EXPIRED:
            self.tokens.refresh_next = True  # the reconnect asks the provider (offline without one)
            return
        self._closing = True  # a kicked device does not fight back by reconnecting
        self._set_state("kicked", f"reason {reason}")
        self._emit(ev.KickedEvent(reason))
        self._fail_waiters(Kicked(reason))

    def _fail_waiters(self, exc: BaseException) -> None:
        for fut in self._waiters.values():
            if not fut.done():
                fut.set_exception(exc)

    async def request(self, opcode: int, body: bytes, timeout: Optional[float] = None) -> tuple[int, bytes]:
        """One request on the live connection -> (reply opcode, body); one the send-rate
        buckets charge waits for the RateGate first. NotConnected, ServerError (ERROR
        reply), ConnectionLost."""
        conn = self._conn
        if conn is None or not self.connected:
            raise NotConnected("call connect() first")
        if opcode in RATE_LIMITED_OPCODES:
            return await self.rate_gate.through(lambda _permit: conn.request(opcode, body, timeout or self.send_timeout))
        return await conn.request(opcode, body, timeout or self.send_timeout)

    # --- sending -------------------------------------------------------------------
    async def submit_message(self, conversation_id: bytes, recipient_user_id: int, body: bytes,
                             message_type: int = MESSAGE_TYPE_TEXT, custom_type: bytes = b"") -> bytes:
        """Validate, store the local_pending row (durable) and start sending; returns the
        cmid. SendRefused (nothing stored) for what the server would refuse. Sent now
        when ready, otherwise after the next (re)connect's reconciliation."""
        check_send(self.store.tenant, self.store.user_id, conversation_id, recipient_user_id, body, message_type,
                   custom_type, self.max_body_bytes)
        row = await self.store.run(self.store.add_pending, conversation_id, recipient_user_id,
                                   message_type, custom_type, body)
        cmid = row.client_message_id
        self._waiters.setdefault(cmid, asyncio.get_running_loop().create_future())
        self._emit(ev.SendPending(row))
        self._sender.track(row)
        if self._ready and self._conn is not None:
            self._sender.start(self._conn, row)
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
        raised before anything is stored); SendRefused, ServerError, SendTimeout."""
        if self._closing:
            raise NotConnected("call connect() first")
        cmid = await self.submit_message(conversation_id, recipient_user_id, body, message_type, custom_type)
        return await self.wait_ack(cmid)

    def _settle(self, cmid: bytes, ack: Optional[SendAck] = None, exc: Optional[BaseException] = None) -> bool:
        """Resolve the waiter of `cmid`; False when there is none or it was already resolved."""
        fut = self._waiters.get(cmid)
        if fut is None or fut.done():
            return False
        if exc is None:
            fut.set_result(ack)
            return True
        fut.set_exception(exc)
        fut.exception()  # submit_message without wait_ack: the app hears of it by SendFailed, not a GC warning
        return True

    # --- mailbox -------------------------------------------------------------------
    async def pull_mailbox(self) -> None:
        """Pull until has_more is false (single flight: a call during a running pull marks
        it dirty and waits for it). ConnectionLost / NotConnected / ServerError."""
        await self._puller.pull()

    def _on_push(self, push: mailbox_pb2.PushEvents) -> None:
        """PUSH_EVENTS are a wake-up only, and a position: nothing of them is stored or
        told (issue 10 fault 1); one the cursor covers asks for no pull (puller.py)."""
        self.stats["pushes"] += 1
        self._puller.notify(push)

    def _after_apply(self, result: ApplyResult, read_source: str = "local") -> None:
        """Only after the SQLite commit: events and pending resolution (seed 000 §362;
        qim/sdk/tell.py)."""
        tell(self, result, read_source)

    async def ping(self) -> int:
        """PING/PONG round trip; returns server time in ms. NotConnected, ConnectionLost."""
        if self._conn is None or not self._conn.is_open:
            raise NotConnected("no connection")
        return await self._conn.ping()

    # --- plumbing ------------------------------------------------------------------
    def emit(self, event: Any) -> None:
        """Tell the app `event` (the event queue and/or on_event): for the runtime's helpers."""
        self._emit(event)

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
