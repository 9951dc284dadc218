"""Signed expiring tokens through the real gateway (docs/protocol.md AUTH,
docs/decisions/0021-tokens-and-limits.md): every refusal is ERROR(UNAUTHENTICATED) and a
close, counted by reason in the gateway's /metrics; `qimctl token` signs with the
development key only; a session ends with its token and the SDK carries on with a fresh
one from its token provider. Helpers here are shared by the other token/limit tests."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import jwt

from qim.errors import ErrorCode
from qim.net.framed import open_framed, parse_addr
from qim.proto.v1 import common_pb2, connection_pb2
from qim.protocol import Opcode
from qim.sdk import Client, credentials
from qim.wire.devtoken import issue_dev_token, load_dev_key
from qim.wire.tokens import SigningKey, issue_token, token_expiry
from tests.e2e.rawclient import client_tls, sdk_transport
from tests.sdk.realstack import eventually, users

BIN = Path(sys.executable).parent


transport = sdk_transport  # Client.open keywords for this stack's gateway (TLS with its CA)


async def gateway_stream(stack):
    """A raw framed stream to the gateway's client port (TLS with the stack's CA)."""
    return await open_framed(*parse_addr(stack.gateway_addr), tls=client_tls(stack))


async def try_auth(stack, token: str):
    """(reply opcode, Error or None, closed afterwards?) of one AUTH on a new connection."""
    stream = await gateway_stream(stack)
    stream.send(Opcode.AUTH, 3, connection_pb2.Auth(token=token).SerializeToString())
    op, rid, body = await asyncio.wait_for(stream.read_frame(), 10)
    assert rid == 3
    try:
        closed = await asyncio.wait_for(stream.read_frame(), 3) is None
    except asyncio.TimeoutError:
        closed = False
    except ConnectionError:
        closed = True
    stream.abort()
    return op, (common_pb2.Error.FromString(body) if op == Opcode.ERROR else None), closed


def metric(stack, name: str, label: str = "", service: str = "gateway") -> float:
    """Sum of a metric's samples (those whose labels contain `label`) on /metrics."""
    text = urllib.request.urlopen(f"http://{stack.metrics[service]}/metrics", timeout=3).read().decode()
    return sum(float(v) for v in re.findall(rf"^{name}(?:\{{[^}}]*{label}[^}}]*\}})? (\S+)$", text, re.M))


def hs256_with_public_key(key: SigningKey, claims: dict) -> str:
    """Algorithm confusion: an HS256 token keyed with the PUBLIC key's PEM (made by hand:
    PyJWT refuses to)."""
    b64 = jwt.utils.base64url_encode
    signing_input = (b64(json.dumps({"alg": "HS256", "kid": key.kid, "typ": "JWT"}).encode()) + b"."
                     + b64(json.dumps(claims).encode()))
    mac = hmac.new(key.verify_key().public_pem(), signing_input, hashlib.sha256).digest()
    return (signing_input + b"." + b64(mac)).decode()


def refused_tokens(dev: SigningKey, user: int) -> dict[str, str]:
    """reason -> a token the gateway must refuse for that reason."""
    now = int(time.time())
    stranger = SigningKey.generate()
    claims = jwt.decode(issue_dev_token(dev, 0, user, 1), options={"verify_signature": False})
    return {
        "expired": issue_dev_token(dev, 0, user, 1, ttl_s=60, now=now - 3600),
        "not_yet_valid": issue_token(dev, 0, user, 1, audience="qim", issuer="qim-dev", ttl_s=600, now=now,
                                     not_before=now + 300),
        "signature": jwt.encode(claims, stranger.private, algorithm="EdDSA", headers={"kid": dev.kid}),
        "unknown_kid": issue_dev_token(stranger, 0, user, 1),
        "audience": issue_dev_token(dev, 0, user, 1, audience="another-deployment"),
        "algorithm": jwt.encode(claims, None, algorithm="none", headers={"kid": dev.kid}),
        "tenant": issue_dev_token(dev, 7, user, 1),
        "lifetime": issue_dev_token(dev, 0, user, 1, ttl_s=30 * 86_400),
    }


async def test_every_bad_token_is_refused_with_unauthenticated_closed_and_counted(stack):
    dev = load_dev_key(stack.token_key)
    (user,) = users(1)
    cases = refused_tokens(dev, user)
    cases["hs256_confusion"] = hs256_with_public_key(dev, jwt.decode(issue_dev_token(dev, 0, user, 1),
                                                                     options={"verify_signature": False}))
    before = {r: metric(stack, "qim_gateway_auth_refused_total", f'reason="{r}"') for r in
              [*cases, "algorithm"]}
    for name, token in cases.items():
        op, err, closed = await try_auth(stack, token)
        assert op == Opcode.ERROR and ErrorCode(err.code) == ErrorCode.UNAUTHENTICATED, name
        assert err.request_opcode == Opcode.AUTH and closed, f"{name}: not closed after the refusal"
    for reason in cases:
        expected = 2 if reason == "algorithm" else 1  # alg none and the HS256 confusion
        if reason == "hs256_confusion":
            continue
        got = metric(stack, "qim_gateway_auth_refused_total", f'reason="{reason}"') - before[reason]
        assert got == expected, (reason, got)
    op, _, closed = await try_auth(stack, issue_dev_token(dev, 0, user, 1))
    assert op == Opcode.AUTH_OK and not closed


def qimctl(*args: str, env_extra=None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QIM_")}
    env.update(env_extra or {})
    return subprocess.run([str(BIN / "qimctl"), *args], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL, timeout=60)


async def test_qimctl_token_signs_with_the_dev_key_only_and_honours_ttl(stack):
    no_key = qimctl("token", "--user", "5", "--device", "1")
    assert no_key.returncode == 2 and no_key.stdout == "" and "Traceback" not in no_key.stderr
    assert no_key.stderr.count("\n") == 1 and "QIM_DEV_TOKEN_KEY" in no_key.stderr
    assert qimctl("token", "--user", "5", "--device", "1", "--ttl", "0",
                  env_extra={"QIM_DEV_TOKEN_KEY": stack.token_key}).returncode == 2
    (user,) = users(1)
    made = qimctl("token", "--user", str(user), "--device", "4", "--ttl", "120",
                  env_extra={"QIM_DEV_TOKEN_KEY": stack.token_key})
    assert made.returncode == 0 and made.stderr == "", made.stderr
    token = made.stdout.strip()
    assert token_expiry(token) - time.time() <= 120
    assert jwt.get_unverified_header(token)["kid"] == load_dev_key(stack.token_key).kid
    op, _, _ = await try_auth(stack, token)
    assert op == Opcode.AUTH_OK


async def test_a_session_ends_with_its_token_and_the_sdk_goes_on_with_a_fresh_one(stack, tmp_path, monkeypatch):
    monkeypatch.setattr(credentials, "REFRESH_MARGIN_S", 0.0)  # use the 2 s token, do not refresh it early
    a, b = users(2)
    calls: list[int] = []

    def fresh() -> str:
        calls.append(1)
        return issue_dev_token(stack.token_key, 0, a, 1)

    kicks = metric(stack, "qim_gateway_token_expired_kicks_total")
    short = issue_dev_token(stack.token_key, 0, a, 1, ttl_s=2)  # the gateway adds its 5 s leeway
    c = await Client.open(stack.gateway_addr, short, data_dir=str(tmp_path / "a"), token_provider=fresh,
                          **transport(stack))
    try:
        await c.connect()
        first = c.runtime.core.conn
        assert calls == []
        await eventually(lambda: c.runtime.core.conn is not first and c.connected, timeout=30,
                         what="reconnected after KICKED{TOKEN_EXPIRED}")
        assert calls, "the token provider was not asked"
        assert metric(stack, "qim_gateway_token_expired_kicks_total") - kicks >= 1
        chat = await c.open_direct(b)
        ack = await c.send_text(chat.conversation_id, "after the refresh")
        assert ack.conversation_seq >= 1
    finally:
        await c.close()
