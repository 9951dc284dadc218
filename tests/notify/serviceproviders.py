"""A local FCM endpoint (with its OAuth2 token endpoint) and a local RFC 8030 push service
(tests/notify/fakes/fcm.py, webpush.py) in a thread of their own, for the
NotificationService's end-to-end tests through FCM and Web Push (the service runs in
other processes; the endpoints keep their own loop, as servicefakes.ThreadedApns).
`android(...)` / `browser(...)` make a registered, disconnected device of each kind;
`fcm_alerts`, `fcm_silents`, `web_alerts`, `web_silents` read what each was sent;
`per_message` counts the accepted alerts per message."""

from __future__ import annotations

import asyncio
import json
import secrets
import ssl
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from qim.dev.certs import CLIENT_PORT, ensure_dev_pki
from tests.e2e.sdkclient import client
from tests.notify.fakes.fcm import FakeFcm
from tests.notify.fakes.webpush import FakePushService, raw_public
from tests.notify.pushfixtures import EMAIL, PROJECT, SUBJECT


class ThreadedFcmWebPush:
    """`start(base)` -> self with `fcm` (FakeFcm), `web` (FakePushService), `env` (the
    QIM_PUSH_FCM_* and QIM_PUSH_VAPID_* of a NotificationService sending to them); `stop()`."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="fake-fcm-webpush")
        self.fcm: Any = None
        self.web: Any = None
        self.vapid_public = b""
        self.env: dict[str, str] = {}

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def start(self, base: Path) -> "ThreadedFcmWebPush":
        """Listen on free loopback ports with a certificate of a private CA under `base`."""
        pki = ensure_dev_pki(base / "pki", services=())
        files = pki.files(CLIENT_PORT)
        server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        server.load_cert_chain(files.cert, files.key)
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
        pub = key.public_key().public_bytes(serialization.Encoding.PEM,
                                            serialization.PublicFormat.SubjectPublicKeyInfo).decode()
        vapid = ec.generate_private_key(ec.SECP256R1())
        self.vapid_public = raw_public(vapid)
        self.thread.start()
        self.fcm = self._run(FakeFcm(server, PROJECT, EMAIL, pub).start())
        self.web = self._run(FakePushService(server).start())
        account = base / "fcm-service-account.json"
        account.write_text(json.dumps({"type": "service_account", "project_id": PROJECT, "client_email": EMAIL,
                                       "private_key": pem, "private_key_id": "k1", "token_uri": self.fcm.token_uri}))
        vapid_file = base / "vapid.pem"
        vapid_file.write_text(vapid.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                  serialization.NoEncryption()).decode())
        self.env = {"QIM_PUSH_FCM_SERVICE_ACCOUNT_FILE": str(account), "QIM_PUSH_FCM_ENDPOINT": self.fcm.base_url,
                    "QIM_PUSH_FCM_CA_FILE": pki.ca_file, "QIM_PUSH_VAPID_PRIVATE_KEY_FILE": str(vapid_file),
                    "QIM_PUSH_VAPID_SUBJECT": SUBJECT, "QIM_PUSH_VAPID_CA_FILE": pki.ca_file}
        return self

    def stop(self) -> None:
        """Stop both endpoints and their loop."""
        self._run(self.fcm.stop())
        self._run(self.web.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)

    def subscribe(self) -> dict[str, Any]:
        """A new browser subscription for the service's VAPID key (its PushSubscription JSON)."""
        return self.web.subscribe(self.vapid_public)

    # FCM: a message is an alert when it has a `notification`, a silent update when data only
    def fcm_alerts(self, token: str) -> list[dict]:
        """The FCM alert messages answered "ok" for registration `token`, in order."""
        return [m for m in list(self.fcm.accepted) if m["token"] == token and "notification" in m]

    def fcm_silents(self, token: str) -> list[dict]:
        """The FCM data-only messages (silent badge updates) answered "ok" for `token`."""
        return [m for m in list(self.fcm.accepted) if m["token"] == token and "notification" not in m]

    def fcm_asked(self, token: str) -> list[dict]:
        """Every FCM request for `token`, whatever it was answered (with "_at")."""
        return [m for m in list(self.fcm.received) if m["token"] == token]

    def web_alerts(self, sub_id: str) -> list[dict]:
        """The decrypted Web Push alert payloads answered "ok" for subscription `sub_id`."""
        return [r["payload"] for r in list(self.web.accepted) if r["sub"] == sub_id and r["payload"]["silent"] != "1"]

    def web_silents(self, sub_id: str) -> list[dict]:
        """The decrypted Web Push silent badge updates answered "ok" for `sub_id`."""
        return [r["payload"] for r in list(self.web.accepted) if r["sub"] == sub_id and r["payload"]["silent"] == "1"]

    def per_message(self, device: "Device") -> Counter:
        """How many accepted alerts each message (hex id) made for `device`."""
        got = (self.fcm_alerts(device.key) if device.provider == "fcm" else self.web_alerts(device.key))
        return Counter(p["data"]["message"] if device.provider == "fcm" else p["message"] for p in got)


@dataclass(frozen=True)
class Device:
    """A registered device: `provider` "fcm" or "webpush", `key` (the FCM token, or the
    push service's subscription id), `endpoint` (Web Push only)."""

    provider: str
    key: str
    endpoint: str = ""


async def android(st: Any, tmp_path: Path, user: int, device: int, *, content: bool = True, locale: str = "",
                  display_name: str = "") -> Device:
    """Connect `user`'s `device`, register it for FCM with a fresh token, disconnect it."""
    c = await client(st, tmp_path, user, device, display_name=display_name, name=f"fcm{device}")
    await c.connect()
    token = "fcm-" + secrets.token_urlsafe(24)
    await c.push.register("fcm", token, content=content, locale=locale)
    await c.close()
    return Device("fcm", token)


async def browser(st: Any, tmp_path: Path, providers: ThreadedFcmWebPush, user: int, device: int, *,
                  content: bool = True, locale: str = "") -> Device:
    """Connect `user`'s `device`, register a fresh Web Push subscription, disconnect it."""
    sub = providers.subscribe()
    c = await client(st, tmp_path, user, device, name=f"web{device}")
    await c.connect()
    await c.push.register("webpush", sub["endpoint"], content=content, locale=locale,
                          webpush_p256dh=sub["keys"]["p256dh"], webpush_auth=sub["keys"]["auth"])
    await c.close()
    return Device("webpush", sub["endpoint"].rsplit("/", 1)[1], sub["endpoint"])
