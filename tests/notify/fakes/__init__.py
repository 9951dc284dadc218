"""Local provider endpoints for the push tests (docs/decisions/0130): APNs over HTTP/2
(apns.py), FCM HTTP v1 with its OAuth2 token endpoint (fcm.py) and an RFC 8030 push
service that checks VAPID and decrypts the payload (webpush.py). Each serves HTTPS on a
free loopback port in the test's own event loop, records what it received and answers
as its `mode` says: "ok", "400", "410", "429" (with `retry_after`), "500", "hang" or
"close" (the connection dropped without an answer)."""

MODES = ("ok", "400", "410", "429", "500", "hang", "close")
HANG_S = 60.0
