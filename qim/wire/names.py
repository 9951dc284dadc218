"""Names a person reads, checked the same way everywhere (docs/protocol.md "Names"): a
user's display name (the token claim `name`) and a group's title.

A name is text of at most NAME_MAX_BYTES of UTF-8 after its whitespace runs are folded
to single spaces, with no control, format, surrogate, private-use or unassigned
character (it is shown on other people's screens: no terminal escapes, no
right-to-left overrides). "" means no name; the numeric id is shown then.
"""

from __future__ import annotations

import unicodedata

from qim.consts import NAME_MAX_BYTES
from qim.errors import ErrorCode, RequestError

REFUSED_CATEGORIES = frozenset(("Cc", "Cf", "Cs", "Co", "Cn"))


def check_name(name: object) -> str:
    """`name` folded (module docstring); ValueError naming what is wrong otherwise."""
    if not isinstance(name, str):
        raise ValueError("a name must be text")
    folded = " ".join(name.split())
    if any(unicodedata.category(ch) in REFUSED_CATEGORIES for ch in folded):
        raise ValueError("a name may not hold control, format or unassigned characters")
    if len(folded.encode("utf-8")) > NAME_MAX_BYTES:
        raise ValueError(f"a name holds at most {NAME_MAX_BYTES} bytes of UTF-8")
    return folded


def check_title(title: str) -> None:
    """A group title as a request gives it (CREATE_GROUP, SET_GROUP_TITLE), checked by
    the gateway and again by the writer: RequestError PAYLOAD_TOO_LARGE past
    NAME_MAX_BYTES, INVALID_ARGUMENT for a refused character or whitespace that is not
    folded already (the stored title is exactly the one sent)."""
    if len(title.encode("utf-8")) > NAME_MAX_BYTES:
        raise RequestError(ErrorCode.PAYLOAD_TOO_LARGE, f"a group title holds at most {NAME_MAX_BYTES} bytes")
    try:
        folded = check_name(title)
    except ValueError as exc:
        raise RequestError(ErrorCode.INVALID_ARGUMENT, f"group title refused: {exc}") from None
    if folded != title:
        raise RequestError(ErrorCode.INVALID_ARGUMENT, "group title has leading, trailing or repeated whitespace")
