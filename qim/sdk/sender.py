"""Transmission of pending sends (docs/design.md §3 conversation_seq, §9).

One device's sends to one conversation must get conversation_seq in submission order,
also across retries and reconnects. The writer sequences a send only after the send
named by its `previous_client_message_id` holds a commit state; the Sender fills that
field with the cmid of this store's nearest earlier (by ordinal) send to the same
conversation that is still unresolved (pending: not acked, committed or failed),
recomputed at every (re)transmission. Frames are written in ordinal order: the first
transmission of a send is queued synchronously when it is started, and after a
reconnect every unresolved send is started again in ordinal order. A send that finds
the RateGate without a token is lined up at once, and while one of its conversation
is, a later one joins the gate's line (ticket order) instead of passing it by the
fast path (docs/decisions/0063).

Every transmission holds a Permit of the runtime's RateGate (qim/sdk/rategate.py): the
gateway charges each one a token, also a retransmission. A send takes its ticket (its
place in line) when it is first started, so after a RATE_LIMITED sends go out again in
submission order: through a closed gate (a gateway that advertises no limit) one at a
time, never one before its previous send was answered; through a paced gate in ticket
order, and never one before an earlier refused send went again (qim/sdk/window.py).

A per-conversation send window follows what the writer can sequence (qim/sdk/window.py,
decision 0056): only the oldest unresolved sends of a conversation are on the wire, a
send outside the window is held and started when earlier ones resolve, and a
retransmission after a refusal waits for its turn in the window again.

Every transmission after a send's first passes one admission, `Sender._admitted`: a
permit of the gate, still unresolved in the ledger, inside the window (issue 36: it was
a loop with four exits).

The unresolved sends themselves are the SendLedger's (qim/sdk/ledger.py): the ledger
computes `previous` and the window's positions, and every outcome is resolved through
it. Outcomes never vanish: SEND_ACK →
acked; UNAVAILABLE (e.g. "previous send not yet sequenced") or MAILBOX_DIRTY → back
off and retransmit with a recomputed previous id, keeping the permit (paced by the
gate: Permit.again) unless an earlier refused send must go first (then the permit is
given up and the send waits for its turn: decision 0063); RATE_LIMITED → the permit goes back and the send waits in line
for the gate (not before the server's retry_after_ms);
a permanent ERROR (CONFLICT, ...) → row failed with its body kept, the waiter gets
ServerError and the app a SendFailed event; ConnectionLost → the reconnect resends;
any other exception → the same as a permanent error (never pending for ever).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Optional

from qim.errors import ErrorCode, QimError
from qim.proto.v1 import message_pb2
from qim.protocol import Opcode
from qim.sdk import events as ev
from qim.sdk.connection import Connection
from qim.sdk.core import RuntimeCore, whole
from qim.sdk.events import ConnectionLost, SendAck, ServerError
from qim.sdk.rategate import Permit
from qim.sdk.retry import RETRYABLE, Backoff
from qim.sdk.store import PendingSend, Resolved
from qim.sdk.window import SendWindows

logger = logging.getLogger(__name__)
SEND_RETRY_START_S = 0.02  # "previous send not yet sequenced" clears within a commit
NOT_SENT = ConnectionLost("no answer under this permit")  # Permit.close: neither admitted nor refused


class Sender:
    """Transmission of one runtime's unresolved sends (module docstring)."""

    def __init__(self, core: RuntimeCore) -> None:
        self._core = core
        self._ledger = core.ledger
        self._windows = SendWindows(core.ledger, core.tuning.ack_deadline_s)
        self._inflight: set[bytes] = set()  # cmids with a transmission on the current connection
        self._tickets: dict[bytes, int] = {}  # cmid -> RateGate ticket, taken when first started
        # conversation -> cmids started but still waiting for the gate's first permit: a
        # later send of the conversation must not take the gate's fast path past them
        # (its frame would leave first, name one the writer has not seen, and be refused
        # with every send behind it)
        self._lined_up: dict[bytes, set[bytes]] = {}
        core.ledger.on_resolved = self._resolved

    def frame(self, row: PendingSend) -> bytes:
        """SEND_MESSAGE bytes for one transmission (previous id as of now)."""
        msg = message_pb2.SendMessage(
            client_message_id=row.client_message_id, conversation_id=row.conversation_id,
            recipient_user_id=row.recipient_user_id, message_type=row.message_type, custom_type=row.custom_type,
            body=row.body, previous_client_message_id=self._ledger.previous(row))
        msg.MergeFromString(row.extras)  # reply target and mentions: same on every retry (decision 0120)
        return msg.SerializeToString()

    def new_connection(self) -> None:
        """Transmissions of an earlier connection are gone with it."""
        self._inflight = set()
        self._lined_up = {}
        self._windows.reset()

    def _resolved(self, row: PendingSend) -> None:
        """The ledger resolved `row`: its window moves; start what it admits now."""
        self._tickets.pop(row.client_message_id, None)
        self._windows.forget(row)
        conn = self._core.conn
        if not self._core.ready or conn is None or not conn.is_open:
            return  # the next connection's sync starts them
        for held in self._windows.admitted(row.conversation_id):
            if held.client_message_id not in self._inflight:
                self.start(conn, held)

    # --- transmission ----------------------------------------------------------------
    def start(self, conn: Connection, row: PendingSend) -> None:
        """Queue the first transmission now when the window admits it and the RateGate
        has a permit (so frames leave in the order sends are started; a waiting gate
        keeps that order by ticket) and await its outcome in a task. No-op when already
        in flight or resolved; held (started again when the window moves) outside it."""
        cmid = row.client_message_id
        if cmid in self._inflight or cmid not in self._ledger or not self._windows.admits(row):
            return
        self._inflight.add(cmid)
        gate = self._core.rate_gate
        if cmid not in self._tickets:
            self._tickets[cmid] = gate.ticket()
        permit = None if row.conversation_id in self._lined_up else gate.try_acquire(self._tickets[cmid])
        if permit is None:  # before its task runs: the next start() sees it waiting
            self._lined_up.setdefault(row.conversation_id, set()).add(cmid)
        first = None
        if permit is not None:
            try:
                first = self._transmit(conn, row)
            except ConnectionLost as exc:
                permit.close(exc)
                self._inflight.discard(cmid)  # the reconnect's reconciliation resends it
                return
            except Exception as exc:  # noqa: BLE001 — settle the waiter, never pending for ever
                permit.close(exc)
                self._inflight.discard(cmid)
                self._core.spawn(self._fail(row, exc))
                return
        self._core.spawn(self._outcome(conn, row, permit, first))

    def _transmit(self, conn: Connection, row: PendingSend) -> asyncio.Future:
        fut = conn.send_request(Opcode.SEND_MESSAGE, self.frame(row))
        self._windows.sent(row)
        if self._core.faults is not None:
            self._core.faults.sent(conn)  # a test's cut after this frame (qim/sdk/faults.py)
        return fut

    def _repeat_pacer(self, permit: Permit):
        """`pace` for Connection.request_probed: a repeat after the ACK deadline costs a
        token of `permit` (Permit.again) and is counted in stats["repeats"]."""
        stats = self._core.stats

        async def again() -> None:
            await permit.again()
            stats["repeats"] = stats.get("repeats", 0) + 1  # request_probed sends it next
        return again

    async def _admitted(self, conn: Connection, row: PendingSend, ticket: int, permit: Optional[Permit],
                        answered: BaseException, retry: bool) -> Optional[Permit]:
        """The one place a (re)transmission is admitted (issue 36): it holds a permit of the
        RateGate (acquired in ticket order when it has none; with `retry`, after a "not
        now" whose token the gateway gave back, paced again by Permit.again), it is still
        unresolved in the ledger (our own mailbox entry may have resolved it meanwhile),
        and its conversation's window admits it (else the permit is given up while it
        waits for its turn: never wait holding the gate's slot; decision 0063). Returns
        the permit to transmit under, or None when resolved meanwhile (permit closed with
        how the last transmission was `answered`)."""
        while True:
            if permit is None:  # in line behind the gate
                permit = await self._core.rate_gate.acquire(ticket)
                self._let_through(conn, row)
            elif retry and self._windows.admits(row):
                await permit.again(charged=False)  # the gateway gave the refused one's token back
            retry = False
            if row.client_message_id not in self._ledger:
                permit.close(answered)  # after an UNAVAILABLE the bucket did admit it
                return None
            if self._windows.admits(row):
                return permit
            permit.close(answered)  # an earlier send was refused: wait for the turn without the slot
            permit, answered = None, NOT_SENT
            await self._windows.turn(conn, row)

    async def _outcome(self, conn: Connection, row: PendingSend, permit: Optional[Permit],
                       first: Optional[asyncio.Future]) -> None:
        """Await the answer of `row`'s transmissions until an outcome (module docstring):
        each retransmission passes _admitted first; ACK resolves, a permanent ERROR
        fails, RATE_LIMITED goes back in the gate's line, another "not now" backs off."""
        core, cmid, tuning = self._core, row.client_message_id, self._core.tuning
        ticket = self._tickets.get(cmid) or core.rate_gate.ticket()
        backoff = Backoff(SEND_RETRY_START_S, budget=None)  # retried until answered; the waiter has its timeout
        answered: BaseException = NOT_SENT  # how the permit's last transmission was answered
        retry = False
        try:
            while True:
                if first is None:
                    permit = await self._admitted(conn, row, ticket, permit, answered, retry)
                    if permit is None:
                        return
                    first = self._transmit(conn, row)  # previous id recomputed
                assert permit is not None  # start() transmitted `first` under it
                try:
                    op, reply = await conn.request_probed(Opcode.SEND_MESSAGE, lambda: self.frame(row),
                                                          tuning.ack_deadline_s, tuning.probe_s, repeat=True,
                                                          first=first, pace=self._repeat_pacer(permit))
                except ServerError as exc:
                    first, answered = None, exc
                    if exc.code not in RETRYABLE:
                        permit.close(exc)
                        await self._fail(row, exc)
                        return
                    self._windows.refused(row)
                    retry = exc.code != ErrorCode.RATE_LIMITED
                    if retry:
                        await backoff.wait(exc)
                    else:
                        # back in the gate's line at once (the same ticket; the gate holds the
                        # hint): a closed gate must see it waiting, or it opens too early
                        permit.close(exc)
                        permit, answered = None, NOT_SENT
                    continue
                permit.close(None)
                if op != Opcode.SEND_ACK:
                    conn.abort(f"unexpected reply 0x{op:04x} to SEND_MESSAGE")
                    return  # the reconnect resends it with the same cmid
                a = message_pb2.SendAck.FromString(reply)
                self._windows.answered(row.conversation_id, cmid)
                self._ledger.drop(cmid)  # later sends stop naming it at once; its waiter after the store
                await whole(self._acked(cmid, a))
                return
        except ConnectionLost:
            pass  # the reconnect's reconciliation resends or resolves it
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 — settle the waiter, never pending for ever
            await self._fail(row, exc)
        finally:
            self._let_through(conn, row)
            if permit is not None:
                permit.close(NOT_SENT)  # no answer (lost, cancelled); idempotent after close(None)
            if conn is core.conn:
                self._inflight.discard(cmid)

    def _let_through(self, conn: Connection, row: PendingSend) -> None:
        """`row` holds a permit now (or gave up waiting) on `conn`: later sends may take the
        fast path (an earlier connection's task leaves the current line alone)."""
        lined_up = self._lined_up.get(row.conversation_id) if conn is self._core.conn else None
        if lined_up is not None:
            lined_up.discard(row.client_message_id)
            if not lined_up:
                del self._lined_up[row.conversation_id]

    async def _acked(self, cmid: bytes, a: message_pb2.SendAck) -> None:
        core = self._core
        body = a.body if a.replaced else None  # moderation's replaced body (decision 0126)
        changed = await core.store.run(core.store.mark_acked, Resolved(cmid, a.message_id, a.conversation_id,
                                                                       a.conversation_seq, a.created_at_ms, body))
        ack = SendAck(cmid, a.message_id, a.conversation_id, a.conversation_seq, a.created_at_ms,
                      replaced=a.replaced, body=body)
        self._ledger.resolve(cmid, ack=ack)
        if changed.conversations or changed.reads:  # the row was pending: tell its new state
            core.tell(changed)
            core.emit(ev.PendingResolved((ack,)))

    async def _fail(self, row: PendingSend, exc: BaseException) -> None:
        """A permanent outcome: row failed (body kept), waiter gets `exc`, app a SendFailed."""
        await whole(self._failed(row, exc))

    async def _failed(self, row: PendingSend, exc: BaseException) -> None:
        core, cmid = self._core, row.client_message_id
        self._ledger.drop(cmid)
        if not isinstance(exc, QimError):
            logger.warning("send failed in the SDK: %r", exc)  # a bug of ours: keep the cause visible
        code = exc.code if isinstance(exc, QimError) else ErrorCode.INTERNAL
        try:
            changed = await core.store.run(core.store.mark_failed, cmid)
        finally:
            self._ledger.resolve(cmid, exc=exc)
        if changed:
            core.emit(ev.SendFailed(cmid, code, str(exc)))
