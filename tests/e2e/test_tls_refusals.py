"""Every refusal of issue 15 against the real stack (its processes run with the
development certificates of qim/dev/certs.py, as `make up` does):

- the client port: plaintext, a TLS 1.2 client, a client without ALPN qim/1 and a client
  that does not trust the gateway's CA (the SDK: TlsError, tried once) are refused, and
  the gateway counts each (qim_tls_handshake_failures_total{listener="client", reason});
- internal RPC: a mailbox certificate calling WRITER_SEND or WRITER_ADMIN and a gateway
  certificate calling WRITER_ADMIN get FORBIDDEN (qim_rpc_refused_total on the writer);
  a client without a certificate, or in plaintext, is refused at the handshake; PUSH_BATCH
  from anything but a mailbox certificate is dropped by the gateway's push listener;
- qimctl with another service's certificate is refused (exit 1), without one it stops
  with one line naming the options (exit 2).
"""

from __future__ import annotations

import asyncio
import os
import ssl
import subprocess
import sys

import pytest

from qim.dev.certs import DevCa
from qim.errors import ErrorCode, RequestError
from qim.net.framed import FramedStream, open_framed, parse_addr
from qim.net.rpc import RemoteError
from qim.proto.v1 import connection_pb2, internal_pb2
from qim.protocol import Opcode
from qim.sdk import Client, TlsError
from qim.wire.devtoken import issue_dev_token
from tests.e2e.rawclient import RawClient
from tests.e2e.tlsmetrics import eventually, handshake_failures, refused, speaking_as


def writer_addr(stack) -> str:
    return stack.env["QIM_WRITER_ADDRS"].split(",")[0]


async def closes_without_a_frame(reader: asyncio.StreamReader) -> bool:
    try:
        return await asyncio.wait_for(reader.read(), 10) == b""
    except (ConnectionError, OSError):  # a reset is a close too
        return True


async def test_plaintext_to_the_client_port_is_refused_and_counted(stack):
    before = handshake_failures(stack, "gateway", listener="client", reason="plaintext")
    reader, writer = await asyncio.open_connection(*parse_addr(stack.gateway_addr))
    token = issue_dev_token(stack.token_key, 0, 4_200_001, 1)
    FramedStream(reader, writer).send(Opcode.AUTH, 1, connection_pb2.Auth(token=token).SerializeToString())
    assert await closes_without_a_frame(reader)  # no AUTH_OK, no ERROR: the handshake failed
    await eventually(lambda: handshake_failures(stack, "gateway", listener="client", reason="plaintext")
                     == before + 1, what="plaintext counted")
    writer.close()


async def test_tls12_and_no_alpn_are_refused_at_the_client_port(stack):
    host, port = parse_addr(stack.gateway_addr)
    version = handshake_failures(stack, "gateway", listener="client", reason="version")
    alpn = handshake_failures(stack, "gateway", listener="client", reason="alpn")
    tls12 = ssl.create_default_context(cafile=stack.ca_file)
    tls12.maximum_version = ssl.TLSVersion.TLSv1_2
    with pytest.raises((ssl.SSLError, ConnectionError)):
        await asyncio.open_connection(host, port, ssl=tls12, server_hostname=host)
    plain_tls = ssl.create_default_context(cafile=stack.ca_file)  # TLS 1.3 without ALPN qim/1
    reader, writer = await asyncio.open_connection(host, port, ssl=plain_tls, server_hostname=host)
    assert await closes_without_a_frame(reader)
    writer.close()
    await eventually(lambda: handshake_failures(stack, "gateway", listener="client", reason="version") == version + 1
                     and handshake_failures(stack, "gateway", listener="client", reason="alpn") == alpn + 1,
                     what="version and alpn counted")


async def test_the_sdk_refuses_a_gateway_it_does_not_trust_once(stack, tmp_path):
    other = tmp_path / "other-ca.crt"
    other.write_bytes(DevCa.create("not the stack's CA").pem())
    before = handshake_failures(stack, "gateway", listener="client")
    token = issue_dev_token(stack.token_key, 0, 4_200_002, 1)
    c = await Client.open(stack.gateway_addr, token, data_dir=str(tmp_path), ca_file=str(other))
    with pytest.raises(TlsError, match="certificate verify failed"):
        await c.connect()
    await asyncio.sleep(1.0)  # long enough for a few reconnects, had there been any
    assert handshake_failures(stack, "gateway", listener="client") == before + 1
    await c.close()
    # the same client with the stack's CA gets in
    c = await Client.open(stack.gateway_addr, token, data_dir=str(tmp_path), ca_file=stack.ca_file)
    await c.connect()
    await c.close()


async def test_services_calling_outside_their_allow_list_get_forbidden(stack):
    addr = writer_addr(stack)
    send_mailbox = refused(stack, "writer", "WRITER_SEND", "mailbox")
    admin_mailbox = refused(stack, "writer", "WRITER_ADMIN", "mailbox")
    admin_gateway = refused(stack, "writer", "WRITER_ADMIN", "gateway")
    admin = internal_pb2.AdminRequest(tenant_id=bytes(16)).SerializeToString()
    mailbox = speaking_as(stack, "mailbox", addr, expect="writer")
    for opcode in (Opcode.WRITER_SEND, Opcode.WRITER_ADMIN):
        with pytest.raises(RemoteError) as err:
            await mailbox.call(opcode, admin)
        assert err.value.code == ErrorCode.FORBIDDEN, err.value
    gateway = speaking_as(stack, "gateway", addr, expect="writer")
    with pytest.raises(RemoteError) as err:
        await gateway.call(Opcode.WRITER_ADMIN, admin)
    assert err.value.code == ErrorCode.FORBIDDEN and "may not call WRITER_ADMIN" in err.value.message
    qimctl = speaking_as(stack, "qimctl", addr, expect="writer")
    with pytest.raises(RemoteError) as err:  # allowed through: the writer itself judges the empty request
        await qimctl.call(Opcode.WRITER_ADMIN, admin)
    assert err.value.code != ErrorCode.FORBIDDEN
    assert refused(stack, "writer", "WRITER_SEND", "mailbox") == send_mailbox + 1
    assert refused(stack, "writer", "WRITER_ADMIN", "mailbox") == admin_mailbox + 1
    assert refused(stack, "writer", "WRITER_ADMIN", "gateway") == admin_gateway + 1
    for c in (mailbox, gateway, qimctl):
        await c.close()


async def test_no_certificate_or_plaintext_on_an_internal_port_is_refused(stack):
    host, port = parse_addr(writer_addr(stack))
    cert = handshake_failures(stack, "writer", listener="rpc", reason="certificate")
    plain = handshake_failures(stack, "writer", listener="rpc", reason="plaintext")
    bare = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # trusts the CA, presents nothing
    bare.check_hostname = False
    bare.load_verify_locations(stack.ca_file)
    stream = await open_framed(host, port, tls=bare)
    stream.send(Opcode.WRITER_SEND, 1, b"")
    try:
        assert await asyncio.wait_for(stream.read_frame(), 10) is None
    except (ConnectionError, OSError):
        pass  # the alert: certificate required
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(b"".join([b"QI\x01\x00", bytes(16)]))
    assert await closes_without_a_frame(reader)
    writer.close()
    await eventually(lambda: handshake_failures(stack, "writer", listener="rpc", reason="certificate") == cert + 1
                     and handshake_failures(stack, "writer", listener="rpc", reason="plaintext") == plain + 1,
                     what="certificate and plaintext counted on the writer")


async def test_push_batches_only_from_mailbox_certificates(stack):
    push = stack.env["QIM_GATEWAY_PUSH_ADDR"]
    before = refused(stack, "gateway", "PUSH_BATCH", "writer")
    fake = speaking_as(stack, "writer", push, expect="gateway")  # a writer posing as mailbox node 0
    await fake.connect()
    fake.send_oneway(Opcode.PUSH_BATCH, internal_pb2.PushBatch(hello=True, node_id="mailbox@fake", shards=[0],
                                                               wake_all=True).SerializeToString())
    await eventually(lambda: refused(stack, "gateway", "PUSH_BATCH", "writer") == before + 1,
                     what="the gateway dropped the frame")
    await fake.close()
    # the real push path is untouched: a message still reaches an online device
    a, b = await RawClient.login(stack, 4_200_011), await RawClient.login(stack, 4_200_012)
    op, _ = await a.send_text(4_200_012, b"pushed over mutual TLS")
    assert op == Opcode.SEND_ACK
    for _ in range(100):
        if b.pushes:
            break
        await b.request(Opcode.PING, b"")
        await asyncio.sleep(0.05)
    assert b.pushes and b.pushes[0][0] == Opcode.PUSH_EVENTS
    await a.close()
    await b.close()


def qimctl(stack, *args: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("QIM_")}
    return subprocess.run([sys.executable, "-m", "qim.cli.qimctl", *args], env={**base, **env},
                          capture_output=True, text=True, timeout=60)


async def test_qimctl_is_refused_with_another_services_certificate_and_says_what_it_lacks(stack):
    args = ("membership", "add", "--group", "42", "--user", "7", "--writer", writer_addr(stack))
    gw = stack.tls_files("gateway")
    done = qimctl(stack, *args, "--tls-cert", gw.cert, "--tls-key", gw.key, **stack.client_env())
    assert done.returncode == 1 and "refused: FORBIDDEN" in done.stdout, done.stdout + done.stderr
    bare = qimctl(stack, *args)  # nothing sourced: no CA, no certificate
    assert bare.returncode == 2 and bare.stderr.count("\n") == 1 and "Traceback" not in bare.stderr
    assert "--ca-file, --tls-cert, --tls-key required" in bare.stderr
    ok = qimctl(stack, *args, **stack.client_env())  # with stack.env: through, the writer decides
    assert "FORBIDDEN" not in ok.stdout and ok.returncode in (0, 1), ok.stdout + ok.stderr


async def test_a_writer_address_that_is_not_a_writer_is_not_trusted(stack):
    mailbox_addr = stack.env["QIM_MAILBOX_ADDRS"].split(",")[0]
    client = speaking_as(stack, "gateway", mailbox_addr, expect="writer")
    with pytest.raises(RequestError, match="certificate of service 'mailbox', not 'writer'"):
        await client.call(Opcode.WRITER_SEND, b"")
    await client.close()


def test_qim_desktop_without_the_ca_says_so_in_one_line(stack, tmp_path):
    base = {k: v for k, v in os.environ.items() if not k.startswith("QIM_")}
    done = subprocess.run([sys.executable, "-m", "qim.desktop.cli", "--endpoint", stack.gateway_addr, "--user", "5",
                           "--key", stack.token_key, "--data-dir", str(tmp_path)], env=base, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert "certificate verify failed" in done.stderr and "--ca-file" in done.stderr
