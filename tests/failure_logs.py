"""What a failed end-to-end test adds to its report: the last WARNING and ERROR lines of
every service of the stack it ran on (a CI log holds only pytest's output, and a fault
that stops delivery for minutes is said in those lines, not in the assertion).

`service_warnings(dir)` reads DIR/logs/*.log of a qim.dev.stack.Stack; lines are cut to
LINE_CHARS and each file to LINES_PER_LOG, so a report stays readable.
"""

from __future__ import annotations

from pathlib import Path

LINES_PER_LOG = 12
LINE_CHARS = 260
LEVELS = (" WARNING ", " ERROR ", " CRITICAL ")


def service_warnings(stack_dir: Path) -> str:
    """The last LINES_PER_LOG WARNING/ERROR/CRITICAL lines of each DIR/logs/*.log, under
    a `== name` heading per file that has any; "" when none has (or there is no logs/)."""
    out = []
    for path in sorted((Path(stack_dir) / "logs").glob("*.log")):
        lines = [ln[:LINE_CHARS] for ln in path.read_text(errors="replace").splitlines()
                 if any(level in ln for level in LEVELS)]
        if lines:
            out.append(f"== {path.stem} ({len(lines)} warnings or errors, the last {min(len(lines), LINES_PER_LOG)})")
            out.extend(lines[-LINES_PER_LOG:])
    return "\n".join(out)


def stack_dirs(funcargs: dict) -> list[Path]:
    """Directories of the stacks among a test's fixture values (anything with a `dir`
    holding logs/), each once."""
    seen: list[Path] = []
    for value in funcargs.values():
        d = getattr(value, "dir", None)
        if isinstance(d, Path) and (d / "logs").is_dir() and d not in seen:
            seen.append(d)
    return seen
