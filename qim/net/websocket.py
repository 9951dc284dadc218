"""The WebSocket transport: one frame of the 20-byte-header protocol per binary WebSocket
message (docs/protocol.md "WebSocket"; docs/decisions/0030-edge-transport-seam-and-websocket.md).

WebSocketStream is a FramedStream (qim/net/framed.py) whose bytes are WebSocket frames:
the same asyncio stream below it (TCP, or TLS upgraded in place with its one-chunk
buffers), the same outbound chunk order (qim/net/chunks.py), the same frame decoder and
limits above it. The WebSocket framing is the `websockets` library's Sans-I/O protocol
(`ServerProtocol` / `ClientProtocol`, after the handshake of qim/net/ws_handshake.py):
it masks, unmasks, answers pings and closes; this file only maps messages to frames.

A message is exactly one chunk (header + body_len bytes, at most MESSAGE_MAX_BYTES);
anything else fails the connection with a close code and a reason (WebSocketFault,
a FrameError, so the connection handler treats it as any frame fault: no resync):
- a text message: 1003 (unsupported data);
- a message shorter than its frame (a frame split across messages) or longer (two
  frames in one message): 1002 (protocol error);
- a message over MESSAGE_MAX_BYTES: 1009 (message too big, by the library's max_size);
- a bad header, CRC or body inside a message: 1002 with the fault's name;
- `abort(reason)` by the handler for another cause (no AUTH in time): 1008 (policy).
A clean `close()` (a kick, the end of a token) sends 1000 after the queued frames.
"""

from __future__ import annotations

import logging
from typing import Optional, Union

from websockets.client import ClientProtocol
from websockets.frames import CloseCode, Frame, Opcode
from websockets.server import ServerProtocol

from qim.consts import FRAME_HEADER_LEN, MAX_FRAME_BODY, STREAM_WRITE_CHUNK_BYTES, WS_PATH
from qim.errors import FrameError, TruncatedFrame
from qim.net.framed import FramedStream
from qim.net.transport import ByteReader, ByteWriter, release

logger = logging.getLogger(__name__)

__all__ = ["MESSAGE_MAX_BYTES", "WS_PATH", "WebSocketFault", "WebSocketStream", "chunk_length"]  # WS_PATH: qim/consts.py
MESSAGE_MAX_BYTES = FRAME_HEADER_LEN + STREAM_WRITE_CHUNK_BYTES  # one chunk: the library's max_size
WsProtocol = Union[ServerProtocol, ClientProtocol]


class WebSocketFault(FrameError):
    """A message that is not exactly one binary frame; `close_code` is the close code
    sent (module doc), `reason` its line."""

    def __init__(self, close_code: int, reason: str) -> None:
        super().__init__(reason)
        self.close_code = close_code
        self.reason = reason


def chunk_length(message: bytes) -> int:
    """The length a message holding exactly one chunk has: header + its body_len (0 when
    the message is shorter than a header)."""
    if len(message) < FRAME_HEADER_LEN:
        return 0
    return FRAME_HEADER_LEN + int.from_bytes(message[12:16], "big")


class WebSocketStream(FramedStream):
    """Frames as binary WebSocket messages over an asyncio (reader, writer) pair whose
    WebSocket handshake is done (`ws`: the open Sans-I/O protocol; `events`: what it
    parsed after the handshake in the same read). Contract: FrameTransport
    (qim/net/transport.py); faults and close codes: module doc."""

    def __init__(self, reader: ByteReader, writer: ByteWriter, ws: WsProtocol,
                 events: Optional[list] = None, max_frame: int = MAX_FRAME_BODY,
                 chunk_bytes: int = STREAM_WRITE_CHUNK_BYTES) -> None:
        super().__init__(reader, writer, max_frame=max_frame, chunk_bytes=chunk_bytes)
        self._ws = ws
        self._message: Optional[bytearray] = None  # a fragmented message being received
        self._fault: Optional[tuple[int, str]] = None  # (close code, reason) of a fault seen
        self._peer_closed = False
        self._early = list(events or ())

    async def read_frame(self) -> Optional[tuple[int, int, bytes]]:
        """As FramedStream.read_frame; first the messages parsed with the handshake (a
        client that sent its AUTH right behind the upgrade request)."""
        if self._early:
            early, self._early = self._early, []
            self._push_ready(self._frames_of(early))
        return await super().read_frame()

    # --- FramedStream hooks
    def _decode(self, data: bytes) -> list[tuple[int, int, bytes]]:
        self._ws.receive_data(data)
        return self._frames_of(self._ws.events_received())

    def _frames_of(self, events: list) -> list[tuple[int, int, bytes]]:
        frames: list[tuple[int, int, bytes]] = []
        try:
            for event in events:
                if isinstance(event, Frame):
                    frames.extend(self._on_ws_frame(event))
            if self._ws.parser_exc is not None:  # the library failed the connection (max_size, bad framing)
                release(self._ws.parser_exc)  # it keeps the error; its traceback holds the protocol
                sent = self._ws.close_sent
                raise WebSocketFault(sent.code if sent else CloseCode.PROTOCOL_ERROR,
                                     sent.reason if sent else str(self._ws.parser_exc))
        except FrameError as exc:
            self._fail(exc)
            raise
        finally:
            self._write_pending()  # pongs, close replies, the close frame of a fault
        return frames

    def _on_ws_frame(self, frame: Frame) -> list[tuple[int, int, bytes]]:
        if frame.opcode is Opcode.TEXT:
            raise WebSocketFault(CloseCode.UNSUPPORTED_DATA, "text message: QIM frames are binary messages")
        if frame.opcode is Opcode.CLOSE:
            self._peer_closed = True
            return []
        if frame.opcode not in (Opcode.BINARY, Opcode.CONT):
            return []  # PING (the library answers), PONG
        if frame.opcode is Opcode.BINARY:
            self._message = bytearray(frame.data)
        elif self._message is not None:
            self._message += frame.data  # bounded by the library's max_size
        if not frame.fin or self._message is None:
            return []
        message, self._message = bytes(self._message), None
        expected = chunk_length(message)
        if len(message) < max(expected, FRAME_HEADER_LEN):
            raise WebSocketFault(CloseCode.PROTOCOL_ERROR, "a frame split across messages: one frame per message")
        if len(message) > expected:
            raise WebSocketFault(CloseCode.PROTOCOL_ERROR, "more than one frame in a message: one frame per message")
        return self._decoder.feed(message)

    def _at_eof(self) -> None:
        self._ws.receive_eof()
        self._write_pending()
        if self._message is not None or not self._decoder.at_boundary():
            raise TruncatedFrame("connection ended inside a frame")

    def _ended(self) -> bool:
        return self._peer_closed

    def _emit(self, chunks: list[bytes]) -> None:
        for chunk in chunks:  # one WebSocket message per chunk (the module doc)
            self._ws.send_binary(chunk)
        self._write_pending()

    def _closing(self, reason: str) -> None:
        self._send_close(CloseCode.NORMAL_CLOSURE, reason)

    # --- WebSocket close
    def _fail(self, exc: FrameError) -> None:
        """Remember the fault's close code for `abort()`; a decoder fault inside a
        message is a protocol error named by its class."""
        # the code and line only: the exception's traceback holds this stream (a cycle)
        self._fault = ((exc.close_code, exc.reason) if isinstance(exc, WebSocketFault)
                       else (CloseCode.PROTOCOL_ERROR, f"bad frame: {type(exc).__name__}"))

    def _send_close(self, code: int, reason: str) -> None:
        if self._ws.close_sent is None and not self._ws.eof_sent:
            try:
                self._ws.send_close(code, reason[:120])  # a close reason fits one control frame
            except Exception as exc:  # noqa: BLE001 — a close in a state that cannot send one
                logger.debug("no close frame to %s: %s", self.peer, type(exc).__name__)
        self._write_pending()

    def _write_pending(self) -> None:
        """Hand what the protocol has to send to the socket in one write (b"" marks the
        end of it: the transport closes after this)."""
        pending = []
        for data in self._ws.data_to_send():
            if not data:
                break
            pending.append(data)
        if pending and not self._writer.is_closing():
            self._writer.write(pending[0] if len(pending) == 1 else b"".join(pending))

    def abort(self, reason: str = "") -> None:
        """Close at once with a close frame: the fault's code (module doc), else 1008
        with `reason`; queued frames are dropped."""
        if not self.closed:
            code, line = self._fault or (CloseCode.POLICY_VIOLATION, reason)
            self._send_close(code, line)
        self._finish(clean=False)  # the socket closes after the close frame already written
