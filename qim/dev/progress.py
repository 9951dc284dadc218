"""Progress lines of the slow development steps (`make up`, `make demo`; docs/decisions/0085).

`qim-dev engines up` and `qim-dev stack up` turn it on (`enable`): each engine and each
service says when it is ready, with the seconds since the command started, one line on
stderr each ("engines: kafka ready (41 s)"), so a start of minutes on a busy machine is
never silent. Library callers (the tests' fixtures) leave it off and print nothing.
"""

from __future__ import annotations

import sys
import time
from typing import Optional

_started: Optional[float] = None
_phase = ""


def enable(phase: str) -> None:
    """Print progress lines from now on, prefixed with `phase` ("engines", "stack")."""
    global _started, _phase
    _started = time.monotonic()
    _phase = phase


def note(text: str) -> None:
    """One line `<phase>: <text> (<s> s)` on stderr when enabled; nothing otherwise."""
    if _started is None:
        return
    print(f"{_phase}: {text} ({time.monotonic() - _started:.0f} s)", file=sys.stderr, flush=True)
