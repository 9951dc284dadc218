"""Tools of the deploy suite (make test-deploy): helm and kubecheck from
~/.cache/qim/tools/bin (tools/deploy/install-tools.sh), umoci from Debian. A missing tool
fails the test that needs it, naming the make target that installs it (never a skip)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOLS = Path(os.environ.get("QIM_TOOLS", Path.home() / ".cache" / "qim" / "tools")) / "bin"


def tool(name: str, target: str = "make deploy-tools") -> str:
    """The path of `name` (the cached tools first, then PATH); pytest.fail naming `target`."""
    path = shutil.which(name, path=f"{TOOLS}{os.pathsep}{os.environ.get('PATH', '')}")
    if path is None:
        pytest.fail(f"{name} not found in {TOOLS} or on PATH: run `{target}`")
    return path
