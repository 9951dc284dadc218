"""qim-fanout entry point."""

import asyncio

from qim.app.run import run_service
from qim.config import Env, FanoutConfig


def main() -> None:
    async def body() -> None:
        from qim.obs.http import invariant_reasons, serve_http
        from qim.services.fanout.coordinator import UNPLANNABLE, FanoutCoordinator

        config = FanoutConfig.from_env(Env())
        from qim.faults import FANOUT_POINTS, FaultPoints

        from qim.infra.redis.client import connect

        coordinator = FanoutCoordinator(config.common.kafka_bootstrap, config.common.shard_count, config.batch_size,
                                        FaultPoints(config.fault_point, FANOUT_POINTS),
                                        connect(config.common.redis_addr))

        def not_ready():
            if not coordinator.ready:
                yield "fanout not running" + (f": {coordinator.stopped_reason}" if coordinator.stopped_reason else "")
            yield from invariant_reasons([UNPLANNABLE])

        await serve_http(config.metrics_listen, not_ready)
        lag = asyncio.get_running_loop().create_task(coordinator.lag_loop())
        await coordinator.run()
        lag.cancel()
        # Stopped on a record it must not skip: stay up, unhealthy, for the operator.
        await asyncio.Event().wait()

    run_service("fanout", body)


if __name__ == "__main__":
    main()
