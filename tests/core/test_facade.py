"""qim._core picks compiled or pure once at import (QIM_PUREPYTHON=1), never silently."""

from __future__ import annotations

import importlib
import importlib.machinery
import pathlib
import re

import qim._core as core

from ._impls import NAMES, PURE_MODE


def test_facade_selection() -> None:
    assert core.PURE is PURE_MODE and core.COMPILED is (not PURE_MODE)
    for name in NAMES:
        mod = getattr(core, name)
        compiled = mod.__file__.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))
        assert compiled is (not PURE_MODE), mod.__file__
        assert mod.__name__ == (f"qim._core._pure.{name}" if PURE_MODE else f"qim._core.{name}")


def test_public_names_match_stubs() -> None:
    here = pathlib.Path(core.__file__).parent
    for name in NAMES:
        stub = (here / f"{name}.pyi").read_text(encoding="utf-8")
        public = set(re.findall(r"^(?:def|class) (\w+)", stub, re.M))
        for impl in (f"qim._core._pure.{name}", f"qim._core.{name}"):
            if PURE_MODE and not impl.startswith("qim._core._pure"):
                continue
            mod = importlib.import_module(impl)
            missing = {n for n in public if not hasattr(mod, n)}
            assert not missing, (impl, missing)
            assert all(getattr(mod, n).__doc__ for n in public), impl
