"""ModerationConfig: qim-moderation, the ModerationService (issue 38; docs/decisions/0123).

Its after-send notifier delivers to QIM_MODERATION_NOTIFY_URL, signed with
QIM_MODERATION_NOTIFY_SECRET (16+ characters, the HMAC key of X-QIM-Signature); a bad URL
or a missing secret stops the start with exit 2 naming it. No URL: notifications are off
and the node idles (a chart's default replica costs nothing).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from qim.config.common import CommonConfig
from qim.config.env import Env
from qim.errors import ConfigError
from qim.topology import MODERATION


@dataclass(frozen=True)
class ModerationConfig:
    """`url` the receiver of after-send notifications ("" = off), `secret` signs them, `ca_file` ""
    = the system's CAs, `batch` notifications per POST at most, `timeout_ms` per POST."""

    common: CommonConfig
    metrics_listen: str
    url: str
    secret: str = field(repr=False)
    ca_file: str = ""
    batch: int = 100
    timeout_ms: int = 5000

    @classmethod
    def from_env(cls, env: Env) -> "ModerationConfig":
        """Read and validate every variable; ConfigError naming the first bad one."""
        url = env.raw("QIM_MODERATION_NOTIFY_URL").strip()
        if url and not url.startswith(("https://", "http://")):
            raise ConfigError(f"QIM_MODERATION_NOTIFY_URL={url!r}: expected an https:// (or http://) URL")
        secret = env.raw("QIM_MODERATION_NOTIFY_SECRET")
        if url and len(secret) < 16:
            raise ConfigError(
                "QIM_MODERATION_NOTIFY_SECRET is required with QIM_MODERATION_NOTIFY_URL (at least 16 characters)"
            )
        return cls(
            CommonConfig.from_env(env),
            env.metrics_listen(MODERATION),
            url,
            secret,
            env.raw("QIM_MODERATION_NOTIFY_CA_FILE").strip(),
            env.integer("QIM_MODERATION_NOTIFY_BATCH", 100, 1, 10_000),
            env.integer("QIM_MODERATION_NOTIFY_TIMEOUT_MS", 5000, 100, 120_000),
        )
