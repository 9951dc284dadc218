"""What the MediaService checks and changes in an uploaded file before it is stored
(issue 40; docs/decisions/0138): declared size and SHA-256 against the bytes, the type
sniffed from the bytes (never the client's claim), image metadata stripped, decompression
bombs refused, a small thumbnail. Pure functions over bytes; Pillow does the imaging.

Types (ALLOWED): image/jpeg, image/png, image/webp, image/gif, video/mp4, audio/ogg
(Opus or Vorbis in Ogg), application/pdf, and application/octet-stream for any other
file. A client that declares one of the named types must send bytes of that type (415
otherwise); a client that declares octet-stream may send anything, and it is stored and
served as octet-stream (never rendered inline), unless its bytes are one of the named
types, which then wins.

Images are decoded: more pixels than `max_pixels` is refused (422) before any decoding
(Pillow reads the header only), a file Pillow cannot decode is refused (415). With
`strip` (the default) the stored bytes are without EXIF, XMP, ICC, comments or text
chunks: an upright JPEG has those segments dropped and its image data kept byte for byte
(qim/services/media/jpegstrip.py, the pixels checked); any other image is saved again,
after turning it upright by its EXIF orientation; GIF and
animated images are stored as sent (GIF carries no EXIF). The thumbnail: at most
THUMB_PX on the longer side, WebP, for every still or animated image (first frame).
"""

from __future__ import annotations

import hashlib
import io
import warnings
from dataclasses import dataclass

from PIL import Image, ImageChops, ImageOps, UnidentifiedImageError

from qim.obs.httpauth import HttpRefused
from qim.services.media.jpegstrip import strip_jpeg
from qim.wire.media import NAME_MAX, sniff

ALLOWED = (
    "image/jpeg",
    "image/png",
    "image/webp",
    "image/gif",
    "video/mp4",
    "audio/ogg",
    "application/pdf",
    "application/octet-stream",
)
IMAGES = {"image/jpeg": "JPEG", "image/png": "PNG", "image/webp": "WEBP", "image/gif": "GIF"}
THUMB_PX = 320
THUMB_QUALITY = 60
ORIENTATION = 0x0112  # the EXIF tag


class MediaRefused(HttpRefused):
    """An upload or download refused: `status` (HTTP), `reason` (a fixed word, a metric
    label) and `message` (one line for the client, with no bytes or names of the file);
    the HTTP seam answers it as its status with the message (qim/obs/http.py)."""


def mib(nbytes: int) -> str:
    """A size in a refusal's words: "16.6 MiB", "512 KiB", "300 bytes" (the SDKs and the
    page show the reason as it is: a person reads it, not a byte count)."""
    if nbytes >= 1 << 20:
        return f"{nbytes / (1 << 20):.1f} MiB".replace(".0 MiB", " MiB")
    if nbytes >= 1 << 10:
        return f"{nbytes / (1 << 10):.0f} KiB"
    return f"{nbytes} bytes"


def check_name(name: str) -> str:
    """A file name as given, when it is one: MediaRefused 400 bad_name for a path (/ or
    \\), a dot-only name, a control character, or more than NAME_MAX bytes (its own
    words: an 86-character Chinese name is too long, not a path)."""
    if len(name.encode()) > NAME_MAX:
        raise MediaRefused(
            400, "bad_name", f"the file name is {len(name.encode())} bytes of UTF-8; at most {NAME_MAX} (shorten it)"
        )
    if "/" in name or "\\" in name or name.strip(".") == "" and name or any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise MediaRefused(400, "bad_name", "the file name must be a plain name (no path, no control characters)")
    return name


@dataclass(frozen=True)
class Inspected:
    """What is stored and what the reference says: `data` (the stored bytes), `mime`,
    `sha256` (hex, of `data`), `width`/`height` (0 when not an image), `thumbnail`
    (WebP bytes, b"" when not an image), `stripped` (metadata was removed)."""

    data: bytes
    mime: str
    sha256: str
    width: int = 0
    height: int = 0
    thumbnail: bytes = b""
    stripped: bool = False


def check_declared(data: bytes, size: int, sha256: str, mime: str) -> str:
    """The sniffed type, after checking the declared `size` (bytes), `sha256` (hex) and
    `mime` against `data`; MediaRefused 400 size_mismatch / hash_mismatch, 415
    type_not_allowed (a type outside ALLOWED) or type_mismatch (the bytes are not `mime`)."""
    if len(data) != size:
        raise MediaRefused(400, "size_mismatch", f"declared size {size} but {len(data)} bytes arrived")
    if not data:  # a row with nothing behind it is never what a person meant (a newcomer sent one)
        raise MediaRefused(400, "empty", "the file is empty (0 bytes): nothing to send")
    if hashlib.sha256(data).hexdigest() != sha256.lower():
        raise MediaRefused(400, "hash_mismatch", "the SHA-256 of the bytes is not the declared one")
    if mime not in ALLOWED:
        raise MediaRefused(415, "type_not_allowed", f"type {mime[:64]!r} is not allowed; allowed: {', '.join(ALLOWED)}")
    sniffed = sniff(data)
    if mime != "application/octet-stream" and sniffed != mime:
        raise MediaRefused(415, "type_mismatch", f"the bytes are {sniffed}, not the declared {mime}")
    return sniffed


def inspect(
    data: bytes, size: int, sha256: str, mime: str, *, strip: bool = True, max_pixels: int = 50_000_000
) -> Inspected:
    """Check `data` against its declaration and prepare what is stored (module doc).
    MediaRefused for every refusal; nothing is stored by this function."""
    sniffed = check_declared(data, size, sha256, mime)
    if sniffed not in IMAGES:
        return Inspected(data, sniffed, hashlib.sha256(data).hexdigest())
    return _image(data, sniffed, strip, max_pixels)


def _open(data: bytes, max_pixels: int) -> Image.Image:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            im = Image.open(io.BytesIO(data))
            w, h = im.size  # the header only: nothing decoded yet
            if w * h > max_pixels:
                raise MediaRefused(
                    422,
                    "too_many_pixels",
                    f"the image is {w}×{h} pixels ({w * h / 1e6:.0f} megapixels); at most "
                    f"{max_pixels / 1e6:.0f} megapixels",
                )
            im.load()
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise MediaRefused(
            422, "too_many_pixels", f"the image has more pixels than allowed: at most {max_pixels / 1e6:.0f} megapixels"
        ) from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise MediaRefused(415, "undecodable", f"the image cannot be decoded ({type(exc).__name__})") from None
    return im


def _same_pixels(im: Image.Image, data: bytes) -> bool:
    """`data` decodes to `im`'s size, mode and pixels (the check of a lossless strip: a
    walk that went wrong falls back to saving the image again)."""
    try:
        again = Image.open(io.BytesIO(data))
        again.load()
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError):
        return False
    if again.size != im.size or again.mode != im.mode:
        return False
    try:
        return ImageChops.difference(again, im).getbbox() is None
    except ValueError:  # a mode the comparison does not take: save it again
        return False


def _image(data: bytes, mime: str, strip: bool, max_pixels: int) -> Inspected:
    im = _open(data, max_pixels)
    animated = bool(getattr(im, "is_animated", False))
    stored, stripped = data, False
    if strip and mime != "image/gif" and not animated:
        # Pillow writes EXIF, XMP and ICC only when the save is given them: a plain save strips
        upright = im if im.getexif().get(ORIENTATION, 1) == 1 else ImageOps.exif_transpose(im)
        out = io.BytesIO()
        lossless = strip_jpeg(data) if mime == "image/jpeg" and upright is im else None
        if lossless is not None and _same_pixels(im, lossless):
            # an upright JPEG: its metadata segments dropped, its image data kept as sent
            # (never re-encoded, never larger; qim/services/media/jpegstrip.py)
            out.write(lossless)
        elif mime == "image/jpeg":
            # the source's own quantization tables when not rotated: the least loss Pillow offers
            upright.save(out, "JPEG", quality="keep" if upright is im else 92)
        elif mime == "image/png":
            upright.save(out, "PNG", optimize=False)
        else:
            upright.save(out, "WEBP", quality=90)
        stored, stripped, im = out.getvalue(), True, upright
    thumb = im.copy()  # the first frame of an animation
    if thumb.mode not in ("RGB", "RGBA"):
        thumb = thumb.convert("RGBA" if "A" in thumb.getbands() or thumb.mode == "P" else "RGB")
    thumb.thumbnail((THUMB_PX, THUMB_PX))
    tout = io.BytesIO()
    thumb.save(tout, "WEBP", quality=THUMB_QUALITY)
    return Inspected(stored, mime, hashlib.sha256(stored).hexdigest(), im.width, im.height, tout.getvalue(), stripped)
