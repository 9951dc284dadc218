"""A tiny asyncio HTTP listener serving /metrics (Prometheus text) and /healthz.

/healthz answers 200 "ok" when the node reports no reason against its health (ready,
no failed task, every always-zero invariant counter zero); otherwise 503 with the
reasons, one a line (docs/design.md §2). /metrics renders the node's own registry
(qim/obs/metrics.py). Metric names start with `qim_`; labels never carry user or
message ids.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable, Iterable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from qim.net.framed import parse_addr
from qim.obs.metrics import invariant_reasons

__all__ = ["Readiness", "invariant_reasons", "serve_http"]

logger = logging.getLogger(__name__)

Readiness = Callable[[], Iterable[str]]  # yields reasons for NOT being healthy
REQUEST_TIMEOUT_S = 5.0


async def serve_http(listen: str, health: Readiness, registry: CollectorRegistry) -> asyncio.AbstractServer:
    """Start the listener on 'host:port' (port 0 picks a free one: see `.sockets`).

    `health()` yields the reasons against health (none = 200); `registry` is what
    /metrics renders. Raises OSError when the address cannot be bound, ValueError on a
    malformed address."""
    host, port = parse_addr(listen)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readline(), REQUEST_TIMEOUT_S)
            while (await asyncio.wait_for(reader.readline(), REQUEST_TIMEOUT_S)) not in (b"\r\n", b"\n", b""):
                pass
            parts = request.decode("latin-1").split()
            path = parts[1] if len(parts) >= 2 else ""
            if path == "/metrics":
                status, ctype, body = "200 OK", CONTENT_TYPE_LATEST, generate_latest(registry)
            elif path == "/healthz":
                reasons = list(health())
                status = "503 Service Unavailable" if reasons else "200 OK"
                body = ("\n".join(reasons) if reasons else "ok").encode() + b"\n"
                ctype = "text/plain; charset=utf-8"
            else:
                status, ctype, body = "404 Not Found", "text/plain", b"not found\n"
            writer.write(f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                         f"Connection: close\r\n\r\n".encode() + body)
            await writer.drain()
        except (asyncio.TimeoutError, ConnectionError, OSError):
            pass  # a scraper that went away or never spoke: nothing to answer
        finally:
            writer.close()

    return await asyncio.start_server(handle, host, port)
