"""The send window of each conversation: how many of its sends may be on the wire
(docs/decisions/0056).

Only the `limit` oldest unresolved sends of a conversation may be transmitted; a send
outside is held until earlier ones resolve. The writer sequences one conversation's
sends one after the other, so sends beyond its rate would only queue there, and past
the ACK deadline each would be repeated: the limit starts at START, grows by one per
SEND_ACK answered within LATENCY_TARGET of the ACK deadline, shrinks to 3/4 (at most
once per such latency: the cut needs that long to show) when an ACK took longer, and
halves on a "not now" or RATE_LIMITED answer; it stays within 1..MAX. After a refusal
(the writer refuses a send whose previous one holds no commit state, so the sends
behind a refused one are refused too) only the sends already in flight are refused,
and their retransmissions wait for their `turn` in the window again, in ordinal order,
instead of each retrying on its own.
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


class SendWindows:
    """Windows of the conversations of one runtime's `ledger`; ACK deadline `deadline_s`."""

    def __init__(self, ledger: SendLedger, deadline_s: float) -> None:
        self._ledger, self._deadline_s = ledger, deadline_s
        self._limit: dict[bytes, float] = {}  # conversation -> its window
        self._cut_at: dict[bytes, float] = {}  # conversation -> monotonic time it last shrank for latency
        self._sent_at: dict[bytes, float] = {}  # cmid -> monotonic time of its latest transmission
        self._turns: dict[bytes, list[asyncio.Future]] = {}  # conversation -> retransmissions waiting

    def limit(self, conversation_id: bytes) -> int:
        """The window of a conversation now."""
        return int(self._limit.get(conversation_id, START))

    def admits(self, row: PendingSend) -> bool:
        """True when `row` is among the `limit` oldest unresolved sends of its conversation."""
        return self._ledger.position(row) < self.limit(row.conversation_id)

    def admitted(self, conversation_id: bytes) -> list[PendingSend]:
        """The sends of a conversation the window admits, in ordinal order."""
        return self._ledger.oldest(conversation_id, self.limit(conversation_id))

    def sent(self, cmid: bytes) -> None:
        """A transmission of `cmid` left now."""
        self._sent_at[cmid] = time.monotonic()

    def answered(self, conversation_id: bytes, cmid: bytes) -> None:
        """A SEND_ACK: grow while ACKs are quick, shrink when they queue (module doc)."""
        now = time.monotonic()
        latency = now - self._sent_at.get(cmid, now)
        window = self._limit.get(conversation_id, START)
        if latency <= LATENCY_TARGET * self._deadline_s:
            self._limit[conversation_id] = min(MAX, window + 1)
        elif now - self._cut_at.get(conversation_id, 0.0) > latency:
            self._limit[conversation_id], self._cut_at[conversation_id] = max(1.0, window * 0.75), now

    def refused(self, conversation_id: bytes) -> None:
        """A "not now" or RATE_LIMITED answer: halve."""
        self._limit[conversation_id] = max(1.0, self._limit.get(conversation_id, START) / 2)

    def forget(self, row: PendingSend) -> None:
        """`row` resolved: its conversation's window moved; wake the retransmissions waiting."""
        self._sent_at.pop(row.client_message_id, None)
        if not self._ledger.oldest(row.conversation_id, 1):
            self._limit.pop(row.conversation_id, None)
            self._cut_at.pop(row.conversation_id, None)
        for fut in self._turns.pop(row.conversation_id, []):
            if not fut.done():
                fut.set_result(None)

    def reset(self) -> None:
        """A new connection: every window starts again."""
        self._limit.clear()
        self._cut_at.clear()

    async def turn(self, conn: Connection, row: PendingSend) -> None:
        """Wait until `row` is in its window (or resolved); ConnectionLost when `conn` ends first."""
        while row.client_message_id in self._ledger and not self.admits(row):
            fut = asyncio.get_running_loop().create_future()
            self._turns.setdefault(row.conversation_id, []).append(fut)
            await asyncio.wait([fut, conn.closed], return_when=asyncio.FIRST_COMPLETED)
            if not conn.is_open:
                raise ConnectionLost("connection closed while waiting for the send window")
