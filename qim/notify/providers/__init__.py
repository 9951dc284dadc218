"""The push providers (docs/decisions/0130): `PushProvider.send(notification) -> Outcome`
for APNs (apns.py), FCM HTTP v1 (fcm.py) and Web Push (webpush.py); the shapes, the
outcome and the caller's retry rule are in base.py."""
