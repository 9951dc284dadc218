"""The object store contract QIM relies on, against a real S3-compatible server (s3proxy,
qim/dev/s3_engine.py) through boto3 (qim/stores/s3.py; docs/decisions/0137): put, get,
a range get, size, list, delete, and a multipart upload whose parts go to presigned URLs
with a part listing to resume from."""

from __future__ import annotations

import asyncio
import os
import urllib.request

import pytest

from qim.config.env import Env
from qim.errors import ConfigError, EngineError
from qim.stores.s3 import ObjectMissing, ObjectStore, S3Config

MIB = 1024 * 1024


def test_put_get_range_list_delete(object_store: ObjectStore) -> None:
    async def run() -> None:
        data = os.urandom(70_000)
        await object_store.put("m/abc", data, "image/png")
        await object_store.put("m/def", b"second")
        assert await object_store.get("m/abc") == data
        assert await object_store.get("m/abc", 100, 199) == data[100:200]
        assert await object_store.get("m/abc", 69_990) == data[69_990:]
        assert await object_store.size("m/abc") == 70_000
        assert await object_store.keys("m/") == ["m/abc", "m/def"]
        await object_store.delete("m/abc")
        assert await object_store.keys() == ["m/def"]
        with pytest.raises(ObjectMissing):
            await object_store.get("m/abc")
        with pytest.raises(ObjectMissing):
            await object_store.size("m/abc")

    asyncio.run(run())


def test_multipart_with_presigned_parts_resumes(object_store: ObjectStore) -> None:
    async def run() -> None:
        part1, part2 = os.urandom(5 * MIB), os.urandom(1234)
        upload = await object_store.create_multipart("big/one")
        req = urllib.request.Request(object_store.presign_part("big/one", upload, 1), data=part1, method="PUT")
        await asyncio.to_thread(urllib.request.urlopen, req)
        # a device cut off after part 1 asks what arrived and sends only the rest
        done = await object_store.parts("big/one", upload)
        assert [(p["PartNumber"], p["Size"]) for p in done] == [(1, 5 * MIB)]
        req = urllib.request.Request(object_store.presign_part("big/one", upload, 2), data=part2, method="PUT")
        await asyncio.to_thread(urllib.request.urlopen, req)
        await object_store.complete_multipart("big/one", upload, await object_store.parts("big/one", upload))
        assert await object_store.size("big/one") == 5 * MIB + 1234
        assert await object_store.get("big/one", 5 * MIB - 2, 5 * MIB + 1) == part1[-2:] + part2[:2]
        # an aborted upload leaves no object behind
        other = await object_store.create_multipart("big/two")
        await object_store.abort_multipart("big/two", other)
        assert await object_store.keys("big/") == ["big/one"]

    asyncio.run(run())


def test_wrong_secret_is_an_engine_error(s3_engine) -> None:
    env = dict(s3_engine.env(bucket="t-wrong-secret"), QIM_S3_SECRET_KEY="not-the-secret")
    with pytest.raises(EngineError, match="SignatureDoesNotMatch|AccessDenied|InvalidAccessKeyId"):
        asyncio.run(ObjectStore(S3Config.from_env(Env(env))).put("k", b"x"))


@pytest.mark.parametrize(
    "env, needle",
    [
        ({"QIM_S3_BUCKET": "Bad_Bucket"}, "QIM_S3_BUCKET"),
        ({"QIM_S3_BUCKET": "ok-bucket", "QIM_S3_ENDPOINT": "ftp://x"}, "QIM_S3_ENDPOINT"),
        ({"QIM_S3_BUCKET": "ok-bucket", "QIM_S3_ACCESS_KEY": "k"}, "QIM_S3_SECRET_KEY"),
        ({}, "QIM_S3_BUCKET"),
    ],
)
def test_bad_configuration_names_the_variable(env, needle) -> None:
    with pytest.raises(ConfigError, match=needle):
        S3Config.from_env(Env(env))
