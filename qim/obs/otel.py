"""OpenTelemetry traces of a message's way (docs/operations.md "Tracing", docs/decisions/0140).

Off by default. `setup(service)` (qim/app/run.py, before the node is built) turns it on
when OTEL_TRACES_EXPORTER is `otlp` (OTLP/HTTP protobuf to OTEL_EXPORTER_OTLP_ENDPOINT or
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or `console`; unset or `none`, or OTEL_SDK_DISABLED=true,
leaves it off and the OpenTelemetry packages unimported (the `otel` extra need not be
installed). The sampler is the SDK's from OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG
(default parentbased_always_on; parentbased_traceidratio with a ratio is the usual
production choice); service.name is OTEL_SERVICE_NAME or the service row's name,
service.instance.id the node (QIM_NODE_NAME).

Every hook of the per-message path tests the module flag `ON` first and, off, returns a
shared no-op (or None) without creating any object: no cost when off (tests/otel count it).

One id: the message's QIM trace id (OutboxRecord.trace_id, the `trace=` of the log lines
and of `qimctl trace`) IS the OpenTelemetry trace id. The gateway's span starts the
trace; its traceparent travels to the writer in WriterSend.traceparent, and the writer
takes the trace id of its span for the Outbox record (`trace_id()`), instead of drawing
16 random bytes as it does with tracing off. Between the services the context travels
as a W3C `traceparent` Kafka header (Outbox and dispatch records; only for sampled
traces) and as PushBatch.Position.span_id (mailbox -> gateway; the trace id is already
there). Names of the spans: SPAN_* below.
"""

from __future__ import annotations

import contextlib
import os
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, ContextManager, Mapping, Optional, Sequence

from qim.errors import ConfigError

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer

SPAN_GATEWAY = "qim.gateway.forward"  # a client request forwarded to the writer (frame in -> reply)
SPAN_WRITER = "qim.writer.commit"  # the writer's request: plan, reserve, Outbox record enqueued
SPAN_FANOUT = "qim.fanout.plan"  # one Outbox record planned and its dispatch records produced
SPAN_MAILBOX = "qim.mailbox.append"  # one dispatch record materialized (its batch's round trip)
SPAN_PUSH = "qim.gateway.push"  # the position pushed to the recipients' devices on one gateway
SPAN_PULL = "qim.gateway.pull"  # a recipient's pull that returned the message's entry
EXPORTERS = ("otlp", "console")
SAMPLERS = ("always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off",
            "parentbased_traceidratio")
HEADER = "traceparent"

ON = False  # set by setup(); every hook tests it first
_tracer: Optional["Tracer"] = None
_provider: Any = None
_NOOP: ContextManager[None] = contextlib.nullcontext()
# the spans of the dispatch records a mailbox shard worker is materializing, by trace id:
# its pushes (same task, no await between) name theirs as the gateway's parent
_BATCH: ContextVar[Optional[dict[bytes, "Span"]]] = ContextVar("qim_otel_batch", default=None)


def setup(service: str, environ: Mapping[str, str] = os.environ) -> bool:
    """Turn tracing on from the OTEL_* variables of `environ` (module doc); True when on.
    ConfigError naming the variable for an unknown exporter, protocol, sampler or ratio,
    or when the `otel` extra is missing while an exporter is chosen."""
    global ON, _tracer, _provider
    exporter = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true" or exporter in ("", "none"):
        return False
    if exporter not in EXPORTERS:
        raise ConfigError(f"OTEL_TRACES_EXPORTER={exporter!r}: one of none, {', '.join(EXPORTERS)}")
    protocol = environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", ""))
    if protocol.strip() not in ("", "http/protobuf"):
        raise ConfigError(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r}: QIM exports OTLP over http/protobuf only")
    sampler = environ.get("OTEL_TRACES_SAMPLER", "parentbased_always_on").strip().lower()
    if sampler not in SAMPLERS:
        raise ConfigError(f"OTEL_TRACES_SAMPLER={sampler!r}: one of {', '.join(SAMPLERS)}")
    if sampler.endswith("traceidratio"):
        _ratio(environ.get("OTEL_TRACES_SAMPLER_ARG", "1.0"))
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ModuleNotFoundError as exc:
        raise ConfigError(f"OTEL_TRACES_EXPORTER={exporter} needs the otel extra (no module {exc.name!r}): "
                          "pip install 'qim[otel]'") from None
    node = environ.get("QIM_NODE_NAME", "").strip() or service
    resource = Resource.create({"service.name": environ.get("OTEL_SERVICE_NAME", "").strip() or service,
                                "service.instance.id": node})
    provider = TracerProvider(resource=resource)  # the sampler from OTEL_TRACES_SAMPLER(_ARG)
    if exporter == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    else:
        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    _provider, _tracer, ON = provider, provider.get_tracer("qim"), True
    return True


def _ratio(text: str) -> float:
    try:
        ratio = float(text)
    except ValueError:
        ratio = -1.0
    if not 0.0 <= ratio <= 1.0:
        raise ConfigError(f"OTEL_TRACES_SAMPLER_ARG={text!r}: a ratio from 0 to 1")
    return ratio


def use(provider: Any) -> None:
    """Trace through `provider` (an SDK TracerProvider; None: off again). For tests and
    benches that export in process; services call setup()."""
    global ON, _tracer, _provider
    _provider, _tracer, ON = provider, (provider.get_tracer("qim") if provider is not None else None), provider is not None


def shutdown() -> None:
    """Export what is queued and stop (the SDK also does it at interpreter exit)."""
    if _provider is not None:
        _provider.shutdown()


def traceparent(span: "Span") -> str:
    """The W3C traceparent of `span` (version 00)."""
    ctx = span.get_span_context()
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def parent(text: str) -> Optional["Context"]:
    """The remote parent context a W3C traceparent names (None: malformed, ignored as the
    W3C rule says: the receiver starts a new trace)."""
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    ctx = TraceContextTextMapPropagator().extract({HEADER: text})
    from opentelemetry import trace

    return ctx if trace.get_current_span(ctx).get_span_context().is_valid else None


def remote(trace_id: bytes, span_id: bytes) -> Optional["Context"]:
    """The sampled remote parent (trace_id: 16 bytes, span_id: 8) as a context."""
    if len(trace_id) != 16 or len(span_id) != 8:
        return None
    from opentelemetry import trace

    ctx = trace.SpanContext(int.from_bytes(trace_id, "big"), int.from_bytes(span_id, "big"), is_remote=True,
                            trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED))
    return trace.set_span_in_context(trace.NonRecordingSpan(ctx))


def start(name: str, context: Optional["Context"], kind: str = "INTERNAL", **attributes: Any) -> "Span":
    """A started span `name` under `context` (kind: a SpanKind name; attributes qim.*)."""
    from opentelemetry.trace import SpanKind

    assert _tracer is not None
    return _tracer.start_span(name, context=context, kind=SpanKind[kind],
                              attributes={f"qim.{k}": v for k, v in attributes.items()})


# ---- hooks of the per-message path (each tests ON first) ----

def trace_id() -> bytes:
    """The trace id of a new message (16 bytes): the current span's when tracing is on
    and a span is current (the writer's request under the gateway's), else 16 random bytes."""
    if ON:
        from opentelemetry import trace

        ctx = trace.get_current_span().get_span_context()
        if ctx.is_valid:
            return ctx.trace_id.to_bytes(16, "big")
    return os.urandom(16)


def writer_span(traceparent_text: str, op: str) -> ContextManager[Any]:
    """SPAN_WRITER, current for the writer's request, child of the gateway's span; a
    no-op when off or the request is untraced (no traceparent)."""
    if not ON or not traceparent_text:
        return _NOOP
    assert _tracer is not None
    from opentelemetry.trace import SpanKind

    return _tracer.start_as_current_span(SPAN_WRITER, context=parent(traceparent_text), kind=SpanKind.SERVER,
                                         attributes={"qim.op": op})


def outbox_headers(audience: bytes) -> Optional[list[tuple[str, bytes]]]:
    """Kafka headers of an Outbox record (`audience`: its serialized OutboxRecord part):
    the current span's traceparent when tracing is on, the span is sampled and of the
    record's own trace (a resumed commit of another request keeps its stored trace id
    and goes without). None otherwise."""
    if not ON:
        return None
    from opentelemetry import trace

    from qim.proto.v1 import internal_pb2

    span = trace.get_current_span()
    ctx = span.get_span_context()
    if not ctx.trace_flags.sampled or internal_pb2.OutboxRecord.FromString(audience).trace_id != \
            ctx.trace_id.to_bytes(16, "big"):
        return None
    return [(HEADER, traceparent(span).encode())]


def consumed(name: str, record: Any, **attributes: Any) -> Optional["Span"]:
    """A started span `name` for a consumed Kafka record whose headers carry a traceparent
    (None when off or untraced): end it with end()."""
    if not ON:
        return None
    ctx = _header_parent(record.headers())
    return start(name, ctx, "CONSUMER", **attributes) if ctx is not None else None


def _header_parent(headers: Optional[Sequence[tuple[str, Optional[bytes]]]]) -> Optional["Context"]:
    for key, value in headers or ():
        if key == HEADER and value:
            return parent(value.decode("ascii", "replace"))
    return None


def headers_of(span: Optional["Span"]) -> Optional[list[tuple[str, bytes]]]:
    """Kafka headers naming `span` as the parent of what consumes the record (None: none)."""
    return None if span is None else [(HEADER, traceparent(span).encode())]


def end(span: Optional["Span"]) -> None:
    """End `span` (None: nothing)."""
    if span is not None:
        span.end()


def batch_spans(shard: int, records: Sequence[Any]) -> ContextManager[Any]:
    """SPAN_MAILBOX for each traced record of a mailbox batch (`records`: consumed dispatch
    records), each the child of its record's traceparent, for the batch's round trip;
    their pushes inside the block name them (pushed_span_id). A no-op when off."""
    return _batch(shard, records) if ON else _NOOP


@contextlib.contextmanager
def _batch(shard: int, records: Sequence[Any]):
    spans: dict[bytes, Span] = {}
    for rec in records:
        ctx = _header_parent(rec.headers())
        if ctx is not None:
            span = start(SPAN_MAILBOX, ctx, "CONSUMER", shard=shard, batch_records=len(records))
            spans[span.get_span_context().trace_id.to_bytes(16, "big")] = span
    token = _BATCH.set(spans)
    try:
        yield
    finally:
        _BATCH.reset(token)
        for span in spans.values():
            span.end()


def pushed_span_id(trace_id: bytes) -> bytes:
    """PushBatch.Position.span_id of a record being materialized: its SPAN_MAILBOX's id
    (8 bytes), b"" when off or untraced."""
    if not ON or not trace_id:
        return b""
    span = (_BATCH.get() or {}).get(trace_id)
    return span.get_span_context().span_id.to_bytes(8, "big") if span is not None else b""
