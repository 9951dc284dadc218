"""ObjectStore: the media originals in any S3-compatible store, through boto3 (issue 40;
docs/decisions/0137).

boto3 is synchronous; every call runs in a worker thread (`asyncio.to_thread`) so the
event loop never waits on the store. The client is built from S3Config (qim/config/s3.py: QIM_S3_*
variables: endpoint, bucket, region, access key, secret key), path-style addressing (a
bucket in the path works with every S3-compatible server, a bucket in the host name
needs DNS), signature v4, and checksums only where S3 requires them: boto3's default
CRC32 trailer (aws-chunked uploads) is not implemented by every S3-compatible server.

Errors: a missing object is ObjectMissing; any other store failure is EngineError with
the operation and S3's error code (never the credentials).
"""

from __future__ import annotations

import asyncio
from typing import Any, Optional

import boto3
import botocore.config
import botocore.exceptions

from qim.config.s3 import S3Config
from qim.errors import EngineError

__all__ = ["ObjectMissing", "ObjectStore", "S3Config"]


class ObjectMissing(Exception):
    """No object under that key (S3 NoSuchKey / 404)."""


def _code(exc: botocore.exceptions.ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", "unknown"))


class ObjectStore:
    """One bucket of an S3-compatible store (module doc). Keys are chosen by the caller
    (the MediaService: random, nothing from the client). Every method is a coroutine."""

    def __init__(self, config: S3Config) -> None:
        self.config = config
        self.bucket = config.bucket
        self._s3: Any = boto3.session.Session().client(
            "s3",
            endpoint_url=config.endpoint or None,
            region_name=config.region,
            aws_access_key_id=config.access_key or None,
            aws_secret_access_key=config.secret_key or None,
            config=botocore.config.Config(
                s3={"addressing_style": "path"},
                signature_version="s3v4",
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required",
                retries={"max_attempts": 3, "mode": "standard"},
                connect_timeout=5,
                read_timeout=30,
            ),
        )

    async def _call(self, op: str, **kw: Any) -> Any:
        try:
            return await asyncio.to_thread(getattr(self._s3, op), **kw)
        except botocore.exceptions.ClientError as exc:
            if _code(exc) in ("NoSuchKey", "404", "NotFound", "NoSuchUpload"):
                raise ObjectMissing(f"{op}: {_code(exc)}") from None
            raise EngineError(f"object store {op} failed: {_code(exc)}") from None
        except botocore.exceptions.BotoCoreError as exc:
            raise EngineError(f"object store {op} failed: {type(exc).__name__}: {exc}") from None

    async def ping(self) -> None:
        """One HEAD of the bucket: EngineError (or ObjectMissing: no bucket) when the store
        does not answer as it should."""
        await self._call("head_bucket", Bucket=self.bucket)

    async def ensure_bucket(self) -> None:
        """Create the bucket unless it exists (development and tests; production creates it)."""
        try:
            await self._call("head_bucket", Bucket=self.bucket)
        except (ObjectMissing, EngineError):
            try:
                await self._call("create_bucket", Bucket=self.bucket)
            except EngineError as exc:
                if "BucketAlreadyOwnedByYou" not in str(exc):
                    raise

    async def put(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> None:
        """Store `data` under `key` (replacing any object there)."""
        await self._call("put_object", Bucket=self.bucket, Key=key, Body=data, ContentType=content_type)

    async def get(self, key: str, first: Optional[int] = None, last: Optional[int] = None) -> bytes:
        """The object's bytes, or bytes first..last inclusive (an HTTP byte range)."""
        kw: dict[str, Any] = {"Bucket": self.bucket, "Key": key}
        if first is not None:
            kw["Range"] = f"bytes={first}-{'' if last is None else last}"
        obj = await self._call("get_object", **kw)
        return await asyncio.to_thread(obj["Body"].read)

    async def size(self, key: str) -> int:
        """The object's size in bytes; ObjectMissing when there is none."""
        return int((await self._call("head_object", Bucket=self.bucket, Key=key))["ContentLength"])

    async def delete(self, key: str) -> None:
        """Delete the object (no error when it is already gone, as S3 answers)."""
        await self._call("delete_object", Bucket=self.bucket, Key=key)

    async def keys(self, prefix: str = "") -> list[str]:
        """Every key under `prefix`, in S3's order (paged through)."""
        return [k for k, _ in await self.listing(prefix)]

    async def listing(self, prefix: str = "") -> list[tuple[str, int]]:
        """(key, last modified in ms since the epoch) of every object under `prefix`."""
        out: list[tuple[str, int]] = []
        token: Optional[str] = None
        while True:
            kw: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix}
            if token:
                kw["ContinuationToken"] = token
            page = await self._call("list_objects_v2", **kw)
            out.extend((o["Key"], int(o["LastModified"].timestamp() * 1000)) for o in page.get("Contents", []))
            if not page.get("IsTruncated"):
                return out
            token = page["NextContinuationToken"]

    # --- multipart: large files uploaded by the device straight to the store --------
    async def create_multipart(self, key: str, content_type: str = "application/octet-stream") -> str:
        """Start a multipart upload; its UploadId."""
        return str(
            (await self._call("create_multipart_upload", Bucket=self.bucket, Key=key, ContentType=content_type))[
                "UploadId"
            ]
        )

    def presign_part(self, key: str, upload_id: str, part: int, expires_s: int = 900) -> str:
        """A URL a device PUTs part `part` (1..10000) to, valid `expires_s` seconds
        (signed locally: no round trip)."""
        return str(
            self._s3.generate_presigned_url(
                "upload_part",
                Params={"Bucket": self.bucket, "Key": key, "UploadId": upload_id, "PartNumber": part},
                ExpiresIn=expires_s,
            )
        )

    async def parts(self, key: str, upload_id: str) -> list[dict[str, Any]]:
        """The parts received so far: [{"PartNumber", "ETag", "Size"}] (a resumed upload
        sends only the others)."""
        page = await self._call("list_parts", Bucket=self.bucket, Key=key, UploadId=upload_id)
        return [{"PartNumber": p["PartNumber"], "ETag": p["ETag"], "Size": p["Size"]} for p in page.get("Parts", [])]

    async def complete_multipart(self, key: str, upload_id: str, parts: list[dict[str, Any]]) -> None:
        """Join `parts` ([{"PartNumber", "ETag"}], ascending) into the object."""
        await self._call(
            "complete_multipart_upload",
            Bucket=self.bucket,
            Key=key,
            UploadId=upload_id,
            MultipartUpload={"Parts": [{"PartNumber": p["PartNumber"], "ETag": p["ETag"]} for p in parts]},
        )

    async def abort_multipart(self, key: str, upload_id: str) -> None:
        """Drop an unfinished upload and its parts."""
        await self._call("abort_multipart_upload", Bucket=self.bucket, Key=key, UploadId=upload_id)
