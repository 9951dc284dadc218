"""No device token, provider credential or message text reaches a log line while the
providers send, even with every logger at DEBUG (httpx logs each request's URL at INFO,
and hpack each header at DEBUG: the APNs URL carries the device token, a header the
bearer JWT). docs/decisions/0130 item 8."""

from __future__ import annotations

import logging

from qim.notify.providers.base import Alert, Notification, Registration

SECRET_TEXT = "the body nobody may log"


def _alert() -> Alert:
    return Alert(badge=1, badge_version=1, collapse_id="0c" * 16, title="Di", body=SECRET_TEXT)


async def test_no_token_credential_or_body_in_the_logs(apns, fcm, webpush, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    apns_provider, apns_fake = apns
    fcm_provider, fcm_fake = fcm
    wp_provider, wp_fake, subscription = webpush
    apns_token, fcm_token = "b2" * 32, "fcm-device-token-secret"
    assert (await apns_provider.send(Notification(Registration("apns", token=apns_token), _alert()))).kind == "sent"
    assert (await fcm_provider.send(Notification(Registration("fcm", token=fcm_token), _alert()))).kind == "sent"
    sub = Notification(Registration("webpush", subscription=subscription), _alert())
    assert (await wp_provider.send(sub)).kind == "sent"
    logging.getLogger("qim.notify").debug("canary")
    assert "canary" in caplog.text  # the capture sees DEBUG: the check below can fail
    secrets = {
        "APNs device token": apns_token, "APNs provider JWT": apns_fake.jwts[0],
        "FCM registration token": fcm_token, "FCM access token": fcm_fake.received[0]["_bearer"],
        "Web Push endpoint": subscription["endpoint"].rsplit("/", 1)[1], "message text": SECRET_TEXT,
    }
    leaked = [name for name, value in secrets.items() if value in caplog.text]
    assert not leaked, f"in the logs: {leaked} (loggers: {sorted({r.name for r in caplog.records})})"
