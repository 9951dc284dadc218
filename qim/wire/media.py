"""Media references: the body of a MEDIA message (proto/qim/v1/media.proto MediaRef; issue
40; docs/decisions/0138). Pure: the MediaService signs, the writer verifies, the SDK
decodes, all with these functions.

The signature is HMAC-SHA256 with QIM_MEDIA_REF_KEY over a fixed layout of the fields
(`ref_mac`), not over the Protobuf bytes: a serialization is not canonical across
languages, the layout is. The thumbnail enters by its SHA-256. A writer checks a MEDIA
body with `check_media_body` and no round trip: a reference that decodes, fits
MEDIA_BODY_MAX, carries the service's signature and names the sender as its owner.
"""

from __future__ import annotations

import hashlib
import hmac
import struct

from google.protobuf.message import DecodeError

from qim.proto.v1.media_pb2 import MediaRef

MEDIA_BODY_MAX = 16 * 1024  # a reference with its inline thumbnail; the original is in object storage
THUMBNAIL_MAX = 12 * 1024
NAME_MAX = 255
_DOMAIN = b"qim-media-ref-v1"


class BadMediaRef(ValueError):
    """A MEDIA body the writer refuses (the message says which check failed)."""


def _field(b: bytes) -> bytes:
    return struct.pack(">I", len(b)) + b


def ref_mac(key: bytes, tenant: int, ref: MediaRef) -> bytes:
    """HMAC-SHA256 of `ref`'s fields (all but `signature`) and `tenant` under `key`."""
    layout = b"".join(
        (
            _DOMAIN,
            _field(str(tenant).encode()),
            _field(ref.media_id.encode()),
            _field(ref.mime.encode()),
            struct.pack(">QIIIQ", ref.size, ref.width, ref.height, ref.duration_ms, ref.owner),
            _field(ref.sha256),
            _field(hashlib.sha256(ref.thumbnail).digest()),
            _field(ref.name.encode()),
        )
    )
    return hmac.new(key, layout, hashlib.sha256).digest()


def sign_ref(key: bytes, tenant: int, ref: MediaRef) -> bytes:
    """`ref` signed (its `signature` set) and serialized: a MEDIA message body."""
    ref.signature = ref_mac(key, tenant, ref)
    return ref.SerializeToString()


def check_media_body(key: bytes, tenant: int, sender: int, body: bytes) -> MediaRef:
    """The MediaRef of a MEDIA `body` sent by user `sender`; BadMediaRef when it is too
    large, does not decode, is not signed by the MediaService or belongs to another user."""
    if len(body) > MEDIA_BODY_MAX:
        raise BadMediaRef(f"MEDIA body is {len(body)} bytes, above the limit of {MEDIA_BODY_MAX}")
    ref = MediaRef()
    try:
        ref.ParseFromString(body)
    except DecodeError:
        raise BadMediaRef("MEDIA body is not a MediaRef") from None
    if not ref.media_id or not ref.signature:
        raise BadMediaRef("MEDIA body has no media_id or no signature")
    if not hmac.compare_digest(ref.signature, ref_mac(key, tenant, ref)):
        raise BadMediaRef("MEDIA body is not a reference the MediaService issued")
    if ref.owner != sender:
        raise BadMediaRef("MEDIA body references media another user uploaded")
    return ref


def sniff(data: bytes) -> str:
    """The type of `data` by its first bytes: one of ALLOWED (octet-stream when none matches)."""
    head = data[:16]
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if head[4:8] == b"ftyp":
        return "video/mp4"
    if head.startswith(b"OggS"):
        return "audio/ogg"
    if head.startswith(b"%PDF-"):
        return "application/pdf"
    return "application/octet-stream"


def decode_ref(body: bytes) -> MediaRef:
    """The MediaRef of a received MEDIA body (unverified: the writer verified it);
    BadMediaRef when it does not decode."""
    ref = MediaRef()
    try:
        ref.ParseFromString(body)
    except DecodeError:
        raise BadMediaRef("MEDIA body is not a MediaRef") from None
    return ref
