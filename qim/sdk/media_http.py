"""The MediaService nodes one client may use, and moving to the next when one fails
(issue 40; docs/sdk.md "Media"; docs/decisions/0147).

An app gives one base URL or several (`client.media_urls = [...]`, or `client.media_url`
/ $QIM_MEDIA_URL as one string "http://a:9111,http://b:9111"), in order of preference.
MediaService nodes are stateless (uploads are recorded in Redis, objects in the store), so
every request may go to any of them. A request that cannot reach its node (refused,
reset, no answer within SOCK_READ_S) or gets 502/503/504 goes to the next node; after
each failure the client waits a jittered, doubling delay (RETRY_START_S … RETRY_CAP_S,
uniform ½-1½ of it, as the gateway reconnects do: qim/sdk/reconnect.py) and gives up
after `budget_s` seconds without an answer with MediaUnavailable (a MediaRefused of
status 503 that names the upload to resume, when there is one). Any other status is the
service's refusal: MediaRefused at once, never retried.
"""

from __future__ import annotations

import asyncio
import random
import ssl
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence, Union

from qim.proto.v1.media_pb2 import MediaRef

Progress = Callable[[int, int], None]  # (bytes sent, bytes in all)
RETRY_START_S, RETRY_CAP_S, RETRY_BUDGET_S = 0.1, 5.0, 120.0
SOCK_CONNECT_S, SOCK_READ_S = 10.0, 60.0  # a node that accepts and then says nothing is a failed node
TRANSIENT = (502, 503, 504)
MediaUrls = Union[str, Sequence[str]]


class MediaRefused(Exception):
    """The MediaService refused an upload or a download: `status` (HTTP) and `reason`
    (its one-line explanation, safe to show)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"{status}: {reason}")
        self.status, self.reason = status, reason


class MediaUnavailable(MediaRefused):
    """No MediaService node (nor the object store) answered within the retry budget:
    status 503; `upload` is the upload id to resume later ("" when none was started)."""

    def __init__(self, reason: str, upload: str = "") -> None:
        super().__init__(503, reason + (f"; resume upload {upload} later" if upload else ""))
        self.upload = upload


@dataclass(frozen=True)
class Uploaded:
    """The MediaService's answer: `ref` (the signed MediaRef, sent as the MEDIA body) and
    `body` (its serialized bytes)."""

    ref: MediaRef
    body: bytes


def aiohttp_module() -> Any:
    """aiohttp, or RuntimeError saying how to install it."""
    try:
        import aiohttp
    except ImportError:
        raise RuntimeError("media needs aiohttp: pip install 'qim[server]' (or aiohttp)") from None
    return aiohttp


def parse_media_urls(urls: MediaUrls) -> tuple[str, ...]:
    """The base URLs of `urls` (one string, possibly comma-separated, or a sequence), in
    order, without a trailing slash. ValueError for none, one that is not http(s):// or
    one listed twice."""
    items = urls.split(",") if isinstance(urls, str) else list(urls)
    out = tuple(u.strip().rstrip("/") for u in items if u and u.strip())
    if not out:
        raise ValueError("set client.media_url (or media_urls) to the MediaService's address first")
    for u in out:
        if not u.startswith(("http://", "https://")):
            raise ValueError(f"media URL {u!r} is not http:// or https://")
    if len(set(out)) != len(out):
        raise ValueError("a media URL is listed twice")
    return out


def jittered(delay: float) -> float:
    """`delay` spread uniformly over ½-1½ of it (many clients cut at once do not come back at once)."""
    return delay * (0.5 + random.random())


class Patience:
    """Bounded jittered backoff (module doc): `wait(exc)` sleeps before the next attempt,
    or raises MediaUnavailable (from `exc`) once `budget_s` seconds passed since the
    first failure after the last `progress()`."""

    def __init__(self, budget_s: float = RETRY_BUDGET_S, upload: str = "") -> None:
        self.budget_s, self.upload = budget_s, upload
        self.delay, self.began = RETRY_START_S, None  # type: float, Optional[float]
        self.failures = 0

    def progress(self) -> None:
        """Something got through: the next failure starts a new budget."""
        self.delay, self.began = RETRY_START_S, None

    async def wait(self, exc: BaseException, what: str) -> None:
        """Sleep before retrying `what`, or MediaUnavailable when the budget is spent."""
        now = time.monotonic()
        self.began = now if self.began is None else self.began
        self.failures += 1
        pause = jittered(self.delay)
        if now + pause - self.began > self.budget_s:
            raise MediaUnavailable(
                f"{what} failed for {self.budget_s:.0f} s ({exc.__class__.__name__})", self.upload
            ) from exc
        await asyncio.sleep(pause)
        self.delay = min(self.delay * 2, RETRY_CAP_S)


class MediaNodes:
    """The MediaService base URLs of one client (module doc) and which one is current;
    `ssl_context` verifies https ones (None: the system's CAs)."""

    def __init__(
        self, urls: MediaUrls, ssl_context: Optional[ssl.SSLContext] = None, budget_s: float = RETRY_BUDGET_S
    ) -> None:
        self.urls = parse_media_urls(urls)
        self.ssl_context, self.budget_s = ssl_context, budget_s
        self._at = 0
        self.moves = 0  # how many times a request went on to another node

    @property
    def current(self) -> str:
        """The base URL requests go to first."""
        return self.urls[self._at]

    def session(self) -> Any:
        """An aiohttp ClientSession with this module's timeouts (no total: a 200 MB part may take minutes)."""
        aiohttp = aiohttp_module()
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=SOCK_CONNECT_S, sock_read=SOCK_READ_S)
        return aiohttp.ClientSession(timeout=timeout)

    async def request(
        self,
        http: Any,
        method: str,
        path: str,
        ok: Sequence[int],
        *,
        read: str = "json",
        patience: Optional[Patience] = None,
        body: Optional[Callable[[], Any]] = None,
        **kw: Any,
    ) -> tuple[int, Any]:
        """(status, answer) of `method path` on the current node, moving on to the next
        one after a failure (module doc); `read` is "json" or "bytes"; `body()` makes the
        request body afresh for each attempt (a stream is spent by a failed one).
        MediaRefused for a status outside `ok` that is not transient; MediaUnavailable
        when patience runs out."""
        aiohttp = aiohttp_module()
        patience = patience or Patience(self.budget_s)
        tls = self.ssl_context if self.ssl_context is not None else True
        while True:
            url = self.current + path
            try:
                fresh = {"data": body()} if body is not None else {}
                async with http.request(method, url, ssl=tls, **kw, **fresh) as r:
                    if r.status in ok:
                        return r.status, await (r.json() if read == "json" else r.read())
                    text = (await r.text()).strip()[:500]
                    if r.status not in TRANSIENT:
                        raise MediaRefused(r.status, text)
                    failure: BaseException = MediaRefused(r.status, text)
            except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, asyncio.TimeoutError) as exc:
                failure = exc
            if len(self.urls) > 1:
                self._at = (self._at + 1) % len(self.urls)
                self.moves += 1
            await patience.wait(failure, f"{method} {path.split('?')[0]}")
