"""qim-archiver entry point (HistoryArchiver)."""

from qim.app.run import run_node
from qim.config import Env
from qim.config_tier import ArchiverConfig


def main() -> None:
    """Configuration from QIM_* variables, then the node until SIGTERM (qim/app/run.py)."""
    def build():  # imported here: an app-only install gets run_node's one-line message
        from qim.services.archiver.node import ArchiverNode

        return ArchiverNode(ArchiverConfig.from_env(Env()))

    run_node("archiver", build)


if __name__ == "__main__":
    main()
