"""A local OTLP/HTTP receiver for the tracing tests (docs/decisions/0140): an aiohttp
handler of POST /v1/traces on loopback (a free port), decoding each
ExportTraceServiceRequest (protobuf, gzip or not) with opentelemetry-proto into Span
records; it runs its own event loop in a thread so that the test's loop and the
services' exports never wait for each other."""

from __future__ import annotations

import asyncio
import gzip
import threading
from dataclasses import dataclass, field
from typing import Optional

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass(frozen=True)
class Span:
    """One received span: ids as hex ("" parent: a root), its resource's service name and
    instance, its attributes (string, int or bool values)."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    service: str
    instance: str
    attributes: dict = field(hash=False, compare=False)


def _value(v) -> object:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


def decode(body: bytes) -> list[Span]:
    """The spans of one ExportTraceServiceRequest."""
    req = ExportTraceServiceRequest.FromString(body)
    out = []
    for rs in req.resource_spans:
        res = {a.key: _value(a.value) for a in rs.resource.attributes}
        for ss in rs.scope_spans:
            for s in ss.spans:
                out.append(Span(s.name, s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(),
                                str(res.get("service.name", "")), str(res.get("service.instance.id", "")),
                                {a.key: _value(a.value) for a in s.attributes}))
    return out


class OtlpReceiver:
    """Start with start(); `endpoint` is OTEL_EXPORTER_OTLP_ENDPOINT; `spans()` what came
    so far; `requests` counts the exports; `bad` the requests that did not decode."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spans: list[Span] = []
        self.requests = 0
        self.bad = 0
        self.endpoint = ""
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._runner: Optional[web.AppRunner] = None
        self._thread: Optional[threading.Thread] = None

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        if request.headers.get("Content-Encoding", "") == "gzip":
            body = gzip.decompress(body)
        try:
            spans = decode(body)
        except Exception:  # DecodeError: what a broken exporter sent; the test sees `bad`
            with self._lock:
                self.bad += 1
            return web.Response(status=400, text="not an ExportTraceServiceRequest")
        with self._lock:
            self.requests += 1
            self._spans.extend(spans)
        return web.Response(body=ExportTraceServiceResponse().SerializeToString(),
                            content_type="application/x-protobuf")

    def start(self) -> "OtlpReceiver":
        """Listen on 127.0.0.1, a free port; returns when it accepts."""
        ready = threading.Event()

        async def serve() -> None:
            app = web.Application()
            app.router.add_post("/v1/traces", self._handle)
            self._runner = web.AppRunner(app)
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            await site.start()
            port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            self.endpoint = f"http://127.0.0.1:{port}"
            ready.set()

        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="otlp-receiver", daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(serve(), self._loop).result(timeout=30)
        ready.wait(30)
        return self

    def spans(self) -> list[Span]:
        """Every span received so far."""
        with self._lock:
            return list(self._spans)

    def stop(self) -> None:
        """Close the listener and the loop."""
        if self._loop is None:
            return
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(30)
        self._loop.close()
