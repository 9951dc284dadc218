"""Tokens in production, on real processes (the supervised `ops_stack`): revocation
(`qimctl token revoke` cuts the device within REVOKE_WITHIN_S, its token is refused at
reconnect, the app is told why, another device of the user stays), keys from a JWKS
document rotated by kid, and a token refreshed on the live connection before it expires
(no disconnect). The three run concurrently (one wall-clock wait for all)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import time

import pytest

from qim.net.framed import FramedStream
from qim.proto.v1 import common_pb2, connection_pb2
from qim.protocol import Opcode
from qim.sdk import events as ev
from qim.wire.devtoken import issue_dev_token
from qim.wire.jwks import jwk_of
from qim.wire.tokens import SigningKey, issue_token
from tests.e2e.rawclient import RawClient, open_raw
from tests.e2e.sdkclient import client

REVOKE_WITHIN_S = 5.0
JWKS_WITHIN_S = 12.0  # a refresh every 5 s, at once on an unknown kid (at most every 5 s)
TTL_S = 14  # the refresh test's token lifetime: the SDK refreshes at half of it (7 s)


async def _auth(st, token: str) -> tuple[int, object]:
    """(reply opcode, parsed reply) of one AUTH on a new raw connection (closed after)."""
    reader, writer = await open_raw(st)
    stream = FramedStream(reader, writer)
    try:
        stream.send(Opcode.AUTH, 1, connection_pb2.Auth(token=token).SerializeToString())
        item = await asyncio.wait_for(stream.read_frame(), 10)
        assert item is not None, "closed without an answer"
        op, _, body = item
        return op, (connection_pb2.AuthOk if op == Opcode.AUTH_OK else common_pb2.Error).FromString(body)
    finally:
        stream.abort()


async def _eventually(check, within: float, what: str):
    end = time.monotonic() + within
    while True:
        got = await check()
        if got:
            return got
        assert time.monotonic() < end, what
        await asyncio.sleep(0.2)


async def revocation(st, tmp_path) -> None:
    user = 8_800_001
    app = await client(st, tmp_path, user, device=1)
    other = await RawClient.login(st, user, device=2)
    token = app.runtime.tokens.token
    try:
        await app.connect()
        assert app.runtime.state == "ready"
        env = {**os.environ, "QIM_REDIS_ADDR": st.engines.env()["QIM_REDIS_ADDR"]}
        r = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "qim.cli.qimctl", "token", "revoke",
                                                     "--user", str(user), "--device", "1"],
                                    env=env, capture_output=True, text=True, timeout=60)
        # the clock starts when the revocation is in effect (recorded and published: qimctl
        # returned), not at the start of a Python process that takes seconds to import on a
        # loaded machine
        t0 = time.monotonic()
        assert r.returncode == 0 and "1 gateway(s) notified" in r.stdout, r.stdout + r.stderr

        async def cut():
            return app.runtime.state == "kicked"

        await _eventually(cut, REVOKE_WITHIN_S, "the revoked device was not cut in time")
        assert time.monotonic() - t0 < REVOKE_WITHIN_S
        # what the app is told: the state and the event name the reason
        states = [e for e in app.told.of(ev.ConnectionState) if e.state == "kicked"]
        assert states and states[-1].reason == "REVOKED"
        assert [k.reason for k in app.told.of(ev.KickedEvent)] == [connection_pb2.Kicked.REVOKED]
        # the other device of the user is not touched
        assert (await other.request(Opcode.PING, b""))[0] == Opcode.PONG
        # refused at reconnect, with its reason
        op, err = await _auth(st, token)
        assert op == Opcode.ERROR and err.code == common_pb2.UNAUTHENTICATED and "revoked" in err.message
        await asyncio.sleep(1.1)  # a token issued after the cutoff second is a new sign-in
        op, _ = await _auth(st, issue_dev_token(st.token_key, 0, user, 1))
        assert op == Opcode.AUTH_OK
    finally:
        await app.close()
        await other.close()


def _jwks_token(key: SigningKey, kid: str, user: int) -> str:
    return issue_token(dataclasses.replace(key, kid=kid), 0, user, 1, audience="qim", issuer="qim-dev", ttl_s=600)


async def jwks_rotation(st) -> None:
    user = 8_800_101
    old, new = st.jwks_key, SigningKey.generate("ES256")
    assert (await _auth(st, _jwks_token(old, "ops-a", user)))[0] == Opcode.AUTH_OK
    st.jwks_path.write_text(json.dumps({"keys": [jwk_of(old.verify_key(), "ops-a"), jwk_of(new.verify_key(), "ops-b")]}))

    async def new_accepted():
        return (await _auth(st, _jwks_token(new, "ops-b", user)))[0] == Opcode.AUTH_OK

    await _eventually(new_accepted, JWKS_WITHIN_S, "the gateway did not take the new kid from the JWKS")
    st.jwks_path.write_text(json.dumps({"keys": [jwk_of(new.verify_key(), "ops-b")]}))

    async def old_refused():
        op, err = await _auth(st, _jwks_token(old, "ops-a", user))
        return op == Opcode.ERROR and "kid" in err.message

    await _eventually(old_refused, JWKS_WITHIN_S, "the old kid is still trusted after it left the JWKS")
    assert (await _auth(st, issue_dev_token(st.token_key, 0, user, 2)))[0] == Opcode.AUTH_OK  # file keys stay


async def live_refresh(st, tmp_path) -> None:
    user = 8_800_201
    calls = []

    def provider() -> str:
        calls.append(time.time())
        return issue_dev_token(st.token_key, 0, user, 1, ttl_s=TTL_S)

    app = await client(st, tmp_path, user, device=1, token_provider=provider)
    app.runtime.tokens.update(issue_dev_token(st.token_key, 0, user, 1, ttl_s=TTL_S))
    peer = await RawClient.login(st, user + 1, device=1)
    try:
        await app.connect()
        first = app.runtime.core.conn
        await asyncio.sleep(TTL_S + 3)  # past the first token's exp (no leeway on this gateway)
        assert calls, "the SDK never asked its provider for a fresh token"
        assert app.runtime.core.conn is first and first is not None and first.is_open and app.runtime.state == "ready"
        assert not app.told.of(ev.Disconnected), app.told.of(ev.Disconnected)
        op, _ = await peer.send_text(user, b"still here")
        assert op == Opcode.SEND_ACK
    finally:
        await app.close()
        await peer.close()


async def test_revocation_jwks_rotation_and_live_refresh(ops_stack, tmp_path):
    await asyncio.gather(revocation(ops_stack, tmp_path), jwks_rotation(ops_stack), live_refresh(ops_stack, tmp_path))


@pytest.mark.parametrize("doc, needle", [
    ('{"keys": [{"kty": "OKP", "crv": "Ed25519", "x": "AAAA", "d": "AAAA", "kid": "k"}]}', "private key material"),
    ('{"keys": []}', "no Ed25519 or P-256"),
    ('[1, 2]', "not a JWKS document"),
])
def test_a_bad_jwks_document_is_refused_whole(doc, needle):
    from qim.wire.jwks import parse_jwks

    with pytest.raises(ValueError, match=needle):
        parse_jwks(doc)
