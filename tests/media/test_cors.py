"""CORS on the MediaService (docs/decisions/0146; issue 40: the web page reaches the
service from its own origin) on real engines (s3proxy, Redis): with
QIM_MEDIA_CORS_ORIGINS naming the page's origin, a preflight of an upload (POST with
Authorization, Content-Type and the declarations) and of a ranged download (GET with
Range) from that origin is allowed, and the actual answers (a 201, a refusal with its
reason, a ranged 206) carry Access-Control-Allow-Origin and expose Content-Range and
Content-Length; another origin's preflight gets a 403 and its requests no CORS header, nor do
/healthz and /metrics; without the variable no CORS header is served at all. A bad
origin in the variable stops the configuration with the variable named."""

from __future__ import annotations

import asyncio

import pytest

from qim.config.env import Env
from qim.config.media import MediaConfig
from qim.errors import ConfigError
from tests.media.helpers import declared, photo_with_gps, running_media, token

PAGE = "http://127.0.0.1:8088"
OTHER = "http://evil.example:8088"
UPLOAD_HEADERS = "authorization,content-type,x-qim-size,x-qim-sha256"


def preflight(method: str, origin: str, headers: str) -> dict[str, str]:
    """The headers of a browser's preflight for `method` with `headers` from `origin`."""
    return {"Origin": origin, "Access-Control-Request-Method": method, "Access-Control-Request-Headers": headers}


def test_the_allowed_origin_passes_and_another_gets_no_cors_headers(media_env) -> None:
    env, key = media_env
    env = {**env, "QIM_MEDIA_CORS_ORIGINS": f"{PAGE}, http://localhost:8088"}
    photo = photo_with_gps()

    async def run() -> None:
        async with running_media(env) as (node, http, base):
            async with http.options(
                f"{base}/v1/media?name=a.jpg", headers=preflight("POST", PAGE, UPLOAD_HEADERS)
            ) as r:
                assert r.status == 200, await r.text()
                assert r.headers["Access-Control-Allow-Origin"] == PAGE
                assert "POST" in r.headers["Access-Control-Allow-Methods"]
                allowed = {h.strip().lower() for h in r.headers["Access-Control-Allow-Headers"].split(",")}
                assert allowed == set(UPLOAD_HEADERS.split(","))
                assert "Access-Control-Allow-Credentials" not in r.headers  # a bearer token, never a cookie
            where = f"{base}/v1/media/{'ab' * 16}?conversation={'00' * 16}&message={'00' * 16}"
            async with http.options(where, headers=preflight("GET", PAGE, "authorization,range")) as r:
                assert r.status == 200 and r.headers["Access-Control-Allow-Origin"] == PAGE, await r.text()
            for url, method, asked in ((f"{base}/v1/media", "POST", UPLOAD_HEADERS), (where, "GET", "range")):
                async with http.options(url, headers=preflight(method, OTHER, asked)) as r:
                    assert r.status == 403 and not any(h.startswith("Access-Control-") for h in r.headers), r.headers

            # the actual upload: its 201 and a refusal both readable by the page (the reason shown)
            head = {**token(key, 1001), **declared(photo, "image/jpeg"), "Origin": PAGE}
            async with http.post(f"{base}/v1/media?name=a.jpg", data=photo, headers=head) as r:
                assert r.status == 201, await r.text()
                assert r.headers["Access-Control-Allow-Origin"] == PAGE and "Origin" in r.headers["Vary"]
                media_id = (await r.json())["media_id"]
            async with http.post(f"{base}/v1/media?name=a/b.jpg", data=photo, headers=head) as r:
                assert r.status == 400 and r.headers["Access-Control-Allow-Origin"] == PAGE
                assert "name" in await r.text()
            async with http.post(f"{base}/v1/media?name=a.jpg", data=photo, headers={**head, "Origin": OTHER}) as r:
                # the service still answers (CORS is the browser's rule), but with nothing a browser lets the page read
                assert r.status == 201 and "Access-Control-Allow-Origin" not in r.headers
            # a download's answer (here a refusal of all-zero ids: 400, once a 500) exposes the range headers
            async with http.get(
                where.replace("ab" * 16, media_id), headers={**token(key, 1001), "Origin": PAGE, "Range": "bytes=0-9"}
            ) as r:
                assert r.status == 400 and "not all zero" in await r.text()
                assert r.headers["Access-Control-Allow-Origin"] == PAGE
                exposed = {h.strip() for h in r.headers["Access-Control-Expose-Headers"].split(",")}
                assert {"Content-Range", "Content-Length"} <= exposed
            for path in ("/healthz", "/metrics"):
                async with http.get(base + path, headers={"Origin": PAGE}) as r:
                    assert r.status == 200 and "Access-Control-Allow-Origin" not in r.headers

    asyncio.run(run())


def test_no_cors_without_the_variable(media_env) -> None:
    env, key = media_env

    async def run() -> None:
        async with running_media(env) as (_, http, base):
            async with http.options(f"{base}/v1/media", headers=preflight("POST", PAGE, UPLOAD_HEADERS)) as r:
                assert r.status == 405 and "Access-Control-Allow-Origin" not in r.headers
            async with http.post(f"{base}/v1/media", data=b"x", headers={**token(key, 1001), "Origin": PAGE}) as r:
                assert r.status == 400 and "Access-Control-Allow-Origin" not in r.headers

    asyncio.run(run())


def test_origins_are_exact_and_a_bad_one_is_refused_naming_the_variable(media_env) -> None:
    env, _ = media_env
    config = MediaConfig.from_env(Env({**env, "QIM_MEDIA_CORS_ORIGINS": f" {PAGE} ,HTTPS://Chat.Example.com,{PAGE}"}))
    assert config.cors_origins == (PAGE, "https://chat.example.com")
    assert MediaConfig.from_env(Env(env)).cors_origins == ()
    for bad in ("*", "http://page.example/", "http://page.example/app", "page.example", "ftp://x", "null"):
        with pytest.raises(ConfigError, match="QIM_MEDIA_CORS_ORIGINS"):
            MediaConfig.from_env(Env({**env, "QIM_MEDIA_CORS_ORIGINS": f"{PAGE},{bad}"}))
