"""pytest-benchmark benches of qim._core (run by `make bench`, never by `make test`).

Every bench is parametrised over `impl` ("pure", "compiled") so each compiled function
is timed against its pure twin in the same run; `@pytest.mark.benchmark(group=...)`
names the figure it feeds in benches/report.py (frame_stream, watermark, eventgroup,
frame_header, mailbox_seq, ids, sendkey). Files are named bench_*.py and collected only with
`-o python_files=bench_*.py` (see the Makefile), so a plain `pytest` never runs them.
A compiled module that is missing or not an extension fails every bench: comparing
the pure twin with itself would print a meaningless ratio.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import os
from types import ModuleType
from typing import Callable

import pytest

NAMES = ("frame", "mailbox_seq", "watermark", "eventgroup", "ids", "sendkey")


def _compiled(name: str) -> ModuleType:
    mod = importlib.import_module(f"qim._core.{name}")
    if not (mod.__file__ or "").endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
        raise ImportError(f"qim._core.{name} is not an extension module: {mod.__file__}")
    return mod


@pytest.fixture(autouse=True, scope="session")
def _compiled_core_loaded() -> None:
    if os.environ.get("QIM_PUREPYTHON", "") == "1":
        pytest.fail("benches compare compiled with pure: unset QIM_PUREPYTHON", pytrace=False)
    errors = {}
    for name in NAMES:
        try:
            _compiled(name)
        except ImportError as e:
            errors[name] = str(e)
    if errors:
        pytest.fail(f"compiled qim._core modules missing (make install): {errors}", pytrace=False)


@pytest.fixture(params=["pure", "compiled"])
def impl(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def core(impl: str) -> Callable[[str], ModuleType]:
    """core("frame") is the `impl` implementation of qim._core.frame."""
    def load(name: str) -> ModuleType:
        if impl == "pure":
            return importlib.import_module(f"qim._core._pure.{name}")
        return _compiled(name)
    return load

# bench_sessions.py is a standalone script (`make bench-sessions`) with its own real stack,
# not a pytest-benchmark module: never collect it with the micro-benches.
collect_ignore = ["bench_sessions.py"]
