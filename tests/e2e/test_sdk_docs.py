"""The SDK's documented examples run as written against the real stack ("its
module docstring example fails as written")."""

from __future__ import annotations

import re

import qim.sdk
from tests.e2e.docrun import ROOT, client_env, docstring_example, markdown_blocks, run_python


def test_sdk_module_docstring_example_runs_as_written(stack, tmp_path):
    code = docstring_example(qim.sdk.__doc__)
    assert "asyncio.run(main())" in code
    done = run_python(code, client_env(stack), tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == ["你好, Bob 👋", "1 True"]


def test_every_python_block_of_docs_sdk_md_runs_and_prints_what_it_says(stack, tmp_path):
    blocks = markdown_blocks(ROOT / "docs" / "sdk.md")
    assert len(blocks) >= 2
    for i, code in enumerate(blocks):
        done = run_python(code, client_env(stack), tmp_path)
        assert done.returncode == 0, f"block {i}:\n{code}\n{done.stderr[-3000:]}"
        promised = re.findall(r"# prints: (.*)$", code, flags=re.M)
        assert promised, f"block {i} says nothing it prints"
        for text in promised:
            assert text.strip() in done.stdout, f"block {i}: {text!r} not in {done.stdout!r}"
