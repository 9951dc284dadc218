"""The development stack lets its web page reach the MediaService (decision 0146): the
stack's services get QIM_MEDIA_CORS_ORIGINS naming qim-web's origins (QIM_WEB_PORT, else
8088, by both loopback names), which the MediaService's configuration reads as its CORS
allowlist; an operator's own QIM_MEDIA_CORS_ORIGINS wins."""

from __future__ import annotations

from qim.config.env import Env
from qim.config.media import MediaConfig
from qim.dev.stack import stack_up

ENGINES = {
    "QIM_REDIS_ADDR": "127.0.0.1:6379",
    "QIM_KAFKA_BOOTSTRAP": "127.0.0.1:9092",
    "QIM_S3_ENDPOINT": "http://127.0.0.1:9",
    "QIM_S3_BUCKET": "qim-media",
}


def test_the_stack_allows_the_web_page_origin(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("QIM_WEB_PORT", raising=False)
    monkeypatch.delenv("QIM_MEDIA_CORS_ORIGINS", raising=False)
    st = stack_up(tmp_path / "a", ENGINES, start=False)  # laid out, nothing started
    assert st.env["QIM_MEDIA_CORS_ORIGINS"] == "http://127.0.0.1:8088,http://localhost:8088"
    media_env = {**st.env, **st.instance_env["media"]}  # what the stack's media node is started with
    assert MediaConfig.from_env(Env(media_env)).cors_origins == ("http://127.0.0.1:8088", "http://localhost:8088")

    monkeypatch.setenv("QIM_WEB_PORT", "9099")
    assert stack_up(tmp_path / "b", ENGINES, start=False).env["QIM_MEDIA_CORS_ORIGINS"] == (
        "http://127.0.0.1:9099,http://localhost:9099"
    )
    monkeypatch.setenv("QIM_MEDIA_CORS_ORIGINS", "https://chat.example.com")
    assert stack_up(tmp_path / "c", ENGINES, start=False).env["QIM_MEDIA_CORS_ORIGINS"] == "https://chat.example.com"
