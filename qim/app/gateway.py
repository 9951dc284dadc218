"""qim-gateway entry point."""

from qim.app.run import forever, run_service
from qim.config import Env, GatewayConfig


def main() -> None:
    async def body() -> None:
        from qim.services.gateway.server import ConnectionNode

        node = ConnectionNode(GatewayConfig.from_env(Env()))
        await node.start()
        await forever()

    run_service("gateway", body)


if __name__ == "__main__":
    main()
