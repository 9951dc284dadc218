"""What the parts of one ClientRuntime share: the seam between the runtime and its
helpers (sender, puller, sessions, the connection supervisor), so that none of them
reads the runtime's privates or imports it (asyncpg's pool hands its connections a
narrow holder the same way).

`RuntimeCore` holds the state they all read — the current connection, readiness,
whether the runtime is stopping, the store, the rate gate, the send ledger, the tuning
— and the few operations they all need: emit an event, set the connection state, spawn
a supervised background task, resolve a send (through the SendLedger: one path), and
apply a store change and tell the app what it changed, as one unit a cancellation
cannot split (a committed batch whose events were never emitted would never be told).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Coroutine, Optional, Sequence, TypeVar

from qim.proto.v1 import room_pb2, session_pb2
from qim.sdk import events as ev
from qim.sdk.connection import Connection
from qim.sdk.events import ConnectionLost, NotConnected, SendAck
from qim.sdk.faults import LinkFaults
from qim.sdk.ledger import SendLedger
from qim.sdk.model import ApplyResult
from qim.sdk.rategate import RateGate
from qim.sdk.store import LocalStore
from qim.sdk.tell import tell

logger = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class Tuning:
    """A runtime's timing knobs (seconds): the ACK deadline before a PING probe, the
    probe's window, the retry budget of transient ERRORs, a send's default wait, the
    reconnect backoff (start, cap), and whether a lost connection is reconnected."""

    ack_deadline_s: float
    probe_s: float
    retry_budget_s: float
    send_timeout: float
    reconnect_backoff: tuple[float, float]
    auto_reconnect: bool


class RuntimeCore:
    """The shared state and operations of one runtime (module docstring)."""

    def __init__(self, store: LocalStore, tuning: Tuning, on_event: Optional[Callable[[ev.Event], None]],
                 event_queue: bool, faults: Optional[LinkFaults]) -> None:
        self.store, self.tuning, self.on_event = store, tuning, on_event
        self.events: Optional[asyncio.Queue] = asyncio.Queue() if event_queue else None
        self.rate_gate = RateGate()  # every request the send-rate buckets charge passes it (rategate.py)
        self.ledger = SendLedger()
        self.faults = faults
        self.conn: Optional[Connection] = None  # the current connection (the latest authenticated one)
        self.ready = False      # connected, synced and reconciled: sends go out at once
        self.closing = True     # True until connect(); a stop or close() sets it again
        self.state = "offline"  # see ev.ConnectionState
        self.stats = {"reconnects": 0, "resends": 0, "reconciled": 0, "pushes": 0, "pages": 0, "pull_repeats": 0}
        # awaited after every (re)connect's sync, on its connection (Client: the session list);
        # a QimError is told as SyncFailed, never fails the connect
        self.after_sync: list[Callable[[Connection], Awaitable[None]]] = []
        self.on_session_delta: Optional[Callable[[session_pb2.SessionDelta], None]] = None
        self.on_read_sync: Optional[Callable[[session_pb2.ReadSync], None]] = None
        self.on_room_events: Optional[Callable[[room_pb2.RoomEvents], None]] = None  # qim/sdk/rooms.py
        self.on_ephemeral: Optional[Callable[[int, bytes], None]] = None  # qim/sdk/reactions.py
        # the entries of every applied MAILBOX_BATCH (their reaction summaries: qim/sdk/reactions.py)
        self.on_pulled: Optional[Callable[[Sequence[Any]], None]] = None
        # further server-initiated frames by opcode -> handler(body) (qim/sdk/convstate.py)
        self.frame_handlers: dict[int, Callable[[bytes], None]] = {}
        self._tasks: set[asyncio.Task] = set()
        if faults is not None:
            faults.bind(lambda: self.conn, self.spawn)

    @property
    def connected(self) -> bool:
        """True while a connection is up and the sync after it finished."""
        return self.ready and self.conn is not None and self.conn.is_open

    def live(self) -> Connection:
        """The current connection while it is open; NotConnected otherwise."""
        conn = self.conn
        if conn is None or not conn.is_open:
            raise NotConnected("no connection")
        return conn

    def emit(self, event: ev.Event) -> None:
        """Tell the app: the event queue and/or the on_event callback."""
        if self.events is not None:
            self.events.put_nowait(event)
        if self.on_event is not None:
            self.on_event(event)

    def set_state(self, state: str, reason: str = "") -> None:
        """Move to `state`, told as ConnectionState(state, reason) when it changed."""
        if state != self.state:
            self.state = state
            self.emit(ev.ConnectionState(state, reason))

    def stop(self, reason: str, cause: Optional[BaseException]) -> None:
        """The runtime stopped for good: told as offline(reason); waiting sends get
        `cause` (None: they stay pending for a later connect())."""
        self.closing, self.ready = True, False
        self.set_state("offline", reason)
        if cause is not None:
            self.ledger.fail_waiters(cause)
        if self.conn is not None:
            self.conn.abort(reason)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run `coro` as a background task of this runtime (cancelled by close(); a
        failure other than a lost connection is logged, never silent)."""
        task: asyncio.Task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def cancel_tasks(self) -> None:
        """close(): stop every background task."""
        for task in list(self._tasks):
            if not task.done():
                task.cancel()

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            if not isinstance(exc, (ConnectionLost, NotConnected)):
                logger.warning("background task failed: %r", exc)

    def resolve(self, ack: SendAck) -> bool:
        """A send found committed: resolved through the ledger (False: nobody waited)."""
        return self.ledger.resolve(ack.client_message_id, ack=ack)

    def tell(self, result: ApplyResult, read_source: str = "local") -> None:
        """Only after the SQLite commit: the events of `result` and the sends it
        reconciled (qim/sdk/tell.py; seed 000 §362)."""
        self.stats["reconciled"] += tell(result, read_source, self.emit, self.resolve)

    async def apply(self, fn: Callable[..., ApplyResult], *args: Any, source: str = "local") -> ApplyResult:
        """Run a store change, then tell the app, as one unit (module docstring)."""
        async def unit() -> ApplyResult:
            result = await self.store.run(fn, *args)
            self.tell(result, source)
            return result

        return await whole(unit())


async def whole(coro: Awaitable[T]) -> T:
    """Run `coro` (a store write, then telling the waiter and the app) to its end even
    when the awaiting task is cancelled (close()): an outcome is never half recorded."""
    return await asyncio.shield(asyncio.ensure_future(coro))
