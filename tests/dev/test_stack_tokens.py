"""`qim-dev stack up` passes token-key settings to the gateway (issue 33 item 10), so the
rotations of docs/operations.md "Tokens and keys" can be tried on the development stack:
a second PEM key beside the development key, a JWKS document whose new kid is taken
without a restart; the settings survive a plain `stack up` again; a bad key file is one
line and exit 2. Real engines (no Cassandra) and services, started through the CLI."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import time

from qim.dev.stack import Stack
from qim.net.framed import FramedStream
from qim.proto.v1 import connection_pb2
from qim.protocol import Opcode
from qim.wire.devtoken import issue_dev_token
from qim.wire.jwks import jwk_of
from qim.wire.tokens import SigningKey, issue_token
from tests.e2e.rawclient import open_raw

ENV = {**os.environ, "QIM_DEV_WITH_CASSANDRA": "0"}


def _cli(*args, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "qim.dev.cli", *map(str, args)], env=ENV,
                          capture_output=True, text=True, timeout=timeout)


def _token(key: SigningKey, kid: str, user: int) -> str:
    return issue_token(dataclasses.replace(key, kid=kid), 0, user, 1, audience="qim", issuer="qim-dev", ttl_s=600)


def _auth_op(st, token: str) -> int:
    async def go() -> int:
        reader, writer = await open_raw(st)
        stream = FramedStream(reader, writer)
        try:
            stream.send(Opcode.AUTH, 1, connection_pb2.Auth(token=token).SerializeToString())
            item = await asyncio.wait_for(stream.read_frame(), 10)
            assert item is not None
            return item[0]
        finally:
            stream.abort()

    return asyncio.run(go())


def test_stack_up_takes_token_keys_and_a_jwks_rotation_works(tmp_path):
    sd, ed = tmp_path / "stack", tmp_path / "engines"
    dirs = ("--dir", sd, "--engines-dir", ed)
    pem_key, old, new = SigningKey.generate(), SigningKey.generate(), SigningKey.generate("ES256")
    pub = tmp_path / "second.pub.pem"
    pub.write_bytes(pem_key.verify_key().public_pem())
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [jwk_of(old.verify_key(), "dev-a")]}))
    bad = tmp_path / "not-a-key.pem"
    bad.write_text("hello\n")
    try:
        refused = _cli("stack", "up", *dirs, "--token-public-keys", bad)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
        assert refused.stderr.startswith("qim-dev: error: --token-public-keys"), refused.stderr

        up = _cli("stack", "up", *dirs, "--token-public-keys", pub, "--token-jwks", jwks,
                  "--token-jwks-refresh-s", 5)
        assert up.returncode == 0, up.stderr
        st = Stack.load(sd)
        assert st is not None
        assert _auth_op(st, issue_dev_token(st.token_key, 0, 77_001, 1)) == Opcode.AUTH_OK  # the development key
        assert _auth_op(st, _token(pem_key, pem_key.kid, 77_002)) == Opcode.AUTH_OK  # the second PEM key
        assert _auth_op(st, _token(old, "dev-a", 77_003)) == Opcode.AUTH_OK  # the JWKS key

        # rotation by kid (docs/operations.md): publish the new key, no restart
        jwks.write_text(json.dumps({"keys": [jwk_of(old.verify_key(), "dev-a"), jwk_of(new.verify_key(), "dev-b")]}))
        deadline = time.monotonic() + 30
        while _auth_op(st, _token(new, "dev-b", 77_004)) != Opcode.AUTH_OK:
            assert time.monotonic() < deadline, "the gateway never took the new kid from the JWKS"
            time.sleep(0.5)

        # `stack up` again without the flags keeps them (and the running stack)
        again = _cli("stack", "up", *dirs)
        assert again.returncode == 0 and "stack already up" in again.stdout, again.stdout + again.stderr
        assert Stack.load(sd).pids == st.pids
    finally:
        _cli("stack", "down", "--dir", sd)
        _cli("engines", "down", "--dir", ed)
