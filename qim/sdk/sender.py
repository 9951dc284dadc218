"""Transmission of pending sends (docs/design.md §3 conversation_seq, §9; issue 10 faults 2, 4, 6).

One device's sends to one conversation must get conversation_seq in submission order,
also across retries and reconnects. The writer sequences a send only after the send
named by its `previous_client_message_id` holds a commit state; the Sender fills that
field with the cmid of this store's nearest earlier (by ordinal) send to the same
conversation that is still unresolved (pending: not acked, committed or failed),
recomputed at every (re)transmission. Frames are written in ordinal order: the first
transmission of a send is queued synchronously when it is started, and after a
reconnect every unresolved send is started again in ordinal order.

Every transmission holds a Permit of the runtime's RateGate (qim/sdk/rategate.py): the
gateway charges each one a token, also a retransmission. A send takes its ticket (its
place in line) when it is first started, so after a RATE_LIMITED sends go out again in
submission order, one at a time, never one before its previous send was answered.

Outcomes settle the send's waiter (runtime._settle) and never vanish: SEND_ACK →
acked; UNAVAILABLE (e.g. "previous send not yet sequenced") or MAILBOX_DIRTY → back
off and retransmit with a recomputed previous id, keeping the permit (paced by the
gate: Permit.again); RATE_LIMITED → the permit goes back and the send waits in line
for the gate (not before the server's retry_after_ms);
a permanent ERROR (CONFLICT, ...) → row failed with its body kept, the waiter gets
ServerError and the app a SendFailed event; ConnectionLost → the reconnect resends;
any other exception → the same as a permanent error (never pending for ever).
"""

from __future__ import annotations

import asyncio
import bisect
import logging
from typing import TYPE_CHECKING, Optional

from qim.errors import ErrorCode, QimError
from qim.proto.v1 import message_pb2
from qim.protocol import Opcode
from qim.sdk import events as ev
from qim.sdk.connection import Connection
from qim.sdk.events import ConnectionLost, SendAck, ServerError
from qim.sdk.rategate import Permit
from qim.sdk.retry import RETRYABLE, Backoff
from qim.sdk.store import PendingSend, Resolved

if TYPE_CHECKING:
    from qim.sdk.runtime import ClientRuntime

logger = logging.getLogger(__name__)
SEND_RETRY_START_S = 0.02  # "previous send not yet sequenced" clears within a commit
NOT_SENT = ConnectionLost("no answer under this permit")  # Permit.close: neither admitted nor refused


class Sender:
    """The unresolved sends of one runtime and their transmission."""

    def __init__(self, rt: "ClientRuntime") -> None:
        self._rt = rt
        self._rows: dict[bytes, PendingSend] = {}  # unresolved sends by cmid
        self._by_conv: dict[bytes, list[tuple[int, bytes]]] = {}  # conversation -> sorted (ordinal, cmid)
        self._inflight: set[bytes] = set()  # cmids with a transmission on the current connection
        self._tickets: dict[bytes, int] = {}  # cmid -> RateGate ticket, taken when first started

    # --- the unresolved set ----------------------------------------------------------
    def track(self, row: PendingSend) -> None:
        """Remember an unresolved send (idempotent)."""
        if row.client_message_id in self._rows:
            return
        self._rows[row.client_message_id] = row
        bisect.insort(self._by_conv.setdefault(row.conversation_id, []), (row.ordinal, row.client_message_id))

    def resolved(self, cmid: bytes) -> None:
        """The send is acked, committed or failed: later sends stop naming it."""
        row = self._rows.pop(cmid, None)
        self._tickets.pop(cmid, None)
        if row is None:
            return
        entries = self._by_conv.get(row.conversation_id, [])
        i = bisect.bisect_left(entries, (row.ordinal, cmid))
        if i < len(entries) and entries[i] == (row.ordinal, cmid):
            del entries[i]
        if not entries:
            self._by_conv.pop(row.conversation_id, None)

    def previous(self, row: PendingSend) -> bytes:
        """cmid of the nearest earlier unresolved send to the same conversation, or b""."""
        entries = self._by_conv.get(row.conversation_id, [])
        i = bisect.bisect_left(entries, (row.ordinal, row.client_message_id))
        return entries[i - 1][1] if i > 0 else b""

    def frame(self, row: PendingSend) -> bytes:
        """SEND_MESSAGE bytes for one transmission (previous id as of now)."""
        return message_pb2.SendMessage(
            client_message_id=row.client_message_id, conversation_id=row.conversation_id,
            recipient_user_id=row.recipient_user_id, message_type=row.message_type, custom_type=row.custom_type,
            body=row.body, previous_client_message_id=self.previous(row)).SerializeToString()

    def new_connection(self) -> None:
        """Transmissions of an earlier connection are gone with it."""
        self._inflight = set()

    def unresolved(self) -> list[PendingSend]:
        """Every tracked unresolved send in ordinal order."""
        return sorted(self._rows.values(), key=lambda r: r.ordinal)

    # --- transmission ----------------------------------------------------------------
    def start(self, conn: Connection, row: PendingSend) -> None:
        """Queue the first transmission now when the RateGate is open (so frames leave in
        the order sends are started; a closed gate keeps that order by ticket) and await
        its outcome in a task. No-op when already in flight."""
        cmid = row.client_message_id
        if cmid in self._inflight or cmid not in self._rows:
            return
        self._inflight.add(cmid)
        if cmid not in self._tickets:
            self._tickets[cmid] = self._rt.rate_gate.ticket()
        permit = self._rt.rate_gate.try_acquire(self._tickets[cmid])
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
                self._rt._spawn(self._fail(row, exc))
                return
        self._rt._spawn(self._outcome(conn, row, permit, first))

    def _transmit(self, conn: Connection, row: PendingSend) -> asyncio.Future:
        rt = self._rt
        if rt._cut_after_next_send:  # test hook: the frame leaves, then the network is cut
            rt._cut_after_next_send = False
            fut = conn.send_request(Opcode.SEND_MESSAGE, self.frame(row))
            conn.go_deaf()
            rt._spawn(self._cut(conn))
            return fut
        return conn.send_request(Opcode.SEND_MESSAGE, self.frame(row))

    @staticmethod
    async def _cut(conn: Connection) -> None:
        try:
            await conn.flush()
        finally:
            conn.abort("cut after send (test hook)")

    async def _outcome(self, conn: Connection, row: PendingSend, permit: Optional[Permit],
                       first: Optional[asyncio.Future]) -> None:
        rt, cmid = self._rt, row.client_message_id
        ticket = self._tickets.get(cmid) or rt.rate_gate.ticket()
        backoff = Backoff(SEND_RETRY_START_S, budget=None)  # retried until answered; the waiter has its timeout
        answered: BaseException = NOT_SENT  # how the permit's last transmission was answered
        try:
            while True:
                if permit is None:  # in line behind the gate (RATE_LIMITED seen)
                    permit = await rt.rate_gate.acquire(ticket)
                if first is None:
                    if cmid not in self._rows:  # resolved meanwhile (our own mailbox entry)
                        permit.close(answered)  # after an UNAVAILABLE the bucket did admit it
                        return
                    first = self._transmit(conn, row)  # previous id recomputed
                try:
                    op, reply = await conn.request_probed(Opcode.SEND_MESSAGE, lambda: self.frame(row),
                                                          rt.ack_deadline_s, rt.probe_s, repeat=True, first=first,
                                                          pace=permit.again)
                except ServerError as exc:
                    first, answered = None, exc
                    if exc.code not in RETRYABLE:
                        permit.close(exc)
                        await self._fail(row, exc)
                        return
                    if exc.code == ErrorCode.RATE_LIMITED:
                        permit.close(exc)  # back in line (the same ticket); the gate holds the hint
                        permit, answered = None, NOT_SENT
                    else:
                        await backoff.wait(exc)
                        await permit.again()  # the retransmission costs a token too
                    continue
                permit.close(None)
                if op != Opcode.SEND_ACK:
                    conn.abort(f"unexpected reply 0x{op:04x} to SEND_MESSAGE")
                    return  # the reconnect resends it with the same cmid
                a = message_pb2.SendAck.FromString(reply)
                self.resolved(cmid)
                await _unit(self._acked(cmid, a))
                return
        except ConnectionLost:
            pass  # the reconnect's reconciliation resends or resolves it
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 — settle the waiter, never pending for ever
            await self._fail(row, exc)
        finally:
            if permit is not None:
                permit.close(NOT_SENT)  # no answer (lost, cancelled); idempotent after close(None)
            if conn is rt._conn:
                self._inflight.discard(cmid)

    async def _acked(self, cmid: bytes, a: message_pb2.SendAck) -> None:
        rt = self._rt
        changed = await rt.store.run(rt.store.mark_acked, Resolved(cmid, a.message_id, a.conversation_id,
                                                                   a.conversation_seq, a.created_at_ms))
        ack = SendAck(cmid, a.message_id, a.conversation_id, a.conversation_seq, a.created_at_ms)
        rt._settle(cmid, ack=ack)
        if changed.conversations or changed.reads:  # the row was pending: tell its new state
            rt._after_apply(changed)
            rt._emit(ev.PendingResolved((ack,)))

    async def _fail(self, row: PendingSend, exc: BaseException) -> None:
        """A permanent outcome: row failed (body kept), waiter gets `exc`, app a SendFailed."""
        await _unit(self._failed(row, exc))

    async def _failed(self, row: PendingSend, exc: BaseException) -> None:
        rt, cmid = self._rt, row.client_message_id
        self.resolved(cmid)
        if not isinstance(exc, QimError):
            logger.warning("send failed in the SDK: %r", exc)  # a bug of ours: keep the cause visible
        code = exc.code if isinstance(exc, QimError) else ErrorCode.INTERNAL
        try:
            changed = await rt.store.run(rt.store.mark_failed, cmid)
        finally:
            rt._settle(cmid, exc=exc)
        if changed:
            rt._emit(ev.SendFailed(cmid, code, str(exc)))


async def _unit(coro) -> None:
    """Run `coro` (a store write, then telling the waiter and the app) to its end even when
    the awaiting task is cancelled (close()): an outcome is never half recorded."""
    await asyncio.shield(asyncio.ensure_future(coro))
