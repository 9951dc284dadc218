"""Shared process shell: logging, signals, exit codes around one ServiceNode.

`run_node(service, build)`: `build()` reads the configuration and returns the node
(qim/obs/node.py); the node starts, serves until SIGTERM or SIGINT, then stops cleanly
and the process exits 0. SIGHUP reloads the node's TLS certificates (ServiceNode.reload_tls). Exit codes otherwise, each with a one-line message on stderr:
2 configuration error (the message names the variable), 3 cannot start (an engine
check failed, a port is taken), 4 the `server` extra is not installed
(docs/decisions/0020-service-shell.md), 5 a background task of the running node died or
ended (the node is stopped first; the supervisor or systemd starts the process again:
docs/decisions/0074-supervision-acts-on-health.md).

The event loop is uvloop (part of the `server` extra: 12 to 24 % less CPU per message in
the writer, session and gateway, docs/perf-profile.md); `QIM_EVENT_LOOP=asyncio` runs the
standard library's loop instead (docs/operations.md).
"""

from __future__ import annotations

import asyncio
import faulthandler
import logging
import os
import signal
import sys
from typing import TYPE_CHECKING, Callable

from qim.config.env import Env
from qim.config.tls import metrics_tls
from qim.errors import ConfigError, EngineError
from qim.obs import logcontext, otel

if TYPE_CHECKING:
    from qim.obs.node import ServiceNode

# Top-level modules of the `server` extra (pyproject.toml): a service importing one of
# them on an app-only install fails with EXIT_NO_SERVER_EXTRA and the pip command.
SERVER_EXTRA_MODULES = frozenset({"uvloop", "redis", "hiredis", "confluent_kafka", "prometheus_client", "pyroaring", "numpy",
                                  "cassandra", "websockets", "aiohttp", "aiohttp_cors"})
EXIT_CONFIG, EXIT_CANNOT_START, EXIT_NO_SERVER_EXTRA, EXIT_TASK_DIED = 2, 3, 4, 5
EVENT_LOOP_ENV = "QIM_EVENT_LOOP"
EVENT_LOOPS = ("uvloop", "asyncio")  # the first is the default


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """The loop factory $QIM_EVENT_LOOP names: "uvloop" (default) or "asyncio".
    ConfigError naming the variable for any other value; ModuleNotFoundError('uvloop')
    when uvloop is chosen but the `server` extra is not installed."""
    name = os.environ.get(EVENT_LOOP_ENV, "").strip().lower() or EVENT_LOOPS[0]
    if name not in EVENT_LOOPS:
        raise ConfigError(f"{EVENT_LOOP_ENV}={name!r}: expected one of {', '.join(EVENT_LOOPS)}")
    if name == "asyncio":
        return asyncio.new_event_loop
    import uvloop  # server extra

    return uvloop.new_event_loop


class TaskDied(Exception):
    """A background task of the running node died or ended (the message names it)."""


def setup_logging(service: str) -> None:
    """Log lines `time LEVEL logger [service=… node=… op=… rid=… trace=…]: message` at
    QIM_LOG_LEVEL (default INFO), the context of qim/obs/logcontext.py on every line;
    QIM_NODE_NAME names the node (default the service); QIM_LOG_TRACE=1 adds the
    per-message stage lines of the `qim.trace` logger (DEBUG) whatever the level."""
    level = os.environ.get("QIM_LOG_LEVEL", "INFO").upper()
    logcontext.set_process(service, os.environ.get("QIM_NODE_NAME", "").strip() or service)
    logging.basicConfig(level=getattr(logging, level, logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s [%(ctx)s]: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(logcontext.ContextFilter())
    if os.environ.get("QIM_LOG_TRACE", "") == "1":
        logging.getLogger(logcontext.TRACE_LOGGER).setLevel(logging.DEBUG)
    # asyncio's INFO lines (slow callbacks) are noise at INFO; its warnings still show.
    logging.getLogger("asyncio").setLevel(logging.WARNING)


def missing_server_module(exc: ModuleNotFoundError) -> str:
    """The top-level module name when `exc` is a module of the server extra, else ""."""
    top = (exc.name or "").split(".")[0]
    return top if top in SERVER_EXTRA_MODULES else ""


def run_node(service: str, build: Callable[[], "ServiceNode"]) -> None:
    """Run the node `build()` returns until SIGTERM/SIGINT; exits as the module doc says.
    A fatal signal (SIGSEGV, SIGFPE, SIGABRT, SIGBUS, SIGILL) leaves every thread's
    Python stack on stderr, the service's log, before the process dies: a crash in a
    compiled extension is otherwise a bare "killed by signal 11" with nothing to act on."""
    faulthandler.enable(file=sys.stderr, all_threads=True)
    setup_logging(service)
    prog = f"qim-{service}"
    try:
        otel.setup(service)  # OpenTelemetry traces when OTEL_TRACES_EXPORTER names an exporter (decision 0140)
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            runner.run(serve_until_signal(service, build))
    except ConfigError as exc:
        print(f"{prog}: configuration error: {exc}", file=sys.stderr)
        sys.exit(EXIT_CONFIG)
    except EngineError as exc:
        print(f"{prog}: cannot start: {exc}", file=sys.stderr)
        sys.exit(EXIT_CANNOT_START)
    except TaskDied as exc:
        print(f"{prog}: {exc}; exiting so that the process is started again", file=sys.stderr)
        sys.exit(EXIT_TASK_DIED)
    except ModuleNotFoundError as exc:
        module = missing_server_module(exc)
        if not module:
            raise
        print(f"{prog}: the server extra is not installed (no module {module!r}); "
              f"install it with: pip install 'qim[server]'", file=sys.stderr)
        sys.exit(EXIT_NO_SERVER_EXTRA)


async def serve_until_signal(service: str, build: Callable[[], "ServiceNode"]) -> None:
    """Build and start the node, wait for SIGTERM/SIGINT, stop it. A signal during the
    start stops what was started. Raises what `build()`/`start()` raise; an OSError of
    a listener (port taken) becomes EngineError."""
    log = logging.getLogger(f"qim.app.{service}")
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    node = build()
    # /metrics and /healthz: HTTPS with a certificate, else plain HTTP on loopback only
    node.metrics_tls = metrics_tls(Env(), node.metrics_listen)
    # certificate rotation: new connections use the reloaded files (docs/operations.md)
    loop.add_signal_handler(signal.SIGHUP, node.reload_tls)
    starting = loop.create_task(node.start(), name=f"{service}:start")
    signalled = loop.create_task(stop.wait(), name=f"{service}:signal")
    await asyncio.wait({starting, signalled}, return_when=asyncio.FIRST_COMPLETED)
    if not starting.done():
        log.info("stopping during start")
        starting.cancel()
        await asyncio.gather(starting, return_exceptions=True)  # start() stops the node
        # ... unless the cancellation was lost inside it (asyncio.wait_for of Python 3.11
        # can drop one when the awaited call finishes at the same moment): stop it here
        await node.stop()
        return
    exc = starting.exception()
    if exc is not None:
        signalled.cancel()
        if isinstance(exc, OSError):
            raise EngineError(f"cannot listen: {exc}") from exc
        raise exc
    log.info("started (event loop: %s)", type(loop).__module__.split(".")[0])
    died = loop.create_task(node.wait_task_died(), name=f"{service}:task died")
    await asyncio.wait({signalled, died}, return_when=asyncio.FIRST_COMPLETED)
    if died.done() and not signalled.done():
        signalled.cancel()
        log.error("stopping: %s", died.result())
        await node.stop()
        raise TaskDied(died.result())
    died.cancel()
    log.info("stopping")
    await node.stop()
    log.info("stopped")
