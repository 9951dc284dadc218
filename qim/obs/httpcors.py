"""CORS on a node's device routes: a web page served from another origin may call them
(docs/decisions/0146; docs/operations.md "QIM_MEDIA_CORS_ORIGINS").

An explicit allowlist of origins (`scheme://host[:port]`, compared as strings, never a
wildcard): a request whose Origin is on it gets `Access-Control-Allow-Origin: <origin>`
(no credentials: the routes take a bearer token, never a cookie) and the response
headers a client must read (Content-Range, Content-Length, ...); a preflight (OPTIONS)
from it is answered with the methods of that path and the request headers the clients
send (Authorization, Content-Type, Range and QIM's declarations). Any other origin gets
no CORS header at all (its preflight a 403), so the browser refuses the page the answer.
An empty allowlist serves no CORS: the default. /metrics and /healthz never take part.

The protocol itself is aiohttp-cors's (aio-libs; it implements the Fetch standard's
preflight and response rules), configured here.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterable

from qim.errors import ConfigError

if TYPE_CHECKING:
    from aiohttp import web

# what the clients send: the bearer token, a declared type, a range, an upload's declarations
ALLOW_HEADERS = ("Authorization", "Content-Type", "Range", "X-QIM-Size", "X-QIM-SHA256")
# what a client reads besides the safelisted ones: a range answer's extent, the download's name
EXPOSE_HEADERS = ("Content-Range", "Content-Length", "Accept-Ranges", "ETag", "Content-Disposition")
MAX_AGE_S = 600  # how long a browser may keep a preflight's answer
_ORIGIN = re.compile(r"https?://[a-z0-9.\-]+(:[0-9]{1,5})?|https?://\[[0-9a-f:.]+\](:[0-9]{1,5})?")


def parse_origins(raw: str, variable: str) -> tuple[str, ...]:
    """The comma-separated origins of `raw` ("" = none), lower-cased, each
    `http(s)://host[:port]` with no path, no trailing slash and no wildcard (a browser
    sends exactly that form in Origin, and CORS compares strings); ConfigError naming
    `variable` and the bad item otherwise."""
    origins = []
    for item in (x.strip() for x in raw.split(",")):
        if not item:
            continue
        if not _ORIGIN.fullmatch(item.lower()):
            raise ConfigError(
                f"{variable}: {item!r} is not an origin: give scheme://host[:port] with no path or "
                "trailing slash, e.g. https://chat.example.com (no wildcard: the allowlist is explicit)"
            )
        origins.append(item.lower())
    return tuple(dict.fromkeys(origins))


def enable_cors(app: web.Application, origins: Iterable[str], skip: Iterable[str] = ()) -> None:
    """Serve CORS for `origins` on every route of `app` except the paths in `skip`
    (module doc); nothing at all for no origins. Call after the routes are added."""
    allowed = tuple(origins)
    if not allowed:
        return
    # imported here: qim.config reads the allowlist (parse_origins) in every process, also
    # where the `server` extra is not installed (the wheel's plain install, an SDK app)
    import aiohttp_cors

    options = aiohttp_cors.ResourceOptions(
        allow_credentials=False, expose_headers=EXPOSE_HEADERS, allow_headers=ALLOW_HEADERS, max_age=MAX_AGE_S
    )
    cors = aiohttp_cors.setup(app, defaults={o: options for o in allowed})
    skipped = set(skip)
    for route in list(app.router.routes()):
        if route.resource is not None and route.resource.canonical not in skipped:
            cors.add(route)

    async def vary(request: web.Request, response: web.StreamResponse) -> None:
        # the answer depends on Origin: a cache must not give one origin's answer to another
        if request.headers.get("Origin") and "Origin" not in response.headers.get("Vary", ""):
            response.headers.add("Vary", "Origin")

    app.on_response_prepare.append(vary)
