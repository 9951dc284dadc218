"""Up-front checks of the load generators' options (`qim-loadgen rate`, `room`,
`replay`): each raises ArgError whose text names the option and what it got, so a
bad value is refused with exit 2 before anything connects, instead of failing (or
quietly meaning something else) minutes into a run.
"""

from __future__ import annotations

import math
import os
from typing import Optional


class ArgError(ValueError):
    """A bad option value; str() is the one line to print after the program's name."""


def positive(option: str, value: float) -> None:
    """`value` must be a finite number > 0 (nan and inf are refused too)."""
    if not (math.isfinite(value) and value > 0):
        raise ArgError(f"{option} must be a finite number > 0, got {value:g}")


def non_negative(option: str, value: float) -> None:
    """`value` must be a finite number >= 0."""
    if not (math.isfinite(value) and value >= 0):
        raise ArgError(f"{option} must be a finite number >= 0, got {value:g}")


def in_range(option: str, value: int, low: int, high: Optional[int] = None) -> None:
    """`value` must be low..high (inclusive; no upper bound when `high` is None)."""
    if value < low or (high is not None and value > high):
        want = f"{low}..{high}" if high is not None else f">= {low}"
        raise ArgError(f"{option} must be {want}, got {value}")


def writable_path(option: str, path: Optional[str]) -> None:
    """A report written at the end of a run: its directory must exist and be writable
    now, and the path must not be a directory (else the whole run's report is lost)."""
    if not path:
        return
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ArgError(f"{option} {path!r} is a directory, not a file")
    if not os.path.isdir(directory):
        raise ArgError(f"{option} {path!r}: directory {directory!r} does not exist")
    if not os.access(directory, os.W_OK):
        raise ArgError(f"{option} {path!r}: directory {directory!r} is not writable")
