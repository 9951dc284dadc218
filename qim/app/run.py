"""Shared process shell: logging, config errors, signals, graceful stop."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from typing import Awaitable, Callable

from qim.errors import ConfigError, EngineError


def setup_logging(service: str) -> None:
    level = os.environ.get("QIM_LOG_LEVEL", "INFO").upper()
    logging.basicConfig(level=getattr(logging, level, logging.INFO),
                        format=f"%(asctime)s {service} %(levelname)s %(name)s: %(message)s")
    # librdkafka and redis-py are chatty at INFO; their warnings still show.
    logging.getLogger("asyncio").setLevel(logging.WARNING)


def run_service(service: str, body: Callable[[], Awaitable[None]]) -> None:
    """Run `body()` until it returns or SIGTERM/SIGINT. Exit 2 with a message naming the
    variable on ConfigError, 3 on EngineError at start."""
    setup_logging(service)
    log = logging.getLogger(f"qim.app.{service}")

    async def main() -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        try:
            await body()
        except asyncio.CancelledError:
            log.info("stopping")

    try:
        asyncio.run(main())
    except ConfigError as exc:
        print(f"{service}: configuration error: {exc}", file=sys.stderr)
        sys.exit(2)
    except EngineError as exc:
        print(f"{service}: cannot start: {exc}", file=sys.stderr)
        sys.exit(3)


async def forever() -> None:
    await asyncio.Event().wait()
