"""WebSocket messages for the live WebSocket target (tests/fuzz/test_live_websocket.py).

`messages(d, seq)` -> WsSequence: the chunks of a live sequence (tests/fuzz/live_gen.py),
one binary message each, as a browser sends them, and sometimes one message-level fault
drawn from the input: a chunk split across two messages, two chunks in one message, a
text message, a message over one chunk (the gateway's max_size). `requests` is what the
gateway can decode before the first fault, by the rules of docs/protocol.md
"WebSocket" (a message is exactly one chunk, then the frame decoder), computed here
without the gateway's code; `fault` says whether the gateway must close the connection
after them, `unfinished` that the last frame lacks chunks (the connection then waits
for them, as on TCP, until the client ends it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from qim._core import frame as frame_codec
from qim.errors import FrameError
from tests.fuzz.draw import Draw
from tests.fuzz.live_gen import Sequence

MESSAGE_MAX = 20 + 64 * 1024  # header + one chunk (docs/protocol.md "WebSocket")
Message = Union[bytes, str]  # str: a text message


@dataclass
class WsSequence:
    """One WebSocket connection's messages and what the gateway decodes before a fault."""

    messages: list[Message]
    requests: list[tuple[int, int, bytes]]
    fault: bool
    unfinished: bool = False


def _one_chunk(message: bytes) -> bool:
    return 20 <= len(message) <= MESSAGE_MAX and len(message) == 20 + int.from_bytes(message[12:16], "big")


def messages(d: Draw, seq: Sequence) -> WsSequence:
    """The messages of `seq` with maybe one message-level fault (module doc)."""
    out: list[Message] = list(seq.chunks)
    how = d.below(10)
    at = d.below(len(out) + 1)
    if how == 0 and out:  # a chunk split across two messages
        i = min(at, len(out) - 1)
        chunk = out[i]
        cut = d.between(1, max(1, len(chunk) - 1))
        out[i:i + 1] = [chunk[:cut], chunk[cut:]]
    elif how == 1 and len(out) >= 2:  # two chunks in one message
        i = min(at, len(out) - 2)
        out[i:i + 2] = [out[i] + out[i + 1]]  # type: ignore[operator]
    elif how == 2:  # a text message
        out.insert(at, d.blob(40).decode("latin-1"))
    elif how == 3:  # one byte over the limit
        out.insert(at, d.sized(MESSAGE_MAX + 1))
    requests: list[tuple[int, int, bytes]] = []
    dec = frame_codec.FrameDecoder()
    fault = False
    for m in out:
        if isinstance(m, str) or not _one_chunk(m):
            fault = True
            break
        try:
            requests.extend(dec.feed(m))
        except FrameError:
            fault = True
            break
    return WsSequence(out, requests, fault, not fault and not dec.at_boundary())
