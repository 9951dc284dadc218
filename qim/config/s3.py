"""S3Config: where the MediaService's objects go (QIM_S3_*; issue 40; docs/decisions/0137).
Any S3-compatible store: AWS S3 (QIM_S3_ENDPOINT unset), Ceph RGW, SeaweedFS, s3proxy in
development (qim/dev/s3_engine.py). The client is qim/stores/s3.py ObjectStore."""

from __future__ import annotations

from dataclasses import dataclass, field

from qim.config.env import Env
from qim.errors import ConfigError


@dataclass(frozen=True)
class S3Config:
    """Where the objects go: `endpoint` (http(s)://host:port; "" = AWS's own), `bucket`,
    `region`, `access_key`, `secret_key` (never in a repr or a log)."""

    endpoint: str
    bucket: str
    region: str = "us-east-1"
    access_key: str = ""
    secret_key: str = field(default="", repr=False)

    @classmethod
    def from_env(cls, env: Env) -> "S3Config":
        """QIM_S3_ENDPOINT, QIM_S3_BUCKET (required), QIM_S3_REGION, QIM_S3_ACCESS_KEY,
        QIM_S3_SECRET_KEY; ConfigError naming the first bad one."""
        endpoint = env.raw("QIM_S3_ENDPOINT").strip()
        if endpoint and not endpoint.startswith(("http://", "https://")):
            raise ConfigError(f"QIM_S3_ENDPOINT={endpoint!r}: expected an http:// or https:// URL")
        bucket = env.text("QIM_S3_BUCKET")
        if not (3 <= len(bucket) <= 63) or not all(c.islower() or c.isdigit() or c in ".-" for c in bucket):
            raise ConfigError(f"QIM_S3_BUCKET={bucket!r}: expected an S3 bucket name (3-63 of a-z 0-9 . -)")
        key, secret = env.raw("QIM_S3_ACCESS_KEY"), env.raw("QIM_S3_SECRET_KEY")
        if bool(key) != bool(secret):
            raise ConfigError(
                "QIM_S3_ACCESS_KEY and QIM_S3_SECRET_KEY are set together (or neither: "
                "boto3's own credential chain, e.g. an instance role)"
            )
        return cls(endpoint, bucket, env.raw("QIM_S3_REGION").strip() or "us-east-1", key, secret)
