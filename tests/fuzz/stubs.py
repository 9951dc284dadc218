"""Stand-ins for the in-process request targets: a stream, stores that mark where
validation ended, and one event loop that runs a coroutine with a hang deadline."""

from __future__ import annotations

import asyncio
from typing import Any, Coroutine

from tests.fuzz.draw import Finding

HANG_S = 10.0  # one in-process request never needs more: past it the input is a hang finding
_LOOP = None


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run `coro` on the process's fuzz event loop; Finding when it takes HANG_S."""
    global _LOOP
    if _LOOP is None:
        _LOOP = asyncio.new_event_loop()
    try:
        return _LOOP.run_until_complete(asyncio.wait_for(coro, HANG_S))
    except asyncio.TimeoutError:
        raise Finding(f"a request did not finish within {HANG_S} s (hang)") from None


class Reached(Exception):
    """Validation passed: the request touched storage (or the clock). The attribute it
    asked for is the message."""


class ReachedStore:
    """Calling any method raises Reached: where the request leaves pure validation. The
    call's arguments are evaluated first, so checks inside them still run."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        def reached(*args: Any, **kwargs: Any) -> Any:
            raise Reached(f"{self._name}.{attr}")

        return reached


class StubStream:
    """What ClientConnection uses of its FramedStream, without a socket."""

    def __init__(self) -> None:
        self.buffer_limit: Any = None
        self.closed = False
        self.queued_bytes = 0
        self.sent: list[tuple[int, int, bytes]] = []
        self.peer = "fuzz"

    def send(self, opcode: int, request_id: int, body: bytes, compress: bool = False) -> None:
        """Record a frame (pushes, KICKED)."""
        self.sent.append((opcode, request_id, body))

    def close(self) -> None:
        """Closed by a kick or an expired token."""
        self.closed = True

    abort = close
