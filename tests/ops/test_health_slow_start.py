"""A start that keeps missing the start grace backs off instead of being cut off at the
same grace for ever (docs/decisions/0091-an-engine-away-holds-the-health-clock.md;
qim/dev/healthwatch.py).

Observed before the fix (issue 33 follow-up, helper H11): a service that needs longer
than the 120 s start grace to become healthy (a mailbox catching up a long backlog on a
loaded machine) was stopped at 120 s, started again from its checkpoint and stopped
again at 120 s, for ever: the health rule made a slow start an endless restart loop.

Real engines, a supervised stack with a GRACE_S start grace; every process started from
now on is held unready by the fault file (qim/faults.py `unready:<pid>`), the writer is
SIGKILLed: the supervisor starts it again, it misses its grace, and each further start
must get twice the grace of the one before (the supervisor's log names them). Once the
fault file is gone the writer is healthy without anyone's help.
"""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

from qim.dev.stack import Stack
from qim.faults import FAULT_FILE
from tests.fixtures import start_private_stack

# Short, so the two misses cost 24 s, not 60 s. The stack's own first start need not fit
# in it: a start that misses it is restarted with a doubled grace (the very rule under
# test) and only the supervisor lines after the SIGKILL are read.
GRACE_S = 8.0
MISSES = 2  # graces 8, 16 s
WITHIN_S = 180.0  # the misses, their stops and starts, on a loaded machine


def _hold_every_new_process(dir: Path) -> None:
    """Fault-file lines holding unready every pid the kernel hands out next (pids grow)."""
    last = int(Path("/proc/sys/kernel/ns_last_pid").read_text())
    (dir / FAULT_FILE).write_text("".join(f"unready:{pid} 1 held\n" for pid in range(last + 1, last + 20_000)))


def test_a_start_that_misses_its_grace_gets_a_longer_one_each_time(tmp_path):
    st = start_private_stack(tmp_path, supervise=True, unhealthy_restart_s=GRACE_S, start_grace_s=GRACE_S,
                             extra_env={"QIM_FAULT_INJECTION": "1"})
    try:
        log_path = st.dir / "logs" / "supervisor.log"
        _hold_every_new_process(st.dir)
        seen = len(log_path.read_bytes())  # a miss of the stack's own start is not this test's
        os.kill(Stack.load(st.dir).pids["writer"], signal.SIGKILL)
        deadline = time.monotonic() + WITHIN_S
        while True:
            graces = [float(g) for g in re.findall(r"writer \(pid \d+\) not healthy within (\d+)s of its start.*: stopping it$",
                                                   log_path.read_bytes()[seen:].decode(errors="replace"), re.M)]
            if len(graces) >= MISSES:
                break
            assert time.monotonic() < deadline, log_path.read_text()[-3000:]
            time.sleep(0.5)
        assert graces[:MISSES] == [GRACE_S * 2 ** i for i in range(MISSES)], log_path.read_text()[-3000:]
        (st.dir / FAULT_FILE).unlink()
        deadline = time.monotonic() + WITHIN_S
        while Stack.load(st.dir).healthz("writer")[0] != 200:
            assert time.monotonic() < deadline, "writer not healthy after the fault file was removed"
            time.sleep(0.5)
    finally:
        st.down()
        st.engines.down()
