"""qim-desktop shows a MEDIA message in words (kind, name, pixels, size) read from the
signed reference it carries, in the chat and in the list's preview; never the
reference's protobuf bytes, which are binary and showed as garbage ("<media> 300
bytes" before, and nothing a person could tell a photo by)."""

from __future__ import annotations

from qim.consts import MESSAGE_TYPE_MEDIA
from qim.desktop import render
from qim.proto.v1.media_pb2 import MediaRef
from qim.sdk.model import LastMessage, StoredMessage
from qim.wire.media import sign_ref

ME = 1001
KEY = b"k" * 40


def media_body(**fields) -> bytes:
    """A reference as the MediaService signs it (qim/wire/media.py sign_ref)."""
    ref = MediaRef(media_id="ab" * 16, owner=1002, sha256=b"\x01" * 32, **fields)
    return sign_ref(KEY, 0, ref)


def test_a_photo_a_voice_note_and_a_file_are_named():
    photo = media_body(mime="image/jpeg", size=8229, width=800, height=600, name="photo.jpg", thumbnail=b"RIFF")
    assert render.media_words(photo) == "[photo: photo.jpg, 800×600, 8.0 KiB]"
    voice = media_body(mime="audio/ogg", size=51_200, duration_ms=7_000)
    assert render.media_words(voice) == "[voice note: 7 s, 50.0 KiB]"
    pdf = media_body(mime="application/pdf", size=17 * 1024 * 1024, name="合同.pdf")
    assert render.media_words(pdf) == "[file: 合同.pdf, 17.0 MiB]"
    assert render.media_words(media_body(mime="application/octet-stream", size=300)) == "[file: 300 B]"


def test_a_reference_that_does_not_decode_says_so():
    assert render.media_words(b"\xff\xff\xff") == "[media: unreadable reference]"
    assert render.media_words(b"") == "[media]"  # a list head whose body was cut


def test_the_chat_line_and_the_list_preview_show_the_words():
    body = media_body(mime="image/png", size=2048, width=32, height=32, name="cat.png")
    msg = StoredMessage(b"m" * 16, b"c" * 16, 9, 1002, 0, MESSAGE_TYPE_MEDIA, b"", body, None, 0, 0)
    line = render.message_line(msg, ME, {1002: "Bob"}).plain
    assert line.endswith(" Bob: [photo: cat.png, 32×32, 2.0 KiB]"), line
    last = LastMessage(b"m" * 16, 9, 1002, 0, MESSAGE_TYPE_MEDIA, b"", body, True, 0)
    assert render.preview(last, ME, {1002: "Bob"}) == "Bob: [photo: cat.png, 3…"


def test_a_cut_reference_in_the_list_says_media():
    body = media_body(mime="image/png", size=2048, width=32, height=32, name="cat.png", thumbnail=b"R" * 5000)
    last = LastMessage(b"m" * 16, 9, 1002, 0, MESSAGE_TYPE_MEDIA, b"", body[:4096], False, 0)
    assert render.preview(last, ME, {1002: "Bob"}) == "Bob: [media]"
