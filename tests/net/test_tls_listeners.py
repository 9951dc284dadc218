"""TLS on ServiceNode listeners and the RPC client (qim/net/tls.py, qim/net/allow.py,
qim/obs/node.py), over loopback with the development certificates, no engines:
every refusal the listeners make is counted by reason, the allow-list answers FORBIDDEN
with the request's id (one-way frames are dropped), the client checks which service it
reached, and a reload (SIGHUP) applies to new connections only."""

from __future__ import annotations

import asyncio
import shutil
import ssl
from pathlib import Path

import pytest
from cryptography import x509

from qim.dev.certs import CLIENT_PORT, DevCa, ensure_dev_pki
from qim.errors import ErrorCode, RequestError
from qim.net.framed import FramedStream, open_framed
from qim.net.rpc import RemoteError, RpcClient
from qim.net.tls import ALPN, TlsContexts, TlsFiles, client_port_context
from qim.obs.node import ServiceNode
from qim.protocol import Opcode


class Node(ServiceNode):
    service = "writer"

    def __init__(self, files: TlsFiles, alpn=None) -> None:
        super().__init__("127.0.0.1:0")
        self.tls = self.tls_contexts(files, "internal", "QIM_INTERNAL_*", alpn=alpn)
        self.oneway: list[tuple[int, bytes]] = []

    async def handle(self, opcode: int, body: bytes) -> tuple[int, bytes]:
        return Opcode.SEND_ACK, b"ok:" + body

    async def on_oneway(self, opcode: int, body: bytes) -> None:
        self.oneway.append((opcode, body))

    def failures_of(self, listener: str, reason: str) -> float:
        return self.metrics_base.value("qim_tls_handshake_failures_total", {"listener": listener, "reason": reason})

    def refused(self, opcode: str, peer: str) -> float:
        return self.metrics_base.value("qim_rpc_refused_total", {"opcode": opcode, "peer_service": peer})


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return ensure_dev_pki(tmp_path_factory.mktemp("tls"))


@pytest.fixture
async def writer_node(pki):
    node = Node(pki.files("writer"))
    await node.start()
    server = await node.serve_rpc("127.0.0.1:0", node.handle, 8, on_oneway=node.on_oneway, tls=node.tls)
    node.addr = "127.0.0.1:%d" % server.sockets[0].getsockname()[1]
    yield node
    await node.stop()


def client_as(pki, service: str, addr: str, expect: str = "writer") -> RpcClient:
    return RpcClient(addr, tls=TlsContexts(pki.files(service)), expect_service=expect)


async def eventually(check, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


async def test_the_allow_list_answers_forbidden_with_the_request_id_and_counts(pki, writer_node):
    gateway = client_as(pki, "gateway", writer_node.addr)
    assert await gateway.call(Opcode.WRITER_SEND, b"x") == (Opcode.SEND_ACK, b"ok:x")
    with pytest.raises(RemoteError) as err:  # a gateway may not call the admin plane
        await gateway.call(Opcode.WRITER_ADMIN, b"x")
    assert err.value.code == ErrorCode.FORBIDDEN and "gateway may not call WRITER_ADMIN" in err.value.message
    mailbox = client_as(pki, "mailbox", writer_node.addr)
    for opcode in (Opcode.WRITER_SEND, Opcode.WRITER_ADMIN):  # a mailbox may not commit, nor administer
        with pytest.raises(RemoteError) as err:
            await mailbox.call(opcode, b"x")
        assert err.value.code == ErrorCode.FORBIDDEN
    qimctl = client_as(pki, "qimctl", writer_node.addr)
    assert await qimctl.call(Opcode.WRITER_ADMIN, b"y") == (Opcode.SEND_ACK, b"ok:y")
    assert writer_node.refused("WRITER_ADMIN", "gateway") == 1
    assert writer_node.refused("WRITER_SEND", "mailbox") == 1 and writer_node.refused("WRITER_ADMIN", "mailbox") == 1
    # a refused one-way frame is dropped, counted; an allowed one reaches the handler
    await mailbox.connect()
    mailbox.send_oneway(Opcode.WRITER_SEND, b"dropped")
    mailbox.send_oneway(Opcode.PROJECTION, b"taken")
    await eventually(lambda: writer_node.oneway == [(Opcode.PROJECTION, b"taken")])
    assert writer_node.refused("WRITER_SEND", "mailbox") == 2
    # an opcode outside the table is refused to everyone (fail closed)
    with pytest.raises(RemoteError) as err:
        await qimctl.call(0x7F7F, b"")
    assert err.value.code == ErrorCode.FORBIDDEN and writer_node.refused("other", "qimctl") == 1
    for c in (gateway, mailbox, qimctl):
        await c.close()


async def test_no_certificate_plaintext_and_a_foreign_ca_are_refused_at_the_handshake(pki, writer_node, tmp_path):
    host, port = writer_node.addr.split(":")
    # a TLS client without a certificate: TLS 1.3 lets it finish its side; the server refuses it
    bare = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    bare.check_hostname = False
    bare.load_verify_locations(pki.ca_file)
    stream = await open_framed(host, int(port), tls=bare)
    stream.send(Opcode.WRITER_SEND, 1, b"x")
    assert await asyncio.wait_for(_read_or_close(stream), 5) is None
    await eventually(lambda: writer_node.failures_of("rpc", "certificate") == 1)
    # plaintext
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"QI" + bytes(18))
    assert await asyncio.wait_for(reader.read(), 5) == b""
    await eventually(lambda: writer_node.failures_of("rpc", "plaintext") == 1)
    # a certificate that says "gateway", issued by another CA
    other = DevCa.create("not ours")
    other.issue("gateway", tmp_path / "fake.crt", tmp_path / "fake.key")
    fake = RpcClient(writer_node.addr, tls=TlsContexts(TlsFiles(str(tmp_path / "fake.crt"), str(tmp_path / "fake.key"),
                                                                pki.ca_file)))
    with pytest.raises(RequestError) as err:
        await fake.call(Opcode.WRITER_SEND, b"x", timeout=5)
    assert err.value.code == ErrorCode.UNAVAILABLE
    await eventually(lambda: writer_node.failures_of("rpc", "certificate") == 2)
    writer.close()
    await fake.close()


async def _read_or_close(stream: FramedStream):
    try:
        return await stream.read_frame()
    except (ConnectionError, OSError):
        return None


async def test_a_silent_client_is_cut_at_the_handshake_timeout(pki):
    node = Node(pki.files("writer"))
    await node.start()

    async def never(reader, writer):
        raise AssertionError("a connection without a handshake reached the protocol")

    server = await node.listen("127.0.0.1:0", never, tls=node.tls, name="slow", handshake_timeout=0.3)
    reader, writer = await asyncio.open_connection(*server.sockets[0].getsockname()[:2])
    assert await asyncio.wait_for(reader.read(), 5) == b""
    await eventually(lambda: node.failures_of("slow", "timeout") == 1)
    writer.close()
    await node.stop()


async def test_the_client_checks_which_service_it_reached(pki, writer_node):
    lost = client_as(pki, "gateway", writer_node.addr, expect="mailbox")
    with pytest.raises(RequestError) as err:
        await lost.call(Opcode.MAILBOX_PULL, b"")
    assert err.value.code == ErrorCode.UNAVAILABLE
    assert "presented the certificate of service 'writer', not 'mailbox'" in err.value.message
    await lost.close()


async def test_the_client_port_takes_only_tls13_with_alpn_qim1(pki):
    node = Node(pki.files(CLIENT_PORT), alpn=ALPN)
    await node.start()
    served: list[str] = []

    async def serve(reader, writer):
        served.append("x")
        writer.write(b"hello")
        await writer.drain()
        writer.close()

    server = await node.listen("127.0.0.1:0", serve, tls=node.tls, name="client")
    host, port = server.sockets[0].getsockname()[:2]
    tls12 = ssl.create_default_context(cafile=pki.ca_file)
    tls12.maximum_version = ssl.TLSVersion.TLSv1_2
    with pytest.raises((ssl.SSLError, ConnectionError)):
        await asyncio.open_connection(host, port, ssl=tls12, server_hostname=host)
    no_alpn = ssl.create_default_context(cafile=pki.ca_file)  # TLS 1.3, but no ALPN offered
    reader, writer = await asyncio.open_connection(host, port, ssl=no_alpn, server_hostname=host)
    assert await asyncio.wait_for(_read_all(reader), 5) == b""
    writer.close()
    reader, writer = await asyncio.open_connection(host, port, ssl=client_port_context(pki.ca_file),
                                                   server_hostname=host)
    assert await asyncio.wait_for(_read_all(reader), 5) == b"hello"
    writer.close()
    assert served == ["x"]  # only the TLS 1.3 + qim/1 connection reached the protocol
    await eventually(lambda: node.failures_of("client", "version") == 1 and node.failures_of("client", "alpn") == 1)
    await node.stop()


async def _read_all(reader: asyncio.StreamReader) -> bytes:
    try:
        return await reader.read()
    except (ConnectionError, OSError):
        return b""


async def test_reload_applies_to_new_connections_and_a_bad_file_keeps_the_old(pki, tmp_path):
    d = tmp_path / "live"
    d.mkdir()
    for suffix in ("crt", "key"):
        shutil.copy(pki.files("writer").cert[:-3] + suffix, d / f"writer.{suffix}")
    files = TlsFiles(str(d / "writer.crt"), str(d / "writer.key"), pki.ca_file)
    node = Node(files)
    await node.start()
    server = await node.serve_rpc("127.0.0.1:0", node.handle, 8, tls=node.tls)
    addr = "127.0.0.1:%d" % server.sockets[0].getsockname()[1]
    host, port = addr.split(":")
    before = client_as(pki, "gateway", addr)
    assert await before.call(Opcode.WRITER_SEND, b"1") == (Opcode.SEND_ACK, b"ok:1")
    serial_before = await _server_serial(pki, host, int(port))
    # a new leaf under the same CA, written in place, then the reload SIGHUP triggers
    ca = DevCa.load(Path(pki.ca_file), Path(pki.ca_file).with_suffix(".key"))
    ca.issue("writer", d / "writer.crt", d / "writer.key")
    assert node.reload_tls()
    assert node.metrics_base.value("qim_tls_reloads_total", {"result": "ok"}) == 1
    assert await _server_serial(pki, host, int(port)) != serial_before
    assert await before.call(Opcode.WRITER_SEND, b"2") == (Opcode.SEND_ACK, b"ok:2")  # the old connection lives
    after = client_as(pki, "gateway", addr)
    assert await after.call(Opcode.WRITER_SEND, b"3") == (Opcode.SEND_ACK, b"ok:3")  # no configuration change
    # a broken file: the reload fails, is counted, and the certificate in use stays
    serial = await _server_serial(pki, host, int(port))
    (d / "writer.key").write_text("not a key")
    assert not node.reload_tls()
    assert node.metrics_base.value("qim_tls_reloads_total", {"result": "failed"}) == 1
    assert await _server_serial(pki, host, int(port)) == serial
    for c in (before, after):
        await c.close()
    await node.stop()


async def _server_serial(pki, host: str, port: int) -> int:
    """The serial number of the certificate the server presents to a new connection."""
    ctx = TlsContexts(pki.files("gateway")).client
    assert ctx is not None
    reader, writer = await asyncio.open_connection(host, port, ssl=ctx)
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    return x509.load_der_x509_certificate(der).serial_number
