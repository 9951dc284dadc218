"""WriterConfig: qim-writer (ConversationWriter)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional

from qim.config.common import CommonConfig
from qim.config.env import Env
from qim.config.media import ref_key
from qim.config.moderation import WebhookConfig
from qim.config.tls import service_tls
from qim.consts import MAX_MESSAGE_BODY, RECALL_WINDOW_MS_DEFAULT, WRITER_INFLIGHT_DEFAULT, WRITER_INFLIGHT_MAX
from qim.faults import WRITER_POINTS
from qim.net.tls import TlsFiles
from qim.topology import WRITER

_LISTENERS = ("QIM_WRITER_LISTEN", "QIM_WRITER_METRICS_LISTEN")  # loopback-only knobs look at these


@dataclass(frozen=True)
class WriterConfig:
    """qim-writer (ConversationWriter)."""

    common: CommonConfig
    listen: str
    metrics_listen: str
    writer_id: int  # 0 = lease one automatically
    region_id: int
    inflight_limit: int
    fault_point: str  # "" in production; see qim/services/writer/faults.py
    recovery_stale_ms: int
    recall_window_ms: int
    clock_skew_ms: int  # test/dev knob (QIM_CLOCK_SKEW_MS); 0 in production
    max_body: int = MAX_MESSAGE_BODY  # QIM_MAX_MESSAGE_BODY (Env.max_body): the gateway's limit, checked again
    internal_tls: Optional[TlsFiles] = None  # QIM_INTERNAL_* (qim/config/tls.py); None: plaintext development
    send_policy: str = ""  # QIM_SEND_POLICY module:callable ("" = accept all; loaded at start: qim/policy)
    moderation: WebhookConfig = WebhookConfig()  # QIM_MODERATION_* (qim/policy/webhook.py, decision 0114)
    # QIM_MEDIA_REF_KEY: verifies MEDIA bodies (qim/wire/media.py; decision 0138); b"": MEDIA refused
    media_ref_key: bytes = field(default=b"", repr=False)

    @classmethod
    def from_env(cls, env: Env) -> "WriterConfig":
        """Read and validate every variable; ConfigError naming the first bad one."""
        cfg = cls(
            common=CommonConfig.from_env(env),
            listen=env.listen("QIM_WRITER_LISTEN"),
            metrics_listen=env.metrics_listen(WRITER),
            writer_id=env.integer("QIM_WRITER_ID", 0, 0, 65535),
            region_id=env.integer("QIM_REGION_ID", 0, 0, 65535),
            inflight_limit=env.integer("QIM_WRITER_REQUEST_INFLIGHT_LIMIT", WRITER_INFLIGHT_DEFAULT, 1, WRITER_INFLIGHT_MAX),
            fault_point=env.fault_point("QIM_WRITER_FAULT_POINT", _LISTENERS, WRITER_POINTS),
            recovery_stale_ms=env.integer("QIM_COMMIT_RECOVERY_STALE_MS", 5000, 100, 3_600_000),
            recall_window_ms=env.integer("QIM_RECALL_WINDOW_MS", RECALL_WINDOW_MS_DEFAULT, 0, 30 * 86_400_000),
            clock_skew_ms=env.clock_skew("QIM_CLOCK_SKEW_MS", _LISTENERS),
            max_body=env.max_body(),
            send_policy=env.raw("QIM_SEND_POLICY").strip(),
            moderation=WebhookConfig.from_env(env),
            media_ref_key=ref_key(env) if env.raw("QIM_MEDIA_REF_KEY") else b"",
        )
        return replace(cfg, internal_tls=service_tls(env, WRITER, cfg.listen, {}))
