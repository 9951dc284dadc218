"""qim-web: the development server of the QIM web client (web/, docs/sdk.md "qim-js").

Serves the built page (web/dist, made by `make web-build`), `/config.json` (the
WebSocket address of every gateway, in order: `gateways`; the first also as `gateway`;
the `deployment` the page's store is named after, so the page fails over without
becoming a new device (docs/decisions/0082): $QIM_DEPLOYMENT when set, the name the
development stack keeps when its gateway's port moves (0150), else the first gateway's
URL) and, when a development token key
is configured, `POST /api/dev-token` {"user", "device", "name"} → {"token"}: a token
signed with the development key exactly as `qimctl token` signs one (1 h). Ids travel
as decimal strings (64-bit values never pass through a JSON number). Loopback only:
it refuses to bind another address, since it hands out tokens. Bad input gets a 400
with a one-line {"error"}; nothing is logged about tokens. With Web Push configured
(QIM_PUSH_VAPID_PRIVATE_KEY_FILE, the NotificationService's key, docs/operations.md
"Push providers"), /config.json also carries `vapidPublicKey`, the base64url public
point the page subscribes with (docs/decisions/0143); the page's service worker is
web/dist/sw.js, served at /sw.js so its scope is the page.

Config: --gateway-ws, one URL or several comma-separated (else $QIM_GATEWAY_WS_ADDRS,
else $QIM_GATEWAY_WS_ADDR), --port (else $QIM_WEB_PORT, else 8088),
--dist (else web/dist of the checkout), $QIM_DEV_TOKEN_KEY (the key's path; without
it the page takes pasted tokens only), $QIM_DEV_TENANT (tenant of issued tokens, 0),
$QIM_MEDIA_URL (the MediaService's base URL, handed to the page as `media` in
/config.json: the page uploads and downloads media there by CORS, decision 0146).
"""

from __future__ import annotations

import argparse
import base64
import inspect
import ipaddress
import json
import logging
import mimetypes
import os
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Optional

from qim.errors import ConfigError
from qim.wire.devtoken import issue_dev_token

log = logging.getLogger("qim.web")
DEFAULT_PORT = 8088
DIST = Path(__file__).resolve().parents[2] / "web" / "dist"
U63_MAX = (1 << 63) - 1
MAX_REQUEST_BYTES = 4096
NAME_MAX_CHARS = 64


class BadRequest(ValueError):
    """A request qim-web refuses with 400 and this message."""


def _u63(value: object, what: str) -> int:
    """A decimal string (or int) in 1..2^63-1; BadRequest otherwise."""
    text = str(value)
    if not text.isdigit() or len(text) > 19 or not 0 < int(text) <= U63_MAX:
        raise BadRequest(f"{what} must be a decimal id in 1..2^63-1")
    return int(text)


def token_for(key: str, tenant: int, request: dict) -> str:
    """A development token for the request's user, device and display name (the `name`
    claim when the token library takes one). BadRequest for bad ids or a long name."""
    user = _u63(request.get("user"), "user")
    device = _u63(request.get("device"), "device")
    name = str(request.get("name") or "")
    if len(name) > NAME_MAX_CHARS:
        raise BadRequest(f"name longer than {NAME_MAX_CHARS} characters")
    params = inspect.signature(issue_dev_token).parameters
    for keyword in ("name", "display_name"):  # the `name` claim, when the token library takes one
        if name and keyword in params:
            issue: Any = issue_dev_token  # the keyword is checked above, not by mypy
            return str(issue(key, tenant, user, device, **{keyword: name}))
    return issue_dev_token(key, tenant, user, device)


def vapid_public_key(pem: str) -> str:
    """The base64url (unpadded) uncompressed point of a VAPID P-256 private key in PEM:
    the `applicationServerKey` a page subscribes with. ConfigError when it is not one."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    try:
        key = serialization.load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError) as exc:
        raise ConfigError("the VAPID private key is not a PEM key without a password") from exc
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
        raise ConfigError("the VAPID private key is not a P-256 key")
    raw = key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def make_handler(dist: Path, config: dict, tokens: Optional[Callable[[dict], str]]) -> type:
    """The request handler class serving `dist`, `config` and (when given) tokens."""

    class Handler(BaseHTTPRequestHandler):
        """GET files and /config.json; POST /api/dev-token."""

        server_version = "qim-web"

        def log_message(self, fmt: str, *args: object) -> None:
            log.debug("%s %s", self.command, self.path.split("?")[0])

        def _send(self, status: int, body: bytes, ctype: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: int, obj: dict) -> None:
            self._send(status, json.dumps(obj).encode(), "application/json")

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            """Static files of the page (index.html for /), and /config.json."""
            path = self.path.split("?")[0]
            if path == "/config.json":
                self._json(HTTPStatus.OK, config)
                return
            root = dist.resolve()
            target = (root / (path.lstrip("/") or "index.html")).resolve()
            if root not in target.parents or not target.is_file():  # no way out of dist
                self._json(HTTPStatus.NOT_FOUND, {"error": "not found"})
                return
            ctype = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
            self._send(HTTPStatus.OK, target.read_bytes(), ctype)

        def do_POST(self) -> None:  # noqa: N802
            """POST /api/dev-token."""
            if self.path != "/api/dev-token" or tokens is None:
                self._json(HTTPStatus.NOT_FOUND, {"error": "no development tokens here (QIM_DEV_TOKEN_KEY unset)"})
                return
            try:
                size = int(self.headers.get("Content-Length") or 0)
                if not 0 < size <= MAX_REQUEST_BYTES:
                    raise BadRequest("a JSON body of at most 4 KiB is required")
                request = json.loads(self.rfile.read(size))
                if not isinstance(request, dict):
                    raise BadRequest("the body must be a JSON object")
                self._json(HTTPStatus.OK, {"token": tokens(request)})
            except (ValueError, UnicodeDecodeError) as exc:  # BadRequest, bad JSON, a name the token refuses
                self._json(HTTPStatus.BAD_REQUEST, {"error": str(exc).splitlines()[0]})

    return Handler


def gateway_urls(value: str) -> list[str]:
    """The WebSocket URLs of a comma-separated list; ValueError naming a bad one or none."""
    urls = [u.strip() for u in value.split(",") if u.strip()]
    if not urls:
        raise ValueError("no gateway WebSocket URL given")
    for url in urls:
        if not url.startswith(("ws://", "wss://")):
            raise ValueError(f"{url!r} is not a ws:// or wss:// URL")
    return urls


def serve(host: str, port: int, dist: Path, gateway_ws: str, key: Optional[str],
          tenant: int = 0, vapid_public: str = "", media_url: str = "",
          deployment: str = "") -> ThreadingHTTPServer:
    """Start qim-web in a thread; returns the server (`.server_address`, `.shutdown()`).
    `gateway_ws`: one ws:// or wss:// URL or several comma-separated; `vapid_public`: the
    VAPID public key /config.json hands the page ("" = no Web Push); `media_url`: the
    MediaService's base URL the page uploads to ("" = no media; it must allow this page's
    origin, QIM_MEDIA_CORS_ORIGINS: decision 0146); `deployment`: the name the page's
    store is kept under ("" = the first gateway's URL). ValueError for a
    non-loopback host, a missing dist directory or a URL that is not ws:// or wss://."""
    if not ipaddress.ip_address(host).is_loopback:
        raise ValueError(f"qim-web serves loopback only, not {host}")
    if not (dist / "index.html").is_file():
        raise ValueError(f"{dist}/index.html is missing: run `make web-build` first")
    tokens = (lambda req: token_for(key, tenant, req)) if key else None
    gateways = gateway_urls(gateway_ws)
    config = {"gateway": gateways[0], "gateways": gateways, "deployment": deployment.strip() or gateways[0],
              "devTokens": tokens is not None}
    if vapid_public:
        config["vapidPublicKey"] = vapid_public
    if media_url:
        if not media_url.startswith(("http://", "https://")):
            raise ValueError(f"media URL {media_url!r} is not http:// or https://")
        config["media"] = media_url.rstrip("/")
    httpd = ThreadingHTTPServer((host, port), make_handler(dist, config, tokens))
    threading.Thread(target=httpd.serve_forever, name="qim-web", daemon=True).start()
    return httpd


def main(argv: Optional[list[str]] = None) -> int:
    """Entry point `qim-web`: serve until interrupted; exit 2 with one line on bad config."""
    p = argparse.ArgumentParser(prog="qim-web", description="development server of the QIM web client")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=int(os.environ.get("QIM_WEB_PORT") or DEFAULT_PORT))
    p.add_argument("--dist", type=Path, default=DIST)
    p.add_argument("--gateway-ws", default=os.environ.get("QIM_GATEWAY_WS_ADDRS") or os.environ.get(
        "QIM_GATEWAY_WS_ADDR", ""), help="every gateway's WebSocket URL, comma-separated, in order "
                                         "(default $QIM_GATEWAY_WS_ADDRS, else $QIM_GATEWAY_WS_ADDR)")
    args = p.parse_args(argv)
    try:
        gateway_urls(args.gateway_ws)
    except ValueError as exc:
        print(f"qim-web: --gateway-ws (or $QIM_GATEWAY_WS_ADDRS): {exc}: give ws:// or wss:// URLs", file=sys.stderr)
        return 2
    try:
        vapid_file = (os.environ.get("QIM_PUSH_VAPID_PRIVATE_KEY_FILE") or "").strip()
        vapid = vapid_public_key(Path(vapid_file).read_text()) if vapid_file else ""
        httpd = serve(args.host, args.port, args.dist, args.gateway_ws, os.environ.get("QIM_DEV_TOKEN_KEY"),
                      int(os.environ.get("QIM_DEV_TENANT") or 0), vapid, os.environ.get("QIM_MEDIA_URL") or "",
                      os.environ.get("QIM_DEPLOYMENT") or "")
    except (ValueError, OSError, ConfigError) as exc:
        print(f"qim-web: {exc}", file=sys.stderr)
        return 2
    host, port = str(httpd.server_address[0]), int(httpd.server_address[1])
    print(f"qim-web: http://{host}:{port}/ (gateways {args.gateway_ws})", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        httpd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
