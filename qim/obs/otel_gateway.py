"""The gateway's OpenTelemetry spans (docs/decisions/0140; qim/obs/otel.py): the send that
starts a message's trace, the push of its position to the recipients' devices, and the
recipient's pull that fetched it. Only called while qim.obs.otel.ON (the gateway's hooks
test it first).

The pull is tied to the push by the gateway itself: a push span is remembered per
(tenant, user, mailbox_seq) of its recipients (at most PULL_MEMORY of them, the oldest
forgotten first), and a MAILBOX_BATCH reply that returns such an entry to that user
gets a SPAN_PULL child of it. A pull on another gateway than the push (the device
reconnected elsewhere) or after PULL_MEMORY newer pushes is not in the trace (decision
0140, limits).
"""

from __future__ import annotations

import collections
import contextlib
import time
from typing import Any, Awaitable, Callable, ContextManager, Union

from google.protobuf.message import DecodeError

from qim.obs import otel
from qim.proto.v1 import internal_pb2, mailbox_pb2
from qim.protocol import Opcode

PULL_MEMORY = 100_000  # remembered (tenant, user, mailbox_seq) -> push span context
_pushed: collections.OrderedDict[tuple[int, int, int], Any] = collections.OrderedDict()
RouteKey = Union[bytes, int]


async def traced_call(call: Callable[[str, RouteKey, int, bytes], Awaitable[tuple[int, bytes]]], backend: str,
                      key: RouteKey, internal_opcode: int, client_opcode: int, actor: internal_pb2.Actor,
                      body: bytes) -> tuple[int, bytes]:
    """`call(backend, key, internal_opcode, body)` (BackendRouter.call) with its spans: a
    request to the writer (WRITER_SEND) runs in SPAN_GATEWAY, whose traceparent is added to
    the envelope when sampled (WriterSend.traceparent; protobuf concatenation merges; an
    unsampled request costs the writer nothing, its id is drawn there); a MAILBOX_BATCH
    reply gets a SPAN_PULL per returned entry whose push is remembered. Raises what
    `call` raises (the span records it)."""
    if internal_opcode != Opcode.WRITER_SEND:
        started = time.time_ns()
        reply_opcode, reply = await call(backend, key, internal_opcode, body)
        if reply_opcode == Opcode.MAILBOX_BATCH:
            _pulled(actor, reply, started)
        return reply_opcode, reply
    from opentelemetry.trace import SpanKind

    assert otel._tracer is not None
    name = Opcode(client_opcode).name if client_opcode in Opcode._value2member_map_ else str(client_opcode)
    with otel._tracer.start_as_current_span(otel.SPAN_GATEWAY, kind=SpanKind.SERVER,
                                            attributes={"qim.op": name}) as span:
        if span.get_span_context().trace_flags.sampled:  # unsampled: the writer draws the id, spans nothing
            body += internal_pb2.WriterSend(traceparent=otel.traceparent(span)).SerializeToString()
        return await call(backend, key, internal_opcode, body)


def push_span(tenant: int, pos: internal_pb2.PushBatch.Position) -> ContextManager[Any]:
    """SPAN_PUSH around the delivery of one pushed position whose mailbox span is named
    (pos.span_id), remembered for its recipients' pulls; a no-op when off or untraced."""
    if not otel.ON or not pos.span_id:
        return otel._NOOP
    return _push(tenant, pos)


@contextlib.contextmanager
def _push(tenant: int, pos: internal_pb2.PushBatch.Position):
    span = otel.start(otel.SPAN_PUSH, otel.remote(pos.trace_id, pos.span_id), "CONSUMER",
                      mailbox_seq=pos.mailbox_seq, recipients=len(pos.user_ids))
    try:
        yield
    finally:
        span.end()
        ctx = span.get_span_context()
        for user in pos.user_ids:
            _pushed[(tenant, user, pos.mailbox_seq)] = ctx
            while len(_pushed) > PULL_MEMORY:
                _pushed.popitem(last=False)


def _pulled(actor: internal_pb2.Actor, reply: bytes, started_ns: int) -> None:
    """SPAN_PULL for each entry of a MAILBOX_BATCH `reply` pushed to `actor` before."""
    if not _pushed:
        return
    try:
        batch = mailbox_pb2.MailboxBatch.FromString(reply)
    except DecodeError:  # the device gets the reply as it is; its own parse reports it
        return
    tenant = int.from_bytes(actor.tenant_id, "big")
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind

    assert otel._tracer is not None
    for entry in batch.entries:
        ctx = _pushed.pop((tenant, actor.user_id, entry.mailbox_seq), None)
        if ctx is None:
            continue
        parent = trace.set_span_in_context(trace.NonRecordingSpan(ctx))
        span = otel._tracer.start_span(otel.SPAN_PULL, context=parent, kind=SpanKind.SERVER, start_time=started_ns,
                                       attributes={"qim.mailbox_seq": entry.mailbox_seq,
                                                   "qim.entries": len(batch.entries)})
        span.end()
