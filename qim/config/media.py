"""MediaConfig: qim-media, the MediaService (issue 40; docs/decisions/0137, 0138).

The object store (QIM_S3_*: qim/stores/s3.py S3Config), the limits (QIM_MEDIA_MAX_FILE_BYTES
per file through the service, QIM_MEDIA_MAX_UPLOAD_BYTES per multipart upload, QIM_MEDIA_QUOTA_BYTES_PER_DAY per user and UTC day,
QIM_MEDIA_MAX_PIXELS per image), the key that signs media references
(QIM_MEDIA_REF_KEY, 32+ characters, the same value on the writers that check MEDIA
bodies), and the device-token settings the gateway's AUTH reads (QIM_TOKEN_*,
QIM_TENANT_ID), and the web origins allowed to call the routes from a page
(QIM_MEDIA_CORS_ORIGINS, comma-separated `scheme://host[:port]`; empty: no CORS; decision
0146). Redis (the home instance of QIM_REDIS_ADDR / _CORE_ADDRS) holds the quota
counters and object records; downloads read messages and groups as the writer does
(both tiers with QIM_SCYLLA_ADDRS).
A bad value stops the start with exit 2 naming the variable.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from qim.config.common import CommonConfig
from qim.config.env import Env
from qim.config.s3 import S3Config
from qim.consts import TOKEN_AUDIENCE_DEFAULT, TOKEN_ISSUER_DEFAULT, TOKEN_LEEWAY_S_DEFAULT, TOKEN_MAX_TTL_S_DEFAULT
from qim.errors import ConfigError
from qim.obs.httpcors import parse_origins
from qim.topology import MEDIA

MAX_FILE_BYTES_CEILING = 64 * 1024 * 1024  # through the service; larger files: multipart (multipart.py)
REF_KEY_MIN = 32


def ref_key(env: Env) -> bytes:
    """QIM_MEDIA_REF_KEY as bytes: the HMAC key of media references (decision 0138);
    ConfigError when shorter than 32 characters."""
    raw = env.raw("QIM_MEDIA_REF_KEY")
    if len(raw) < REF_KEY_MIN:
        raise ConfigError(f"QIM_MEDIA_REF_KEY is required (at least {REF_KEY_MIN} characters)")
    return raw.encode()


@dataclass(frozen=True)
class MediaConfig:
    """`common` (Redis layout, tenant, tier: the messages and groups downloads are checked
    against), `metrics_listen` (the HTTP routes' listener),
    `s3`, `max_file_bytes`, `quota_bytes_per_day`, `max_pixels`, `ref_key`, and the token
    settings (`token_keys`, `token_audience`, `token_issuer`, `token_leeway_s`,
    `token_max_ttl_s`: as the gateway's), `cors_origins` (QIM_MEDIA_CORS_ORIGINS)."""

    common: CommonConfig
    metrics_listen: str
    s3: S3Config
    ref_key: bytes = field(repr=False)
    token_keys: tuple = ()
    max_file_bytes: int = 16 * 1024 * 1024
    max_upload_bytes: int = 1024**3
    quota_bytes_per_day: int = 1024 * 1024 * 1024
    max_pixels: int = 50_000_000
    orphan_ms: int = 3_600_000  # QIM_MEDIA_ORPHAN_MS: an upload no message references is deleted after it (0139)
    sweep_interval_ms: int = 60_000  # QIM_MEDIA_SWEEP_INTERVAL_MS: how often the sweeper runs (0139)
    token_audience: str = TOKEN_AUDIENCE_DEFAULT
    token_issuer: str = TOKEN_ISSUER_DEFAULT
    token_leeway_s: int = TOKEN_LEEWAY_S_DEFAULT
    token_max_ttl_s: int = TOKEN_MAX_TTL_S_DEFAULT
    cors_origins: tuple[str, ...] = ()  # web pages of these origins may call the routes (0146)

    @classmethod
    def from_env(cls, env: Env) -> "MediaConfig":
        """Read and validate every variable; ConfigError naming the first bad one."""
        return cls(
            common=CommonConfig.from_env(env),
            metrics_listen=env.metrics_listen(MEDIA),
            s3=S3Config.from_env(env),
            ref_key=ref_key(env),
            token_keys=env.token_keys(),
            max_file_bytes=env.integer("QIM_MEDIA_MAX_FILE_BYTES", 16 * 1024 * 1024, 1, MAX_FILE_BYTES_CEILING),
            max_upload_bytes=env.integer("QIM_MEDIA_MAX_UPLOAD_BYTES", 1024**3, 1, 8 * 10**9),
            quota_bytes_per_day=env.integer("QIM_MEDIA_QUOTA_BYTES_PER_DAY", 1024**3, 1, 1 << 50),
            max_pixels=env.integer("QIM_MEDIA_MAX_PIXELS", 50_000_000, 1, 1_000_000_000),
            orphan_ms=env.integer("QIM_MEDIA_ORPHAN_MS", 3_600_000, 1000, 30 * 86_400_000),
            sweep_interval_ms=env.integer("QIM_MEDIA_SWEEP_INTERVAL_MS", 60_000, 100, 86_400_000),
            token_audience=env.text("QIM_TOKEN_AUDIENCE", TOKEN_AUDIENCE_DEFAULT),
            token_issuer=env.text("QIM_TOKEN_ISSUER", TOKEN_ISSUER_DEFAULT),
            token_leeway_s=env.integer("QIM_TOKEN_LEEWAY_S", TOKEN_LEEWAY_S_DEFAULT, 0, 300),
            token_max_ttl_s=env.integer("QIM_TOKEN_MAX_TTL_S", TOKEN_MAX_TTL_S_DEFAULT, 60, 30 * 86_400),
            cors_origins=parse_origins(env.raw("QIM_MEDIA_CORS_ORIGINS"), "QIM_MEDIA_CORS_ORIGINS"),
        )

    @property
    def tenant(self) -> int:
        """QIM_TENANT_ID."""
        return self.common.tenant
