"""qim-mailbox entry point."""

import asyncio

from qim.app.run import run_service
from qim.config import Env, MailboxConfig


def main() -> None:
    async def body() -> None:
        from qim.services.mailbox.node import MailboxNode

        node = MailboxNode(MailboxConfig.from_env(Env()))
        task = await node.start()
        await task
        # Stopped dirty: stay up and unhealthy; a restart replays from the watermark.
        await asyncio.Event().wait()

    run_service("mailbox", body)


if __name__ == "__main__":
    main()
