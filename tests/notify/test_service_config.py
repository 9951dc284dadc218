"""qim-notify's configuration (qim/config/notify.py; docs/decisions/0135) and the dev
stack's passing of it: a provider with no variable is off, a half-configured one or one
with an unreadable key stops the start naming the variable, a test endpoint is taken;
`qim-dev stack up` passes QIM_PUSH_* / QIM_NOTIFY_* to its services and runs 0 notify
nodes unless asked."""

from __future__ import annotations

import pytest

from qim.config.env import Env
from qim.config.notify import NotifyConfig
from qim.dev.stack_cli import NODE_FLAGS, OPTIONAL, policy_settings
from qim.errors import ConfigError
from qim.topology import NOTIFY, SERVICES
from tests.notify.pushfixtures import KEY_ID, TEAM, TOPIC, apns_keys

BASE = {"QIM_REDIS_ADDR": "127.0.0.1:6379", "QIM_KAFKA_BOOTSTRAP": "127.0.0.1:9092"}


def config(**env: str) -> NotifyConfig:
    return NotifyConfig.from_env(Env({**BASE, **env}))


def test_no_provider_variable_means_every_provider_off() -> None:
    cfg = config()
    assert (cfg.apns, cfg.fcm, cfg.vapid) == (None, None, None)
    assert (cfg.batch, cfg.claim_ms, cfg.badge_wait_ms) == (200, 30_000, 30_000)
    assert cfg.registry_addr == BASE["QIM_REDIS_ADDR"]


def test_apns_half_configured_or_with_a_bad_endpoint_or_key_file_is_refused(tmp_path) -> None:
    with pytest.raises(ConfigError, match="QIM_PUSH_APNS_KEY_FILE, QIM_PUSH_APNS_TOPIC unset"):
        config(QIM_PUSH_APNS_TEAM_ID=TEAM, QIM_PUSH_APNS_KEY_ID=KEY_ID)
    full = {"QIM_PUSH_APNS_TEAM_ID": TEAM, "QIM_PUSH_APNS_KEY_ID": KEY_ID, "QIM_PUSH_APNS_TOPIC": TOPIC,
            "QIM_PUSH_APNS_KEY_FILE": str(tmp_path / "missing.p8")}
    with pytest.raises(ConfigError, match="QIM_PUSH_APNS_KEY_FILE=.*FileNotFoundError"):
        config(**full)
    (tmp_path / "k.p8").write_text(apns_keys()[0])
    full["QIM_PUSH_APNS_KEY_FILE"] = str(tmp_path / "k.p8")
    with pytest.raises(ConfigError, match="QIM_PUSH_APNS_ENDPOINT='http://x'"):
        config(**full, QIM_PUSH_APNS_ENDPOINT="http://x")
    apns = config(**full, QIM_PUSH_APNS_ENDPOINT="https://127.0.0.1:9/").apns
    assert apns is not None and apns.base_url == apns.sandbox_url == "https://127.0.0.1:9"
    sandbox = config(**full, QIM_PUSH_APNS_ENDPOINT="sandbox").apns
    assert sandbox is not None and sandbox.base_url.startswith("https://api.sandbox")


def test_web_push_needs_both_key_and_subject() -> None:
    with pytest.raises(ConfigError, match="QIM_PUSH_VAPID_PRIVATE_KEY_FILE and QIM_PUSH_VAPID_SUBJECT"):
        config(QIM_PUSH_VAPID_SUBJECT="mailto:ops@example.com")


def test_the_dev_stack_passes_push_settings_and_runs_notify_only_when_asked() -> None:
    env = {"QIM_PUSH_APNS_TEAM_ID": TEAM, "QIM_NOTIFY_CLAIM_MS": "3000", "QIM_PUSH_FCM_ENDPOINT": "",
           "HOME": "/root"}
    assert policy_settings(env) == {"QIM_PUSH_APNS_TEAM_ID": TEAM, "QIM_NOTIFY_CLAIM_MS": "3000"}
    assert NODE_FLAGS["notify-nodes"] == NOTIFY and NOTIFY in OPTIONAL
    assert SERVICES[NOTIFY].dev_nodes == 0
