"""Tracing off costs no span (docs/decisions/0140): every hook of the per-message path,
given inputs that carry a trace context, creates no span object while tracing is off,
and the same calls do create spans once it is on (so the count can fail). A service
with tracing off never imports OpenTelemetry; a bad OTEL_* value is a configuration
error naming the variable (exit 2 for a service)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import Tracer, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from qim.errors import ConfigError
from qim.obs import otel, otel_gateway
from qim.proto.v1 import internal_pb2, mailbox_pb2
from qim.protocol import Opcode
from qim.services.gateway.routes import ROUTES, forward

TRACE = bytes(range(1, 17))
PARENT = f"00-{TRACE.hex()}-{'ab' * 8}-01"


class Record:
    """A consumed Kafka record with a traceparent header; `reads` counts headers() calls."""

    def __init__(self) -> None:
        self.reads = 0

    def headers(self):
        self.reads += 1
        return [("traceparent", PARENT.encode())]


class Router:
    """BackendRouter.call: a SEND_ACK, or a MAILBOX_BATCH with an entry at mailbox_seq 7."""

    async def call(self, backend: str, key, opcode: int, body: bytes) -> tuple[int, bytes]:
        if opcode == Opcode.MAILBOX_PULL:
            return Opcode.MAILBOX_BATCH, mailbox_pb2.MailboxBatch(
                entries=[mailbox_pb2.MailboxEntry(mailbox_seq=7)]).SerializeToString()
        return Opcode.SEND_ACK, b""


def per_message_path() -> dict[str, int]:
    """Run every hook once with traced inputs; how many spans each created."""
    counts: dict[str, int] = {}
    actor = internal_pb2.Actor(tenant_id=bytes(16), user_id=5)
    pos = internal_pb2.PushBatch.Position(mailbox_seq=7, trace_id=TRACE, span_id=b"\1" * 8, user_ids=[5])
    record = Record()

    def step(name: str, fn) -> None:
        before = len(created)
        fn()
        counts[name] = len(created) - before

    step("gateway send", lambda: asyncio.run(forward(Router(), ROUTES[Opcode.SEND_MESSAGE], b"k" * 16, actor,
                                                     Opcode.SEND_MESSAGE, b"")))

    def writer() -> None:
        with otel.writer_span(PARENT, "SEND_MESSAGE"):
            audience = internal_pb2.OutboxRecord(trace_id=otel.trace_id()).SerializeToString()
            otel.outbox_headers(audience)

    step("writer", writer)

    def fanout() -> None:
        span = otel.consumed(otel.SPAN_FANOUT, record)
        otel.headers_of(span)
        otel.end(span)

    step("fanout", fanout)

    def mailbox() -> None:
        with otel.batch_spans(3, [record]):
            otel.pushed_span_id(TRACE)

    step("mailbox", mailbox)

    def push() -> None:
        with otel_gateway.push_span(0, pos):
            pass

    step("push", push)
    step("pull", lambda: asyncio.run(forward(Router(), ROUTES[Opcode.PULL_MAILBOX], 3, actor,
                                             Opcode.PULL_MAILBOX, b"")))
    counts["headers read"] = record.reads
    return counts


created: list[str] = []


@pytest.fixture
def counting(monkeypatch):
    """Count every span the SDK's tracers start and every NonRecordingSpan made."""
    created.clear()
    start, non_recording = Tracer.start_span, trace.NonRecordingSpan.__init__

    def counted_start(self, name, *args, **kwargs):
        created.append(name)
        return start(self, name, *args, **kwargs)

    def counted_non_recording(self, *args, **kwargs):
        created.append("NonRecordingSpan")
        non_recording(self, *args, **kwargs)

    monkeypatch.setattr(Tracer, "start_span", counted_start)
    monkeypatch.setattr(trace.NonRecordingSpan, "__init__", counted_non_recording)
    yield
    otel.use(None)
    otel_gateway._pushed.clear()


def test_no_span_is_created_when_off_and_spans_are_when_on(counting):
    otel.use(None)
    assert per_message_path() == {"gateway send": 0, "writer": 0, "fanout": 0, "mailbox": 0, "push": 0, "pull": 0,
                                  "headers read": 0}
    assert created == []
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel.use(provider)
    on = per_message_path()
    assert all(on[k] >= 1 for k in ("gateway send", "writer", "fanout", "mailbox", "push", "pull")), on
    names = [s.name for s in exporter.get_finished_spans()]
    assert sorted(set(names)) == sorted({otel.SPAN_GATEWAY, otel.SPAN_WRITER, otel.SPAN_FANOUT, otel.SPAN_MAILBOX,
                                         otel.SPAN_PUSH, otel.SPAN_PULL}), names
    writer = next(s for s in exporter.get_finished_spans() if s.name == otel.SPAN_WRITER)
    assert writer.context.trace_id == int.from_bytes(TRACE, "big") and writer.parent.span_id == int("ab" * 8, 16)


def test_a_service_with_tracing_off_imports_no_opentelemetry():
    code = ("import sys\nfrom qim.obs import otel\nassert otel.setup('gateway', {}) is False\n"
            "assert otel.setup('gateway', {'OTEL_TRACES_EXPORTER': 'otlp', 'OTEL_SDK_DISABLED': 'true'}) is False\n"
            "import qim.services.gateway.server, qim.services.writer.server, qim.services.fanout.node\n"
            "import qim.services.mailbox.node, qim.app.run\n"
            "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


@pytest.mark.parametrize("env, named", [
    ({"OTEL_TRACES_EXPORTER": "jaeger"}, "OTEL_TRACES_EXPORTER"),
    ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL"),
    ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "sometimes"}, "OTEL_TRACES_SAMPLER"),
    ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
      "OTEL_TRACES_SAMPLER_ARG": "2"}, "OTEL_TRACES_SAMPLER_ARG"),
])
def test_a_bad_value_is_a_configuration_error_naming_the_variable(env, named):
    with pytest.raises(ConfigError, match=named):
        otel.setup("writer", env)
    assert not otel.ON


def test_a_service_exits_2_on_a_bad_exporter():
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "QIM_"))},
           "OTEL_TRACES_EXPORTER": "zipkin"}
    r = subprocess.run([sys.executable, "-m", "qim.app", "writer"], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "OTEL_TRACES_EXPORTER='zipkin'" in r.stderr
