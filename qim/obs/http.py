"""The HTTP seam of a node: /metrics, /healthz and the service's declared routes on one
aiohttp server (docs/decisions/0111-an-http-seam-on-aiohttp.md; docs/operations.md
"Metrics").

/healthz answers 200 "ok" when the node reports no reason against its health (ready,
no failed task, every always-zero invariant counter zero); otherwise 503 with the
reasons, one a line (docs/design.md §2). /metrics renders the node's own registry
(qim/obs/metrics.py). Plain HTTP on a loopback address by default; HTTPS (TLS 1.3,
optionally client certificates of a CA) when the process is given a certificate
(qim/config/tls.py `metrics_tls`): the same context serves every route.

A service row's `http` routes (qim/topology.py HttpRoute) are served beside them: the
node's coroutine method named by the route is awaited as `handler(request, device)`
(`device`: the VerifiedToken of the request's bearer token when the route requires one,
qim/obs/httpauth.py, else None) and returns an aiohttp Response. Every route is bounded:
a body above its `max_body` is 413 (a declared Content-Length before the handler runs,
a chunked body when the handler reads past it), a request not answered within its
`timeout_s` is 408, a connection that sends no complete request head within
`idle_timeout_s` is closed (aiohttp's keep-alive timer also runs from the connection's
start), and a TLS handshake has as long. Errors are statuses with a one-line reason
body: an aiohttp HTTPException as raised, qim.errors.RequestError 400, HttpRefused its
status, anything else 500 "internal error" logged with its traceback (route template
only: no body, no token).

Every request counts in `qim_http_requests_total{method, route, status}` and
`qim_http_request_duration_seconds{method, route}`: `route` is the route's template
("/v1/media/{upload}", "other" for no route), `status` its class ("2xx" ... "5xx"),
never an id (docs/operations.md "Metrics").
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import ssl
import time
from typing import Any, Awaitable, Callable, Iterable, Optional, Sequence

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest

from qim.errors import ConfigError, RequestError
from qim.net.framed import parse_addr
from qim.obs.httpauth import DeviceAuth, HttpRefused
from qim.obs.httpcors import enable_cors
from qim.obs.metrics import invariant_reasons
from qim.topology import HttpRoute

__all__ = ["HttpServer", "Readiness", "invariant_reasons", "serve_http"]

logger = logging.getLogger(__name__)

Readiness = Callable[[], Iterable[str]]  # yields reasons for NOT being healthy
REQUEST_TIMEOUT_S = 5.0  # a request head, a TLS handshake, an idle keep-alive connection
BUILTIN = ("/metrics", "/healthz")
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})  # others: label "OTHER"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _text(status: int, body: str, headers: Optional[dict[str, str]] = None) -> web.Response:
    return web.Response(
        status=status, text=body.rstrip("\n") + "\n", content_type="text/plain", charset="utf-8", headers=headers
    )


class HttpServer:
    """The running server: `sockets` (the bound ones: port 0 picked a free port), `is_serving()`,
    `close()` (no new connection) and `wait_closed()` (open connections ended, at most
    a second for a request in flight)."""

    def __init__(self, server: asyncio.Server, runner: web.AppRunner) -> None:
        self._server, self._runner = server, runner

    @property
    def sockets(self) -> Sequence[Any]:
        """The listening sockets."""
        return self._server.sockets

    def is_serving(self) -> bool:
        """True while connections are accepted."""
        return self._server.is_serving()

    def close(self) -> None:
        """Stop accepting connections."""
        self._server.close()

    async def wait_closed(self) -> None:
        """Close the open connections and wait until the server is gone."""
        self._server.close()
        await self._runner.cleanup()
        await self._server.wait_closed()


class _Metrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "qim_http_requests",
            "HTTP requests answered, by route template and status class",
            ["method", "route", "status"],
            registry=registry,
        )
        self.seconds = Histogram(
            "qim_http_request_duration_seconds",
            "HTTP request time, head read to answer",
            ["method", "route"],
            registry=registry,
        )
        self.refused = Counter(
            "qim_http_auth_refused",
            "HTTP requests refused by device-token authentication",
            ["reason"],
            registry=registry,
        )


def _bind(route: HttpRoute, target: Any, auth: Optional[DeviceAuth], m: _Metrics) -> Handler:
    """The aiohttp handler of one declared route (limits, auth, timeout: module doc);
    ConfigError for a declaration the node cannot serve."""
    where = f"HTTP route {route.method} {route.path}"
    if route.method not in METHODS or not route.path.startswith("/") or route.path in BUILTIN:
        raise ConfigError(f"{where}: method must be one of {sorted(METHODS)}, the path absolute and not {BUILTIN}")
    fn = getattr(target, route.handler, None)
    if not inspect.iscoroutinefunction(fn):
        raise ConfigError(f"{where}: {type(target).__name__} has no coroutine method {route.handler!r}")
    if route.token and auth is None:
        raise ConfigError(f"{where} requires a device token but the node has no token verifier (http_auth)")

    async def call(request: web.Request) -> web.StreamResponse:
        length = request.content_length
        if length is not None and length > route.max_body:
            raise HttpRefused(413, "too_large", f"request body is {length} bytes; at most {route.max_body}")
        request = request.clone(client_max_size=route.max_body)  # a chunked body: 413 past it when read
        device = None
        if route.token:
            assert auth is not None
            try:
                device = await auth.authenticate(request.headers.get("Authorization"))
            except HttpRefused as exc:
                m.refused.labels(reason=exc.reason).inc()
                raise
        deadline = asyncio.timeout(route.timeout_s)
        try:
            async with deadline:
                return await fn(request, device)
        except TimeoutError:
            if deadline.expired():  # ours, not a timeout of the handler's own
                raise HttpRefused(408, "timeout", f"request not complete within {route.timeout_s:g} s") from None
            raise

    return call


def _app(
    health: Readiness,
    registry: CollectorRegistry,
    routes: Sequence[HttpRoute],
    target: Any,
    auth: Optional[DeviceAuth],
    cors_origins: Sequence[str] = (),
) -> web.Application:
    m = _Metrics(registry)

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(_: web.Request) -> web.Response:
        reasons = list(health())
        # X-Qim-Pid: a starter checks that its own process answered, not another one that
        # holds the port (qim/dev/stack.py wait_ready; docs/decisions/0155)
        return _text(503 if reasons else 200, "\n".join(reasons) if reasons else "ok", {"X-Qim-Pid": str(os.getpid())})

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        resource = request.match_info.route.resource
        route = resource.canonical if resource is not None else "other"
        method = request.method if request.method in METHODS else "OTHER"
        started, status = time.monotonic(), 500
        try:
            response = await handler(request)
        except web.HTTPException as exc:  # routing's 404/405, a handler's own, aiohttp's 413
            text = exc.text or ""
            response = _text(exc.status, exc.reason.lower() if not text or text.startswith(f"{exc.status}: ") else text)
        except HttpRefused as exc:
            bearer = {"WWW-Authenticate": 'Bearer realm="qim"'} if exc.status == 401 else None
            response = _text(exc.status, exc.message, bearer)
        except RequestError as exc:
            response = _text(400, exc.message)
        except Exception:  # noqa: BLE001 — answered 500, counted and logged with its traceback
            logger.exception("HTTP %s %s failed", method, route)
            response = _text(500, "internal error")
        status = response.status
        m.requests.labels(method=method, route=route, status=f"{status // 100}xx").inc()
        m.seconds.labels(method=method, route=route).observe(time.monotonic() - started)
        return response

    app = web.Application(middlewares=[guard], client_max_size=max([r.max_body for r in routes] + [1024]))
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    for r in routes:
        app.router.add_route(r.method, r.path, _bind(r, target, auth, m))
    enable_cors(app, cors_origins, skip=BUILTIN)  # a page of another origin (decision 0146); none by default
    return app


async def serve_http(
    listen: str,
    health: Readiness,
    registry: CollectorRegistry,
    tls: Optional[ssl.SSLContext] = None,
    routes: Sequence[HttpRoute] = (),
    target: Any = None,
    auth: Optional[DeviceAuth] = None,
    idle_timeout_s: float = REQUEST_TIMEOUT_S,
    cors_origins: Sequence[str] = (),
) -> HttpServer:
    """Serve /metrics, /healthz and `routes` (handlers: methods of `target`) on
    'host:port' (port 0 picks a free one: see `.sockets`); HTTPS with `tls` (a TLS 1.3
    server context: QIM_METRICS_TLS_CERT, qim/config/tls.py). `health()` yields the
    reasons against health (none = 200); `registry` is what /metrics renders and where
    the request metrics are made (once per registry); `auth` verifies the routes that
    require a device token; `cors_origins` the web origins allowed to call the routes
    (qim/obs/httpcors.py; none: no CORS). Raises OSError when the address cannot be bound, ValueError
    on a malformed address, ConfigError for a route the node cannot serve."""
    host, port = parse_addr(listen)
    app = _app(health, registry, routes, target, auth, cors_origins)
    # keepalive_timeout also runs from the connection's start: a client that never
    # completes a request head is closed after idle_timeout_s (no slow-loris hold)
    runner = web.AppRunner(
        app,
        access_log=None,
        handle_signals=False,
        shutdown_timeout=1.0,
        keepalive_timeout=idle_timeout_s,
        handler_cancellation=True,
    )
    await runner.setup()
    assert runner.server is not None
    try:
        server = await asyncio.get_running_loop().create_server(
            runner.server, host, port, ssl=tls, ssl_handshake_timeout=idle_timeout_s if tls else None
        )
    except BaseException:
        await runner.cleanup()
        raise
    return HttpServer(server, runner)
