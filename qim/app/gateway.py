"""qim-gateway entry point (ConnectionNode)."""

from qim.app.run import run_node
from qim.config import Env, GatewayConfig


def main() -> None:
    """Configuration from QIM_* variables, then the node until SIGTERM (qim/app/run.py)."""
    def build():  # imported here: an app-only install gets run_node's one-line message
        from qim.services.gateway.server import ConnectionNode

        return ConnectionNode(GatewayConfig.from_env(Env()))

    run_node("gateway", build)


if __name__ == "__main__":
    main()
