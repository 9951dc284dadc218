"""What an alert shows (docs/decisions/0144-alert-text-paused-nodes-and-claims-that-move.md; protocol.md
"Push registrations"): a title naming who wrote, a body with the message's text, and the
fixed strings in the device's locale.

- Title: a group's title when it has one, else the sender's display name (the `name`
  claim of its AUTH token, kept by the session service: SessionStore.display_names,
  docs/protocol.md "Names"), else "User <id>" in the device's language.
- Body: a TEXT message's text (cut at BODY_MAX characters), prefixed "<sender>: " in a
  group with a title (the title names the group, not the writer); a MEDIA message a fixed
  "Sent an attachment"; anything else the fixed "New message".
- A device registered with `content` false is sent neither title nor text: only the fixed
  "New message" in its language (Notification.shown, decision 0130), so a locked phone
  shows nothing of the conversation (decision 0128's choice, kept).
- Languages: English ("en", also the fallback) and simplified Chinese ("zh-CN"; any "zh"
  tag but traditional ones: Hant, TW, HK, MO). A registration's `locale` is a BCP 47
  tag (qim/wire/push.py checks its form); unknown languages get English.
"""

from __future__ import annotations

from typing import Optional

from qim.consts import MESSAGE_TYPE_MEDIA, MESSAGE_TYPE_TEXT
from qim.proto.v1 import message_pb2

BODY_MAX = 180  # characters of text in an alert (the providers' payloads are small: 4 KB)
STRINGS: dict[str, dict[str, str]] = {
    "en": {"new_message": "New message", "attachment": "Sent an attachment", "user": "User {id}"},
    "zh-CN": {"new_message": "新消息", "attachment": "发送了一个附件", "user": "用户 {id}"},
}
TRADITIONAL = ("hant", "tw", "hk", "mo")


def language(locale: str) -> str:
    """The STRINGS key for a BCP 47 tag: "zh-CN" for simplified Chinese, else "en"."""
    parts = locale.replace("_", "-").lower().split("-")
    if parts[0] == "zh" and not any(p in TRADITIONAL for p in parts[1:]):
        return "zh-CN"
    return "en"


def fixed(locale: str, name: str) -> str:
    """One fixed string (`name` a key of STRINGS["en"]) in the language of `locale`."""
    return STRINGS[language(locale)][name]


def alert_text(record: Optional[message_pb2.MessageRecord], sender: int, sender_name: str, group_title: str,
               locale: str) -> tuple[str, str, str]:
    """(title, body, generic) of one alert (module doc): `record` the message (None when it
    could not be read), `sender` its sender's user id, `sender_name` its display name ("" none),
    `group_title` the group's title ("" for a direct conversation or an untitled group),
    `locale` the device's registration locale ("" none)."""
    who = sender_name or fixed(locale, "user").format(id=sender)
    generic = fixed(locale, "new_message")
    text = ""
    if record is not None and record.message_type == MESSAGE_TYPE_TEXT:
        try:
            text = record.body.decode("utf-8")
        except UnicodeDecodeError:
            text = ""
    elif record is not None and record.message_type == MESSAGE_TYPE_MEDIA:
        text = fixed(locale, "attachment")
    text = text or generic
    if group_title:
        title, body = group_title, f"{who}: {text}"
    else:
        title, body = who, text
    if len(body) > BODY_MAX:
        body = body[:BODY_MAX - 1] + "…"
    return title, body, generic
