"""Fault injection for SDK tests and chaos harnesses: a test-only switch, as the
server's qim/faults.py FaultPoints is.

A runtime has none unless it is built with one, `ClientRuntime(..., faults=LinkFaults())`
(tests, `qim-loadgen replay`'s cut-connection dialogues); product code never arms it.
What it can do to the link of that runtime:

- `abort_connection()`: cut the current connection abruptly, as a network failure would;
- `cut_after_next_send()`: the next SEND_MESSAGE frame leaves, then the network is cut
  before its answer can arrive (inbound frames are dropped, the connection aborted once
  the frame was flushed): the send's outcome is unknown to the client, as after a real
  cut, and the reconnect must reconcile or resend it with the same cmid.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Coroutine, Optional

from qim.sdk.connection import Connection


class LinkFaults:
    """The faults one runtime's tests can inject (module docstring). `bind` is the
    runtime's: it tells where the current connection is and how to run a task."""

    def __init__(self) -> None:
        self._current: Callable[[], Optional[Connection]] = lambda: None
        self._spawn: Callable[[Coroutine[Any, Any, Any]], Any] = asyncio.ensure_future
        self._cut_next_send = False

    def bind(self, current: Callable[[], Optional[Connection]], spawn: Callable[[Coroutine[Any, Any, Any]], Any]) -> None:
        """Attach to a runtime: `current()` its connection, `spawn(coro)` its task runner."""
        self._current, self._spawn = current, spawn

    def abort_connection(self) -> None:
        """Cut the current connection abruptly (as a network failure would)."""
        conn = self._current()
        if conn is not None:
            conn.abort("aborted by host")

    def cut_after_next_send(self) -> None:
        """Abort right after the next SEND_MESSAGE frame was written, before its answer."""
        self._cut_next_send = True

    def sent(self, conn: Connection) -> None:
        """The Sender queued a SEND_MESSAGE frame on `conn`: cut now if armed."""
        if not self._cut_next_send:
            return
        self._cut_next_send = False
        conn.go_deaf()
        self._spawn(self._cut(conn))

    @staticmethod
    async def _cut(conn: Connection) -> None:
        try:
            await conn.flush()
        finally:
            conn.abort("cut after send (test hook)")
