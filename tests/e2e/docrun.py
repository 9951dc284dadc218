"""Run the code examples of the SDK's documentation as written: the qim.sdk
module docstring and the ```python blocks of docs/sdk.md, each as its own Python
process with the stack's client environment (QIM_GATEWAY_ADDR, QIM_DEV_TOKEN_KEY),
exactly what a reader gets after sourcing .qim/stack/stack.env."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def docstring_example(doc: str) -> str:
    """The indented code block of a docstring (from its first `import` line to the end
    of the indented block)."""
    lines = doc.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("    import "))
    end = start
    while end < len(lines) and (lines[end].startswith("    ") or not lines[end].strip()):
        end += 1
    return textwrap.dedent("\n".join(lines[start:end]))


def markdown_blocks(path: Path) -> list[str]:
    """Every ```python block of a markdown file, in order."""
    return re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)


def client_env(stack, **extra: str) -> dict[str, str]:
    """The environment a reader has after sourcing the stack's stack.env."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("QIM_")}
    env.update(QIM_GATEWAY_ADDR=stack.gateway_addr, QIM_DEV_TOKEN_KEY=stack.token_key,
               QIM_WRITER_ADDRS=stack.env["QIM_WRITER_ADDRS"], PYTHONPATH=str(ROOT), PYTHONIOENCODING="utf-8",
               **extra)
    env.update(stack.client_env())  # QIM_CA_FILE and qimctl's certificate: the whole stack.env
    return env


def run_python(code: str, env: dict[str, str], cwd: Path, timeout: float = 90.0) -> subprocess.CompletedProcess:
    """Run `code` as a script; the caller asserts on returncode and output."""
    script = cwd / "example.py"
    script.write_text(code, encoding="utf-8")
    return subprocess.run([sys.executable, str(script)], env=env, cwd=cwd, capture_output=True, text=True,
                          encoding="utf-8", timeout=timeout)
