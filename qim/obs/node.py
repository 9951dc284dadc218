"""ServiceNode: the shell every QIM service process is built on (issue 11).

One node per process (tests may hold several in one process: nothing here is global).
It owns
- a Prometheus registry of its own (`self.registry`; metrics are created by the
  service's MetricSet on it, never at import) served with /healthz by qim/obs/http.py;
- health: `health()` = failed background tasks + `not_ready()` (the service's readiness
  reasons) + always-zero invariant counters that are not zero (DESIGN.md §2);
- listeners: `listen()` for any stream protocol and `serve_rpc()` for internal RPC
  (qim/net/rpc.py); the node tracks every connection they serve;
- supervised background tasks: `spawn(coro, name)`. A task that raises marks the node
  unhealthy with its reason and is logged once with its traceback; one that returns or
  is cancelled while the node is running marks it unhealthy too (every background task
  of a node runs for the node's lifetime). Never a silent death;
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
from typing import Any, Awaitable, Callable, Coroutine, Iterable, Iterator, Optional

from prometheus_client import GC_COLLECTOR, PLATFORM_COLLECTOR, PROCESS_COLLECTOR, Counter

from qim.net.framed import parse_addr
from qim.net.rpc import Handler, OnewayHandler, rpc_connection_handler
from qim.obs.http import serve_http
from qim.obs.metrics import MetricSet, invariant_reasons

logger = logging.getLogger(__name__)

ConnectionCallback = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
# How long stop() lets cancelled connection handlers (in-flight requests still answer)
# and tasks finish their cleanup, and each client close.
STOP_GRACE_S = 3.0  # then a second cancel; normally everything ends at the first


class ServiceNode:
    """Base class of every service process (gateway, writer, fanout, mailbox, session).

    Subclasses set `service` (names the logger and the task-failure metric), build their
    components in `__init__` after `super().__init__(metrics_listen)`, override
    `not_ready()` and `setup()` (engine checks, listeners, tasks; raise
    qim.errors.EngineError when the node cannot start). `start()` serves /metrics and
    /healthz first (so a starting node answers 503 with its reasons), then runs
    `setup()`. `stop()` is idempotent.
    """

    service = "node"

    def __init__(self, metrics_listen: str) -> None:
        self.metrics_listen = metrics_listen
        self.metrics_base = MetricSet()
        self.registry = self.metrics_base.registry
        # the process, Python platform and GC metrics /metrics always had (the default
        # registry's collectors: they describe the process, so every node may show them)
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
            self.registry.register(collector)
        self._task_failures = self.metrics_base.counter(
            "qim_node_task_failures", "Background tasks of this node that died or ended", ["task"])
        self._invariants: list[Counter] = []
        self._failures: list[str] = []
        self._tasks: dict[asyncio.Task, str] = {}
        self._connections: set[asyncio.Task] = set()
        self._servers: list[asyncio.AbstractServer] = []
        self._closers: list[tuple[str, Callable[[], Any]]] = []
        self._http: Optional[asyncio.AbstractServer] = None
        self._stopping = False
        self.log = logging.getLogger(f"qim.{self.service}")

    # --- what a service overrides -------------------------------------------------
    def not_ready(self) -> Iterable[str]:
        """Reasons the service is not ready (none by default)."""
        return ()

    async def setup(self) -> None:
        """Check engines, open listeners, spawn tasks (EngineError when impossible)."""

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

    async def listen(self, addr: str, on_connection: ConnectionCallback) -> asyncio.AbstractServer:
        """A TCP listener on 'host:port' whose connection handlers the node tracks (and
        cancels on stop). OSError when the address cannot be bound."""
        host, port = parse_addr(addr)

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

    async def serve_rpc(self, addr: str, handler: Handler, inflight_limit: int,
                        on_oneway: Optional[OnewayHandler] = None) -> asyncio.AbstractServer:
        """Internal RPC on 'host:port' (qim/net/rpc.py rpc_connection_handler)."""
        return await self.listen(addr, rpc_connection_handler(handler, inflight_limit, on_oneway))

    # --- health -----------------------------------------------------------------------
    @property
    def failures(self) -> list[str]:
        """Reasons recorded for background tasks that died or ended."""
        return list(self._failures)

    def health(self) -> Iterator[str]:
        """Every reason against health: failed tasks, readiness, invariants."""
        yield from self._failures
        yield from self.not_ready()
        yield from invariant_reasons(self._invariants)

    def _task_done(self, task: asyncio.Task) -> None:
        name = self._tasks.pop(task, task.get_name())
        if self._stopping:
            return
        if task.cancelled():
            reason = f"task {name} was cancelled"
            self.log.error("%s", reason)
        elif task.exception() is not None:
            exc = task.exception()
            reason = f"task {name} died: {type(exc).__name__}: {exc}"
            self.log.error("%s", reason, exc_info=exc)
        else:
            reason = f"task {name} ended"
            self.log.warning("%s (the node stays up, unhealthy, for the operator)", reason)
        self._task_failures.labels(task=name).inc()
        self._failures.append(reason)

    # --- lifecycle ----------------------------------------------------------------------
    async def start(self) -> None:
        """Serve /metrics and /healthz, then `setup()`. On failure the node is stopped
        and the error re-raised (EngineError, OSError for a busy port, ...)."""
        try:
            self._http = await serve_http(self.metrics_listen, self.health, self.registry)
            await self.setup()
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
        for outcome in await _cancel_all(set(self._connections)) + await _cancel_all(set(self._tasks)):
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


async def _cancel_all(tasks: set[asyncio.Task]) -> list[str]:
    """Cancel `tasks` and wait (STOP_GRACE_S) for them, a second cancel for stragglers;
    returns a line for every task that failed with an error while stopping."""
    tasks = {t for t in tasks if not t.done()}
    if not tasks:
        return []
    for t in tasks:
        t.cancel()
    _, pending = await asyncio.wait(tasks, timeout=STOP_GRACE_S)
    for t in pending:
        t.cancel()
    if pending:
        await asyncio.wait(pending, timeout=STOP_GRACE_S)
    failed = []
    for t in tasks:  # retrieve every outcome: nothing is logged later as "never retrieved"
        if t.done() and not t.cancelled() and t.exception() is not None:
            exc = t.exception()
            failed.append(f"{t.get_name()} failed while stopping: {type(exc).__name__}: {exc}")
        elif not t.done():
            failed.append(f"{t.get_name()} did not stop within {2 * STOP_GRACE_S} s")
    return failed
