"""Every service stops cleanly on SIGTERM (docs/decisions/0020): exit 0 and no
traceback in its log, with a device connected and pushes flowing. Before the service
shell, a stack stop logged `CancelledError` tracebacks (session) and "Task was destroyed
but it is pending!" / "Event loop is closed" (gateway: a mailbox push link reconnected
while the loop was being torn down). Private engines and services (fresh_stack)."""

from __future__ import annotations

import asyncio

from qim.protocol import Opcode
from tests.e2e.rawclient import RawClient, wait_for_entries

TRACEBACK_MARKS = ("Traceback", "CancelledError", "Task was destroyed", "Event loop is closed", "never retrieved")


async def test_a_stack_stops_with_exit_0_and_no_traceback_in_any_log(fresh_stack):
    st = fresh_stack
    alice = await RawClient.login(st, 501)
    bob = await RawClient.login(st, 502)
    op, _ = await alice.send_text(502, b"before the stop")
    assert op == Opcode.SEND_ACK
    assert len(await wait_for_entries(bob, 1)) == 1  # the whole path ran: mailbox, pushes, sessions
    names = list(st.names)
    for name in reversed(names):  # the order of `qim-dev stack down`; clients still connected
        await asyncio.get_running_loop().run_in_executor(None, st.stop_service, name)
    await alice.close()
    await bob.close()
    assert st.exit_codes == {}  # a service that exited non-zero on SIGTERM is recorded here
    logs = {name: (st.dir / "logs" / f"{name}.log").read_text(errors="replace") for name in names}
    noisy = {name: [mark for mark in TRACEBACK_MARKS if mark in log] for name, log in logs.items()}
    assert not any(noisy.values()), "\n".join(f"== {n}.log {m}:\n{logs[n][-2000:]}" for n, m in noisy.items() if m)
    for name, log in logs.items():
        assert "stopped" in log.splitlines()[-1], f"{name} did not log its stop:\n{log[-1500:]}"
