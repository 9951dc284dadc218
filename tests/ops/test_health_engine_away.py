"""An engine that is away restarts nobody; its services heal by themselves when it is
back (docs/operations.md "Supervision"; docs/decisions/0091-an-engine-away-holds-the-health-clock.md).

Observed before the fix (issue 33 follow-up, helper H11): with Redis SIGKILLed for
longer than the health limit, every service went 503 (its leases ended: "shard registry
unreachable") and the supervisor stopped and restarted all of them, gateways
included, dropping every device's connection for an outage no restart can cure; with
Redis away for minutes it did so again at every start grace.

Real engines, a supervised stack whose health limit is UNHEALTHY_S: Redis is SIGKILLed
and kept away for AWAY_S (well past the limit plus a lease), then started again on
its AOF. Nothing may be restarted by the health rule while it is away, and every
service answers 200 again afterwards.
"""

from __future__ import annotations

import time

from qim.dev.stack import Stack
from tests.fixtures import start_private_stack

UNHEALTHY_S = 4.0
AWAY_S = 25.0  # lease (6 s) + the limit (4 s), three times over
BACK_WITHIN_S = 120.0  # Redis replays its AOF, leases are taken again, on a loaded machine


def _statuses(st: Stack) -> dict[str, int]:
    return {name: st.healthz(name)[0] for name in st.names}


def test_redis_away_past_the_limit_restarts_no_service(tmp_path):
    st = start_private_stack(tmp_path, supervise=True, unhealthy_restart_s=UNHEALTHY_S)
    try:
        before = Stack.load(st.dir)
        pids, restarts = dict(before.pids), dict(before.restarts)
        st.engines.redis.kill()
        t0 = time.monotonic()
        unhealthy: dict[str, int] = {}
        while time.monotonic() - t0 < AWAY_S:  # the outage is seen: services leave 200
            unhealthy.update({n: s for n, s in _statuses(before).items() if s != 200})
            time.sleep(1.0)
        assert unhealthy, "no service noticed that Redis was away"
        log = (st.dir / "logs" / "supervisor.log").read_text()
        assert "unhealthy for" not in log and "not healthy within" not in log, log[-3000:]
        st.engines.redis.start()
        deadline = time.monotonic() + BACK_WITHIN_S
        while True:
            statuses = _statuses(before)
            if all(s == 200 for s in statuses.values()):
                break
            assert time.monotonic() < deadline, f"not all healthy {BACK_WITHIN_S}s after Redis came back: {statuses}"
            time.sleep(1.0)
        after = Stack.load(st.dir)
        log = (st.dir / "logs" / "supervisor.log").read_text()
        assert "unhealthy for" not in log, log[-3000:]
        assert after.restarts == restarts and after.pids == pids, (restarts, after.restarts, log[-3000:])
        print(f"unhealthy while away: {unhealthy}; restarts {after.restarts}")
    finally:
        st.down()
        st.engines.down()
