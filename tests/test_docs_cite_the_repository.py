"""The repository cites its own documents: no tracked file points a reader
at a DESIGN.md or a ../shared directory that a clone does not have (the design is
docs/design.md, decisions are docs/decisions/), and every docs/*.md or decision record a
document names exists."""

from __future__ import annotations

import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUTSIDE = re.compile(r"(?<![\w/])DESIGN\.md|/work/shared|\.\./shared/")
NAMED_DOC = re.compile(r"docs/((?:decisions/)?[\w.-]+\.md)")


def tracked_text_files() -> list[pathlib.Path]:
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / n for n in names.split() if n.endswith((".py", ".pyx", ".pxd", ".md", ".proto", ".lua", ".toml",
                                                           "Makefile", ".txt", ".cfg"))]


def test_no_file_cites_a_document_outside_the_repository():
    me = pathlib.Path(__file__).resolve()
    hits = [f"{p.relative_to(ROOT)}:{i}" for p in tracked_text_files() if p.resolve() != me and p.exists()
            for i, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
            if OUTSIDE.search(line)]
    assert not hits, "cite docs/design.md (or docs/decisions/) instead: " + ", ".join(hits[:20])


def test_every_named_doc_exists():
    missing = set()
    for p in tracked_text_files():
        if p.exists():
            for name in NAMED_DOC.findall(p.read_text(encoding="utf-8", errors="replace")):
                if not (ROOT / "docs" / name).exists():
                    missing.add(f"docs/{name} (in {p.relative_to(ROOT)})")
    assert not missing, sorted(missing)
