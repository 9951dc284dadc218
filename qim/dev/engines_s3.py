"""The object store of the development engine set (issue 40; docs/decisions/0137, 0139):
s3proxy (qim/dev/s3_engine.py) beside Redis, Kafka and Cassandra, recorded in
`<engines dir>/s3.json` (pid, port, directory) so `qim-dev engines down` stops exactly that
pid and the next `up` brings the same store back on the same port and data.

`qim-dev engines up` / `make up` start it unless `--without-s3` or QIM_DEV_WITH_S3=0; the
library (qim.dev.engines.EngineSet.up) and the test fixtures only with QIM_DEV_WITH_S3=1
or `with_s3=True`. While it runs, engines.env carries its QIM_S3_* variables (bucket
`qim-media`), and `qim-dev stack up` then starts one MediaService node (qim/dev/stack.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from qim.dev import progress
from qim.dev.s3_engine import S3Engine, start_s3
from qim.errors import EngineError

STATE = "s3.json"


def s3_wanted(default: bool = False) -> bool:
    """True if QIM_DEV_WITH_S3 asks for the object store ("1"/"0"); `default` when unset
    (the CLI: yes; the library and test fixtures: no). EngineError for any other value."""
    raw = os.environ.get("QIM_DEV_WITH_S3", "1" if default else "0")
    if raw not in ("0", "1"):
        raise EngineError(f"QIM_DEV_WITH_S3 must be 0 or 1, got {raw!r}")
    return raw == "1"


def s3_of(dir: Path) -> S3Engine | None:
    """The store recorded under the engine directory `dir`, None when there is none;
    EngineError when the record is corrupt."""
    path = Path(dir) / STATE
    if not path.exists():
        return None
    try:
        st = json.loads(path.read_text())
        return S3Engine(Path(st["dir"]), st["ports"], st.get("pid"))
    except (ValueError, KeyError, TypeError) as e:
        raise EngineError(f"{path} is corrupt ({e}); stop its process by hand and remove it") from e


def s3_save(dir: Path, eng: S3Engine | None) -> None:
    """Record `eng` (its pid after a start or stop) in `dir/s3.json`; nothing for None."""
    if eng is None:
        return
    tmp = Path(dir) / (STATE + ".tmp")
    tmp.write_text(json.dumps(eng.to_state(), indent=2) + "\n")
    os.replace(tmp, Path(dir) / STATE)


def s3_up(dir: Path, die_with_parent: bool = False) -> S3Engine:
    """Start the store of the engine directory `dir` (idempotent: a healthy one is left
    alone, a dead one restarted on its port and data, none started on a free port)."""
    eng = s3_of(dir)
    if eng is not None and eng.healthy():
        progress.note(f"s3 already running at {eng.addr}")
        return eng
    if eng is None:
        eng = start_s3(Path(dir) / "s3", die_with_parent=die_with_parent)
    else:
        eng.die_with_parent = die_with_parent
        if eng.alive():
            eng.wait_ready(eng.start_timeout)
            progress.note(f"s3 ready at {eng.addr}")  # a start says so itself (qim/dev/engine.py)
        else:
            eng.start()
    s3_save(dir, eng)
    return eng


def s3_env(eng: S3Engine | None) -> dict[str, str]:
    """The QIM_S3_* variables of the store `eng` while it runs, else {}."""
    return eng.env() if eng is not None and eng.alive() else {}
