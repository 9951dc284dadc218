"""Offline push for the NotificationService (issue 39): the push providers behind one
interface (qim/notify/providers: APNs, FCM HTTP v1, Web Push; docs/decisions/0130)."""
