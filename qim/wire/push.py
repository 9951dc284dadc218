"""The pure checks of a PUSH_REGISTER (docs/decisions/0128-device-push-registrations.md;
docs/protocol.md "Push registrations"), shared by the gateway, SessionProjection and
the SDK's own validation. No I/O.

Limits (chosen here, documented in docs/protocol.md):
- APNs: `token` is the device token in hex, an even number of 16..200 hex digits (32
  bytes today; Apple says the length may grow); `apns_topic` 1..255 characters of
  [A-Za-z0-9._-] (the bundle id, optionally with a suffix such as `.voip`);
  `apns_environment` sandbox or production.
- FCM: `token` 1..4096 printable ASCII characters without spaces.
- Web Push: `token` is the PushSubscription endpoint, an absolute URL of at most 2048
  bytes with a host; https, or http only for a loopback host (localhost, 127.0.0.0/8,
  ::1: what a local RFC 8030 push service in tests and development listens on);
  `webpush_p256dh` base64url of a 65-byte uncompressed P-256 point (first byte 0x04),
  `webpush_auth` base64url of 16 bytes (RFC 8291; padding optional).
- The other provider's fields must be empty; `locale` "" or a BCP 47 tag of at most 35
  characters.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from urllib.parse import urlsplit

from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import push_pb2

APNS_TOKEN_HEX = (16, 200)  # hex digits
APNS_TOPIC_MAX = 255
FCM_TOKEN_MAX = 4096
ENDPOINT_MAX = 2048  # bytes of the Web Push endpoint URL
P256DH_LEN, AUTH_LEN = 65, 16
LOCALE_MAX = 35

_HEX = re.compile(r"[0-9a-fA-F]+")
_TOPIC = re.compile(r"[A-Za-z0-9._-]+")
_FCM = re.compile(r"[\x21-\x7e]+")
_B64URL = re.compile(r"[A-Za-z0-9_-]+={0,2}")
_LOCALE = re.compile(r"[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*")

PROVIDERS = {"apns": push_pb2.PUSH_PROVIDER_APNS, "fcm": push_pb2.PUSH_PROVIDER_FCM,
             "webpush": push_pb2.PUSH_PROVIDER_WEBPUSH}


def _bad(reason: str) -> RequestError:
    return RequestError(ErrorCode.INVALID_ARGUMENT, reason)


def b64url_decode(value: str, what: str) -> bytes:
    """The bytes of base64url `value` (padding optional); INVALID_ARGUMENT naming `what`."""
    if not _B64URL.fullmatch(value):
        raise _bad(f"{what}: not base64url")
    try:
        return base64.urlsafe_b64decode(value.rstrip("=") + "=" * (-len(value.rstrip("=")) % 4))
    except (binascii.Error, ValueError):
        raise _bad(f"{what}: not base64url") from None


def is_loopback(host: str) -> bool:
    """Whether `host` (a URL's hostname) is a loopback address or `localhost`."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_endpoint(url: str) -> None:
    if len(url.encode("utf-8")) > ENDPOINT_MAX:
        raise _bad(f"webpush endpoint exceeds {ENDPOINT_MAX} bytes")
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        raise _bad("webpush endpoint: not a URL") from None
    if not host:
        raise _bad("webpush endpoint: an absolute URL with a host is needed")
    if parts.scheme == "http" and not is_loopback(host):
        raise _bad("webpush endpoint must be https (http only for a loopback host)")
    if parts.scheme not in ("https", "http"):
        raise _bad("webpush endpoint must be https")


def check_register(req: push_pb2.PushRegister) -> None:
    """RequestError(INVALID_ARGUMENT) naming the first rule `req` breaks (module doc):
    an unknown provider, an empty or oversized token, a token or topic of the wrong
    shape, a Web Push endpoint that is not https (http only for loopback), keys that are
    not base64url of the right length, another provider's fields, a bad locale."""
    p, token = req.provider, req.token
    if p not in PROVIDERS.values():
        raise _bad("provider: one of apns, fcm, webpush")
    if not token:
        raise _bad("token is empty")
    if p == push_pb2.PUSH_PROVIDER_APNS:
        lo, hi = APNS_TOKEN_HEX
        if not (lo <= len(token) <= hi and len(token) % 2 == 0 and _HEX.fullmatch(token)):
            raise _bad(f"apns token: an even number of {lo}..{hi} hex digits")
        if not (0 < len(req.apns_topic) <= APNS_TOPIC_MAX and _TOPIC.fullmatch(req.apns_topic)):
            raise _bad(f"apns_topic: 1..{APNS_TOPIC_MAX} characters of A-Z a-z 0-9 . _ -")
        if req.apns_environment not in (push_pb2.APNS_ENVIRONMENT_SANDBOX, push_pb2.APNS_ENVIRONMENT_PRODUCTION):
            raise _bad("apns_environment: sandbox or production")
    elif req.apns_topic or req.apns_environment:
        raise _bad("apns_topic and apns_environment are for apns only")
    if p == push_pb2.PUSH_PROVIDER_FCM and not (len(token) <= FCM_TOKEN_MAX and _FCM.fullmatch(token)):
        raise _bad(f"fcm token: 1..{FCM_TOKEN_MAX} printable ASCII characters without spaces")
    if p == push_pb2.PUSH_PROVIDER_WEBPUSH:
        _check_endpoint(token)
        if len(b64url_decode(req.webpush_p256dh, "webpush_p256dh")) != P256DH_LEN or \
                b64url_decode(req.webpush_p256dh, "webpush_p256dh")[0] != 4:
            raise _bad(f"webpush_p256dh: base64url of a {P256DH_LEN}-byte uncompressed P-256 point")
        if len(b64url_decode(req.webpush_auth, "webpush_auth")) != AUTH_LEN:
            raise _bad(f"webpush_auth: base64url of {AUTH_LEN} bytes")
    elif req.webpush_p256dh or req.webpush_auth:
        raise _bad("webpush_p256dh and webpush_auth are for webpush only")
    if req.locale and not (len(req.locale) <= LOCALE_MAX and _LOCALE.fullmatch(req.locale)):
        raise _bad(f"locale: a BCP 47 tag of at most {LOCALE_MAX} characters")
