"""qim-writer entry point (ConversationWriter)."""

from qim.app.run import run_node
from qim.config import Env, WriterConfig


def main() -> None:
    """Configuration from QIM_* variables, then the node until SIGTERM (qim/app/run.py)."""
    def build():  # imported here: an app-only install gets run_node's one-line message
        from qim.services.writer.server import ConversationWriter

        return ConversationWriter(WriterConfig.from_env(Env()))

    run_node("writer", build)


if __name__ == "__main__":
    main()
