"""A local APNs endpoint (tests/notify/fakes/apns.py) in a thread of its own, for the
NotificationService's tests: the service runs in other processes, the test's event loop
is pytest's, so the endpoint keeps its own loop and answers whatever the test does.
`alerts(token)` / `silents(token)` read what it was asked (payload by payload),
`per_message(token)` what it accepted; `offline_phone` makes a registered, disconnected
device."""

from __future__ import annotations

import asyncio
import secrets
import ssl
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from qim.dev.certs import CLIENT_PORT, ensure_dev_pki
from tests.e2e.sdkclient import client
from tests.notify.fakes.apns import FakeApns
from tests.notify.pushfixtures import KEY_ID, TEAM, TOPIC, apns_keys

DEADLINE_S = 120.0  # the projection, the settler and the notify batch on a busy machine
OFFLINE_S = 5.0  # a closed connection's presence tombstone reaching the notify nodes (Kafka, a busy machine)


class ThreadedApns:
    """`start(base)` -> self with `fake` (FakeApns), `env` (the QIM_PUSH_APNS_* of a
    NotificationService sending to it); `stop()`."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="fake-apns")
        self.fake: Any = None
        self.env: dict[str, str] = {}

    def start(self, base: Path) -> "ThreadedApns":
        """Listen on a free loopback port with a certificate of a private CA under `base`."""
        pki = ensure_dev_pki(base / "pki", services=())
        files = pki.files(CLIENT_PORT)
        server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        server.load_cert_chain(files.cert, files.key)
        p8, pub = apns_keys()
        key_file = base / "apns.p8"
        key_file.write_text(p8)
        self.thread.start()
        self.fake = asyncio.run_coroutine_threadsafe(
            FakeApns(pub, KEY_ID, TEAM, TOPIC, server).start(), self.loop).result(30)
        self.env = {"QIM_PUSH_APNS_TEAM_ID": TEAM, "QIM_PUSH_APNS_KEY_ID": KEY_ID,
                    "QIM_PUSH_APNS_KEY_FILE": str(key_file), "QIM_PUSH_APNS_TOPIC": TOPIC,
                    "QIM_PUSH_APNS_ENDPOINT": self.fake.base_url, "QIM_PUSH_APNS_CA_FILE": pki.ca_file}
        return self

    def stop(self) -> None:
        """Stop the endpoint and its loop."""
        asyncio.run_coroutine_threadsafe(self.fake.stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)

    def alerts(self, token: str) -> list[dict]:
        """The alert payloads accepted for device `token`, in order."""
        return [r.payload for r in list(self.fake.received)
                if r.token == token and "content-available" not in r.payload["aps"]]

    def silents(self, token: str) -> list[dict]:
        """The silent badge updates accepted for device `token`, in order."""
        return [r.payload for r in list(self.fake.received)
                if r.token == token and r.payload["aps"].get("content-available") == 1]

    def per_message(self, token: str) -> Counter:
        """How many alerts each message (hex id) made for device `token`: accepted ones
        (answered 200 to a client still connected: FakeApns.accepted)."""
        return Counter(r.payload["qim"]["message"] for r in list(self.fake.accepted)
                       if r.token == token and "content-available" not in r.payload["aps"])


async def register(c: Any) -> str:
    """Register client `c` for APNs (production, the test topic) with a fresh token; the token."""
    token = secrets.token_hex(32)
    await c.push.register("apns", token, apns_topic=TOPIC, apns_environment="production")
    return token


class Phone:
    """A user's device registered for APNs, then disconnected: its `token`."""

    def __init__(self, token: str) -> None:
        self.token = token


async def offline_phone(st: Any, tmp_path: Path, user: int, device: int = 1) -> Phone:
    """Connect `user`'s `device`, register it for APNs, disconnect it."""
    phone = await client(st, tmp_path, user, device)
    await phone.connect()
    token = await register(phone)
    await phone.close()
    return Phone(token)
