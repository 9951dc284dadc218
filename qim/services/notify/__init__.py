"""The NotificationService, qim-notify (issue 39; docs/decisions/0135-notification-service.md)."""
