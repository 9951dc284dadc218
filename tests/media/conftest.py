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
