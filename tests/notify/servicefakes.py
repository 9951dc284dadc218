"""A local APNs endpoint (tests/notify/fakes/apns.py) in a thread of its own, for the
NotificationService's tests: the service runs in other processes, the test's event loop
is pytest's, so the endpoint keeps its own loop and answers whatever the test does.
`alerts(token)` / `silents(token)` read what it accepted (payload by payload)."""

from __future__ import annotations

import asyncio
import ssl
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from qim.dev.certs import CLIENT_PORT, ensure_dev_pki
from tests.notify.fakes.apns import FakeApns
from tests.notify.pushfixtures import KEY_ID, TEAM, TOPIC, apns_keys


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
        """How many alerts each message (hex id) made for device `token`."""
        return Counter(p["qim"]["message"] for p in self.alerts(token))
