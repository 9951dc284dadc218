"""What the two move-under-traffic tests share besides tests/e2e/instancegate.py: running
`qimctl redis move-shard` / `move-bucket` as an operator would, while the traffic runs."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from typing import Awaitable, Callable

from tests.e2e.instancegate import until


def qimctl_move(st, command: str, flag: str, unit: int, target: str) -> subprocess.CompletedProcess:
    """`qimctl redis <command> <flag> <unit> --to <target>` against the stack `st`'s
    engines (their environment); the finished process, its output captured (180 s at
    the most: a TimeoutExpired fails the test)."""
    env = {**os.environ, **st.engines.env()}
    return subprocess.run([sys.executable, "-m", "qim.cli.qimctl", "redis", command, flag, str(unit),
                           "--to", target], env=env, capture_output=True, text=True, timeout=180)


async def move_under_traffic(senders: list, pullers: dict, sdk_send: Callable[[asyncio.Event], Awaitable[None]],
                             sdk_count: Callable[[], int], move: Callable[[], subprocess.CompletedProcess],
                             send_deadline_s: float, heal_s: float) -> tuple[subprocess.CompletedProcess, float]:
    """Run every `Sender`, every `Puller` and `sdk_send(stop)` as tasks; once each sender
    and the SDK app (`sdk_count()` ACKed sends) has 3 ACKed, run `move()` in a thread (it
    must exit 0); then wait until each has 3 more and stop the traffic. AssertionError
    when a wait passes `heal_s` s or a task failed (listing them). Returns the move's
    finished process and how many seconds it took."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    tasks = [loop.create_task(s.run(stop, send_deadline_s)) for s in senders]
    tasks += [loop.create_task(p.run(stop)) for p in pullers.values()]
    tasks.append(loop.create_task(sdk_send(stop)))

    def acked(n: int) -> bool:
        for t in tasks:
            if t.done():
                t.result()  # a failed sender or puller fails the test with its own message
        return all(len(s.order) >= n for s in senders) and sdk_count() >= n

    try:
        await until(lambda: acked(3), "every sender ACKed before the move", heal_s)
        t0 = loop.time()
        moved = await loop.run_in_executor(None, move)
        took = loop.time() - t0
        assert moved.returncode == 0, moved.stdout + moved.stderr
        after = {s.name: len(s.order) for s in senders}
        n_sdk = sdk_count()
        await until(lambda: all(len(s.order) >= after[s.name] + 3 for s in senders) and acked(0)
                    and sdk_count() >= n_sdk + 3, "traffic flowing again after the move", heal_s)
    finally:
        stop.set()
        done = await asyncio.gather(*tasks, return_exceptions=True)
    failures = [d for d in done if isinstance(d, BaseException)]
    assert not failures, failures
    return moved, took
