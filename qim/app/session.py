"""qim-session entry point (SessionProjection)."""

from qim.app.run import run_node
from qim.config import Env, SessionConfig


def main() -> None:
    """Configuration from QIM_* variables, then the node until SIGTERM (qim/app/run.py)."""
    def build():  # imported here: an app-only install gets run_node's one-line message
        from qim.services.session.node import SessionNode

        return SessionNode(SessionConfig.from_env(Env()))

    run_node("session", build)


if __name__ == "__main__":
    main()
