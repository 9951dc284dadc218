"""Device push registrations end to end on the real stack (issue 39, first slice;
docs/decisions/0128): qim.sdk registers, lists, reconnects and lists again,
re-registers (replaces), unregisters; a revoked device's registration is gone from the
list; every bad registration sent raw is ERROR INVALID_ARGUMENT with its request id and
a reason, and the SDK refuses it before sending (PushInvalid)."""

from __future__ import annotations

import asyncio
import base64
import os
import random
import time

import pytest

from qim.errors import ErrorCode
from qim.infra.redis.client import connect
from qim.proto.v1 import common_pb2, push_pb2
from qim.protocol import Opcode
from qim.sdk import PushInvalid
from qim.stores.redis.revocations import RevocationStore
from tests.e2e.rawclient import RawClient
from tests.e2e.sdkclient import client, close_all
from tests.sdk.realstack import eventually


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


P256DH, AUTH = b64(b"\x04" + os.urandom(64)), b64(os.urandom(16))
APNS = dict(provider=push_pb2.PUSH_PROVIDER_APNS, token="0a" * 32, apns_topic="com.example.chat",
            apns_environment=push_pb2.APNS_ENVIRONMENT_PRODUCTION)
FCM = dict(provider=push_pb2.PUSH_PROVIDER_FCM, token="fcm:" + "x" * 150)
WEBPUSH = dict(provider=push_pb2.PUSH_PROVIDER_WEBPUSH, token="https://push.example.net/send/abc",
               webpush_p256dh=P256DH, webpush_auth=AUTH)

# (what is wrong, the registration, a word the reason names)
BAD = [
    ("unknown provider", dict(provider=9, token="abc"), "provider"),
    ("no provider", dict(token="abc"), "provider"),
    ("empty token", dict(APNS, token=""), "empty"),
    ("apns token not hex", dict(APNS, token="zz" * 32), "hex"),
    ("apns token too long", dict(APNS, token="ab" * 101), "hex"),
    ("apns without topic", dict(APNS, apns_topic=""), "apns_topic"),
    ("apns without environment", dict(APNS, apns_environment=0), "apns_environment"),
    ("fcm token oversized", dict(FCM, token="y" * 4097), "fcm token"),
    ("fcm token with a space", dict(FCM, token="a b"), "fcm token"),
    ("webpush http to a remote host", dict(WEBPUSH, token="http://push.example.net/x"), "https"),
    ("webpush not a url", dict(WEBPUSH, token="push.example.net/x"), "host"),
    ("webpush other scheme", dict(WEBPUSH, token="ftp://push.example.net/x"), "https"),
    ("webpush endpoint oversized", dict(WEBPUSH, token="https://p.example/" + "a" * 2040), "2048"),
    ("webpush p256dh not base64url", dict(WEBPUSH, webpush_p256dh="a+b/c"), "webpush_p256dh"),
    ("webpush p256dh wrong length", dict(WEBPUSH, webpush_p256dh=b64(b"\x04" + bytes(10))), "webpush_p256dh"),
    ("webpush auth wrong length", dict(WEBPUSH, webpush_auth=b64(bytes(15))), "webpush_auth"),
    ("webpush keys on fcm", dict(FCM, webpush_auth=AUTH), "webpush only"),
    ("bad locale", dict(FCM, locale="not a locale!"), "locale"),
]


async def _revoke(stack, user: int, device: int, cutoff: int) -> None:
    """The cutoff as `qimctl token revoke` writes and publishes it."""
    store = RevocationStore(connect(stack.env["QIM_REDIS_ADDR"]))
    try:
        await store.revoke(0, user, device, cutoff, 3600)
    finally:
        await store.close()


@pytest.mark.parametrize("what,fields,word", BAD, ids=[b[0] for b in BAD])
async def test_every_bad_registration_is_invalid_argument_with_its_request_id(stack, what, fields, word):
    raw = await RawClient.login(stack, random.getrandbits(40) + 1, device=3)
    try:
        rid = 4242
        raw.stream.send(Opcode.PUSH_REGISTER, rid, push_pb2.PushRegister(**fields).SerializeToString())
        while True:
            op, got_rid, body = await asyncio.wait_for(raw.stream.read_frame(), 30)
            if got_rid:
                break
        assert (op, got_rid) == (Opcode.ERROR, rid), what
        err = common_pb2.Error.FromString(body)
        assert err.code == ErrorCode.INVALID_ARGUMENT and word in err.message, (what, err.message)
    finally:
        await raw.close()


async def test_loopback_http_webpush_is_accepted_and_bad_input_is_refused_by_the_sdk_first(stack, tmp_path):
    c = await client(stack, tmp_path, random.getrandbits(40) + 1, 5)
    try:
        await c.connect()
        got = await c.push.register("webpush", "http://127.0.0.1:8099/push/abc", content=False,
                                    webpush_p256dh=P256DH, webpush_auth=AUTH)
        assert got.provider == "webpush" and got.device_id == 5 and got.content is False
        with pytest.raises(PushInvalid, match="https"):
            await c.push.register("webpush", "http://push.example.net/x", webpush_p256dh=P256DH, webpush_auth=AUTH)
        with pytest.raises(PushInvalid, match="provider"):
            await c.push.register("pager", "abc")
        assert [r.token for r in await c.push.list()] == ["http://127.0.0.1:8099/push/abc"]
    finally:
        await close_all(c)


async def test_register_list_reconnect_replace_unregister_and_revoke(stack, tmp_path):
    user = random.getrandbits(40) + 1
    phone, laptop = await client(stack, tmp_path, user, 1), await client(stack, tmp_path, user, 2)
    try:
        await phone.connect()
        await laptop.connect()
        assert await phone.push.list() == []
        first = await phone.push.register("apns", "0a" * 32, apns_topic="com.example.chat",
                                          apns_environment="sandbox", locale="de-CH")
        assert (first.device_id, first.provider, first.apns_environment, first.locale) == (1, "apns", "sandbox", "de-CH")
        await laptop.push.register("webpush", WEBPUSH["token"], webpush_p256dh=P256DH, webpush_auth=AUTH)
        listed = await laptop.push.list()
        assert [(r.device_id, r.provider) for r in listed] == [(1, "apns"), (2, "webpush")]

        # a reconnect keeps it (it lives with the device, not the connection)
        await phone.close()
        phone = await client(stack, tmp_path, user, 1)
        await phone.connect()
        assert [(r.device_id, r.token) for r in await phone.push.list()] == [(1, "0a" * 32), (2, WEBPUSH["token"])]

        # re-register replaces (one per device), the version grows
        before = phone.push.version
        again = await phone.push.register("fcm", FCM["token"], content=False)
        assert phone.push.version > before
        assert [(r.device_id, r.provider, r.content) for r in await laptop.push.list()] == [
            (1, "fcm", False), (2, "webpush", True)]
        assert again.registered_at_ms >= first.registered_at_ms

        # unregister (the logout path) removes only this device's
        assert await phone.push.unregister() is True
        assert await phone.push.unregister() is False
        assert [r.device_id for r in await laptop.push.list()] == [2]

        # the phone registers again, then its token is revoked: its registration is gone
        await phone.push.register("fcm", FCM["token"])
        assert [r.device_id for r in await laptop.push.list()] == [1, 2]
        await _revoke(stack, user, 1, int(time.time()))
        await eventually(lambda: not phone.runtime.core.connected, timeout=60, what="the revoked phone closed")
        assert [r.device_id for r in await laptop.push.list()] == [2]
    finally:
        await close_all(phone, laptop)
