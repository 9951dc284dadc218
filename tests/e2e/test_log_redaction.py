"""No token, message body or key bytes in any log at any level (docs/design.md §2
"Logs never contain tokens, keys, cursor signatures or message bodies").

A private stack with every service at DEBUG (and a low send rate, so RATE_LIMITED is
exercised too) is driven through valid and refused AUTHs, sends with distinctive bodies
(text and binary), a recall, a conflicting retry, bad requests and rate refusals; this
test's own SDK logging is captured at DEBUG as well. Then every service log and the
captured SDK log are searched for each token, each token's signature, the body markers
and the private keys (PEM, base64 lines, raw bytes in hex and base64): none may appear.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import secrets
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives import serialization

from qim._core import ids
from qim.dev.devkeys import dev_token_key
from qim.errors import ErrorCode
from qim.proto.v1 import common_pb2, connection_pb2, message_pb2
from qim.protocol import SERVER_INITIATED_OPCODES, Opcode
from qim.sdk import Client, ServerError
from qim.wire.devtoken import issue_dev_token, load_dev_key
from qim.wire.tokens import SigningKey
from tests.e2e.test_tokens_auth import gateway_stream, refused_tokens, transport, try_auth
from tests.fixtures import running_stack
from tests.sdk.realstack import eventually, users

SERVICES_AT_DEBUG = {"QIM_LOG_LEVEL": "DEBUG", "QIM_RATE_USER_PER_S": "20", "QIM_RATE_USER_BURST": "3"}


def key_material(key: SigningKey) -> list[str]:
    """Every form a private key could take in a log line."""
    pem = key.private_pem().decode()
    lines = [line for line in pem.splitlines() if line and not line.startswith("-----")]
    raw = key.private.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                    serialization.NoEncryption()) if key.alg == "EdDSA" else b""
    forms = [pem, *lines]
    if raw:
        forms += [raw.hex(), base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode().rstrip("=")]
    return forms


async def replies(s, rids: set[int]) -> dict[int, tuple[int, bytes]]:
    """The reply (opcode, body) to each request id in `rids`, in any order. Frames the
    server sends by itself (this device's own sends come back as PUSH_EVENTS) are
    skipped: they answer no request."""
    got: dict[int, tuple[int, bytes]] = {}
    while set(got) != rids:
        op, rid, body = await asyncio.wait_for(s.read_frame(), 15)
        if op not in SERVER_INITIATED_OPCODES:
            assert rid in rids and rid not in got, (op, rid)
            got[rid] = (op, body)
    return got


async def raw_requests(stack, me: int, peer: int, marker: bytes) -> None:
    """A conflicting retry, bad requests and a burst over the rate, on one raw connection."""
    s = await gateway_stream(stack)
    s.send(Opcode.AUTH, 1, connection_pb2.Auth(token=issue_dev_token(stack.token_key, 0, me, 9)).SerializeToString())
    assert (await asyncio.wait_for(s.read_frame(), 10))[0] == Opcode.AUTH_OK
    conv = ids.conversation_id_direct(0, me, peer)
    cmid = os.urandom(16)
    frames = [
        (Opcode.SEND_MESSAGE, message_pb2.SendMessage(client_message_id=cmid, conversation_id=conv,
                                                      recipient_user_id=peer, body=marker + b" first")),
        (Opcode.SEND_MESSAGE, message_pb2.SendMessage(client_message_id=cmid, conversation_id=conv,
                                                      recipient_user_id=peer, body=marker + b" conflict")),
        (Opcode.SEND_MESSAGE, message_pb2.SendMessage(client_message_id=os.urandom(16), conversation_id=b"\0" * 16,
                                                      recipient_user_id=peer, body=marker + b" bad conversation")),
    ]
    codes = []
    for rid, (op, msg) in enumerate(frames, 10):
        s.send(op, rid, msg.SerializeToString())
        reply_op, body = (await replies(s, {rid}))[rid]
        codes.append(ErrorCode(common_pb2.Error.FromString(body).code).name if reply_op == Opcode.ERROR else "OK")
    s.send(Opcode.SEND_MESSAGE, 20, b"\xff" + marker)  # garbage Protobuf carrying the marker
    for rid in range(30, 36):  # over the rate
        s.send(Opcode.SEND_MESSAGE, rid, message_pb2.SendMessage(
            client_message_id=os.urandom(16), conversation_id=conv, recipient_user_id=peer,
            body=marker + b" burst").SerializeToString())
    for op, body in (await replies(s, {20, *range(30, 36)})).values():
        if op == Opcode.ERROR:
            codes.append(ErrorCode(common_pb2.Error.FromString(body).code).name)
    s.abort()
    assert "CONFLICT" in codes and "INVALID_ARGUMENT" in codes and "RATE_LIMITED" in codes, codes


async def test_no_token_body_or_key_bytes_in_any_log(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    dev_token_key(tmp_path / "stack")
    other = SigningKey.generate()
    with running_stack(tmp_path, extra_env=SERVICES_AT_DEBUG) as stack:
        dev = load_dev_key(stack.token_key)
        a, b, c = users(3)
        marker = f"BODYMARK{secrets.token_hex(6)}"
        binary_marker = secrets.token_bytes(12)
        tokens = [issue_dev_token(dev, 0, a, 1), issue_dev_token(dev, 0, b, 1)]
        tokens += refused_tokens(dev, c).values()
        tokens.append(issue_dev_token(other, 0, c, 1))
        tokens.append(f"TOKENMARK{secrets.token_hex(6)}.not.a.jwt")
        for bad in tokens[2:]:
            op, _, _ = await try_auth(stack, bad)
            assert op == Opcode.ERROR
        ca = await Client.open(stack.gateway_addr, tokens[0], data_dir=str(tmp_path / "a"), **transport(stack))
        cb = await Client.open(stack.gateway_addr, tokens[1], data_dir=str(tmp_path / "b"), **transport(stack))
        try:
            await ca.connect()
            await cb.connect()
            chat = await ca.open_direct(b)
            ack = await ca.send_text(chat.conversation_id, f"{marker} text 你好")
            await ca.send_custom(chat.conversation_id, "bin", binary_marker * 100)
            await ca.send(chat.conversation_id, marker.encode() * 2000)  # past the inline budget: referenced
            await eventually(lambda: len(cb.store.messages(chat.conversation_id)) == 3, timeout=30,
                             what="delivered")
            await ca.recall(chat.conversation_id, ack.message_id)
            with pytest.raises(ServerError):
                await cb.recall(chat.conversation_id, ack.message_id)  # not b's message
            await raw_requests(stack, a, b, marker.encode())
        finally:
            await ca.close()
            await cb.close()
    logs = {p.name: p.read_bytes() for p in (Path(stack.dir) / "logs").glob("*.log")}
    assert {"gateway.log", "writer.log", "mailbox.log", "session.log", "fanout.log"} <= set(logs), sorted(logs)
    assert any(b" DEBUG " in text for text in logs.values()), "services did not log at DEBUG"
    assert b"refused: expired" in logs["gateway.log"]  # the refusals were logged (by reason)
    logs["sdk (caplog)"] = caplog.text.encode()
    secrets_ = {"body marker": marker.encode(), "binary body marker": binary_marker,
                "binary body marker (hex)": binary_marker.hex().encode()}
    for i, tok in enumerate(tokens):
        secrets_[f"token {i}"] = tok.encode()
        if tok.count(".") == 2:
            secrets_[f"token {i} signature"] = tok.rsplit(".", 1)[1].encode()
            secrets_[f"token {i} header+claims"] = tok.rsplit(".", 1)[0].encode()
    for key_name, key in (("dev key", dev), ("other key", other)):
        for j, form in enumerate(key_material(key)):
            secrets_[f"{key_name} form {j}"] = form.encode()
    found = [f"{what} in {name}" for name, text in logs.items() for what, needle in secrets_.items()
             if len(needle) >= 8 and needle in text]
    assert not found, found
    assert jwt.get_unverified_header(tokens[0])["kid"] == dev.kid
