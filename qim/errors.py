"""One error root for QIM and the typed errors of every layer.

Foreign errors (redis, confluent-kafka, sqlite) are converted at the boundary in
`qim/infra/` or the service that owns the call; nothing above it sees them.
`ErrorCode` values are frozen in docs/protocol.md.
"""

from __future__ import annotations

import enum


class ErrorCode(enum.IntEnum):
    """Wire error codes carried by ERROR frames (docs/protocol.md, frozen)."""

    BAD_FRAME = 1
    UNAUTHENTICATED = 2
    FORBIDDEN = 3
    NOT_FOUND = 4
    INVALID_ARGUMENT = 5
    PAYLOAD_TOO_LARGE = 6
    RATE_LIMITED = 7
    CONFLICT = 8
    CURSOR_EXPIRED = 9
    MAILBOX_DIRTY = 10
    UNAVAILABLE = 11
    INTERNAL = 12
    POLICY_REFUSED = 13  # the deployment's send policy refused the send (docs/decisions/0099)
    BANNED = 14  # AUTH of a banned user, with the reason and Error.until_ms (docs/decisions/0123, Amendment 2)


class QimError(Exception):
    """Root of every QIM error. `code` is the wire ErrorCode it maps to."""

    code: ErrorCode = ErrorCode.INTERNAL


# --- frame codec (docs/design.md §4): every one of these closes the connection -------
class FrameError(QimError):
    """A frame-level fault: the stream cannot be trusted any more (no resync)."""

    code = ErrorCode.BAD_FRAME


class BadMagic(FrameError):
    """Header magic is not 0x5149."""


class BadCrc(FrameError):
    """header_crc does not match CRC-32 of header bytes 0..15."""


class BadVersion(FrameError):
    """Header version is not 1."""


class BadFlags(FrameError):
    """An unknown or reserved flag bit (NEED_ACK) is set."""


class ChunkTooLarge(FrameError):
    """A chunk's body_len exceeds stream_write_chunk_bytes (64 KiB)."""


class FrameTooLarge(FrameError):
    """A reassembled or decompressed body exceeds the 4 MiB frame limit."""


class ChunkOrder(FrameError):
    """A chunk arrived out of order, or flags differ between chunks of one frame."""


class DecompressError(FrameError):
    """A COMPRESSED body is not a valid zstd frame."""


class TruncatedFrame(FrameError):
    """The stream ended inside a header or a body."""


# --- binary layouts of the core (docs/design.md §3, §5) ------------------------------
class SeqError(QimError, ValueError):
    """A mailbox_seq, shard_epoch or log offset is out of its range."""

    code = ErrorCode.INVALID_ARGUMENT


class WatermarkError(QimError, ValueError):
    """A packed watermark blob has a bad length, non-zero reserved field or layout."""


class EventGroupError(QimError, ValueError):
    """A mailbox entry or event group violates its encoding or limits."""


class IdError(QimError, ValueError):
    """An id input is out of range (zero user_id, wrong id length, bad kind)."""

    code = ErrorCode.INVALID_ARGUMENT


# --- request level: answered with an ERROR frame carrying the request_id --------
class RequestError(QimError):
    """A request-level fault. `code` goes on the wire, `message` is safe to show."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ConfigError(QimError):
    """Invalid configuration; the message names the variable (docs/design.md §11)."""


class TlsError(QimError):
    """A TLS failure that trying again does not fix (qim/net/tls.py): a server
    certificate the client does not trust, a handshake without ALPN qim/1 or TLS 1.3, an
    unreadable certificate, key or CA file; also an endpoint that is no QIM gateway's
    transport (a WebSocket upgrade refused with a 4xx: qim/sdk/transports.py). The
    message names the file or the reason."""

    code = ErrorCode.UNAVAILABLE


class EngineError(QimError):
    """A Redis or Kafka engine could not be started, reached or configured."""


class TopicWithoutId(EngineError):
    """A Kafka-API broker reports a topic without a KIP-516 topic id (or no cluster id):
    waiting does not help; a checkpoint bound to the topic's identity cannot start."""


class MailboxDirty(QimError):
    """A shard cannot materialize safely (digest conflict or store failure)."""

    code = ErrorCode.MAILBOX_DIRTY
