"""The ModerationService (issue 38): after-send notifications from the Outbox to the
operator's webhook (qim/services/moderation/notify.py; docs/decisions/0123)."""
