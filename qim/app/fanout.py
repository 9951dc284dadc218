"""qim-fanout entry point (FanoutCoordinator)."""

from qim.app.run import run_node
from qim.config import Env, FanoutConfig


def main() -> None:
    """Configuration from QIM_* variables, then the node until SIGTERM (qim/app/run.py)."""
    def build():  # imported here: an app-only install gets run_node's one-line message
        from qim.services.fanout.node import FanoutNode

        return FanoutNode(FanoutConfig.from_env(Env()))

    run_node("fanout", build)


if __name__ == "__main__":
    main()
