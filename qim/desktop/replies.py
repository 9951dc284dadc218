"""Replies, mentions and edits in qim-desktop (docs/decisions/0120; the SDK side is
qim.sdk Client.send(reply_to=, mentions=) and Client.edit):

- `/reply [N] TEXT` answers the N-th newest message of the open chat (1: the newest);
  the chat shows the server's quote above the reply ("↩ Bob: Lunch at noon?", or
  "↩ Bob: (message recalled)");
- `/edit TEXT` replaces your newest message here that can be edited (not recalled, not a
  photo or file: the writer refuses a MEDIA edit) with TEXT (bare `/edit` still puts a
  refused text back, qim/desktop/refused.py); an edited message ends with "(edited)";
- `@name` in any text mentions the person of that display name (or `@ID`), `@all`
  everyone; Tab after `@` and the start of a name completes it from the people the
  chat knows (the group's members, the peer, everyone named so far).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any, Iterable, Optional

from rich.text import Text

from qim.consts import MESSAGE_TYPE_MEDIA
from qim.desktop import render
from qim.sdk.model import StoredMessage

ChatApp = Any  # qim/desktop/app.py's ChatApp (typed loosely: that module imports this one)
MENTION = re.compile(r"@(\S+)")


def mentions_in(text: str, names: render.Names) -> tuple[list[int], bool]:
    """The user ids `@name` / `@ID` name in `text` (display names as known here) and whether `@all` is there.

    A name counts when the text after `@` starts with it and the name ends there: at the
    end, a space or punctuation of any script ("@张三，明天见", "@Bob!"), or anything after
    a name ending in a CJK character, since those scripts put no space after a name
    ("@张三你好"). The longest such name wins; "@Bobby" never mentions "Bob"."""
    ids: dict[int, None] = {}
    everyone = False
    by_name = {name: user for user, name in names.items() if name and " " not in name}
    longest_first = sorted(by_name, key=len, reverse=True)
    for word in MENTION.findall(text):
        digits = re.match(r"\d+", word)
        if word.startswith("all") and _ends_name("all", word[3:]):
            everyone = True
        elif digits and _ends_name("0", word[digits.end():]) and 0 < int(digits.group()) < 1 << 63:
            ids[int(digits.group())] = None
        else:
            name = next((n for n in longest_first if word.startswith(n) and _ends_name(n, word[len(n):])), None)
            if name is not None:
                ids[by_name[name]] = None
    return list(ids), everyone


def _ends_name(name: str, rest: str) -> bool:
    """Whether a name may end where `rest` begins (see mentions_in)."""
    if not rest or unicodedata.category(rest[0])[0] in "PSZ":
        return True
    return unicodedata.east_asian_width(name[-1]) in "WF"


def complete(text: str, candidates: Iterable[str]) -> Optional[str]:
    """`text` with its trailing `@prefix` completed to the one candidate name starting
    with it (or their longest common start); None when there is nothing to complete."""
    m = re.search(r"@(\S*)$", text)
    if m is None:
        return None
    hits = sorted({c for c in [*candidates, "all"] if c and " " not in c and c.startswith(m.group(1))})
    if not hits:
        return None
    done = hits[0] + " " if len(hits) == 1 else _common(hits)
    return text[:m.start(1)] + done if done != m.group(1) else None


def _common(words: list[str]) -> str:
    first, last = words[0], words[-1]
    i = 0
    while i < min(len(first), len(last)) and first[i] == last[i]:
        i += 1
    return first[:i]


def quote_line(msg: StoredMessage, me: int, names: render.Names) -> Optional[Text]:
    """'↩ Bob: Lunch at noon?' above a reply (None for a message that replies to nothing)."""
    ref = msg.reply
    if ref is None:
        return None
    said = "(message recalled)" if ref.state else ref.preview or "(attachment)"
    return Text(f"↩ {render.who(ref.sender_id, me, names)}: {render.cut(said, 60)}", style="dim")


def _newest(app: ChatApp, own: bool) -> list[StoredMessage]:
    return sorted((m for m in app.shown.values() if m.state == 0 and m.message_type != 4
                   and (not own or m.sender_id == app.client.user_id)),
                  key=lambda m: m.conversation_seq, reverse=True)


async def reply(app: ChatApp, nth: int, text: str) -> str:
    """`/reply [N] TEXT`: TEXT as a reply to the N-th newest message shown; the notice line.
    ValueError when there is no such message."""
    shown = _newest(app, own=False)
    if len(shown) < nth:
        raise ValueError("no message here to reply to" if not shown else f"only {len(shown)} message(s) here")
    target = shown[nth - 1]
    users, everyone = mentions_in(text, app.names)
    await app.client.send(app.current, text.encode("utf-8"), wait=False, reply_to=target.message_id,
                          mentions=users, mention_all=everyone)
    app.show_chat(scroll_end=True)
    return "replying to: " + render.cut(render.body_text(target.message_type, target.custom_type, target.body, 0), 40)


async def edit(app: ChatApp, text: str) -> str:
    """`/edit TEXT`: TEXT replaces this person's newest message shown that is not recalled
    and not MEDIA (the writer refuses to edit a photo or file, so after sending one the
    text before it is the one meant); the notice line names the message edited (after a
    /recall or a photo that is an older one, which the person must see)."""
    own = [m for m in _newest(app, own=True) if m.message_type != MESSAGE_TYPE_MEDIA]
    if not own:
        raise ValueError("no message of yours here to edit")
    was = render.cut(render.body_text(own[0].message_type, own[0].custom_type, own[0].body, 0), 40)
    done = await app.client.edit(app.current, own[0].message_id, text)
    return f'edited "{was}" (version {done.version}): the others see the new text'
