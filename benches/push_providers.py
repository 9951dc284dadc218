"""Throughput and CPU of the push providers (qim/notify/providers; docs/decisions/0130)
against the local provider endpoints of the tests (tests/notify/fakes), on loopback.

    .venv/bin/python benches/push_providers.py [--sends 2000] [--concurrency 64]

The endpoints run in a thread of their own with their own event loop; the providers in
the main thread, whose CPU time (time.thread_time) is the providers' own: TLS, HTTP/2 or
HTTP/1.1, the JWTs, JSON and (Web Push) the aes128gcm encryption. Prints per provider the
notifications per second and the CPU microseconds per notification; every send must be
`sent` (anything else is an error: the figure would not be of a working provider).
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec, rsa  # noqa: E402

from qim.dev.certs import CLIENT_PORT, ensure_dev_pki  # noqa: E402
from qim.notify.providers.apns import ApnsConfig, ApnsProvider  # noqa: E402
from qim.notify.providers.base import Alert, Notification, PushProvider, Registration  # noqa: E402
from qim.notify.providers.fcm import FcmConfig, FcmProvider  # noqa: E402
from qim.notify.providers.webpush import VapidConfig, WebPushProvider  # noqa: E402
from tests.notify.fakes.apns import FakeApns  # noqa: E402
from tests.notify.fakes.fcm import FakeFcm  # noqa: E402
from tests.notify.fakes.webpush import FakePushService, raw_public  # noqa: E402


def _pem(key: Any, public: bool = False) -> str:
    if public:
        return key.public_key().public_bytes(serialization.Encoding.PEM,
                                             serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def build(server: ssl.SSLContext, ca_file: str, loop: asyncio.AbstractEventLoop,
          concurrency: int) -> list[tuple[PushProvider, Registration]]:
    """The three providers, each with its endpoint started in `loop`."""
    def on_loop(coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(60)

    ec_key, rsa_key, vapid = (ec.generate_private_key(ec.SECP256R1()),
                              rsa.generate_private_key(public_exponent=65537, key_size=2048),
                              ec.generate_private_key(ec.SECP256R1()))
    apns = on_loop(FakeApns(_pem(ec_key, True), "K", "T", "app", server).start())
    fcm = on_loop(FakeFcm(server, "p", "e@x", _pem(rsa_key, True)).start())
    wp = on_loop(FakePushService(server).start())
    account = {"project_id": "p", "client_email": "e@x", "private_key": _pem(rsa_key), "token_uri": fcm.token_uri}
    return [
        (ApnsProvider(ApnsConfig("T", "K", _pem(ec_key), "app", base_url=apns.base_url, ca_file=ca_file,
                                 concurrency=concurrency)), Registration("apns", token="ab" * 32)),
        (FcmProvider(FcmConfig(account, base_url=fcm.base_url, ca_file=ca_file, concurrency=concurrency)),
         Registration("fcm", token="t")),
        (WebPushProvider(VapidConfig(_pem(vapid), "mailto:a@b.c", ca_file=ca_file, concurrency=concurrency)),
         Registration("webpush", subscription=wp.subscribe(raw_public(vapid)))),
    ]


async def run(provider: PushProvider, reg: Registration, sends: int, concurrency: int) -> tuple[float, float]:
    """(notifications per second, CPU µs per notification) of `sends` sends by
    `concurrency` workers, each sending one after another (as the NotificationService's
    bounded senders would: a send's timeout includes its wait for a slot)."""
    await provider.start()
    note = Notification(reg, Alert(badge=1, badge_version=1, collapse_id="0a" * 16, title="t", body="b"))
    assert (await provider.send(note)).kind == "sent"  # connection and credential made before the clock
    outcomes: list[Any] = []

    async def worker(n: int) -> None:
        for _ in range(n):
            outcomes.append(await provider.send(note))

    share = [sends // concurrency + (1 if k < sends % concurrency else 0) for k in range(concurrency)]
    wall, cpu = time.perf_counter(), time.thread_time()
    await asyncio.gather(*(worker(n) for n in share))
    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    await provider.close()
    bad = [o for o in outcomes if o.kind != "sent"]
    if bad:
        raise SystemExit(f"{provider.name}: {len(bad)} of {sends} sends not sent, e.g. {bad[0]}")
    return sends / wall, cpu / sends * 1e6


def main() -> None:
    """Parse the arguments, run each provider, print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sends", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True, name="endpoints").start()
    with tempfile.TemporaryDirectory() as tmp:
        pki = ensure_dev_pki(Path(tmp), services=())
        files = pki.files(CLIENT_PORT)
        server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        server.load_cert_chain(files.cert, files.key)
        for provider, reg in build(server, pki.ca_file, loop, args.concurrency):
            rate, cpu_us = asyncio.run(run(provider, reg, args.sends, args.concurrency))
            print(f"{provider.name:8} {rate:8.0f} notifications/s  {cpu_us:7.0f} µs CPU per notification "
                  f"({args.sends} sends, {args.concurrency} at once)")


if __name__ == "__main__":
    main()
