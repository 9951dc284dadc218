"""qim-session entry point (SessionProjection)."""

import asyncio

from qim.app.run import run_service
from qim.config import Env, SessionConfig


def main() -> None:
    async def body() -> None:
        from qim.services.session.node import SessionNode

        node = SessionNode(SessionConfig.from_env(Env()))
        task = await node.start()
        await task
        # The durable projection failed closed: stay up and unhealthy for the operator
        # (the reason is in /healthz); MARK_READ keeps working.
        await asyncio.Event().wait()

    run_service("session", body)


if __name__ == "__main__":
    main()
