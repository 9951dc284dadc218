"""Every `make perf` run starts on empty engines of its own (docs/perf.md "`make perf`").

The engines' data used to stay in .perf/engines between runs: after a morning of short
runs its Redis append-only file had grown to 2.8 GiB (the next run's Redis was still
loading it after 20 s and the run broke) and its Kafka logs to 751 MiB, and every run
measured a larger dataset than the one before, so alternated A/B runs favoured whichever
went first. Removing the data makes each run measure the same starting state.
"""

from __future__ import annotations

import shutil
from pathlib import Path


def fresh_engines(dir: Path) -> None:
    """Stop what an earlier run left recorded in `dir` (by its pids, EngineSet.down)
    and remove `dir` with its data. EngineError when its state.json is unreadable."""
    from qim.dev.engines import EngineSet  # qim.dev's engines need the `dev` extra: imported when run

    earlier = EngineSet.load(dir) if dir.exists() else None
    if earlier is not None:
        earlier.down(timeout=15)
    shutil.rmtree(dir, ignore_errors=True)
