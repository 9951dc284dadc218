"""CPU per message of the OpenTelemetry hooks (docs/decisions/0140, docs/perf.md "Tracing"):
tracing off against on at ratio 1.0, exporting over OTLP/HTTP to a local sink.

    .venv/bin/python benches/tracing.py [--messages 20000] [--repeat 3] [--ratio 1.0]

One message's way through the hooks of every service, in one process: the gateway's
forward to the writer (qim/services/gateway/routes.py forward with a stand-in router
that hands the WriterSend's traceparent on), the writer's span, trace id and Outbox
headers, the fanout's span from those headers, the mailbox's batch span and the
push's span id, the gateway's push span and the recipient's pull. The same code runs
with tracing off (otel.use(None)) and on (an SDK TracerProvider, parent-based ratio 1.0,
BatchSpanProcessor, OTLPSpanExporter to a sink in a child process that decodes and counts
what it gets). CPU is time.process_time of this process: every thread, so the batch
processor's export thread (protobuf encoding, HTTP) counts; the sink's CPU does not.
Printed: CPU microseconds per message off and on, their difference (the six spans'
cost), and the spans the sink received (all 6 per message, or the figure is refused).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from qim.obs import otel, otel_gateway  # noqa: E402
from qim.proto.v1 import internal_pb2, mailbox_pb2  # noqa: E402
from qim.protocol import Opcode  # noqa: E402
from qim.services.gateway.routes import ROUTES, forward  # noqa: E402

SINK = r"""
import sys
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
count = [0]
async def traces(request):
    req = ExportTraceServiceRequest.FromString(await request.read())
    count[0] += sum(len(ss.spans) for rs in req.resource_spans for ss in rs.scope_spans)
    return web.Response(body=b"", content_type="application/x-protobuf")
async def spans(request):
    return web.json_response({"spans": count[0]})
async def main():
    app = web.Application()
    app.router.add_post("/v1/traces", traces)
    app.router.add_get("/count", spans)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(site._server.sockets[0].getsockname()[1], flush=True)
    import asyncio
    await asyncio.Event().wait()
web.asyncio.run(main())
"""


class Record:
    """A consumed Kafka record: its headers as produced."""

    def __init__(self, headers) -> None:
        self._headers = headers

    def headers(self):
        return self._headers


class Router:
    """BackendRouter.call: the writer runs its hooks under the envelope's traceparent."""

    def __init__(self) -> None:
        self.outbox_headers = None

    async def call(self, backend: str, key, opcode: int, body: bytes) -> tuple[int, bytes]:
        if opcode == Opcode.MAILBOX_PULL:
            return Opcode.MAILBOX_BATCH, mailbox_pb2.MailboxBatch(
                entries=[mailbox_pb2.MailboxEntry(mailbox_seq=7)]).SerializeToString()
        req = internal_pb2.WriterSend.FromString(body)
        with otel.writer_span(req.traceparent, "SEND_MESSAGE"):
            audience = internal_pb2.OutboxRecord(trace_id=otel.trace_id()).SerializeToString()
            self.outbox_headers = otel.outbox_headers(audience)
        self.trace_id = internal_pb2.OutboxRecord.FromString(audience).trace_id
        return Opcode.SEND_ACK, b""


async def one_message(router: Router, actor: internal_pb2.Actor, seq: int) -> None:
    """The hooks of one message, each fed what the one before produced."""
    await forward(router, ROUTES[Opcode.SEND_MESSAGE], b"k" * 16, actor, Opcode.SEND_MESSAGE, b"")
    span = otel.consumed(otel.SPAN_FANOUT, Record(router.outbox_headers))
    dispatch_headers = otel.headers_of(span)
    otel.end(span)
    with otel.batch_spans(3, [Record(dispatch_headers)]):
        pos = internal_pb2.PushBatch.Position(mailbox_seq=7, trace_id=router.trace_id, user_ids=[5],
                                              span_id=otel.pushed_span_id(router.trace_id))
    with otel_gateway.push_span(0, pos):
        pass
    await forward(router, ROUTES[Opcode.PULL_MAILBOX], 3, actor, Opcode.PULL_MAILBOX, b"")


async def run(messages: int) -> float:
    """CPU seconds of `messages` messages (and, when on, of exporting their spans)."""
    router, actor = Router(), internal_pb2.Actor(tenant_id=bytes(16), user_id=5)
    started = time.process_time()
    for seq in range(messages):
        await one_message(router, actor, seq)
    if otel._provider is not None:
        otel._provider.force_flush()
    return time.process_time() - started


def main() -> int:
    """Print the figures (module doc); 1 when the sink did not get every span."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each; the lowest CPU is printed")
    ap.add_argument("--ratio", type=float, default=1.0, help="the sampling ratio when on (parent-based)")
    args = ap.parse_args()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    sink = subprocess.Popen([sys.executable, "-c", SINK], stdout=subprocess.PIPE, text=True)
    try:
        assert sink.stdout is not None
        port = int(sink.stdout.readline())
        off = min(asyncio.run(run(args.messages)) for _ in range(args.repeat))
        provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(args.ratio)))
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces"),
                                                       max_queue_size=65536))
        otel.use(provider)
        on = min(asyncio.run(run(args.messages)) for _ in range(args.repeat))
        provider.shutdown()
        otel.use(None)
        got = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/count", timeout=10))["spans"]
    finally:
        sink.terminate()
        sink.wait(10)
    per = 1e6 / args.messages
    print(f"tracing off: {off * per:7.1f} us CPU per message (the path's own work, the hooks' flag tests)")
    print(f"tracing on:  {on * per:7.1f} us CPU per message (ratio {args.ratio:g}, six spans per sampled "
          "message, OTLP/HTTP export)")
    print(f"difference:  {(on - off) * per:7.1f} us CPU per message; spans exported {got} "
          f"of {6 * args.messages * args.repeat}")
    return 0 if args.ratio < 1.0 or got == 6 * args.messages * args.repeat else 1


if __name__ == "__main__":
    sys.exit(main())
