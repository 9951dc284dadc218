"""The unresolved sends of one runtime and their waiters (docs/design.md §3, §9): the one
place a send is resolved.

A send is unresolved from `track` (its pending row, stored before anything is sent)
until `resolve`: acknowledged (SEND_ACK), committed (our own mailbox entry or a
history page named its cmid) or failed for good (a permanent ERROR). `resolve` drops
it from the unresolved set, settles the app's waiter (wait_ack) and tells the
listener (the Sender: its send window moves). Every outcome goes through it: the
Sender's ACKs and failures, and every applied batch that reconciles a send
(qim/sdk/tell.py). `drop` is resolve's first half for a SEND_ACK, whose waiter is
settled only after the ACK was stored: later sends stop naming it as their previous
send at once.

The unresolved set answers what transmission needs: per conversation in ordinal
order, a send's `previous` (the cmid of the nearest earlier unresolved send to the
same conversation, the writer's previous_client_message_id rule, decision 0017) and
its `position` (how many earlier ones are unresolved: the send window).
"""

from __future__ import annotations

import asyncio
import bisect
from typing import Callable, Optional

from qim.sdk.events import SendAck, SendTimeout
from qim.sdk.model import PendingSend


class SendLedger:
    """Unresolved sends by cmid and by conversation, and one waiter per cmid."""

    def __init__(self) -> None:
        self._rows: dict[bytes, PendingSend] = {}
        self._by_conv: dict[bytes, list[tuple[int, bytes]]] = {}  # conversation -> sorted (ordinal, cmid)
        self._waiters: dict[bytes, asyncio.Future] = {}  # cmid -> Future[SendAck]
        self.on_resolved: Callable[[PendingSend], None] = lambda row: None  # the Sender's window

    # --- the unresolved set ----------------------------------------------------------
    def track(self, row: PendingSend) -> None:
        """Remember an unresolved send (idempotent)."""
        if row.client_message_id in self._rows:
            return
        self._rows[row.client_message_id] = row
        bisect.insort(self._by_conv.setdefault(row.conversation_id, []), (row.ordinal, row.client_message_id))

    def get(self, cmid: bytes) -> Optional[PendingSend]:
        """The unresolved send of `cmid`, or None."""
        return self._rows.get(cmid)

    def __contains__(self, cmid: object) -> bool:
        return cmid in self._rows

    def unresolved(self) -> list[PendingSend]:
        """Every unresolved send in ordinal order."""
        return sorted(self._rows.values(), key=lambda r: r.ordinal)

    def oldest(self, conversation_id: bytes, n: int) -> list[PendingSend]:
        """The `n` oldest unresolved sends of a conversation, in ordinal order."""
        return [self._rows[c] for _, c in self._by_conv.get(conversation_id, [])[:n]]

    def position(self, row: PendingSend) -> int:
        """How many unresolved sends of its conversation come before `row`."""
        entries = self._by_conv.get(row.conversation_id, [])
        return bisect.bisect_left(entries, (row.ordinal, row.client_message_id))

    def previous(self, row: PendingSend) -> bytes:
        """cmid of the nearest earlier unresolved send to the same conversation, or b""."""
        i = self.position(row)
        return self._by_conv[row.conversation_id][i - 1][1] if i > 0 else b""

    def drop(self, cmid: bytes) -> None:
        """No longer unresolved (later sends stop naming it); idempotent."""
        row = self._rows.pop(cmid, None)
        if row is None:
            return
        entries = self._by_conv.get(row.conversation_id, [])
        i = bisect.bisect_left(entries, (row.ordinal, cmid))
        if i < len(entries) and entries[i] == (row.ordinal, cmid):
            del entries[i]
        if not entries:
            self._by_conv.pop(row.conversation_id, None)
        self.on_resolved(row)

    # --- outcomes --------------------------------------------------------------------
    def waiter(self, cmid: bytes) -> asyncio.Future:
        """The Future[SendAck] the app's wait_ack awaits (made on first use)."""
        fut = self._waiters.get(cmid)
        if fut is None:
            fut = self._waiters[cmid] = asyncio.get_running_loop().create_future()
        return fut

    async def wait(self, cmid: bytes, timeout: float) -> SendAck:
        """The outcome of `cmid`: SendAck, or the send's exception; SendTimeout after
        `timeout` seconds (the send stays pending)."""
        fut = self.waiter(cmid)
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout)
        except asyncio.TimeoutError:
            raise SendTimeout(cmid) from None
        finally:
            if fut.done():
                self._waiters.pop(cmid, None)

    def resolve(self, cmid: bytes, ack: Optional[SendAck] = None, exc: Optional[BaseException] = None) -> bool:
        """The send's outcome: dropped from the unresolved set, its waiter settled with
        `ack` or `exc`. False when no waiter was left to settle (none, or settled)."""
        self.drop(cmid)
        fut = self._waiters.get(cmid)
        if fut is None or fut.done():
            return False
        if exc is None:
            fut.set_result(ack)
        else:
            fut.set_exception(exc)
            fut.exception()  # submit without wait_ack: the app hears of it by SendFailed, not a GC warning
        return True

    def fail_waiters(self, exc: BaseException) -> None:
        """Every waiting app call gets `exc` (kicked, token refused); the rows stay pending."""
        for fut in self._waiters.values():
            if not fut.done():
                fut.set_exception(exc)
                fut.exception()
