"""WebhookConfig: the before-send moderation webhook (issue 38; docs/decisions/0114).

Read by qim-writer and qim-room (their configurations call `WebhookConfig.from_env`, so a
bad value stops the start with exit 2 naming the variable) and by the policy itself
(qim/policy/webhook.py, installed with QIM_SEND_POLICY=qim.policy.webhook:policy).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from qim.config.env import Env
from qim.errors import ConfigError

KINDS = ("direct", "group", "room")
FAIL_MODES = ("open", "closed")
# Below the send-policy seam's POLICY_TIMEOUT_S (1 s, decision 0099 item 5): past the
# webhook's own timeout the fail policy answers, never the seam's generic hold.
SYNC_TIMEOUT_MAX_MS = 900


def parse_fail_policy(raw: str) -> dict[str, str]:
    """QIM_WEBHOOK_FAIL_POLICY "open" | "closed" | "closed,room=open" | "direct=open,group=closed,room=open"
    -> {kind: mode} for every kind ("closed" when nothing names one). ConfigError on an
    unknown kind or mode."""
    modes = {k: "closed" for k in KINDS}
    for part in (p.strip() for p in raw.split(",") if p.strip()):
        kind, sep, mode = part.partition("=")
        if not sep:
            kind, mode = "", kind
        mode = mode.strip()
        if mode not in FAIL_MODES or (kind and kind.strip() not in KINDS):
            raise ConfigError(f"QIM_WEBHOOK_FAIL_POLICY={raw!r}: expected open|closed, optionally per kind "
                              f"(e.g. direct=open,group=closed,room=open)")
        for k in (kind.strip(),) if kind else KINDS:
            modes[k] = mode
    return modes


@dataclass(frozen=True)
class WebhookConfig:
    """`url` "" = no webhook configured (the policy refuses to load). `secret` signs every
    request (HMAC-SHA256), `ca_file` "" = the system's CAs, `timeout_ms` the whole verdict
    (waiting for a slot included), `fail` {kind: "open"|"closed"}, `concurrency` requests
    in flight per process, the breaker opens after `breaker_failures` consecutive
    failures for `breaker_open_ms`."""

    url: str = ""
    secret: str = field(default="", repr=False)
    ca_file: str = ""
    timeout_ms: int = 500
    fail: dict[str, str] = field(default_factory=lambda: {k: "closed" for k in KINDS})
    concurrency: int = 64
    breaker_failures: int = 5
    breaker_open_ms: int = 5000

    @classmethod
    def from_env(cls, env: Env) -> "WebhookConfig":
        """Read and validate every variable; ConfigError naming the first bad one."""
        url = env.raw("QIM_MODERATION_WEBHOOK_URL").strip()
        secret = env.raw("QIM_MODERATION_WEBHOOK_SECRET")
        if url and not url.startswith(("https://", "http://")):
            raise ConfigError(f"QIM_MODERATION_WEBHOOK_URL={url!r}: expected an https:// (or http://) URL")
        if url and len(secret) < 16:
            raise ConfigError("QIM_MODERATION_WEBHOOK_SECRET is required with QIM_MODERATION_WEBHOOK_URL "
                              "(at least 16 characters)")
        return cls(
            url=url, secret=secret, ca_file=env.raw("QIM_MODERATION_WEBHOOK_CA_FILE").strip(),
            timeout_ms=env.integer("QIM_MODERATION_SYNC_TIMEOUT_MS", 500, 10, SYNC_TIMEOUT_MAX_MS),
            fail=parse_fail_policy(env.raw("QIM_WEBHOOK_FAIL_POLICY")),
            concurrency=env.integer("QIM_MODERATION_WEBHOOK_CONCURRENCY", 64, 1, 4096),
            breaker_failures=env.integer("QIM_MODERATION_BREAKER_FAILURES", 5, 1, 1000),
            breaker_open_ms=env.integer("QIM_MODERATION_BREAKER_OPEN_MS", 5000, 100, 600_000),
        )


def webhook_config(env: Optional[Env] = None) -> WebhookConfig:
    """WebhookConfig of this process's environment (or `env`)."""
    return WebhookConfig.from_env(env if env is not None else Env())
