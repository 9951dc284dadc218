"""Which implementations of qim._core the tests run against.

Compiled modules are imported directly (`qim._core.<name>`) and must be real
extension modules; the pure twins come from `qim._core._pure.<name>`. With
QIM_PUREPYTHON=1 only the pure twins are tested and the compiled modules are not even
imported (importing `qim._core.frame` would rebind the facade attribute `qim._core.frame`
to the extension); the differential tests are then deselected (tests/core/conftest.py), not skipped.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import os
from types import ModuleType

NAMES = ("frame", "mailbox_seq", "watermark", "eventgroup", "ids", "sendkey")
PURE_MODE = os.environ.get("QIM_PUREPYTHON", "") == "1"


def _load_compiled() -> tuple[dict[str, ModuleType], dict[str, str]]:
    mods: dict[str, ModuleType] = {}
    errors: dict[str, str] = {}
    for name in NAMES:
        try:
            mod = importlib.import_module(f"qim._core.{name}")
        except ImportError as e:
            errors[name] = f"{type(e).__name__}: {e}"
            continue
        path = getattr(mod, "__file__", "") or ""
        if not path.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
            errors[name] = f"not an extension module: {path}"
            continue
        mods[name] = mod
    return mods, errors


COMPILED, COMPILED_ERRORS = ({}, {"all": "QIM_PUREPYTHON=1"}) if PURE_MODE else _load_compiled()
PURE = {name: importlib.import_module(f"qim._core._pure.{name}") for name in NAMES}
HAVE_COMPILED = not COMPILED_ERRORS
IMPL_IDS = ["pure"] if PURE_MODE else ["pure", "compiled"]


def module(name: str, impl: str) -> ModuleType:
    """The `impl` ("pure" or "compiled") implementation of qim._core.<name>."""
    return PURE[name] if impl == "pure" else COMPILED[name]
