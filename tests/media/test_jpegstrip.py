"""A JPEG's metadata dropped without encoding it again (qim/services/media/jpegstrip.py;
docs/decisions/0138): the stored file keeps the image data byte for byte, is never
larger, carries no EXIF/GPS, comment or trailing preview; a file whose markers do not
walk falls back to saving it again; a rotated photo is still turned upright."""

from __future__ import annotations

import hashlib
import io

from PIL import Image, ImageChops

from qim.services.media.inspect import ORIENTATION, inspect
from qim.services.media.jpegstrip import strip_jpeg
from tests.media.helpers import GPS_IFD, photo_with_gps


def _inspect(data: bytes):
    return inspect(data, len(data), hashlib.sha256(data).hexdigest(), "image/jpeg")


def _pixels_equal(a: bytes, b: bytes) -> bool:
    x, y = Image.open(io.BytesIO(a)), Image.open(io.BytesIO(b))
    return x.size == y.size and ImageChops.difference(x.convert("RGB"), y.convert("RGB")).getbbox() is None


def _segments(data: bytes) -> list[int]:
    """The markers of `data`'s header segments, up to the first scan."""
    i, found = 2, []
    while data[i + 1] != 0xDA:
        found.append(data[i + 1])
        i += 2 + int.from_bytes(data[i + 2:i + 4], "big")
    return found


def test_a_photo_keeps_its_image_data_and_loses_its_exif():
    photo = photo_with_gps()
    assert Image.open(io.BytesIO(photo)).getexif().get_ifd(GPS_IFD) and 0xE1 in _segments(photo)
    got = _inspect(photo)
    assert got.stripped and b"QIMCam" not in got.data and not Image.open(io.BytesIO(got.data)).getexif()
    assert len(got.data) < len(photo)  # re-encoding made it larger before
    assert _pixels_equal(got.data, photo)
    # byte for byte: the original without its APP1 segment is exactly what is stored
    i = photo.index(b"\xff\xe1")
    app1_end = i + 2 + int.from_bytes(photo[i + 2:i + 4], "big")
    assert got.data == photo[:i] + photo[app1_end:]


def test_progressive_with_comments_between_and_a_trailing_preview():
    im = Image.new("RGB", (320, 240), (10, 200, 90))
    im.paste((250, 250, 0), (40, 40, 200, 120))
    out = io.BytesIO()
    exif = Image.Exif()
    exif[0x010F] = "QIMCam"
    im.save(out, "JPEG", progressive=True, quality=85, exif=exif, comment=b"secret place")
    body = out.getvalue()
    # a comment between two scans, and a camera's preview (with its own EXIF) after EOI
    second_scan = body.index(b"\xff\xda", body.index(b"\xff\xda") + 2)
    body = body[:second_scan] + b"\xff\xfe\x00\x08hidden" + body[second_scan:]
    preview = photo_with_gps(64, 48)
    data = body + preview
    got = strip_jpeg(data)
    assert got is not None and got.endswith(b"\xff\xd9") and len(got) < len(body)
    for secret in (b"secret place", b"hidden", b"QIMCam"):
        assert secret in data and secret not in got
    assert _pixels_equal(got, body)
    stored = _inspect(data).data
    assert stored == got


def test_kept_segments_and_refused_walks():
    im = Image.new("CMYK", (64, 64), (0, 128, 255, 10))
    out = io.BytesIO()
    im.save(out, "JPEG", quality=90)  # Pillow writes APP14 (Adobe) for CMYK
    data = out.getvalue()
    assert 0xEE in _segments(data)
    got = strip_jpeg(data)
    assert got == data  # nothing to drop; APP14 kept
    assert strip_jpeg(data[: len(data) // 2]) is None  # truncated: no end of image
    assert strip_jpeg(b"\xff\xd8\xff\xe1\xff\xff") is None  # a segment longer than the file
    assert strip_jpeg(b"\xff\xd8\x00\x00") is None  # no marker where one is due
    assert strip_jpeg(b"GIF89a") is None


def test_a_rotated_photo_is_still_turned_upright():
    im = Image.new("RGB", (80, 40), (200, 30, 30))
    exif = Image.Exif()
    exif[ORIENTATION] = 6  # rotate 90° clockwise to view
    out = io.BytesIO()
    im.save(out, "JPEG", exif=exif)
    got = _inspect(out.getvalue())
    stored = Image.open(io.BytesIO(got.data))
    assert stored.size == (40, 80) and not stored.getexif()
