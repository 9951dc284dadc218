"""An env file as `qim-dev engines up` / `stack up` print it: every line as written, but
a secret's value (a variable whose name holds SECRET or PASSWORD, or the media reference
key) replaced by where to find it. The file itself keeps the values (clients source it);
a terminal's scrollback, a CI log or a pasted transcript does not (no keys in logs)."""

from __future__ import annotations

SECRET_NAMES = ("SECRET", "PASSWORD")
SECRET_VARS = frozenset({"QIM_MEDIA_REF_KEY"})


def is_secret(name: str) -> bool:
    """Whether the variable `name` holds a secret value (module doc)."""
    return name in SECRET_VARS or any(part in name for part in SECRET_NAMES)


def shown(text: str) -> str:
    """`text` (KEY=VALUE lines, comments and blanks kept) with secret values masked as
    `KEY=<hidden: see the env file>`; everything else unchanged."""
    out = []
    for line in text.splitlines(keepends=True):
        name, eq, value = line.partition("=")
        if eq and not name.lstrip().startswith("#") and is_secret(name.strip()) and value.strip():
            end = "\n" if line.endswith("\n") else ""
            line = f"{name}=<hidden: see the env file>{end}"
        out.append(line)
    return "".join(out)
