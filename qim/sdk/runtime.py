"""ClientRuntime: the one SDK state machine every host drives (docs/design.md §9, seed 001 §2.9).

States: idle → (connect) → syncing → ready ⇄ reconnecting → closed. The host calls
`await connect()` explicitly; it authenticates, REBUILDs first when the store asks for
it, syncs the mailbox (PULL_MAILBOX until has_more is false, each batch committed with
its cursor in one SQLite transaction) and only then resends, in ordinal order, the
pending sends the sync did not find (our own mailbox entries carry the
client_message_id). The same sequence runs after every automatic reconnect. Transient
server errors during all of it are retried with bounded backoff (qim/sdk/retry.py).

Sends (qim/sdk/submit.py, qim/sdk/sender.py): `submit_message` validates (qim/sdk/validate.py: what the
server would refuse raises SendRefused before anything is stored), stores the
local_pending row (reserving the cmid) and returns the cmid; `send_message` also
awaits the outcome as a `SendAck`. A SEND_ACK, or our own mailbox entry, resolves it; a
permanent ERROR raises ServerError and tells the app SendFailed; UNAVAILABLE /
RATE_LIMITED / MAILBOX_DIRTY are retried with the same cmid. The ACK deadline is 3 s,
then a PING probe; no PONG and no byte → connection dead → reconnect.

Pulls (qim/sdk/puller.py): PUSH_EVENTS wake a single-flight pull, but for an inline
push whose previous position is the committed cursor, applied as the page it stands
for (docs/decisions/0156); only MAILBOX_BATCH pages (and those) and history pages
reach the store and the app. Events go to `events` (an asyncio.Queue) and/or `on_event`.

The runtime is a façade: what its parts share is a RuntimeCore (qim/sdk/core.py: the
current connection, events, tasks, the send ledger, apply-and-tell); the sender, the
puller, the sessions and the connection supervisor (qim/sdk/reconnect.py) each hold
the core, none of them the runtime. Test hooks live in a LinkFaults given with
`faults=` (qim/sdk/faults.py), never in product paths.
"""

from __future__ import annotations

import logging
import ssl
from typing import Any, Awaitable, Callable, Optional

from qim.consts import MAX_MESSAGE_BODY, SEND_ACK_PROBE_S
from qim.errors import QimError
from qim.proto.v1 import connection_pb2, mailbox_pb2
from qim.protocol import RATE_LIMITED_OPCODES
from qim.sdk import events as ev
from qim.sdk.connection import Connection
from qim.sdk.core import RuntimeCore, Tuning
from qim.sdk.credentials import TokenProvider, TokenSource, keep_fresh
from qim.sdk.events import Banned, ConnectionLost, Kicked, NotConnected
from qim.sdk.faults import LinkFaults
from qim.sdk.gateways import Endpoints, Gateways
from qim.sdk.liveness import PROBE_S
from qim.sdk.puller import Puller
from qim.sdk.rategate import RateGate
from qim.sdk.reconnect import Supervisor
from qim.sdk.retry import RETRY_BUDGET_S
from qim.sdk.sender import Sender
from qim.sdk.store import ApplyResult, LocalStore, StoreError
from qim.sdk.submit import Submitting

logger = logging.getLogger(__name__)


class ClientRuntime(Submitting):
    """Client state machine over one gateway endpoint or several (qim/sdk/gateways.py), one token, one LocalStore.

    `retry_budget_s`: how long transient server errors are retried in connect(), pulls
    and REBUILD before they surface (seconds). `token_provider`: called (sync or async)
    for a fresh token when the held one expires soon or was refused (qim/sdk/credentials.py).
    Transport: TLS 1.3 verifying the gateway against `ca_file` (else $QIM_CA_FILE, else
    the system trust store) or an `ssl_context` of the app's; `plaintext=True` only for a
    development gateway (qim/sdk/connection.py client_tls; TlsError ends connect() and
    the reconnect loop: trying again cannot fix a certificate). `faults`: a LinkFaults
    for tests only (qim/sdk/faults.py)."""

    def __init__(self, endpoint: Endpoints, token: str, store: LocalStore, *, auto_reconnect: bool = True,
                 send_timeout: float = 60.0, on_event: Optional[Callable[[ev.Event], None]] = None,
                 event_queue: bool = True, reconnect_backoff: tuple[float, float] = (0.05, 2.0),
                 ack_deadline_s: float = SEND_ACK_PROBE_S, probe_s: float = PROBE_S,
                 retry_budget_s: float = RETRY_BUDGET_S, token_provider: Optional[TokenProvider] = None,
                 ca_file: Optional[str] = None, ssl_context: Optional[ssl.SSLContext] = None,
                 plaintext: bool = False, faults: Optional[LinkFaults] = None) -> None:
        self.store = store
        self.gateways = Gateways(endpoint, ca_file, ssl_context, plaintext)  # TLS built once: reads the CA file now
        self.tokens = TokenSource(token, (store.tenant, store.user_id, store.device_id), token_provider)
        self.core = RuntimeCore(store, Tuning(ack_deadline_s, probe_s, retry_budget_s, send_timeout,
                                              reconnect_backoff, auto_reconnect), on_event, event_queue, faults)
        self.max_body_bytes = MAX_MESSAGE_BODY  # AuthOk.max_body_bytes once authenticated
        self._sender = Sender(self.core)
        self._puller = Puller(self.core)
        self._supervisor = Supervisor(self.core, self.tokens, self._open, self._sync)

    # --- what the app and the helpers read (the state is the core's) -------------------
    @property
    def endpoint(self) -> str:
        """The gateway endpoint in use, or tried next (qim/sdk/gateways.py)."""
        return self.gateways.current

    @property
    def state(self) -> str:
        """The connection state (ev.ConnectionState; docs/sdk.md "Connection states")."""
        return self.core.state

    @property
    def connected(self) -> bool:
        """True while a connection is up and the mailbox sync after it finished."""
        return self.core.connected

    @property
    def events(self) -> Any:
        """The asyncio.Queue of events, or None when built with event_queue=False."""
        return self.core.events

    @property
    def on_event(self) -> Optional[Callable[[ev.Event], None]]:
        """The app's event callback (settable)."""
        return self.core.on_event

    @on_event.setter
    def on_event(self, fn: Optional[Callable[[ev.Event], None]]) -> None:
        """Replace the app's event callback."""
        self.core.on_event = fn

    @property
    def stats(self) -> dict:
        """Counters: reconnects, resends, reconciled, pushes, pages (MAILBOX_BATCH pages
        applied), rebuilds, repeats (SEND_MESSAGE
        sent again on the same connection after the ACK deadline passed with a PONG)."""
        return self.core.stats

    @property
    def rate_gate(self) -> RateGate:
        """The gate every request the gateway's send-rate buckets charge passes."""
        return self.core.rate_gate

    @property
    def faults(self) -> Optional[LinkFaults]:
        """The test-only fault switch given at construction, else None."""
        return self.core.faults

    @property
    def after_sync(self) -> list[Callable[[Connection], Awaitable[None]]]:
        """Awaited after every (re)connect's sync on its connection (Client: the session list)."""
        return self.core.after_sync

    @property
    def retry_budget_s(self) -> float:
        """Seconds transient server errors are retried before they surface."""
        return self.core.tuning.retry_budget_s

    @property
    def mailbox_page_bytes(self) -> int:
        """The max_bytes the next PULL_MAILBOX asks for (adapts to the link's throughput)."""
        return self._puller.page_bytes

    # --- lifecycle (the loop itself: qim/sdk/reconnect.py) -------------------------
    async def connect(self) -> None:
        """Connect, AUTH, (REBUILD,) sync the mailbox, resend unresolved pending sends;
        returns when ready. Transient ERRORs are retried for `retry_budget_s`; a
        connection lost after AUTH succeeded is a reconnect (connect() waits on).
        Raises ServerError (UNAUTHENTICATED, or a transient one after the budget),
        ConnectionLost (unreachable), TlsError, StoreError (store/device mismatch),
        NotConnected (close() meanwhile). qim/sdk/reconnect.py."""
        if self.core.connected:
            return
        if not self._supervisor.running:
            self.core.closing = False
            self.core.set_state("connecting")
        await self._supervisor.connect()

    async def close(self) -> None:
        """Stop reconnecting and close the connection; the store stays open (host owns it).
        Waiting sends keep their pending rows and time out or resolve after a later connect()."""
        core = self.core
        core.closing, core.ready = True, False
        core.set_state("offline", "closed by the app")
        self._supervisor.cancel(NotConnected("closed by the app"))
        self._puller.cancel()
        core.cancel_tasks()
        if core.conn is not None:
            await core.conn.close()
            core.conn = None

    def update_token(self, token: str) -> None:
        """Authenticate with `token` from the next (re)connect on (a live connection
        keeps its session until the gateway closes it at the old token's expiry).
        ValueError when it names another tenant, user or device than the store."""
        self.tokens.update(token)

    async def _open(self, reconnect: bool = False) -> Connection:
        """One connection: TCP, TLS, AUTH (bounded: CONNECT_TIMEOUT_S), wired to this
        runtime and made the current one (state syncing). StoreError when AUTH names
        another identity than the store."""
        core = self.core
        conn, endpoint = await self.gateways.dial(await self.tokens.current())  # the next gateway on failure
        if reconnect:
            core.stats["reconnects"] += 1
        auth = conn.auth
        if auth.user_id != self.store.user_id or auth.device_id != self.store.device_id:
            conn.abort("identity mismatch")
            raise StoreError("AUTH_OK identity differs from the LocalStore's (user, device)")
        if auth.max_body_bytes:
            self.max_body_bytes = auth.max_body_bytes
        core.rate_gate.limit(auth.send_rate_per_s, auth.send_burst)  # paced below the gateway's limit
        old, core.conn = core.conn, None
        if old is not None:
            old.abort("replaced by a new connection")
        conn.on_push = self._on_push
        conn.on_kicked = lambda reason: self._on_kicked(conn, reason)
        conn.on_rate_limited = core.rate_gate.refused
        if core.on_session_delta is not None:
            conn.on_session_delta = core.on_session_delta
        if core.on_read_sync is not None:
            conn.on_read_sync = core.on_read_sync
        if core.on_room_events is not None:
            conn.on_room_events = core.on_room_events
        if core.on_ephemeral is not None:
            conn.on_ephemeral = core.on_ephemeral
        conn.frame_handlers = core.frame_handlers
        core.conn, core.ready = conn, False
        self._sender.new_connection()
        conn.closed.add_done_callback(lambda f: self._on_closed(conn, f, endpoint))
        core.emit(ev.Connected(auth.user_id, auth.device_id, auth.mailbox_lane))
        core.set_state("syncing")
        core.spawn(conn.heartbeat(max(1.0, min(auth.heartbeat_s or 60, 120) / 2), core.tuning.probe_s))
        core.spawn(keep_fresh(conn, self.tokens))  # AUTH again ahead of the token's expiry, no reconnect
        return conn

    async def _sync(self, conn: Connection) -> None:
        """REBUILD when needed, the mailbox sync, resends in ordinal order, the after-sync
        hooks; then `ready`. ConnectionLost when `conn` is gone by then (never a sync
        that returns on a dead connection), ServerError, StoreError."""
        core = self.core
        if await self.store.run(self.store.rebuild_needed):
            await self._puller.rebuild(conn)
        await self._puller.pull()
        rows = await self.store.run(self.store.pending_sends)
        if conn is not core.conn or not conn.is_open:
            raise ConnectionLost("connection dropped during sync")
        for row in rows:  # from this process and from earlier ones (the durable rows)
            core.ledger.track(row)
        core.ready = True
        for row in core.ledger.unresolved():  # ordinal order: frames leave in submission order
            core.stats["resends"] += 1
            self._sender.start(conn, row)
        for hook in core.after_sync:
            try:
                await hook(conn)
            except (ConnectionLost, NotConnected):
                raise
            except QimError as exc:  # the connection is usable: tell the app, keep it
                core.emit(ev.SyncFailed(exc.code, str(exc)))
        if conn is not core.conn or not conn.is_open:
            raise ConnectionLost("connection dropped during sync")
        core.set_state("ready")

    def _on_closed(self, conn: Connection, closed: Any, endpoint: str) -> None:
        if conn is self.core.conn and not closed.cancelled():
            if not self.core.closing:  # lost, not closed by the app: reconnect elsewhere first (0082)
                self.gateways.failed(endpoint)
            self.core.ready = False
            self.core.emit(ev.Disconnected(closed.result()))

    def _on_kicked(self, conn: Connection, reason: int) -> None:
        core = self.core
        if conn is not core.conn:
            return  # a connection this runtime already replaced: its kick is stale
        if reason == connection_pb2.Kicked.TOKEN_EXPIRED:
            self.tokens.refresh_next = True  # the reconnect asks the provider (offline without one)
            self._supervisor.expired = True
            return
        core.closing = True  # a kicked device does not fight back by reconnecting
        kicked = conn.kicked
        if reason == connection_pb2.Kicked.BANNED and kicked is not None:  # told as a ban (0123, Amendment 2)
            banned = Banned(kicked.message, kicked.until_ms)
            core.set_state("kicked", banned.message)
            core.emit(ev.KickedEvent(reason, kicked.message, kicked.until_ms))
            core.ledger.fail_waiters(banned)
            return
        try:  # the app is told why: REPLACED, REVOKED (qimctl token revoke), ...
            why = connection_pb2.Kicked.Reason.Name(reason)
        except ValueError:
            why = f"reason {reason}"
        core.set_state("kicked", why)
        core.emit(ev.KickedEvent(reason))
        core.ledger.fail_waiters(Kicked(reason))

    async def request(self, opcode: int, body: bytes, timeout: Optional[float] = None) -> tuple[int, bytes]:
        """One request on the live connection -> (reply opcode, body); one the send-rate
        buckets charge waits for the RateGate first. NotConnected, ServerError (ERROR
        reply), ConnectionLost."""
        conn = self.core.conn
        if conn is None or not self.core.connected:
            raise NotConnected("call connect() first")
        wait = timeout or self.send_timeout
        if opcode in RATE_LIMITED_OPCODES:
            return await self.core.rate_gate.through(lambda _permit: conn.request(opcode, body, wait))
        return await conn.request(opcode, body, wait)

    # --- the store and the mailbox -------------------------------------------------
    async def apply(self, fn: Callable[..., ApplyResult], *args: Any, source: str = "local") -> ApplyResult:
        """Run a LocalStore change and tell the app what it changed, as one unit
        (qim/sdk/core.py; the Client's opens, group notes, recalls)."""
        return await self.core.apply(fn, *args, source=source)

    def tell(self, result: ApplyResult, read_source: str = "local") -> None:
        """Tell the app what a committed store change changed (qim/sdk/tell.py)."""
        self.core.tell(result, read_source)

    async def pull_mailbox(self) -> None:
        """Pull until has_more is false (single flight: a call during a running pull marks
        it dirty and waits for it). ConnectionLost / NotConnected / ServerError."""
        await self._puller.pull()

    def _on_push(self, push: mailbox_pb2.PushEvents) -> None:
        """PUSH_EVENTS are a position: one the cursor covers asks for no pull; an inline
        one at the cursor is applied as its page, anything else pulls (puller.py;
        decisions 0033, 0156)."""
        self.core.stats["pushes"] += 1
        self._puller.notify(push)

    async def ping(self) -> int:
        """PING/PONG round trip; returns server time in ms. NotConnected, ConnectionLost."""
        return await self.core.live().ping()
