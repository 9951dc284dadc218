"""Fixtures of the media tests: a private s3proxy (qim/dev/s3_engine.py) per test module,
its bucket, and an ObjectStore on it (issue 40; docs/decisions/0137)."""

from __future__ import annotations

import asyncio

import pytest

from qim.config.env import Env
from qim.dev.s3_engine import S3Engine, start_s3
from qim.errors import EngineError
from qim.stores.s3 import ObjectStore, S3Config


@pytest.fixture(scope="module")
def s3_engine(tmp_path_factory) -> S3Engine:
    """A private s3proxy of this test module (own port and directory), stopped by pid after it."""
    try:
        eng = start_s3(tmp_path_factory.mktemp("s3"), die_with_parent=True)
    except EngineError as e:
        pytest.fail(f"s3proxy could not start: {e}", pytrace=False)
    yield eng
    eng.stop()


@pytest.fixture
def object_store(s3_engine, request) -> ObjectStore:
    """An ObjectStore on a bucket of this test's own (named after the test), created empty."""
    name = "t-" + "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:50].strip("-")
    store = ObjectStore(S3Config.from_env(Env(s3_engine.env(bucket=name))))
    asyncio.run(store.ensure_bucket())
    return store


@pytest.fixture
def media_env(s3_engine, private_redis, tmp_path, request):
    """(env, signing key): the variables of a MediaService on this module's s3proxy (a
    bucket of the test's own) and the test's own Redis, with a token key of its own."""
    from qim.wire.tokens import SigningKey

    key = SigningKey.generate()
    pub = tmp_path / "token.pub.pem"
    pub.write_bytes(key.verify_key().public_pem())
    bucket = "t-" + "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:50].strip("-")
    env = dict(
        s3_engine.env(bucket=bucket),
        QIM_REDIS_ADDR=private_redis.addr,
        QIM_KAFKA_BOOTSTRAP="127.0.0.1:1",  # read with the shared engine variables, never dialled
        QIM_TOKEN_PUBLIC_KEYS=str(pub),
        QIM_MEDIA_METRICS_LISTEN="127.0.0.1:0",
        QIM_MEDIA_REF_KEY="k" * 40,
    )
    return env, key
