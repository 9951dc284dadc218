"""Reactions and typing: the request checks shared by the SDK, the gateway and the writer,
and their limits (docs/protocol.md "Reactions and typing";
docs/decisions/0121-reactions-and-typing-are-ephemeral.md).

An emoji is 1..REACTION_EMOJI_MAX_BYTES bytes of UTF-8 without whitespace and without
control, surrogate, private-use or unassigned characters; of the format characters only
the zero-width joiner and the tag characters (both part of emoji sequences: families,
subdivision flags) are allowed. A message carries at most REACTION_MAX_DISTINCT distinct
emoji (PAYLOAD_TOO_LARGE for an add past it). A device sends at most one TYPING per
conversation every TYPING_MIN_INTERVAL_MS (the gateway answers a faster one
`delivered: false`); a typing indication counts for TYPING_EXPIRES_MS unless renewed.
"""

from __future__ import annotations

import unicodedata

from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import reaction_pb2
from qim.wire.validate import check_conversation, check_id

REACTION_EMOJI_MAX_BYTES = 32
REACTION_MAX_DISTINCT = 20
TYPING_MIN_INTERVAL_MS = 2000
TYPING_EXPIRES_MS = 6000

_REFUSED = frozenset(("Cc", "Cs", "Co", "Cn", "Zs", "Zl", "Zp"))
_ZWJ = "\u200d"


def _allowed_format(ch: str) -> bool:
    return ch == _ZWJ or 0xE0020 <= ord(ch) <= 0xE007F


def check_emoji(emoji: str) -> None:
    """RequestError INVALID_ARGUMENT naming what is wrong with `emoji` (module doc)."""
    size = len(emoji.encode("utf-8"))
    if not 0 < size <= REACTION_EMOJI_MAX_BYTES:
        raise RequestError(ErrorCode.INVALID_ARGUMENT,
                           f"an emoji holds 1 to {REACTION_EMOJI_MAX_BYTES} bytes of UTF-8, not {size}")
    for ch in emoji:
        category = unicodedata.category(ch)
        if category in _REFUSED or ch.isspace() or (category == "Cf" and not _allowed_format(ch)):
            raise RequestError(ErrorCode.INVALID_ARGUMENT,
                               f"an emoji may not hold U+{ord(ch):04X} (whitespace, control or unassigned)")


def check_react(req: reaction_pb2.React) -> int:
    """A REACT request's shape: conversation, message id, emoji. Returns the conversation kind."""
    kind = check_conversation(req.conversation_id)
    check_id(req.message_id, "message_id")
    check_emoji(req.emoji)
    return kind


def check_typing(req: reaction_pb2.Typing) -> int:
    """A TYPING request's shape: a direct or group conversation. Returns its kind."""
    return check_conversation(req.conversation_id)
