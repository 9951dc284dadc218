"""Page replies toward one client: compressed when they compress, and a repeated
PULL_MAILBOX never answered while the first copy of its page is still being written
(issue 34 item 3, docs/decisions/0087-pages-once-and-compressed-to-slow-readers.md).

- Compression: a MAILBOX_BATCH or HISTORY_BATCH of at least COMPRESS_MIN_BYTES whose
  sample compresses to at most COMPRESS_WORTH of its size is sent COMPRESSED (zstd,
  docs/protocol.md: every receiver decodes the flag, both SDKs included, so nothing is
  negotiated and no client changes). Random or already compressed bodies are sent as
  they are: zstd on 900 KiB of random bytes costs ~3 ms of the gateway's loop for
  nothing, the sample ~0.1 ms.
- Repeats: an SDK asks for a page again when its reply seems lost (qim/sdk/puller.py
  PULL_REPEAT_PROBES). A pull byte-identical to one whose MAILBOX_BATCH is still
  queued on this connection (chunks not yet taken by the socket) waits until that copy
  has left: two copies of a page interleaved chunk by chunk on a slow link doubled the
  time of the first, which made the client ask again, and so on (the report's 61 bodies
  for 30 messages). After the first copy left the repeat is served as usual (the
  client may have lost the first with its reply future; it never gets two at once).
"""

from __future__ import annotations

import weakref
from typing import Optional, Protocol, runtime_checkable

from prometheus_client import CollectorRegistry

from qim._core.zstd_bound import compressor
from qim.net.transport import FrameTransport
from qim.obs.metrics import MetricSet
from qim.protocol import Opcode

COMPRESS_MIN_BYTES = 16 * 1024  # one client chunk: below it a page leaves in one write anyway
COMPRESS_WORTH = 0.8  # compress when the sample shrinks to at most this fraction
COMPRESS_OPCODES = frozenset({Opcode.MAILBOX_BATCH, Opcode.HISTORY_BATCH})
SAMPLE_SLICES = 8
SAMPLE_SLICE_BYTES = 4 * 1024

_METRICS: "weakref.WeakKeyDictionary[CollectorRegistry, PageMetrics]" = weakref.WeakKeyDictionary()


@runtime_checkable
class SendTracking(Protocol):
    """A FrameTransport that tells whether a frame is still queued (qim/net/framed.py
    FramedStream; the WebSocket stream does not: its repeats are served at once)."""

    def sending(self, opcode: int, request_id: int) -> bool:
        """True while the frame (`opcode`, `request_id`) has chunks not yet written."""
        ...


class PageMetrics:
    """qim_gateway_page_* counters of one gateway's MetricSet (made once per set)."""

    def __init__(self, m: MetricSet) -> None:
        self.compressed = m.counter("qim_gateway_page_compressed", "Page replies sent COMPRESSED (zstd)")
        self.bytes_in = m.counter("qim_gateway_page_compressed_in_bytes",
                                  "Bytes of page replies sent COMPRESSED, before compression")
        self.deferred = m.counter("qim_gateway_page_repeats_deferred",
                                  "Repeated PULL_MAILBOX held until the first copy of the page was written")

    @classmethod
    def of(cls, m: MetricSet) -> "PageMetrics":
        """The counters on `m`'s registry (created at its first use)."""
        got = _METRICS.get(m.registry)
        if got is None:
            got = _METRICS[m.registry] = cls(m)
        return got


def worth_compressing(body: bytes) -> bool:
    """Whether `body` (a page reply) is worth sending COMPRESSED: at least
    COMPRESS_MIN_BYTES and SAMPLE_SLICES slices of SAMPLE_SLICE_BYTES spread over it
    compress to at most COMPRESS_WORTH (a page of half text, half random bytes does)."""
    n = len(body)
    if n < COMPRESS_MIN_BYTES:
        return False
    step = (n - SAMPLE_SLICE_BYTES) // (SAMPLE_SLICES - 1)
    sample = b"".join(body[i * step:i * step + SAMPLE_SLICE_BYTES] for i in range(SAMPLE_SLICES))
    return len(compressor().compress(sample)) <= COMPRESS_WORTH * len(sample)


class PageReplies:
    """Page-reply rules of one ClientConnection (module doc). `stream` is its
    FrameTransport (`sending(opcode, request_id)` where it has one), `metrics` the
    gateway's MetricSet."""

    def __init__(self, stream: FrameTransport, metrics: MetricSet) -> None:
        self._stream = stream
        self._sending: Optional[SendTracking] = stream if isinstance(stream, SendTracking) else None
        self._m = PageMetrics.of(metrics)
        self._last: tuple[bytes, int] = (b"", 0)  # (PULL_MAILBOX body, request_id) of the last page queued

    def _first_in_flight(self, opcode: int, body: bytes) -> int:
        """The request_id of the queued page this pull repeats, else 0."""
        last_body, rid = self._last
        tracking = self._sending
        if opcode != Opcode.PULL_MAILBOX or not rid or body != last_body or tracking is None:
            return 0
        return rid if tracking.sending(Opcode.MAILBOX_BATCH, rid) else 0

    async def defer_repeat(self, opcode: int, body: bytes) -> None:
        """Wait while the page this request repeats is still being written (counted)."""
        rid = self._first_in_flight(opcode, body)
        if not rid:
            return
        self._m.deferred.inc()
        stream, tracking = self._stream, self._sending
        while tracking is not None and not stream.closed and tracking.sending(Opcode.MAILBOX_BATCH, rid):
            await stream.wait_writable(max(0, stream.queued_bytes - 1))  # wakes on every chunk taken

    def send(self, request_opcode: int, request_body: bytes, request_id: int, opcode: int, reply: bytes) -> None:
        """Queue `reply` (compressed when worth it) and remember a page's request."""
        compress = opcode in COMPRESS_OPCODES and worth_compressing(reply)
        if compress:
            self._stream.send(opcode, request_id, reply, True)
        else:  # the plain call: stand-in streams of unit tests take no flag
            self._stream.send(opcode, request_id, reply)
        if compress:
            self._m.compressed.inc()
            self._m.bytes_in.inc(len(reply))
        if request_opcode == Opcode.PULL_MAILBOX and opcode == Opcode.MAILBOX_BATCH:
            self._last = (request_body, request_id)
