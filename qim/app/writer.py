"""qim-writer entry point."""

from qim.app.run import forever, run_service
from qim.config import Env, WriterConfig


def main() -> None:
    async def body() -> None:
        from qim.services.writer.server import ConversationWriter

        writer = ConversationWriter(WriterConfig.from_env(Env()))
        await writer.start()
        await forever()

    run_service("writer", body)


if __name__ == "__main__":
    main()
