"""`qim-dev stack up --notify-nodes 1` with the QIM_PUSH_* of docs/operations.md "Offline
push" on a running stack restarts it and names the push variables as what they are:
"other offline push settings", not "other moderation settings" (what a newcomer read when
following the docs)."""

from __future__ import annotations

from qim.dev.stack_cli import restart_words
from tests.dev.test_stack_policy import Running

PUSH = {"QIM_PUSH_VAPID_PRIVATE_KEY_FILE": "/etc/qim/push/vapid.pem", "QIM_PUSH_VAPID_SUBJECT": "mailto:a@example.com"}


def test_push_settings_are_named_as_offline_push_settings():
    line = restart_words(Running.stack({}), {}, {**PUSH, "QIM_NOTIFY_CLAIM_MS": "5000"})
    assert "other offline push settings (" in line, line
    assert "QIM_PUSH_VAPID_SUBJECT unset -> mailto:a@example.com" in line and "QIM_NOTIFY_CLAIM_MS unset -> 5000" in line
    assert "moderation" not in line, line  # only what changed is named


def test_moderation_and_push_changed_together_are_named_apart():
    line = restart_words(Running.stack({}), {}, {**PUSH, "QIM_MODERATION_WEBHOOK_URL": "https://hook.example/v1"})
    assert "other moderation settings (QIM_MODERATION_WEBHOOK_URL unset -> https://hook.example/v1)" in line, line
    assert "other offline push settings (QIM_PUSH_VAPID_PRIVATE_KEY_FILE" in line, line
