"""qim-mailbox entry point (MailboxNode)."""

from qim.app.run import run_node
from qim.config import Env, MailboxConfig


def main() -> None:
    """Configuration from QIM_* variables, then the node until SIGTERM (qim/app/run.py)."""
    def build():  # imported here: an app-only install gets run_node's one-line message
        from qim.services.mailbox.node import MailboxNode

        return MailboxNode(MailboxConfig.from_env(Env()))

    run_node("mailbox", build)


if __name__ == "__main__":
    main()
