"""NotifyConfig: qim-notify, the NotificationService (issue 39; docs/decisions/0135).

The providers (docs/decisions/0130) are configured by QIM_PUSH_APNS_*, QIM_PUSH_FCM_* and
QIM_PUSH_VAPID_* (docs/operations.md "Offline push"); a provider whose variables are all
unset is off (its devices' alerts count as failed, reason "provider off"), a provider
half configured or with a key that cannot work stops the start with exit 2 naming the
variable. QIM_NOTIFY_* tune the service itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from qim.config.common import CommonConfig
from qim.config.env import Env
from qim.errors import ConfigError
from qim.notify.providers.apns import PRODUCTION, SANDBOX, ApnsConfig
from qim.notify.providers.fcm import ENDPOINT as FCM_ENDPOINT
from qim.notify.providers.fcm import FcmConfig, load_service_account
from qim.notify.providers.webpush import VapidConfig
from qim.topology import NOTIFY

APNS_VARS = ("QIM_PUSH_APNS_TEAM_ID", "QIM_PUSH_APNS_KEY_ID", "QIM_PUSH_APNS_KEY_FILE", "QIM_PUSH_APNS_TOPIC")


def _read(path: str, var: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError as exc:
        raise ConfigError(f"{var}={path}: {type(exc).__name__}") from None


def _apns(env: Env, timeout_s: float, concurrency: int) -> Optional[ApnsConfig]:
    given = {v: env.raw(v).strip() for v in APNS_VARS}
    endpoint = env.raw("QIM_PUSH_APNS_ENDPOINT").strip() or "production"
    ca_file = env.raw("QIM_PUSH_APNS_CA_FILE").strip()
    if not any(given.values()):
        return None
    missing = [v for v, x in given.items() if not x]
    if missing:
        raise ConfigError(f"APNs is half configured: {', '.join(missing)} unset (set all of {', '.join(APNS_VARS)})")
    if endpoint == "production":
        base, sandbox = PRODUCTION, SANDBOX
    elif endpoint == "sandbox":
        base, sandbox = SANDBOX, SANDBOX
    elif endpoint.startswith("https://"):
        base = sandbox = endpoint.rstrip("/")
    else:
        raise ConfigError(f"QIM_PUSH_APNS_ENDPOINT={endpoint!r}: production, sandbox or an https:// URL")
    key = _read(given["QIM_PUSH_APNS_KEY_FILE"], "QIM_PUSH_APNS_KEY_FILE")
    return ApnsConfig(given["QIM_PUSH_APNS_TEAM_ID"], given["QIM_PUSH_APNS_KEY_ID"], key, given["QIM_PUSH_APNS_TOPIC"],
                      base_url=base, sandbox_url=sandbox, ca_file=ca_file,
                      timeout_s=timeout_s, concurrency=concurrency)


def _fcm(env: Env, timeout_s: float, concurrency: int) -> Optional[FcmConfig]:
    path = env.raw("QIM_PUSH_FCM_SERVICE_ACCOUNT_FILE").strip()
    endpoint = env.raw("QIM_PUSH_FCM_ENDPOINT").strip() or FCM_ENDPOINT
    ca_file = env.raw("QIM_PUSH_FCM_CA_FILE").strip()
    if not path:
        return None
    if not endpoint.startswith("https://"):
        raise ConfigError(f"QIM_PUSH_FCM_ENDPOINT={endpoint!r}: an https:// URL")
    return FcmConfig(load_service_account(path), base_url=endpoint.rstrip("/"),
                     ca_file=ca_file, timeout_s=timeout_s, concurrency=concurrency)


def _vapid(env: Env, timeout_s: float, concurrency: int) -> Optional[VapidConfig]:
    path = env.raw("QIM_PUSH_VAPID_PRIVATE_KEY_FILE").strip()
    subject = env.raw("QIM_PUSH_VAPID_SUBJECT").strip()
    ca_file = env.raw("QIM_PUSH_VAPID_CA_FILE").strip()
    if not path and not subject:
        return None
    if not (path and subject):
        raise ConfigError("Web Push needs both QIM_PUSH_VAPID_PRIVATE_KEY_FILE and QIM_PUSH_VAPID_SUBJECT")
    return VapidConfig(_read(path, "QIM_PUSH_VAPID_PRIVATE_KEY_FILE"), subject,
                       ca_file=ca_file, timeout_s=timeout_s, concurrency=concurrency)


@dataclass(frozen=True)
class NotifyConfig:
    """`apns`/`fcm`/`vapid`: each provider's configuration (None: off); `batch`: dispatch
    records per batch (the bound of what is in flight: the next batch is read only when
    this one is done); `claim_ms`: how long an alert's claim lasts (a node that died
    holding it: its alert is made again after this); `badge_wait_ms`: how long a batch
    waits for the session projection to settle its messages into the badge;
    `max_age_ms`: a message older than this makes no alert (counted suppressed_expired);
    `registry_addr`: the ShardRegistry's Redis, where the live gateways are listed (presence)."""

    common: CommonConfig
    metrics_listen: str
    registry_addr: str
    apns: Optional[ApnsConfig] = None
    fcm: Optional[FcmConfig] = None
    vapid: Optional[VapidConfig] = None
    batch: int = 200
    claim_ms: int = 30_000
    badge_wait_ms: int = 30_000
    max_age_ms: int = 86_400_000

    @classmethod
    def from_env(cls, env: Env) -> "NotifyConfig":
        """Read and validate every variable; ConfigError naming the first bad one."""
        timeout_s = env.integer("QIM_PUSH_TIMEOUT_MS", 10_000, 100, 120_000) / 1000
        concurrency = env.integer("QIM_PUSH_CONCURRENCY", 64, 1, 4096)
        metrics = env.metrics_listen(NOTIFY)
        return cls(CommonConfig.from_env(env), metrics,
                   env.addr("QIM_REGISTRY_REDIS_ADDR", env.addr("QIM_REDIS_ADDR")),
                   _apns(env, timeout_s, concurrency), _fcm(env, timeout_s, concurrency),
                   _vapid(env, timeout_s, concurrency),
                   env.integer("QIM_NOTIFY_BATCH", 200, 1, 10_000),
                   env.integer("QIM_NOTIFY_CLAIM_MS", 30_000, 1000, 3_600_000),
                   env.integer("QIM_NOTIFY_BADGE_WAIT_MS", 30_000, 0, 600_000),
                   env.integer("QIM_NOTIFY_MAX_AGE_MS", 86_400_000, 60_000, 2_592_000_000))
