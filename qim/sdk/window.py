"""The send window of each conversation: how many of its sends may be on the wire
(docs/decisions/0056).

Only the `limit` oldest unresolved sends of a conversation may be transmitted; a send
outside is held until earlier ones resolve. The writer sequences one conversation's
sends one after the other, so sends beyond its rate would only queue there, and past
the ACK deadline each would be repeated: the limit starts at START, grows by one per
SEND_ACK answered within LATENCY_TARGET of the ACK deadline, shrinks to 3/4 (at most
once per such latency: the cut needs that long to show) when an ACK took longer, and
halves on a "not now" or RATE_LIMITED answer; it stays within 1..MAX. It grows only
while it is full (every admitted send on the wire when the ACK came): a window the
RateGate keeps half empty would otherwise grow to MAX on quick ACKs, and one refusal
would then be repeated by every send behind it (RFC 7661 grows a congestion window
the same way), and only while the writer's line stays short (an ACK within twice the
quickest one plus QUEUE_FLOOR_S): beyond that the rate is the writer's whatever the
window, and a longer line only makes the sends one refusal takes with it more.

After a refusal (the writer refuses a send whose previous one holds no commit state,
so the sends behind a refused one are refused too) only the sends already in flight
are refused: a send refused and not yet sent again holds back every later send of its
conversation, first transmissions included, so retransmissions leave in ordinal order
and none names a send the writer has not seen (`turn`, `admits`). The Sender checks
`admits` again when the RateGate lets a send through, and never waits for a turn
holding a permit: a send answered RATE_LIMITED goes back to the gate's line at once
(a closed gate must see it waiting), and one answered "not now" gives its permit up
when an earlier send is still to be sent again.
"""

from __future__ import annotations

import asyncio
import time

from qim.sdk.connection import Connection
from qim.sdk.events import ConnectionLost
from qim.sdk.ledger import SendLedger
from qim.sdk.model import PendingSend

START, MAX = 32, 512  # sends of one conversation on the wire at once
LATENCY_TARGET = 1 / 3  # of the ACK deadline: an ACK slower than this means the writer's line is long
QUEUE_FLOOR_S = 0.05  # a queue shorter than this (or than the quickest ACK) is not worth cutting


class SendWindows:
    """Windows of the conversations of one runtime's `ledger`; ACK deadline `deadline_s`."""

    def __init__(self, ledger: SendLedger, deadline_s: float) -> None:
        self._ledger, self._deadline_s = ledger, deadline_s
        self._limit: dict[bytes, float] = {}  # conversation -> its window
        self._cut_at: dict[bytes, float] = {}  # conversation -> monotonic time it last shrank for latency
        self._quickest: dict[bytes, float] = {}  # conversation -> the quickest ACK latency of this window
        self._sent_at: dict[bytes, float] = {}  # cmid -> monotonic time of its latest transmission
        self._turns: dict[bytes, list[asyncio.Future]] = {}  # conversation -> retransmissions waiting
        self._flying: dict[bytes, set[bytes]] = {}  # conversation -> cmids on the wire, unanswered
        self._refused: dict[bytes, dict[bytes, int]] = {}  # conversation -> {cmid: ordinal} to send again

    def limit(self, conversation_id: bytes) -> int:
        """The window of a conversation now."""
        return int(self._limit.get(conversation_id, START))

    def admits(self, row: PendingSend) -> bool:
        """True when `row` is among the `limit` oldest unresolved sends of its conversation
        and no earlier send of it waits to be sent again after a refusal."""
        refused = self._refused.get(row.conversation_id)
        if refused and any(o < row.ordinal for o in refused.values()):
            return False
        return self._ledger.position(row) < self.limit(row.conversation_id)

    def admitted(self, conversation_id: bytes) -> list[PendingSend]:
        """The sends of a conversation the window admits, in ordinal order."""
        return self._ledger.oldest(conversation_id, self.limit(conversation_id))

    def sent(self, row: PendingSend) -> None:
        """A transmission of `row` left now (a refused one no longer holds later ones back)."""
        cmid, conv = row.client_message_id, row.conversation_id
        self._sent_at[cmid] = time.monotonic()
        self._flying.setdefault(conv, set()).add(cmid)
        refused = self._refused.get(conv)
        if refused and refused.pop(cmid, None) is not None:
            self._wake(conv)

    def answered(self, conversation_id: bytes, cmid: bytes) -> None:
        """A SEND_ACK: grow while ACKs are quick and the window is full, shrink when they
        queue (module doc)."""
        now = time.monotonic()
        latency = now - self._sent_at.get(cmid, now)
        window = self._limit.get(conversation_id, START)
        quickest = self._quickest[conversation_id] = min(latency, self._quickest.get(conversation_id, latency))
        if latency <= LATENCY_TARGET * self._deadline_s:
            # full, and the writer's line adds no more than the quickest round trip again:
            # past that a larger window only lengthens the line (and what one refusal
            # takes with it), the rate stays the writer's
            if len(self._flying.get(conversation_id, ())) >= int(window) and \
                    latency <= 2 * quickest + QUEUE_FLOOR_S:
                self._limit[conversation_id] = min(MAX, window + 1)
        elif now - self._cut_at.get(conversation_id, 0.0) > latency:
            self._limit[conversation_id], self._cut_at[conversation_id] = max(1.0, window * 0.75), now

    def refused(self, row: PendingSend) -> None:
        """A "not now" or RATE_LIMITED answer to `row`: halve; later sends wait for its
        retransmission (`admits`)."""
        conv = row.conversation_id
        self._limit[conv] = max(1.0, self._limit.get(conv, START) / 2)
        self._flying.get(conv, set()).discard(row.client_message_id)
        self._refused.setdefault(conv, {})[row.client_message_id] = row.ordinal

    def forget(self, row: PendingSend) -> None:
        """`row` resolved: its conversation's window moved; wake the retransmissions waiting."""
        cmid, conv = row.client_message_id, row.conversation_id
        self._sent_at.pop(cmid, None)
        self._flying.get(conv, set()).discard(cmid)
        self._refused.get(conv, {}).pop(cmid, None)
        if not self._ledger.oldest(conv, 1):
            for per_conv in (self._limit, self._cut_at, self._quickest, self._flying, self._refused):
                per_conv.pop(conv, None)
        self._wake(conv)

    def _wake(self, conversation_id: bytes) -> None:
        for fut in self._turns.pop(conversation_id, []):
            if not fut.done():
                fut.set_result(None)

    def reset(self) -> None:
        """A new connection: every window starts again, nothing is on the wire."""
        for per_conv in (self._limit, self._cut_at, self._quickest, self._flying, self._refused):
            per_conv.clear()

    async def turn(self, conn: Connection, row: PendingSend) -> None:
        """Wait until `admits(row)` (or it resolved); ConnectionLost when `conn` ends first."""
        while row.client_message_id in self._ledger and not self.admits(row):
            fut = asyncio.get_running_loop().create_future()
            self._turns.setdefault(row.conversation_id, []).append(fut)
            await asyncio.wait([fut, conn.closed], return_when=asyncio.FIRST_COMPLETED)
            if not conn.is_open:
                raise ConnectionLost("connection closed while waiting for the send window")
