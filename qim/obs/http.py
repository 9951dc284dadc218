"""A tiny asyncio HTTP listener serving /metrics (Prometheus text) and /healthz.

/healthz answers 200 "ok" when the service reports ready and every always-zero
invariant counter is zero; otherwise 503 with the failing reasons (DESIGN.md §2).
Metric names start with `qim_`; labels never carry user or message ids.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable, Iterable

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from prometheus_client import Counter

from qim.net.framed import parse_addr

logger = logging.getLogger(__name__)

Readiness = Callable[[], Iterable[str]]  # yields reasons for NOT being ready


def invariant_reasons(counters: Iterable[Counter]) -> list[str]:
    """Names of always-zero counters that are not zero."""
    out = []
    for c in counters:
        for metric in c.collect():
            for sample in metric.samples:
                if sample.name.endswith("_total") and sample.value:
                    out.append(f"{sample.name}={int(sample.value)}")
    return out


async def serve_http(listen: str, not_ready: Readiness) -> asyncio.AbstractServer:
    """Start the listener on 'host:port'. Port 0 picks a free port (see .sockets)."""
    host, port = parse_addr(listen)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readline(), 5.0)
            while (await asyncio.wait_for(reader.readline(), 5.0)) not in (b"\r\n", b"\n", b""):
                pass
            parts = request.decode("latin-1").split()
            path = parts[1] if len(parts) >= 2 else ""
            if path == "/metrics":
                status, ctype, body = "200 OK", CONTENT_TYPE_LATEST, generate_latest(REGISTRY)
            elif path == "/healthz":
                reasons = list(not_ready())
                status = "503 Service Unavailable" if reasons else "200 OK"
                body = ("\n".join(reasons) if reasons else "ok").encode() + b"\n"
                ctype = "text/plain; charset=utf-8"
            else:
                status, ctype, body = "404 Not Found", "text/plain", b"not found\n"
            writer.write(f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                         f"Connection: close\r\n\r\n".encode() + body)
            await writer.drain()
        except (asyncio.TimeoutError, ConnectionError, OSError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, host, port)
