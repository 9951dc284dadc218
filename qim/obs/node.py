"""ServiceNode: the shell every QIM service process is built on (docs/decisions/0020-service-shell.md).

One node per process (tests may hold several in one process: nothing here is global).
It owns
- a Prometheus registry of its own (`self.registry`; metrics are created by the
  service's MetricSet on it, never at import) served with /healthz and the row's HTTP
  routes (`http_routes()`, with `http_auth` for device tokens) by qim/obs/http.py;
- health: `health()` = failed background tasks + `not_ready()` (the service's readiness
  reasons) + always-zero invariant counters that are not zero (docs/design.md §2);
- listeners: `listen()` for any stream protocol and `serve_rpc()` for internal RPC
  (qim/net/rpc.py); the node tracks every connection they serve. With TLS contexts
  (`tls_contexts()`, qim/net/tls.py) a listener upgrades each connection before the
  protocol sees it; a failed handshake is counted
  (`qim_tls_handshake_failures_total{listener, reason}`) and logged (at most once a
  second per listener), and internal RPC checks the allow-list of qim/net/allow.py
  (`qim_rpc_refused_total{opcode, peer_service}`). `reload_tls()` (SIGHUP) rebuilds
  every context from its files for new connections;
- supervised background tasks: `spawn(coro, name)`. A task that raises marks the node
  unhealthy with its reason and is logged once with its traceback; one that returns or
  is cancelled while the node is running too (every background task of a node runs for
  the node's lifetime). Either ends the process: `task_died` is set, and qim/app/run.py
  stops the node and exits EXIT_TASK_DIED so that the supervisor or systemd starts it
  afresh (what a task repairs itself, links and lease renewals, never ends it:
  docs/decisions/0074-supervision-acts-on-health.md). Never a silent death;
- under systemd, READY=1 and WATCHDOG=1 pings while healthy (qim/obs/watchdog.py);
- a clean stop (`stop()`): listeners closed first (no connection is accepted while
  stopping), then connection handlers and tasks cancelled and awaited, then the
  clients registered with `closing()` closed, the HTTP listener last. No CancelledError
  escapes, so nothing is logged as a traceback.

Placement (docs/decisions/0020-service-shell.md): qim/obs sits below qim/services (the
wiring classes subclass ServiceNode) and qim/app (entry points, signals, exit codes:
qim/app/run.py) sits above everything; nothing imports qim/app.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
from typing import Any, Awaitable, Callable, Coroutine, Iterable, Iterator, Optional

from prometheus_client import GC_COLLECTOR, PLATFORM_COLLECTOR, PROCESS_COLLECTOR, Counter

from qim import faults
from qim.consts import STREAM_WRITE_CHUNK_BYTES
from qim.net.framed import parse_addr
from qim.net.link import ClientLink
from qim.net.link_server import LinkServer
from qim.net.rpc import Handler, LinkFactory, OnewayHandler, rpc_connection_handler
from qim.net.tls import HANDSHAKE_TIMEOUT_S, TlsContexts, TlsFiles, server_context
from qim.net.transport import ByteReader, ByteWriter
from qim.obs.engine_probe import engines_away
from qim.obs.http import HttpServer, serve_http
from qim.obs.httpauth import DeviceAuth
from qim.obs.metrics import MetricSet, invariant_reasons
from qim.obs.node_tls import NodeTls
from qim.obs.tasks import cancel_all, task_end
from qim.obs.watchdog import fault_probe, notify_systemd
from qim.topology import SERVICES, HttpRoute

logger = logging.getLogger(__name__)

# a connection handler: asyncio streams (plaintext) or the ClientLink of a TLS listener (both
# ByteReader and ByteWriter: qim/net/transport.py)
ConnectionCallback = Callable[[ByteReader, ByteWriter], Awaitable[None]]
# How long stop() lets cancelled connection handlers (in-flight requests still answer)
# and tasks finish their cleanup, and each client close.
STOP_GRACE_S = 3.0  # then a second cancel; normally everything ends at the first


class ServiceNode(NodeTls):
    """Base class of every service process (gateway, writer, fanout, mailbox, session).

    Its TLS side (contexts, SIGHUP reload, handshakes, the allow-list guard) is NodeTls's
    (qim/obs/node_tls.py). Subclasses set `service` (names the logger and the
    task-failure metric), build their
    components in `__init__` after `super().__init__(metrics_listen)`, override
    `not_ready()` and `setup()` (engine checks, listeners, tasks; raise
    qim.errors.EngineError when the node cannot start). `start()` serves /metrics and
    /healthz first (so a starting node answers 503 with its reasons), then runs
    `setup()`. `stop()` is idempotent.
    """

    service = "node"

    def __init__(self, metrics_listen: str) -> None:
        self.metrics_listen = metrics_listen
        self.metrics_tls: Optional[TlsFiles] = None  # HTTPS for /metrics, /healthz (set by qim/app/run.py)
        self.http_auth: Optional[DeviceAuth] = None  # verifies device tokens of HTTP routes (the service's config)
        self.http_cors: tuple[str, ...] = ()  # web origins allowed to call the HTTP routes (decision 0146)
        self.metrics_base = MetricSet()
        self.registry = self.metrics_base.registry
        # the process, Python platform and GC metrics /metrics always had (the default
        # registry's collectors: they describe the process, so every node may show them)
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
            self.registry.register(collector)
        self._task_failures = self.metrics_base.counter(
            "qim_node_task_failures", "Background tasks of this node that died or ended", ["task"])
        # best-effort links (qim/net/oneway.py): failed connects and turns, by link and error class
        self.link_failures = self.metrics_base.counter(
            "qim_link_failures", "Failed connect attempts and turns of best-effort links, retried", ["link", "error"])
        self._init_tls()
        self._invariants: list[Counter] = []
        self._failures: list[str] = []
        self._tasks: dict[asyncio.Task, str] = {}
        self._connections: set[asyncio.Task] = set()
        self._servers: list[asyncio.AbstractServer] = []
        self._closers: list[tuple[str, Callable[[], Any]]] = []
        self._http: Optional[HttpServer] = None
        self._stopping = False
        self.task_died: Optional[str] = None  # the first background task that died: the process ends
        self._died = asyncio.Event()
        self._set_up = False  # setup() returned: until then /healthz says "starting"
        self.log = logging.getLogger(f"qim.{self.service}")

    # --- what a service overrides -------------------------------------------------
    def not_ready(self) -> Iterable[str]:
        """Reasons the service is not ready (none by default)."""
        return ()

    async def setup(self) -> None:
        """Check engines, open listeners, spawn tasks (EngineError when impossible)."""

    def http_routes(self) -> tuple[HttpRoute, ...]:
        """The HTTP routes served beside /metrics and /healthz: the `http` column of the
        service's row (qim/topology.py; none for a name outside the table)."""
        row = SERVICES.get(self.service)
        return row.http if row is not None else ()

    # --- building blocks ------------------------------------------------------------
    def always_zero(self, *counters: Counter) -> None:
        """Register invariant counters: /healthz is 503 while any is non-zero."""
        self._invariants.extend(counters)

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task:
        """Run `coro` as a supervised background task named `name` (see module doc)."""
        task = asyncio.get_running_loop().create_task(coro, name=f"{self.service}:{name}")
        self._tasks[task] = name
        task.add_done_callback(self._task_done)
        return task

    def closing(self, close: Callable[[], Any], what: str = "") -> None:
        """Call `close()` (sync or async) on stop, after tasks ended; reverse order of
        registration (a client registered after its dependency closes first)."""
        self._closers.append((what or getattr(close, "__qualname__", "close"), close))

    async def listen(self, addr: str, on_connection: ConnectionCallback, tls: Optional[TlsContexts] = None,
                     chunk_bytes: int = STREAM_WRITE_CHUNK_BYTES, name: str = "",
                     handshake_timeout: float = HANDSHAKE_TIMEOUT_S) -> asyncio.AbstractServer:
        """A TCP listener on 'host:port' whose connection handlers the node tracks (and
        cancels on stop). With `tls`, its connections are ClientLinks of a LinkServer
        (qim/net/link_server.py, the one TLS path: decision 0119; `chunk_bytes`: the
        chunk size the protocol writes, which bounds the TCP buffer under TLS; `name`
        labels the failure metric, default the address). OSError when the address
        cannot be bound."""
        host, port = parse_addr(addr)
        listener = name or addr
        if tls is not None:
            async def serve(link: ClientLink) -> None:
                await on_connection(link, link)

            return await LinkServer(self, tls, serve, chunk_bytes, handshake_timeout, listener).start(addr)

        async def tracked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            if self._stopping or task is None:
                writer.transport.abort()
                return
            self._connections.add(task)
            try:
                await on_connection(reader, writer)
            except asyncio.CancelledError:
                writer.transport.abort()  # stopping: the peer sees the connection drop
            finally:
                self._connections.discard(task)

        server = await asyncio.start_server(tracked, host, port)
        self._servers.append(server)
        return server

    @property
    def stopping(self) -> bool:
        """True once stop() began: a listener refuses (aborts) new connections."""
        return self._stopping

    def add_server(self, server: asyncio.AbstractServer) -> None:
        """A listener opened outside listen() (the gateway's client port): closed on stop."""
        self._servers.append(server)

    def track(self, task: asyncio.Task) -> None:
        """A connection handler opened outside listen(): cancelled and awaited on stop,
        untracked when it ends (it is done: nothing to cancel)."""
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    async def serve_rpc(self, addr: str, handler: Optional[Handler], inflight_limit: int,
                        on_oneway: Optional[OnewayHandler] = None,
                        tls: Optional[TlsContexts] = None, links: Optional[LinkFactory] = None) -> asyncio.AbstractServer:
        """Internal RPC on 'host:port' (qim/net/rpc.py rpc_connection_handler): mutual
        TLS with the allow-list when `tls` is given, plaintext without a check otherwise;
        `links`: a handler per connection instead of `handler` (state per caller connection)."""
        guard = self.rpc_guard(enforce=tls is not None)
        return await self.listen(addr, rpc_connection_handler(handler, inflight_limit, on_oneway, guard, links),
                                 tls=tls, name="rpc")

    # --- health -----------------------------------------------------------------------
    @property
    def failures(self) -> list[str]:
        """Reasons recorded for background tasks that died or ended."""
        return list(self._failures)

    def health(self) -> Iterator[str]:
        """Every reason against health: still starting, failed tasks, readiness, invariants."""
        if not self._set_up:
            yield "starting"
        if faults.enabled() and faults.listed(f"unready:{os.getpid()}"):
            yield "held unready by the fault file (tests only: qim/faults.py)"
        yield from self._failures
        yield from self.not_ready()
        yield from invariant_reasons(self._invariants)

    def _task_done(self, task: asyncio.Task) -> None:
        name = self._tasks.pop(task, task.get_name())
        if self._stopping:
            return
        reason, exc = task_end(task, name)
        self.log.error("%s", reason, exc_info=exc)
        self._task_failures.labels(task=name).inc()
        self._failures.append(reason)
        if self.task_died is None:
            self.task_died = reason
            self._died.set()

    async def wait_task_died(self) -> str:
        """Wait until a background task died or ended while running; its reason (module doc)."""
        await self._died.wait()
        return self.task_died or "a background task ended"

    # --- lifecycle ----------------------------------------------------------------------
    async def start(self) -> None:
        """Serve /metrics, /healthz and the row's HTTP routes, then `setup()`. On failure
        the node is stopped and the error re-raised (EngineError, OSError for a busy
        port, ConfigError for a route it cannot serve, ...)."""
        try:
            tls = server_context(self.metrics_tls) if self.metrics_tls is not None else None
            self._http = await serve_http(self.metrics_listen, self.health, self.registry, tls,
                                          routes=self.http_routes(), target=self, auth=self.http_auth,
                                          cors_origins=self.http_cors)
            await self.setup()
            self._set_up = True
            if os.environ.get("NOTIFY_SOCKET"):
                # an engine away keeps the watchdog fed: a restart cannot cure it (0092)
                self.spawn(notify_systemd(self.health, away=lambda: engines_away(os.environ)), "systemd notify")
            if faults.enabled():
                self.spawn(fault_probe(), "fault probe")
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        """Close listeners, cancel and await connections and tasks, close clients, close
        the HTTP listener. Errors while closing are logged (class and message) and the
        stop goes on: a half-closed process must still exit."""
        if self._stopping:
            return
        self._stopping = True
        for server in self._servers:
            server.close()
        outcomes = await cancel_all(set(self._connections), STOP_GRACE_S)
        for outcome in outcomes + await cancel_all(set(self._tasks), STOP_GRACE_S):
            self.log.warning("%s", outcome)
        for what, close in reversed(self._closers):
            try:
                result = close()
                if inspect.isawaitable(result):
                    await asyncio.wait_for(result, STOP_GRACE_S)
            except Exception as exc:  # noqa: BLE001 — reported; the remaining closers still run
                self.log.warning("closing %s failed: %s: %s", what, type(exc).__name__, exc)
        for server in self._servers:
            await server.wait_closed()
        if self._http is not None:
            self._http.close()
            await self._http.wait_closed()
